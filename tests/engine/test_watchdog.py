"""The stall watchdog: an attempt that makes no progress for ``stall_timeout`` ends as a classified, retryable
``stalled`` error with its partial trajectory, whatever it was stuck on; and a spawn that fails under
process-table pressure ends the try classified, never hangs it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import msgspec
import pytest

import agentcompass
from agentcompass.records import TaskDetail

from ..faults.test_engine_faults import _marked_processes

REPO = Path(__file__).resolve().parents[2]
STALLER = "tests.engine.components:StallingHarness"
PIDS_CGROUP = Path("/sys/fs/cgroup/pids")
DUMPING_CLI = ("import faulthandler, signal, sys; faulthandler.register(signal.SIGUSR1, all_threads=True); "
               "from agentcompass.cli import main; sys.exit(main())")


@pytest.mark.parametrize("mode", ["wakeup", "exec"])
def test_a_stalled_attempt_is_ended_classified_retried_and_keeps_its_steps(tmp_path: Path, mode: str) -> None:
    envs = tmp_path / "envs"
    envs.mkdir()
    out = agentcompass.run_evaluation(
        "shell_tasks", STALLER, "scripted", max_retries=1,
        harness_params={"mode": mode, "stall_timeout": 1.0, "agent_timeout": 120},
        environment_params={"base_dir": str(envs)}, benchmark_params={"sample_ids": ["files/hello_world"]},
        results_dir=str(tmp_path / "r"), progress="none")
    assert out.errors_by_kind == {"stalled": 1} and out.counts.retries == 1  # stalled is retryable
    assert out.run_dir is not None
    (path,) = (out.run_dir / "details").glob("*.json")
    a = msgspec.json.decode(path.read_bytes(), type=TaskDetail).attempts["1"]
    assert [t.error_kind for t in a.tries] == ["stalled", "stalled"]
    assert "stall_timeout" in (a.error or "")
    assert a.trajectory is not None and a.trajectory.stop_reason == "stalled"
    assert [s.action for s in a.trajectory.steps] == ["echo step one"]
    assert not list(envs.iterdir()) and _marked_processes(envs) == []


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), 0, -5])
def test_stall_timeout_must_be_a_positive_finite_number(tmp_path: Path, bad: float) -> None:
    out = agentcompass.launch({"requests": [{"benchmark": "shell_tasks", "harness": {
        "id": "shell_agent", "params": {"stall_timeout": bad}}, "model": "scripted",
        "results_dir": str(tmp_path)}], "progress": "none"}).outcomes[0]
    assert out.status == "failed" and out.error_field == "harness_params.stall_timeout", out.error


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.skipif(os.geteuid() != 0 or not os.access(PIDS_CGROUP, os.W_OK), reason="needs a writable pids cgroup")
def test_spawn_failures_under_process_table_pressure_end_classified_never_hang(tmp_path: Path) -> None:
    # RLIMIT_NPROC is not enforced for root, so the engine runs in its own pids cgroup with room for a few
    # processes only: most forks fail with EAGAIN.
    cg = PIDS_CGROUP / f"agentcompass-test-{uuid.uuid4().hex[:8]}"
    cg.mkdir()
    envs = tmp_path / "envs"
    envs.mkdir()
    try:
        (cg / "pids.max").write_text("12\n")
        # the CLI with a thread dump on SIGUSR1 (faulthandler: no thread or fork needed), sent before the hang
        # guard kills it: a hang then shows where the engine's threads were
        cmd = [sys.executable, "-c", DUMPING_CLI, "run", "shell_tasks", "shell_agent", "scripted",
               "--benchmark-params", json.dumps({"categories": ["files", "python"]}),
               "--env-params", json.dumps({"base_dir": str(envs)}), "--task-concurrency", "16",
               "--max-retries", "1", "--run-id", "pressure", "--results-dir", str(tmp_path / "r"),
               "--progress", "none"]
        proc = subprocess.Popen(["sh", "-c", f'echo $$ > {cg}/cgroup.procs && exec "$@"', "sh", *cmd],
                                cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            # A hang guard only. A starved command is slow, not hung: bash retries a failed fork itself,
            # sleeping 1+2+4+8 s, so one command can take ~15 s, and far longer on a loaded machine.
            stdout, stderr = proc.communicate(timeout=480)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGUSR1)
            time.sleep(3)
            proc.kill()
            _, err = proc.communicate()
            # run.log has every task's INFO lines with times: whether it was still moving (starved, slow) or not
            run_log = b"".join(p.read_bytes()[-6000:] for p in (tmp_path / "r").rglob("run.log"))
            pytest.fail(f"the run hung under process-table pressure; its stderr and threads:\n{err[-12000:]}\n"
                        f"run.log:\n{run_log.decode(errors='replace')}")
    finally:
        for pid in (cg / "cgroup.procs").read_text().split():
            os.kill(int(pid), 9)
        for nested in sorted(cg.rglob("*/"), key=lambda d: len(d.parts), reverse=True):  # our envs' cgroups
            if nested.is_dir():
                nested.rmdir()
        cg.rmdir()
    run_dir = next((tmp_path / "r").glob("*/*/*/pressure"))
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["counts"]["done"] == summary["counts"]["total"] > 0, (stdout, stderr)
    kinds = set(summary["errors_by_kind"])
    assert kinds, "the pressure should have made some forks fail"
    # the host failed, not the agent, nor our code: classified as a lost environment (retryable)
    assert kinds <= {"env_lost", "env_open_failed", "stalled"}, summary["errors_by_kind"]
    left = list(envs.iterdir())
    if left:  # what the run said of them: their close, the warnings
        logs = "".join(p.read_text(errors="replace") for p in (tmp_path / "r").rglob("*.log")).splitlines()
        said = [ln for ln in logs if "WARN" in ln or any(p.name in ln for p in left)]
        pytest.fail(f"workspaces left behind: {[str(q) for p in left for q in [p, *p.rglob('*')]]}\n"
                    + "\n".join(said[-100:]))


def test_a_model_call_slower_than_stall_timeout_is_not_a_stall(tmp_path: Path) -> None:
    # A healthy call on a throttled endpoint may queue and retry past stall_timeout: the client bounds it itself.
    out = agentcompass.run_evaluation(
        "shell_tasks", "shell_agent", "scripted", "local", benchmark_params={"sample_ids": ["files/hello_world"]},
        harness_params={"stall_timeout": 0.5}, model_params={"latency_s": 1.5}, results_dir=str(tmp_path),
        progress="none")
    assert out.status == "completed" and out.counts.errors == 0, out.errors_by_kind
    assert out.metrics["pass@1"] == 1.0
