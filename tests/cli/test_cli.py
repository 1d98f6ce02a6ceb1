"""The agentcompass command line, run as a real subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "agentcompass.cli", *args], capture_output=True, text=True,
                          timeout=300, env=env, cwd=cwd)


def test_run_evaluates_and_prints_the_run_directory(tmp_path: Path) -> None:
    res = cli("run", "shell_tasks", "shell_agent", "scripted", "--env", "local", "--progress", "none",
              "--results-dir", str(tmp_path), "--benchmark-params", '{"categories": ["answer"]}',
              "--task-concurrency", "4", "--run-id", "cli1")
    assert res.returncode == 0, res.stderr
    assert "pass@1" in res.stdout and "run directory" in res.stdout
    run_dir = tmp_path / "shell_tasks" / "shell_agent" / "scripted" / "cli1"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["counts"]["done"] == summary["counts"]["total"] > 0
    shown = cli("show", str(run_dir))
    assert shown.returncode == 0 and "pass@1" in shown.stdout and "answer" in shown.stdout


def test_run_against_the_scripted_http_server(tmp_path: Path, scripted_url: str) -> None:
    res = cli("run", "shell_tasks", "openai_chat", "scripted", "--model-base-url", scripted_url,
              "--model-api-key", "k-123456", "--progress", "plain", "--results-dir", str(tmp_path),
              "--benchmark-params", '{"categories": ["answer"]}')
    assert res.returncode == 0, res.stderr
    assert "completed" in res.stderr  # the plain progress line at the end
    assert "k-123456" not in "".join(p.read_text() for p in tmp_path.rglob("*") if p.is_file())


def test_malformed_json_params_name_the_flag(tmp_path: Path) -> None:
    res = cli("run", "shell_tasks", "shell_agent", "scripted", "--benchmark-params", "{sample_ids: [}",
              "--results-dir", str(tmp_path))
    assert res.returncode == 2
    assert "--benchmark-params" in res.stderr and "Traceback" not in res.stderr


def test_unknown_id_is_one_readable_paragraph(tmp_path: Path) -> None:
    res = cli("run", "shell_taks", "shell_agent", "scripted", "--results-dir", str(tmp_path))
    assert res.returncode == 2
    assert res.stderr.startswith("error: Unknown benchmark id 'shell_taks'") and "Traceback" not in res.stderr


def test_launch_reads_yaml_and_reports_each_request(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"""
progress: none
task_concurrency: 4
requests:
  - name: answers
    benchmark: {{id: shell_tasks, params: {{categories: [answer]}}}}
    harness: shell_agent
    model: scripted
    results_dir: {tmp_path}/r
  - name: broken
    benchmark: nope
    harness: shell_agent
    model: scripted
    results_dir: {tmp_path}/r
""")
    res = cli("launch", str(spec))
    assert res.returncode == 1  # one request failed
    assert "answers: completed" in res.stdout and "broken: failed" in res.stdout
    assert "Unknown benchmark id 'nope'" in res.stdout and "launch partial" in res.stdout


def test_launch_json_spec_takes_task_concurrency_and_refuses_a_conflicting_alias(tmp_path: Path) -> None:
    request = {"benchmark": {"id": "shell_tasks", "params": {"categories": ["answer"]}}, "harness": "openai_chat",
               "model": "scripted", "results_dir": str(tmp_path / "r")}
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"progress": "none", "task_concurrency": 2, "requests": [request]}))
    res = cli("launch", str(spec))
    assert res.returncode == 0, res.stderr
    assert "launch completed" in res.stdout
    spec.write_text(json.dumps({"task_concurrency": 2, "max_concurrent_tasks": 3, "requests": [request]}))
    res = cli("launch", str(spec))
    assert res.returncode == 2 and "`task_concurrency`" in res.stderr and "max_concurrent_tasks" in res.stderr
    assert "Traceback" not in res.stderr


def test_malformed_yaml_names_file_and_line(tmp_path: Path) -> None:
    spec = tmp_path / "bad.yaml"
    spec.write_text("requests:\n  - benchmark: shell_tasks\n    harness: [unclosed\n")
    res = cli("launch", str(spec))
    assert res.returncode == 2
    assert "bad.yaml" in res.stderr and "not valid YAML at line" in res.stderr and "Traceback" not in res.stderr


def test_list_shows_registered_components() -> None:
    res = cli("list", "benchmarks")
    assert res.returncode == 0 and "shell_tasks" in res.stdout.split()
    res = cli("list", "harnesses")
    assert {"none", "openai_chat", "shell_agent"} <= set(res.stdout.split())
    res = cli("list", "environments")
    assert {"local", "docker"} <= set(res.stdout.split())


def test_auto_progress_shows_a_live_table_on_a_terminal(tmp_path: Path) -> None:
    import pty

    master, slave = pty.openpty()
    env = dict(os.environ, PYTHONPATH=str(REPO), COLUMNS="120")
    proc = subprocess.Popen([sys.executable, "-m", "agentcompass.cli", "run", "shell_tasks", "shell_agent", "scripted",
                             "--results-dir", str(tmp_path), "--benchmark-params", '{"categories": ["answer"]}'],
                            stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True)
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    assert proc.wait(120) == 0
    os.close(master)
    screen = b"".join(chunks).decode(errors="replace")
    assert "\x1b[" in screen  # a rich, styled display
    for column in ("request", "done", "queue", "retry", "ETA"):
        assert column in screen
    assert "9/9" in screen


def test_plain_progress_off_a_terminal_and_none_prints_nothing(tmp_path: Path) -> None:
    res = cli("run", "shell_tasks", "shell_agent", "scripted", "--results-dir", str(tmp_path),
              "--benchmark-params", '{"categories": ["answer"]}')  # auto, not a TTY: plain lines
    assert res.returncode == 0 and "\x1b[" not in res.stderr
    assert "[shell_tasks/shell_agent/scripted] completed: 9/9 done" in res.stderr and "model retries" in res.stderr
    # its own workspace dir: the sweep of workspaces that other (killed) runs left in /tmp warns, rightly
    (tmp_path / "envs").mkdir()
    res = cli("run", "shell_tasks", "shell_agent", "scripted", "--results-dir", str(tmp_path), "--progress", "none",
              "--benchmark-params", '{"categories": ["answer"]}',
              "--env-params", json.dumps({"base_dir": str(tmp_path / "envs")}))
    assert res.returncode == 0 and res.stderr == "", res.stderr


def test_show_on_a_corrupt_summary_is_one_paragraph_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / "run_info.json").write_text('{"run_id": "r1", "status": "completed"}')
    (tmp_path / "summary.json").write_text('{"run_id": "r1", "benchmark": "shell_ta')  # cut short
    res = cli("show", str(tmp_path))
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.startswith("error: ") and str(tmp_path / "summary.json") in res.stderr
    assert "not valid JSON" in res.stderr and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_show_on_a_corrupt_run_info_without_summary_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "run_info.json").write_bytes(b"\x00\x01{garbage")
    res = cli("show", str(tmp_path))
    assert res.returncode == 2 and str(tmp_path / "run_info.json") in res.stderr and "Traceback" not in res.stderr
    (tmp_path / "run_info.json").write_text("[1, 2]")
    res = cli("show", str(tmp_path))
    assert res.returncode == 2 and "expected a JSON object, got list" in res.stderr


def test_show_on_a_run_in_progress_prints_what_run_info_has(tmp_path: Path) -> None:
    import msgspec

    from agentcompass.records import RequestCounts, RunInfo, RunPaths

    paths = RunPaths(run_dir=str(tmp_path), params="p", run_info="r", progress="g", details_dir="d",
                     summary="s", log="l")
    info = RunInfo(run_id="live1", request="shell_tasks/shell_agent/scripted", status="running",
                   benchmark="shell_tasks", harness="shell_agent", model="scripted", environment="local",
                   started_at=1.0e9, updated_at=1.0e9 + 60, paths=paths, pid=os.getpid(),  # its process is alive
                   counts=RequestCounts(total=9, done=4, running=2, correct=3))
    (tmp_path / "run_info.json").write_bytes(msgspec.json.encode(info))
    res = cli("show", str(tmp_path))
    assert res.returncode == 0, res.stderr
    out = " ".join(res.stdout.split())
    assert "live1" in out and "running" in out and "no summary.json yet" in out
    assert "count: done │ 4" in out and "count: total │ 9" in out


def test_show_on_a_killed_run_says_stale_as_the_viewer_does(tmp_path: Path) -> None:
    from agentcompass.viewer.runs import run_overview
    from tests.viewer.rundirs import make_detail, write_run

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    run_dir = write_run(tmp_path / "killed", [make_detail("a")], status="running", summary=False,
                        pid=int(gone.stdout))  # run_info says running, but the process that wrote it has exited
    assert run_overview(tmp_path.resolve(), "killed", run_dir)["stale"]
    res = cli("show", str(run_dir))
    assert res.returncode == 0, res.stderr
    out = " ".join(res.stdout.split())
    assert "(killed): stale" in out and f"process {gone.stdout.strip()} is gone" in out


def test_version_prints_the_installed_distributions_version() -> None:
    from importlib.metadata import version

    res = cli("--version")
    assert res.returncode == 0, res.stderr
    assert res.stdout == f"agentcompass {version('agentcompass')}\n"


def test_launch_with_a_misspelt_request_field_exits_2_naming_the_closest_field(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"""
progress: none
requests:
  - name: good
    benchmark: {{id: shell_tasks, params: {{categories: [answer]}}}}
    harness: none
    model: scripted
    results_dir: {tmp_path}/r
  - name: typo
    benchmark: shell_tasks
    harness: none
    model: scripted
    max_retriez: 2
    results_dir: {tmp_path}/r
""")
    res = cli("launch", str(spec))
    assert res.returncode == 2, res.stdout + res.stderr
    assert res.stderr.startswith("error: ") and "Traceback" not in res.stderr
    assert "requests[1]" in res.stderr and "`max_retriez`" in res.stderr
    assert "Did you mean 'max_retries'?" in res.stderr
    assert not (tmp_path / "r").exists()  # nothing ran


def _alias_bomb(levels: int = 9) -> str:
    """A "billion laughs" YAML: each level is nine aliases of the one before (9**levels leaves)."""
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, levels + 1):
        refs = ", ".join([f"*a{i - 1}"] * 9)
        lines.append(f"a{i}: &a{i} [{refs}]")
    return "\n".join(lines)


def test_yaml_alias_bomb_in_model_params_is_refused_naming_file_line_and_cap(tmp_path: Path) -> None:
    spec = tmp_path / "bomb.yaml"
    bomb = "".join(f"          {line}\n" for line in _alias_bomb().splitlines())
    spec.write_text(f"""requests:
  - benchmark: shell_tasks
    harness: none
    model:
      id: scripted
      params:
        bomb:
{bomb}    results_dir: {tmp_path}/r
""")
    res = cli("launch", str(spec))  # the old loader expanded it while validating: GBs and minutes
    assert res.returncode == 2, (res.returncode, res.stderr[-2000:])
    assert "bomb.yaml" in res.stderr and "line" in res.stderr and "Traceback" not in res.stderr
    assert "1000000" in res.stderr  # the cap is named
    assert not (tmp_path / "r").exists()


def test_recursive_yaml_alias_is_refused(tmp_path: Path) -> None:
    spec = tmp_path / "loop.yaml"
    spec.write_text("requests: &r\n  - benchmark: shell_tasks\n    harness: none\n    model: scripted\n    x: *r\n")
    res = cli("launch", str(spec))
    assert res.returncode == 2 and "loop.yaml" in res.stderr and "Traceback" not in res.stderr


def test_oversized_spec_file_is_refused_naming_the_cap(tmp_path: Path) -> None:
    spec = tmp_path / "big.yaml"
    spec.write_text("requests: []\n# " + "x" * (17 << 20) + "\n")
    res = cli("launch", str(spec))
    assert res.returncode == 2 and "big.yaml" in res.stderr and "MiB" in res.stderr


def test_deeply_nested_json_params_are_one_readable_error(tmp_path: Path) -> None:
    res = cli("run", "shell_tasks", "none", "scripted", "--model-params", "[" * 100_000,
              "--results-dir", str(tmp_path))
    assert res.returncode == 2 and "--model-params" in res.stderr and "Traceback" not in res.stderr


def test_nan_in_cli_params_is_refused_naming_the_field(tmp_path: Path) -> None:
    for args, field in [(("--harness-params", '{"agent_timeout": NaN}'), "harness_params.agent_timeout"),
                        (("--benchmark-params", '{"eval_timeout": Infinity, "limit": 1}'), "eval_timeout"),
                        (("--timeout-seconds", "nan"), "timeout_seconds"),
                        (("--env-open-qps", "inf"), "env_open_qps"),
                        (("--benchmark-params", '{"k": 1000000000000, "limit": 1}'), "'k'")]:
        res = cli("run", "shell_tasks", "shell_agent", "scripted", "--results-dir", str(tmp_path / "r"),
                  "--benchmark-params", '{"limit": 1}', *args)
        assert res.returncode == 2, (args, res.stderr[-1000:])
        assert field in res.stderr and "Traceback" not in res.stderr, (args, res.stderr)
        assert not (tmp_path / "r").exists() or not any(p.is_file() for p in (tmp_path / "r").rglob("*"))


def test_an_open_rate_below_the_floor_is_refused_on_the_command_line(tmp_path: Path) -> None:
    res = cli("run", "shell_tasks", "shell_agent", "scripted", "--results-dir", str(tmp_path / "r"),
              "--env-open-qps", "1e-300", "--timeout-seconds", "60")
    assert res.returncode == 2, res.stderr[-1000:]
    assert "env_open_qps" in res.stderr and "0.01" in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "r").exists() or not any(p.is_file() for p in (tmp_path / "r").rglob("*"))
