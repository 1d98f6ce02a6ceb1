"""Fault injection at the engine level: kills and resumes, lost environments, runaway tasks, broken harnesses."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import msgspec
import pytest

import agentcompass
from agentcompass.records import TaskDetail

REPO = Path(__file__).resolve().parents[2]
BENCH = {"repeat": 3}  # 111 tasks


def _marked_processes(base: Path, settle_s: float = 30.0) -> list[int]:
    """Live processes started by a local environment under ``base`` (SIGKILLed ones get a moment to die).

    Scoped by the workspace (each environment's HOME) so other runs on the machine don't count."""
    deadline = time.monotonic() + settle_s
    while True:
        found = _scan_marked(base)
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def _scan_marked(base: Path) -> list[int]:
    home = f"HOME={base}/".encode()
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/environ", "rb") as f:
                    environ = f.read().split(b"\0")
            except OSError:
                continue
            if any(v.startswith(b"AGENTCOMPASS_LOCAL_ENV=local-") for v in environ) and \
                    any(v.startswith(home) for v in environ):
                found.append(int(name))
    return found


def _wait_for_details(details: Path, count: int, proc: subprocess.Popen[bytes], timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        if details.is_dir() and sum(1 for _ in details.glob("*.json")) >= count:
            return
        time.sleep(0.02)


def _events(progress: Path) -> list[dict[str, object]]:
    out = []
    for line in progress.read_bytes().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:  # the torn last line of a killed run
            continue
    return out


@pytest.mark.slow
def test_sigkill_five_times_then_resume_commits_each_task_once_with_the_same_metrics(tmp_path: Path) -> None:
    envs = tmp_path / "envs"
    envs.mkdir()
    reference = agentcompass.run_evaluation("shell_tasks", "shell_agent", "scripted", benchmark_params=BENCH,
                                            results_dir=str(tmp_path / "ref"), progress="none", task_concurrency=8)
    cmd = [sys.executable, "-m", "agentcompass.cli", "run", "shell_tasks", "shell_agent", "scripted",
           "--benchmark-params", json.dumps(BENCH), "--env-params", json.dumps({"base_dir": str(envs)}),
           "--run-id", "resumed", "--reuse", "--task-concurrency", "8", "--progress", "none",
           "--results-dir", str(tmp_path / "r")]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    run_dir = tmp_path / "r" / "shell_tasks" / "shell_agent" / "scripted" / "resumed"
    rng = random.Random(7)
    committed: dict[str, int] = {}  # detail file -> mtime when first seen
    for _ in range(5):
        proc = subprocess.Popen(cmd, env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # Kill at a random point measured in progress, not wall time, so a fast machine can't finish first:
        # once a few more tasks have committed, then a random fraction of a task later.
        _wait_for_details(run_dir / "details", len(committed) + rng.randint(4, 16), proc)
        time.sleep(rng.uniform(0.0, 0.3))
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        for p in (run_dir / "details").glob("*.json"):
            mtime = p.stat().st_mtime_ns
            assert committed.setdefault(p.name, mtime) == mtime, f"{p.name} was rewritten after its commit"
    assert 0 < len(committed) < 111, "the kills should land mid-run"
    final = subprocess.run(cmd, env=env, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert final.returncode == 0, final.stderr
    details = sorted((run_dir / "details").glob("*.json"))
    assert len(details) == 111
    assert not list((run_dir / "details").glob(".*"))
    for p in details:
        if p.name in committed:
            assert p.stat().st_mtime_ns == committed[p.name]
        d = msgspec.json.decode(p.read_bytes(), type=TaskDetail)
        assert d.attempts["1"].status == "completed"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["metrics"] == reference.metrics
    assert summary["status"] == "completed" and summary["reuse"]["reused"] >= len(committed)
    # No task ran again after it was committed.
    finished: set[str] = set()
    for ev in _events(run_dir / "progress.jsonl"):
        tid = str(ev.get("task_id"))
        if ev["event"] == "attempt_started":
            assert tid not in finished, f"{tid} ran again after its commit"
        elif ev["event"] == "task_finished" and not ev.get("reused"):
            finished.add(tid)
    # The killed runs' workspaces and processes were swept by the runs after them.
    assert not list(envs.iterdir())
    assert _marked_processes(envs) == []


def test_a_task_that_never_ends_is_bounded_by_agent_timeout_and_still_graded(tmp_path: Path) -> None:
    envs = tmp_path / "envs"
    envs.mkdir()
    t0 = time.monotonic()
    out = agentcompass.run_evaluation(
        "shell_tasks", "tests.engine.components:SleepingHarness", "scripted",
        harness_params={"seconds": 600, "agent_timeout": 1.5}, environment_params={"base_dir": str(envs)},
        benchmark_params={"sample_ids": ["files/hello_world", "files/append_line"]},
        results_dir=str(tmp_path / "r"), progress="none")
    assert time.monotonic() - t0 < 120  # hang guard: the harness would take 600 s
    assert out.ok and out.errors_by_kind == {"agent_timeout": 2}
    assert out.metrics["graded_tasks"] == 2  # graded although the agent never finished
    assert not list(envs.iterdir()) and _marked_processes(envs) == []


def test_a_lost_environment_is_retried_and_every_try_is_recorded(tmp_path: Path) -> None:
    out = agentcompass.run_evaluation(
        "shell_tasks", "tests.engine.components:SandboxBreakingHarness", "scripted", max_retries=2,
        benchmark_params={"sample_ids": ["files/hello_world"]}, results_dir=str(tmp_path), progress="none")
    assert out.ok and out.counts.retries == 1 and out.metrics["pass@1"] == 1.0
    assert out.run_dir is not None
    d = msgspec.json.decode(next((out.run_dir / "details").glob("*.json")).read_bytes(), type=TaskDetail)
    tries = d.attempts["1"].tries
    assert [t.error_kind for t in tries] == ["env_lost", None]
    assert [t.status for t in tries] == ["run_error", "completed"]
    kinds = [e["event"] for e in _events(out.run_dir / "progress.jsonl")]
    assert kinds.count("try_retrying") == 1  # retries are visible live


def test_without_retries_a_lost_environment_is_recorded_not_hidden(tmp_path: Path) -> None:
    out = agentcompass.run_evaluation(
        "shell_tasks", "tests.engine.components:SandboxBreakingHarness", "scripted",
        benchmark_params={"sample_ids": ["files/hello_world"]}, results_dir=str(tmp_path), progress="none")
    assert out.errors_by_kind == {"env_lost": 1} and out.metrics["pass@1"] == 0.0
    assert out.status == "failed" and "every attempt failed (env_lost x1)" in (out.error or "")


def test_retry_pattern_list_retries_matching_final_errors(tmp_path: Path) -> None:
    out = agentcompass.run_evaluation(
        "shell_tasks", "tests.engine.components:CrashingHarness", "scripted", max_retries=2,
        retry_pattern_list=[r"harness_crash: RuntimeError: boom"],
        benchmark_params={"sample_ids": ["files/hello_world"]}, results_dir=str(tmp_path), progress="none")
    assert out.counts.retries == 2 and out.errors_by_kind == {"harness_crash": 1}


def test_three_requests_one_raising_everywhere_leave_the_others_metrics_intact(tmp_path: Path) -> None:
    def req(name: str, harness: str) -> dict[str, object]:
        return {"name": name, "benchmark": {"id": "shell_tasks", "params": {"categories": ["files", "answer"]}},
                "harness": harness, "model": "scripted", "results_dir": str(tmp_path / name)}

    solo = agentcompass.run_evaluation("shell_tasks", "shell_agent", "scripted",
                                       benchmark_params={"categories": ["files", "answer"]},
                                       results_dir=str(tmp_path / "solo"), progress="none")
    result = agentcompass.launch({"requests": [req("a", "shell_agent"),
                                               req("bad", "tests.engine.components:CrashingHarness"),
                                               req("b", "shell_agent")],
                                  "task_concurrency": 4, "progress": "none"})
    assert result["a"].metrics == solo.metrics == result["b"].metrics
    assert result["bad"].metrics["pass@1"] == 0.0 and set(result["bad"].errors_by_kind) == {"harness_crash"}


def test_an_environment_that_fails_to_open_is_retried(tmp_path: Path) -> None:
    out = agentcompass.run_evaluation(
        "shell_tasks", "shell_agent", "scripted", "tests.engine.components:FlakyOpenProvider", max_retries=1,
        environment_params={"fail_first": 1}, benchmark_params={"sample_ids": ["files/hello_world"]},
        results_dir=str(tmp_path), progress="none")
    assert out.ok and out.metrics["pass@1"] == 1.0
    assert out.run_dir is not None
    d = msgspec.json.decode(next((out.run_dir / "details").glob("*.json")).read_bytes(), type=TaskDetail)
    tries = d.attempts["1"].tries
    assert [t.error_kind for t in tries] == ["env_open_failed", None]
    assert "sandbox service reset" in (tries[0].error or "")


def test_a_run_stopped_while_retrying_keeps_every_try_it_made(tmp_path: Path) -> None:
    # Opens fail every time, so the attempt is stuck retrying when timeout_seconds hits: the detail must say why.
    result = agentcompass.launch({
        "requests": [{"benchmark": {"id": "shell_tasks", "params": {"sample_ids": ["files/hello_world"]}},
                      "harness": "shell_agent", "model": "scripted", "max_retries": 50,
                      "environment": {"id": "tests.engine.components:FlakyOpenProvider",
                                      "params": {"fail_first": 10_000}},
                      "results_dir": str(tmp_path)}],
        # wide: a loaded machine starts the run and makes two tries (backoff 0.25-0.5 s) before it hits
        "timeout_seconds": 6, "progress": "none"})
    out = result.outcomes[0]
    assert out.status == "timed_out" and out.run_dir is not None
    d = msgspec.json.decode(next((out.run_dir / "details").glob("*.json")).read_bytes(), type=TaskDetail)
    attempt = d.attempts["1"]
    assert attempt.error_kind == "run_timeout"
    kinds = [t.error_kind for t in attempt.tries]
    assert len(kinds) >= 2 and set(kinds) <= {"env_open_failed", "run_timeout"}, kinds
    assert kinds[0] == "env_open_failed" and "sandbox service reset" in (attempt.tries[0].error or "")
    assert [t.try_no for t in attempt.tries] == list(range(1, len(kinds) + 1))
    retried = sum(1 for e in _events(out.run_dir / "progress.jsonl") if e["event"] == "try_retrying")
    assert retried >= len(kinds) - 1 and out.counts.retries == len(kinds) - 1


def test_a_try_cut_short_by_the_timeout_is_recorded_as_such(tmp_path: Path) -> None:
    result = agentcompass.launch({
        "requests": [{"benchmark": {"id": "shell_tasks", "params": {"sample_ids": ["files/hello_world"]}},
                      "harness": {"id": "tests.engine.components:SleepingHarness", "params": {"seconds": 60}},
                      "model": "scripted", "results_dir": str(tmp_path)}],
        "timeout_seconds": 1.5, "progress": "none"})
    out = result.outcomes[0]
    assert out.run_dir is not None
    d = msgspec.json.decode(next((out.run_dir / "details").glob("*.json")).read_bytes(), type=TaskDetail)
    (only,) = d.attempts["1"].tries
    # the harness would sleep 60 s: only the run's timeout ends the try (how long it ran depends on when it started)
    assert only.try_no == 1 and only.status == "run_error" and only.error_kind == "run_timeout"
    # the event stream closes the attempt too, so live counts and progress.jsonl agree with the detail
    finished = [e for e in _events(out.run_dir / "progress.jsonl") if e["event"] == "attempt_finished"]
    assert [(e["status"], e["error_kind"]) for e in finished] == [("run_error", "run_timeout")]


def test_a_hung_setup_is_bounded_by_setup_timeout_named_in_the_error_and_retried(tmp_path: Path) -> None:
    envs = tmp_path / "envs"
    envs.mkdir()
    t0 = time.monotonic()
    out = agentcompass.run_evaluation(
        "shell_tasks", "tests.engine.components:SlowSetupHarness", "scripted", max_retries=1,
        harness_params={"setup_seconds": 600, "slow_tries": 1, "setup_timeout": 1.0},
        environment_params={"base_dir": str(envs)}, benchmark_params={"sample_ids": ["files/hello_world"]},
        results_dir=str(tmp_path / "r"), progress="none")
    assert time.monotonic() - t0 < 120  # hang guard: the harness would take 600 s
    assert out.run_dir is not None
    d = msgspec.json.decode(next((out.run_dir / "details").glob("*.json")).read_bytes(), type=TaskDetail)
    first, second = d.attempts["1"].tries
    assert first.error_kind == "setup_timeout" and "harness_params.setup_timeout" in (first.error or "")
    assert second.status == "completed"  # the retry's setup was quick; the agent ran and was graded
    assert not list(envs.iterdir()) and _marked_processes(envs) == []


def test_an_agent_stopped_at_agent_timeout_keeps_the_steps_it_took_and_is_graded(tmp_path: Path) -> None:
    script = [{"match": "hello", "turns": ["```bash\necho hello > hello.txt\n```", "```bash\nsleep 61.8034\n```"]}]
    out = agentcompass.run_evaluation(
        "shell_tasks", "shell_agent", "scripted", model_params={"script": script, "bundled": False},
        # wide: two model turns and the echo run, and the sleep starts, before it on a loaded machine
        harness_params={"agent_timeout": 5, "command_timeout": 120},
        benchmark_params={"sample_ids": ["files/hello_world"]}, results_dir=str(tmp_path), progress="none")
    assert out.errors_by_kind == {"agent_timeout": 1} and out.metrics["graded_tasks"] == 1
    assert out.run_dir is not None
    d = msgspec.json.decode(next((out.run_dir / "details").glob("*.json")).read_bytes(), type=TaskDetail)
    traj = d.attempts["1"].trajectory
    assert traj.stop_reason == "agent_timeout" and traj.finished_at is not None
    assert [s.action for s in traj.steps] == ["echo hello > hello.txt", "sleep 61.8034"]
    assert traj.steps[0].exit_code == 0 and traj.steps[1].observation is None  # cut mid-command
