"""Limits, pacing, timeouts and reuse: the engine's control plane, observed from outside."""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path

import msgspec

import agentcompass
from agentcompass.records import EnvOpened, ProgressEvent, TaskDetail

SLEEPER = "tests.engine.components:SleepingHarness"


def test_task_concurrency_and_provider_limits_bound_what_runs_at_once(tmp_path: Path) -> None:
    events: list[ProgressEvent] = []
    out = agentcompass.run_evaluation(
        "shell_tasks", SLEEPER, "scripted", harness_params={"seconds": 0.3},
        benchmark_params={"categories": ["files"]}, task_concurrency=6, provider_limits={"local": 2},
        results_dir=str(tmp_path), progress="none", on_progress=events.append)
    assert out.ok and out.counts.done == out.counts.total > 4
    # Replay opens/finishes: never more than 2 environments (agent or verifier) at once.
    running, peak = 0, 0
    for ev in events:
        if type(ev).__name__ == "AttemptStarted":
            running += 1
        elif type(ev).__name__ == "AttemptFinished":
            running -= 1
        peak = max(peak, running)
    assert peak <= 6
    opens = [e for e in events if isinstance(e, EnvOpened)]
    assert len(opens) >= out.counts.total  # agent envs (answer tasks open no verifier)


def test_env_open_qps_paces_opens(tmp_path: Path) -> None:
    events: list[ProgressEvent] = []
    out = agentcompass.run_evaluation(
        "shell_tasks", SLEEPER, "scripted", harness_params={"seconds": 0.01},
        benchmark_params={"categories": ["files"]}, task_concurrency=8, env_open_qps=5.0,
        results_dir=str(tmp_path), progress="none", on_progress=events.append)
    assert out.ok
    # What the pacer decided: when it granted each open (load can delay an open after its grant, never
    # bring two grants closer), 5 per second.
    grants = sorted(e.granted_at for e in events if isinstance(e, EnvOpened))
    assert len(grants) >= 8 and grants[0] > 0
    gaps = [b - a for a, b in itertools.pairwise(grants)]
    assert min(gaps) >= 0.2 * (1 - 1e-9), gaps


def test_timeout_seconds_stops_the_run_and_records_interrupted_tasks(tmp_path: Path) -> None:
    base = tmp_path / "envs"
    base.mkdir()
    t0 = time.monotonic()
    result = agentcompass.launch({
        "requests": [{"benchmark": {"id": "shell_tasks", "params": {"categories": ["files"]}},
                      "harness": {"id": SLEEPER, "params": {"seconds": 60}}, "model": "scripted",
                      "environment": {"id": "local", "params": {"base_dir": str(base)}},
                      "results_dir": str(tmp_path / "r"), "task_concurrency": 3}],
        "timeout_seconds": 1.5, "progress": "none"})
    elapsed = time.monotonic() - t0
    assert elapsed < 60  # hang guard: the harness would sleep 60 s
    out = result.outcomes[0]
    assert result.status == "timed_out" and out.status == "timed_out"
    assert out.run_dir is not None
    info = json.loads((out.run_dir / "run_info.json").read_text())
    assert info["status"] == "timed_out"
    details = [msgspec.json.decode(p.read_bytes(), type=TaskDetail) for p in (out.run_dir / "details").glob("*.json")]
    assert len(details) == 3  # the three that were running
    assert all(d.attempts["1"].error_kind == "run_timeout" for d in details)
    assert not list(base.iterdir())  # every environment was closed


def test_reuse_run_id_copies_matching_tasks_and_reruns_changed_ones(tmp_path: Path) -> None:
    common = {"results_dir": str(tmp_path), "progress": "none"}
    first = agentcompass.run_evaluation("shell_tasks", "shell_agent", "scripted",
                                        benchmark_params={"categories": ["answer"]}, run_id="first", **common)
    assert first.ok and first.counts.done > 3
    again = agentcompass.run_evaluation("shell_tasks", "shell_agent", "scripted", reuse_run_id="first",
                                        benchmark_params={"categories": ["answer"]}, run_id="second", **common)
    assert again.counts.reused == first.counts.done and again.metrics == first.metrics
    assert again.reuse["reused"] == first.counts.done
    changed = agentcompass.run_evaluation("shell_tasks", "shell_agent", "scripted", reuse_run_id="first",
                                          benchmark_params={"categories": ["answer"]},
                                          harness_params={"step_limit": 7}, run_id="third", **common)
    assert changed.counts.reused == 0
    assert len(changed.reuse["rerun"]["identity_mismatch"]) == first.counts.done


def test_reuse_run_id_ignores_operational_params_like_retries_prices_and_base_dir(tmp_path: Path) -> None:
    common = {"results_dir": str(tmp_path), "progress": "none", "benchmark_params": {"categories": ["answer"]}}
    first = agentcompass.run_evaluation("shell_tasks", "shell_agent", "scripted", run_id="first",
                                        model_params={"retries": 2}, **common)
    assert first.ok and first.counts.done > 3
    envs = tmp_path / "elsewhere"
    envs.mkdir()
    again = agentcompass.run_evaluation(
        "shell_tasks", "shell_agent", "scripted", reuse_run_id="first", run_id="second",
        model_params={"retries": 12, "retry_backoff": 2.0, "price_per_million": {"input": 1.0, "output": 2.0}},
        environment_params={"base_dir": str(envs), "open_timeout": 30}, **common)
    assert again.counts.reused == first.counts.done and again.metrics == first.metrics
    assert not again.reuse["rerun"].get("identity_mismatch")


def test_reuse_continues_a_run_without_rerunning_committed_tasks(tmp_path: Path) -> None:
    common = {"results_dir": str(tmp_path), "progress": "none", "run_id": "r"}
    first = agentcompass.run_evaluation("shell_tasks", "shell_agent", "scripted",
                                        benchmark_params={"sample_ids": ["answer/count_lines", "files/hello_world"]},
                                        **common)
    assert first.counts.done == 2
    run_dir = first.run_dir
    assert run_dir is not None
    # Simulate a crash that lost one committed task: only that one runs again.
    victim = next((run_dir / "details").glob("files_hello*"))
    victim.unlink()
    kept = next((run_dir / "details").glob("answer_count*"))
    mtime = kept.stat().st_mtime_ns
    again = agentcompass.run_evaluation("shell_tasks", "shell_agent", "scripted", reuse=True,
                                        benchmark_params={"sample_ids": ["answer/count_lines", "files/hello_world"]},
                                        **common)
    assert again.counts.reused == 1 and again.counts.done == 2
    assert again.metrics == first.metrics
    assert kept.stat().st_mtime_ns == mtime and victim.exists()


def test_a_run_being_written_cannot_be_continued_by_a_second_process_at_once(tmp_path: Path) -> None:
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[2]
    cmd = [sys.executable, "-m", "agentcompass.cli", "run", "shell_tasks",
           "tests.engine.components:SleepingHarness", "scripted", "--harness-params", '{"seconds": 30}',
           "--benchmark-params", '{"sample_ids": ["files/hello_world"]}', "--run-id", "shared", "--reuse",
           "--progress", "none", "--results-dir", str(tmp_path)]
    env = {**__import__("os").environ, "PYTHONPATH": str(repo)}
    first = subprocess.Popen(cmd, cwd=repo, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not list(tmp_path.glob("shell_tasks/*/scripted/shared/run_info.json")):
            assert time.monotonic() < deadline and first.poll() is None, "the first run never started"
            time.sleep(0.05)
        second = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, timeout=120)
        assert second.returncode == 2, second.stderr
        assert "is being written by another run" in second.stderr and f"pid {first.pid}" in second.stderr
        assert "Traceback" not in second.stderr
    finally:
        first.kill()
        first.wait(30)
    # The kernel dropped the dead run's lock: the run can be taken over now (other params: with --overwrite,
    # which needs the lock too).
    quick = [('{"seconds": 0}' if arg == '{"seconds": 30}' else arg) for arg in cmd] + ["--overwrite"]
    again = subprocess.run(quick, cwd=repo, env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
