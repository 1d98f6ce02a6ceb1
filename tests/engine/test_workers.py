"""The engine's default executor (engine/workers.py) when no thread can be started: a call is never left queued
with no worker to run it."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from agentcompass.engine.workers import DaemonThreadPool


def _wait_until(cond: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.01)


def test_a_call_queued_when_no_thread_could_start_does_not_leave_a_phantom_idle_worker(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # seen under process-table pressure: a call queued for a busy worker (no new thread could start) made that
    # worker count itself idle twice; once it retired, the next call found "an idle worker", started no thread
    # and was never run (a local environment's file operation then hung its attempt for good)
    pool = DaemonThreadPool(idle_s=0.1)
    gate = threading.Event()
    first = pool.submit(gate.wait, 30)
    start = threading.Thread.start

    def refused(self: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", refused)
    second = pool.submit(lambda: "second")  # no thread to be had: the busy worker takes it after the first
    monkeypatch.setattr(threading.Thread, "start", start)
    gate.set()
    assert first.result(30) is True and second.result(30) == "second"
    _wait_until(lambda: not pool._workers)  # the worker retired, idle
    third = pool.submit(lambda: "third")
    assert third.result(30) == "third"  # a thread was started for it
    pool.shutdown()


def test_with_no_worker_at_all_a_call_that_cannot_get_a_thread_fails_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    pool = DaemonThreadPool()

    def refused(self: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", refused)
    with pytest.raises(RuntimeError, match="can't start new thread"):
        pool.submit(lambda: None)
    monkeypatch.undo()
    assert pool.submit(lambda: 7).result(30) == 7
    pool.shutdown()
