"""ProcessOnce: one run per key for the whole process, shared across event loops and threads; errors are not
kept; a cancelled runner hands the run to a waiter; a cancelled waiter leaves the run alone."""

from __future__ import annotations

import asyncio
import threading

import pytest

from agentcompass.common.process_once import ProcessOnce


def test_callers_on_two_threads_event_loops_share_one_run_and_later_ones_get_the_kept_result() -> None:
    once: ProcessOnce[str, int] = ProcessOnce()
    runs: list[str] = []
    started, release = threading.Event(), threading.Event()

    async def job() -> int:
        runs.append(threading.current_thread().name)
        started.set()
        await asyncio.to_thread(release.wait, 30)
        return 42

    results: dict[str, tuple[int, bool]] = {}

    def caller(name: str) -> None:
        results[name] = asyncio.run(once.run("k", job))

    first = threading.Thread(target=caller, args=("first",), name="first")
    first.start()
    assert started.wait(30)
    second = threading.Thread(target=caller, args=("second",), name="second")
    second.start()
    release.set()
    first.join(30)
    second.join(30)
    assert results == {"first": (42, True), "second": (42, False)} and runs == ["first"]
    assert asyncio.run(once.run("k", job)) == (42, False) and runs == ["first"]


async def test_an_error_is_shared_with_waiters_retold_and_not_kept() -> None:
    once: ProcessOnce[str, int] = ProcessOnce()
    gate = asyncio.Event()
    calls = 0

    async def failing() -> int:
        nonlocal calls
        calls += 1
        await gate.wait()
        raise OSError("mirror down")

    runner = asyncio.ensure_future(once.run("k", failing))
    await asyncio.sleep(0)
    waiter = asyncio.ensure_future(once.run("k", failing, retell=lambda exc: ValueError(f"told: {exc}")))
    await asyncio.sleep(0)  # its first step (scheduled before this one resumes) parks it on the shared run
    gate.set()
    with pytest.raises(OSError, match="mirror down"):
        await runner
    with pytest.raises(ValueError, match="told: mirror down") as info:
        await waiter
    assert isinstance(info.value.__cause__, OSError) and calls == 1

    async def working() -> int:
        return 7

    assert await once.run("k", working) == (7, True)  # the failure was not kept


async def test_a_cancelled_runner_hands_the_run_to_a_waiter_and_a_cancelled_waiter_leaves_it_alone() -> None:
    once: ProcessOnce[str, str] = ProcessOnce()
    gate, second_run = asyncio.Event(), asyncio.Event()
    runners: list[int] = []

    async def job() -> str:
        runners.append(len(runners))
        if len(runners) == 2:
            second_run.set()
        await gate.wait()
        return f"done by {len(runners)}"

    runner = asyncio.ensure_future(once.run("k", job))
    await asyncio.sleep(0)
    quitter = asyncio.ensure_future(once.run("k", job))
    taker = asyncio.ensure_future(once.run("k", job))
    await asyncio.sleep(0)  # their first steps (scheduled before this one resumes) park both on the shared run
    quitter.cancel()  # a waiter going away: the run goes on
    with pytest.raises(asyncio.CancelledError):
        await quitter
    assert not runner.done() and runners == [0]
    runner.cancel()  # the runner going away: the waiter runs it
    with pytest.raises(asyncio.CancelledError):
        await runner
    await asyncio.wait_for(second_run.wait(), 30)
    assert runners == [0, 1]
    gate.set()
    assert await asyncio.wait_for(taker, 30) == ("done by 2", True)
