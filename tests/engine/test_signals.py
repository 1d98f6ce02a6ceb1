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

from agentcompass.benchmarks.shell_tasks import all_tasks

from ..faults.test_engine_faults import _marked_processes

REPO = Path(__file__).resolve().parents[2]
HANG_GUARD_S = 60.0
# the nine files/ attempts block a worker thread each (more than the stdlib pool's cpu + 4 threads here, so the
# environments' close would starve for a thread), the three answer/ ones wait on a pipe held by a background child
SAMPLES = [t.id for t in all_tasks() if t.category == "files"] + ["answer/count_lines", "answer/sum_range",
                                                                  "answer/primes_below"]


def _started(progress: Path) -> int:
    if not progress.exists():
        return 0
    return sum(1 for line in progress.read_bytes().splitlines() if b'"attempt_started"' in line)


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_stops_a_run_whose_attempts_are_stuck(tmp_path: Path, sig: signal.Signals, code: int) -> None:
    envs = tmp_path / "envs"
    envs.mkdir()
    cmd = [sys.executable, "-m", "agentcompass.cli", "run", "shell_tasks", "tests.engine.components:StuckHarness",
           "scripted", "--benchmark-params", json.dumps({"sample_ids": SAMPLES}),
           "--env-params", json.dumps({"base_dir": str(envs)}), "--task-concurrency", str(len(SAMPLES)),
           "--run-id", "sig", "--results-dir", str(tmp_path / "r"), "--progress", "none"]
    # SIGINT as a terminal delivers it: a test runner started in the background inherits it ignored
    proc = subprocess.Popen(cmd, cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.default_int_handler))
    run_dir = tmp_path / "r" / "shell_tasks"
    try:
        guard = time.monotonic() + HANG_GUARD_S
        while proc.poll() is None and time.monotonic() < guard:  # every attempt is in flight (by progress)
            progress = next(run_dir.glob("*/*/sig/progress.jsonl"), None) if run_dir.exists() else None
            if progress is not None and _started(progress) >= len(SAMPLES):
                break
            time.sleep(0.05)
        time.sleep(0.5)  # let the commands and threads get stuck
        assert proc.poll() is None, proc.communicate()
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
