"""The run directory: layout, formats, atomic details, and secrets that never reach disk."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

import agentcompass
from agentcompass._errors import ConfigError
from agentcompass.engine.run_dir import read_detail_file, safe_name, task_log_lines
from agentcompass.records import RunInfo, Summary, TaskDetail

from ..fixtures_scripted import start_scripted_server

SECRET = "sk-test-9f8e7d6c5b4a39281706"


def test_run_directory_has_the_documented_layout(tmp_path: Path) -> None:
    out = agentcompass.run_evaluation("shell_tasks", "shell_agent", "scripted", results_dir=str(tmp_path),
                                      benchmark_params={"categories": ["files", "answer"]}, progress="none")
    run_dir = out.run_dir
    assert run_dir is not None
    assert run_dir.parent == tmp_path / "shell_tasks" / "shell_agent" / "scripted"
    for name in ("params.json", "run_info.json", "progress.jsonl", "summary.json", "logs/run.log"):
        assert (run_dir / name).is_file(), name
    details = sorted((run_dir / "details").glob("*.json"))
    assert len(details) == out.counts.total > 0
    assert not list((run_dir / "details").glob(".*"))  # no temp files left
    # one file per task (its detail); its log lines are in run.log
    files = {str(p.relative_to(run_dir)) for p in run_dir.rglob("*") if p.is_file()}
    assert files == {"params.json", "run_info.json", "progress.jsonl", "summary.json", "logs/run.log", ".lock",
                     *(f"details/{p.name}" for p in details)}
    run_log = (run_dir / "logs" / "run.log").read_bytes()
    for path in details:
        task_id = msgspec.json.decode(path.read_bytes(), type=TaskDetail).task_id
        assert b"attempt 1 finished" in task_log_lines(run_log, task_id)
    info = msgspec.json.decode((run_dir / "run_info.json").read_bytes(), type=RunInfo)
    assert info.status == "completed" and info.counts.done == out.counts.total and info.finished_at
    summary = msgspec.json.decode((run_dir / "summary.json").read_bytes(), type=Summary)
    assert summary.metrics == out.metrics and set(summary.by_category) == {"files", "answer"}
    assert 0 < summary.metrics["pass_rate"] < 1
    for path in details:
        d = msgspec.json.decode(path.read_bytes(), type=TaskDetail)
        assert path.name == f"{safe_name(d.task_id)}.json"
        a = d.attempts["1"]
        assert a.status == "completed" and a.trajectory is not None and a.trajectory.steps
        assert a.correct == d.correct and a.tries and a.tries[0].try_no == 1
    params = json.loads((run_dir / "params.json").read_text())
    assert params["spec"]["benchmark"]["id"] == "shell_tasks" and params["versions"]["agentcompass"]


_OPEN_TRACE = """
import os, sys
from pathlib import Path
opened = []
root = sys.argv[1]
def hook(event, args):
    if event == "open" and isinstance(args[0], str) and args[0].startswith(root):
        opened.append(args[0])
sys.addaudithook(hook)
from agentcompass.api import run_evaluation
from benchmarks_perf._components import BENCHMARK, PROVIDER, SCRIPT
out = run_evaluation(BENCHMARK, "shell_agent", "scripted", PROVIDER, benchmark_params={"n": 40},
                     task_concurrency=8, results_dir=root, progress="none", model_params=SCRIPT)
assert out.status == "completed" and out.counts.correct == 40, out
print(os.getpid())
for p in opened:
    print(Path(p).relative_to(out.run_dir))
"""


def test_a_task_creates_one_file_its_detail_opened_once(tmp_path: Path) -> None:
    """Traced with an audit hook in a real run of 40 tasks: every open under the run directory is listed."""
    repo = Path(__file__).resolve().parents[2]
    res = subprocess.run([sys.executable, "-c", _OPEN_TRACE, str(tmp_path)], capture_output=True, text=True,
                         timeout=300, env={**os.environ, "PYTHONPATH": str(repo)}, cwd=repo, check=True)
    pid, *opened = res.stdout.split()
    # each task: its detail's temp file, opened once, then renamed onto details/<id>.json; no log file of its own
    assert sorted(p for p in opened if p.startswith("details/")) == sorted(
        f"details/.mock-{i}.json.{pid}.tmp" for i in range(40))
    assert not [p for p in opened if p.startswith("logs/tasks")]
    assert opened.count("logs/run.log") == 1
    run_dir = next(tmp_path.glob("*/*/*/*"))
    assert len(list((run_dir / "details").iterdir())) == 40


def test_task_log_lines_cuts_one_tasks_lines_with_their_tracebacks_from_run_log(tmp_path: Path) -> None:
    handler = logging.FileHandler(tmp_path / "run.log")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))  # run.log's
    run_log = logging.Logger("agentcompass.run.r")
    run_log.addHandler(handler)
    loggers = {}
    for tid, attempt in (("a", 1), ("a/b", 1), ("a", 2), ("x#1", 1)):
        loggers[tid, attempt] = log = logging.Logger(f"agentcompass.task.{tid}#{attempt}")
        log.parent = run_log
    loggers["a", 1].info("first of a")
    loggers["a/b", 1].info("not a: agentcompass.task.a#1: a quoted header")
    try:
        raise ValueError("boom")
    except ValueError:
        loggers["a", 2].exception("a failed")
    run_log.warning("the request's own line")
    loggers["x#1", 1].info("x line")
    handler.close()
    text = (tmp_path / "run.log").read_bytes()
    a = task_log_lines(text, "a").decode()
    assert "first of a" in a and "a failed" in a and "ValueError: boom" in a and "Traceback" in a
    assert "quoted header" not in a and "request's own" not in a and "x line" not in a
    assert "x line" in task_log_lines(text, "x#1").decode() and task_log_lines(text, "x") == b""
    assert task_log_lines(text, "a/b").decode().count("\n") == 1


def test_safe_names_are_stable_and_never_escape() -> None:
    assert safe_name("files/hello") == safe_name("files/hello") != safe_name("files_hello")
    for bad in ("../../etc/passwd", "a/../b", "x\x00y", "..", "", "\n"):
        name = safe_name(bad)
        assert "/" not in name and name not in (".", "..") and "\x00" not in name and "\n" not in name


async def test_the_api_key_never_reaches_the_run_directory_or_logs(tmp_path: Path) -> None:
    # The agent even prints the key into its trajectory: redaction at the persistence boundary must catch it.
    script = [{"match": "Task: files/hello_world\n",
               "turns": [f"```bash\necho {SECRET} > leak.txt; cat leak.txt\n```", "<submit></submit>"]}]
    async with start_scripted_server({"script": script}, require_api_key=SECRET) as url:
        result = await agentcompass.async_launch({
            "requests": [{"benchmark": {"id": "shell_tasks", "params": {"sample_ids": ["files/hello_world",
                                                                                        "answer/count_lines"]}},
                          "harness": "shell_agent", "results_dir": str(tmp_path), "file_log_level": "DEBUG",
                          "model": {"id": "scripted", "base_url": url, "api_key": SECRET}}],
            "progress": "none", "log_level": "DEBUG"})
    out = result.outcomes[0]
    assert out.status == "completed" and out.counts.done == 2 and out.counts.errors == 0  # the key did work
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(files) >= 6
    for p in files:
        assert SECRET not in p.read_text(errors="replace"), p
    detail = next((out.run_dir / "details").glob("files_hello*")).read_text()  # type: ignore[union-attr]
    assert "***" in detail  # the echoed key was there, masked
    assert os.environ.get("OPENAI_API_KEY") != SECRET


# ----------------------------------------------------------------------------- reuse never destroys a run

def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _first_run(tmp_path: Path, **kw: object) -> Path:
    out = agentcompass.run_evaluation("shell_tasks", "shell_agent", "scripted", results_dir=str(tmp_path),
                                      progress="none", run_id="x", **{"benchmark_params": {"categories": ["answer"]},
                                                                      **kw})  # type: ignore[arg-type]
    assert out.ok and out.run_dir is not None and out.counts.done > 3
    return out.run_dir


def test_reuse_with_changed_params_is_refused_and_the_earlier_run_is_byte_identical(tmp_path: Path) -> None:
    run_dir = _first_run(tmp_path)
    before = _snapshot(run_dir)
    with pytest.raises(ConfigError, match=r"harness_params.step_limit: \(not set\) -> 7") as info:
        agentcompass.run_evaluation("shell_tasks", "shell_agent", "scripted", results_dir=str(tmp_path),
                                    progress="none", run_id="x", reuse=True, harness_params={"step_limit": 7},
                                    benchmark_params={"categories": ["answer"]})
    assert info.value.field == "run_id" and "overwrite" in str(info.value)
    with pytest.raises(ConfigError, match=r"benchmark_params.categories: \['answer'\] -> \['files'\]"):
        agentcompass.run_evaluation("shell_tasks", "shell_agent", "scripted", results_dir=str(tmp_path),
                                    progress="none", run_id="x", reuse=True,
                                    benchmark_params={"categories": ["files"]})
    with pytest.raises(ConfigError, match="already exists"):  # without reuse: never overwritten either
        agentcompass.run_evaluation("shell_tasks", "shell_agent", "scripted", results_dir=str(tmp_path),
                                    progress="none", run_id="x", benchmark_params={"categories": ["answer"]})
    assert _snapshot(run_dir) == before
    assert sorted(p.name for p in run_dir.parent.iterdir()) == ["x"]
    # the same params (operational ones may change) still continue the run
    again = agentcompass.run_evaluation("shell_tasks", "shell_agent", "scripted", results_dir=str(tmp_path),
                                        progress="none", run_id="x", reuse=True, model_params={"retries": 9},
                                        harness_params={"stall_timeout": 600},
                                        benchmark_params={"categories": ["answer"]})
    assert again.ok and again.counts.reused == again.counts.done > 3


def test_overwrite_moves_the_earlier_run_aside_instead_of_deleting_it(tmp_path: Path) -> None:
    run_dir = _first_run(tmp_path)
    before = _snapshot(run_dir)
    out = agentcompass.run_evaluation("shell_tasks", "shell_agent", "scripted", results_dir=str(tmp_path),
                                      progress="none", run_id="x", reuse=True, overwrite=True,
                                      harness_params={"step_limit": 7}, benchmark_params={"categories": ["answer"]})
    assert out.ok and out.counts.reused == 0 and out.run_dir == run_dir
    backups = [p for p in run_dir.parent.iterdir() if p.name.startswith("x.overwritten-")]
    assert len(backups) == 1
    assert _snapshot(backups[0]) == {k: v for k, v in before.items()}
    params = json.loads((run_dir / "params.json").read_text())
    assert params["spec"]["harness"]["params"] == {"step_limit": 7}


def test_reuse_without_a_run_id_starts_a_new_run_when_the_params_changed(tmp_path: Path) -> None:
    run_dir = _first_run(tmp_path)
    before = _snapshot(run_dir)
    out = agentcompass.run_evaluation("shell_tasks", "shell_agent", "scripted", results_dir=str(tmp_path),
                                      progress="none", reuse=True,
                                      benchmark_params={"sample_ids": ["answer/count_lines"]})
    assert out.ok and out.run_dir is not None and out.run_dir.name != "x"
    assert out.counts.reused == 1 and "x" in out.reuse["sources"]  # the matching task copied, not rerun
    assert _snapshot(run_dir) == before
    same = agentcompass.run_evaluation("shell_tasks", "shell_agent", "scripted", results_dir=str(tmp_path),
                                       progress="none", reuse=True,
                                       benchmark_params={"sample_ids": ["answer/count_lines"]})
    assert same.run_dir == out.run_dir  # the same params continue the latest run


# ----------------------------------------------------------------------------- full and read-only disks

@pytest.fixture
def tmpfs_1m(tmp_path: Path) -> Iterator[Path]:
    """A 1 MB tmpfs (needs root and mount rights), unmounted afterwards."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], capture_output=True,
                         text=True, timeout=30)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root and CAP_SYS_ADMIN): {res.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True, timeout=30)


def test_a_full_disk_is_one_clear_error_with_counts_that_match_what_was_written(tmpfs_1m: Path) -> None:
    repo = Path(__file__).resolve().parents[2]
    res = subprocess.run(
        [sys.executable, "-m", "agentcompass.cli", "run", "shell_tasks", "shell_agent", "scripted",
         "--benchmark-params", '{"categories": ["answer"], "repeat": 60}', "--results-dir", str(tmpfs_1m),
         "--run-id", "full", "--progress", "none"],
        capture_output=True, text=True, timeout=600, env={**os.environ, "PYTHONPATH": str(repo)}, cwd=repo)
    out = res.stdout + res.stderr
    assert res.returncode == 1, out
    assert "Logging error" not in out and "Traceback" not in out, out[:3000]
    run_dir = tmpfs_1m / "shell_tasks" / "shell_agent" / "scripted" / "full"
    details = [p for p in (run_dir / "details").iterdir() if p.name.endswith(".json") and not p.name.startswith(".")]
    assert details and all(read_detail_file(p) is not None for p in details)  # nothing written is lost or torn
    assert not list(run_dir.rglob(".*.tmp"))
    info = msgspec.json.decode((run_dir / "run_info.json").read_bytes(), type=RunInfo)
    assert info.status == "failed" and info.counts.done == len(details)
    total = info.counts.total
    assert total > len(details)
    assert f"{len(details)}/{total}" in res.stdout  # the final table
    assert re.search(rf"error: results_dir .*no space left on device \(ENOSPC\).* after {len(details)} of {total} "
                     "details", " ".join(res.stdout.split())), res.stdout
    assert "ENOSPC" in (info.error or "")


def test_a_read_only_results_dir_is_a_config_error_naming_it(tmp_path: Path) -> None:
    mnt = tmp_path / "ro"
    mnt.mkdir()
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(mnt)], capture_output=True,
                         text=True, timeout=30)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a read-only tmpfs here (needs root and CAP_SYS_ADMIN): {res.stderr.strip()}")
    try:
        for where in (mnt, mnt / "not" / "yet"):
            with pytest.raises(ConfigError, match="results_dir.*read-only") as info:
                agentcompass.run_evaluation("shell_tasks", "shell_agent", "scripted", results_dir=str(where),
                                            benchmark_params={"sample_ids": ["answer/count_lines"]}, progress="none")
            assert info.value.field == "results_dir"
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True, timeout=30)
