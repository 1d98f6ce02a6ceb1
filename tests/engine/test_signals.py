"""SIGINT/SIGTERM stop a run promptly whatever its attempts are doing (a worker thread blocked in a
``to_thread`` call, a command waiting on a pipe held by a background child): the run directory says
``cancelled`` and no process of the run is left. The only time bound is a generous hang guard."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentcompass.benchmarks.shell_tasks.benchmark import all_tasks

from ..faults.test_engine_faults import _marked_processes

REPO = Path(__file__).resolve().parents[2]
HANG_GUARD_S = 60.0
# the nine files/ attempts block a worker thread each (more than the stdlib pool's cpu + 4 threads here, so the
# environments' close would starve for a thread), the three answer/ ones wait on a pipe held by a background child
SAMPLES = [t.id for t in all_tasks() if t.category == "files"] + ["answer/count_lines", "answer/sum_range",
                                                                  "answer/primes_below"]


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_stops_a_run_whose_attempts_are_stuck(tmp_path: Path, sig: signal.Signals, code: int) -> None:
    envs, stuck = tmp_path / "envs", tmp_path / "stuck"
    envs.mkdir()
    stuck.mkdir()
    cmd = [sys.executable, "-m", "agentcompass.cli", "run", "shell_tasks", "tests.engine.components:StuckHarness",
           "scripted", "--harness-params", json.dumps({"stuck_dir": str(stuck)}),
           "--benchmark-params", json.dumps({"sample_ids": SAMPLES}),
           "--env-params", json.dumps({"base_dir": str(envs)}), "--task-concurrency", str(len(SAMPLES)),
           "--run-id", "sig", "--results-dir", str(tmp_path / "r"), "--progress", "none"]
    # SIGINT as a terminal delivers it: a test runner started in the background inherits it ignored
    proc = subprocess.Popen(cmd, cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.default_int_handler))
    run_dir = tmp_path / "r" / "shell_tasks"
    try:
        guard = time.monotonic() + HANG_GUARD_S
        # every attempt is stuck: each says so (its thread blocking, its command's background child started)
        while proc.poll() is None and time.monotonic() < guard and len(list(stuck.iterdir())) < len(SAMPLES):
            time.sleep(0.05)
        assert proc.poll() is None, proc.communicate()
        assert len(list(stuck.iterdir())) == len(SAMPLES), f"not every attempt got stuck within {HANG_GUARD_S:g}s"
        proc.send_signal(sig)
        try:
            _, stderr = proc.communicate(timeout=HANG_GUARD_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the run did not stop within {HANG_GUARD_S:g}s of {sig.name}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == code, stderr
    (info_path,) = run_dir.glob("*/*/sig/run_info.json")
    info = json.loads(info_path.read_text())
    assert info["status"] == "cancelled"
    assert not list(envs.iterdir()) and _marked_processes(envs) == []
