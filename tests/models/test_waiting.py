"""A try's time waiting on shared model resources (models/waiting.py): the limiter's queue and retry pauses are
reported to the clock set for the calls; concurrent waits count once; calls without a clock report nowhere."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentcompass._errors import ModelError
from agentcompass.common.error_kinds import ErrorKind
from agentcompass.interfaces import ModelResponse
from agentcompass.models.adaptive import AdaptiveLimiter
from agentcompass.models.retry import RetryingModelClient, RetryPolicy
from agentcompass.models.waiting import WaitClock, counting_waits, waiting


class FakeTime:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_overlapping_waits_count_once_and_a_wait_in_progress_is_included() -> None:
    t = FakeTime()
    clock = WaitClock(t)
    clock.begin()  # call A waits from 100
    t.now = 102
    clock.begin()  # call B too, from 102
    t.now = 104
    clock.end()  # A granted
    assert clock.busy and clock.seconds() == 4.0  # B still waiting: counted up to now
    t.now = 107
    clock.end()  # B granted at 107: 7 s during which some call waited, not 4 + 5
    assert not clock.busy and clock.total == clock.seconds() == 7.0
    t.now = 200
    assert clock.seconds() == 7.0  # nobody waits: it stands still


async def test_a_call_queued_at_the_limiter_reports_its_wait_to_its_own_clock_only() -> None:
    limiter = AdaptiveLimiter("m@http://h/v1", 1, initial=1)
    held = await limiter.acquire()
    mine, other = WaitClock(), WaitClock()

    async def queued() -> Any:
        with counting_waits(mine):
            return await limiter.acquire()

    with counting_waits(other):
        waiter = asyncio.ensure_future(queued())  # inherits `other`, then sets `mine` for itself
        for _ in range(20):
            await asyncio.sleep(0)
        assert mine.busy and not other.busy  # queued behind `held`
        await asyncio.sleep(0.05)
        limiter.release(held, "ok")
        ticket = await waiter
    limiter.release(ticket, "ok")
    assert mine.total >= 0.05 and other.total == 0.0
    fast = WaitClock()
    with counting_waits(fast):
        limiter.release(await limiter.acquire(), "ok")  # a free slot: no wait at all
    assert fast.total == 0.0


class _Flaky:
    model_id = "m"

    def __init__(self) -> None:
        self.calls = 0

    async def complete(self, messages: list[dict[str, Any]], **_: Any) -> ModelResponse:
        self.calls += 1
        if self.calls < 3:
            raise ModelError("overloaded", kind=ErrorKind.MODEL_SERVER_ERROR)
        return ModelResponse(content="ok")

    async def aclose(self) -> None:
        pass


async def test_a_retry_pause_is_waiting_and_the_call_itself_is_not() -> None:
    clock = WaitClock()
    client = RetryingModelClient(_Flaky(), RetryPolicy(retries=3, backoff=0.05, max_wait=0.05))
    with counting_waits(clock):
        await client.complete([{"role": "user", "content": "hi"}])
    assert 0.0 < clock.total < 5.0 and not clock.busy  # two pauses, each counted while it lasted
    with waiting():  # no clock set: nothing to report to, and no error
        pass


@pytest.mark.parametrize("kind", ["limiter", "pause"])
async def test_a_cancelled_wait_still_ends_on_the_clock(kind: str) -> None:
    clock = WaitClock()
    limiter = AdaptiveLimiter("m@http://h/v1", 1, initial=1)
    held = await limiter.acquire()

    async def wait() -> None:
        with counting_waits(clock):
            if kind == "limiter":
                await limiter.acquire()
            else:
                with waiting():
                    await asyncio.sleep(30)

    task = asyncio.ensure_future(wait())
    for _ in range(20):
        await asyncio.sleep(0)
    assert clock.busy
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not clock.busy
    limiter.release(held, "ok")
