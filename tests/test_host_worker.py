"""``HostWorker``: host-side calls in a child process, killed at their deadline while the event loop goes on."""

from __future__ import annotations

import asyncio
import os

import pytest

from agentcompass.host_worker import HostWorker, WorkerCallError, WorkerError, WorkerPool, run_in_worker
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


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


async def test_a_pool_reuses_a_worker_across_calls_and_errors_and_replaces_one_killed_at_its_deadline() -> None:
    pool = WorkerPool("test")
    try:
        first = await pool.call(f"{_F}:pid", timeout_s=30)
        assert [await pool.call(f"{_F}:pid", timeout_s=30) for _ in range(5)] == [first] * 5
        with pytest.raises(WorkerCallError, match="KeyError"):
            await pool.call(f"{_F}:fail", timeout_s=30)
        assert await pool.call(f"{_F}:pid", timeout_s=30) == first  # the function's error left the worker fit
        assert pool.started == 1
        with pytest.raises(TimeoutError):
            await pool.call(f"{_F}:spin", timeout_s=0.5)
        assert not _alive(first)  # killed at the deadline, never handed out again
        second = await pool.call(f"{_F}:pid", timeout_s=30)
        assert second != first and pool.started == 2
        with pytest.raises(WorkerError, match="ended during the call"):
            await pool.call(f"{_F}:die", timeout_s=30)
        assert await pool.call(f"{_F}:pid", timeout_s=30) not in (first, second) and pool.started == 3
    finally:
        await pool.aclose()


async def test_a_pool_retires_a_worker_after_max_calls_keeps_max_idle_and_aclose_ends_them_all() -> None:
    pool = WorkerPool("test", max_idle=2, max_calls=3)
    pids = [await pool.call(f"{_F}:pid", timeout_s=30) for _ in range(7)]
    assert pids[:3] == [pids[0]] * 3 and pids[3:6] == [pids[3]] * 3 and pids[6] not in (pids[0], pids[3])
    assert not _alive(pids[0]) and not _alive(pids[3])
    overlapping = await asyncio.gather(*(pool.call(f"{_F}:nap", 0.3, timeout_s=30) for _ in range(4)))
    assert len(set(overlapping)) == 4  # one worker per call in flight
    alive = [p for p in {*overlapping, pids[6]} if _alive(p)]
    assert len(alive) == 2  # two kept idle, the others closed
    await pool.aclose()
    assert not any(_alive(p) for p in alive)
    with pytest.raises(WorkerError, match="closed"):
        await pool.call(f"{_F}:pid", timeout_s=30)


def test_a_pool_used_from_a_second_event_loop_starts_afresh() -> None:
    pool = WorkerPool("test")
    first = asyncio.run(pool.call(f"{_F}:pid", timeout_s=30))

    async def again() -> int:
        try:
            pid: int = await pool.call(f"{_F}:pid", timeout_s=30)
            return pid
        finally:
            await pool.aclose()

    assert asyncio.run(again()) != first and pool.started == 2
    assert not _alive(first)
