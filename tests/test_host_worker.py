"""``HostWorker``: host-side calls in a child process, killed at their deadline while the event loop goes on."""

from __future__ import annotations

import os

import pytest

from agentcompass.host_worker import HostWorker, WorkerCallError, WorkerError, run_in_worker
from tests.loop_ticks import loop_ticks

_F = "tests.host_worker_funcs"


async def test_a_call_that_never_returns_is_killed_at_its_deadline_and_the_loop_goes_on() -> None:
    worker = HostWorker("test")
    async with loop_ticks() as ticks:
        assert await worker.call(f"{_F}:count", 2, timeout_s=30) == 2
        with pytest.raises(TimeoutError):
            await worker.call(f"{_F}:spin", timeout_s=0.5)
    assert ticks.count > 0  # the loop ran other work while the call spun
    assert worker.stopped is not None and "deadline" in worker.stopped
    await worker.aclose()
    assert worker.returncode == -9
    with pytest.raises(WorkerError, match="takes no more calls"):
        await worker.call(f"{_F}:count", 1, timeout_s=30)


async def test_state_errors_prints_and_deaths() -> None:
    worker = HostWorker("test")
    try:
        assert await worker.call(f"{_F}:count", 2, timeout_s=30) == 2
        assert await worker.call(f"{_F}:chatty", timeout_s=30) == "ok"
        assert await worker.call(f"{_F}:count", 3, timeout_s=30) == 5  # state kept between calls
        with pytest.raises(WorkerCallError, match="KeyError: 'no such thing'"):
            await worker.call(f"{_F}:fail", timeout_s=30)
        with pytest.raises(WorkerError, match="ended during the call"):
            await worker.call(f"{_F}:die", timeout_s=30)
    finally:
        await worker.aclose()


async def test_the_worker_does_not_inherit_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MODEL_API_KEY", "sk-secret")
    env = await run_in_worker(f"{_F}:environment", timeout_s=30)
    assert "MODEL_API_KEY" not in env and "sk-secret" not in str(env)
    assert env.get("PATH") == os.environ.get("PATH")
