"""The adaptive (AIMD) concurrency limiter: real asyncio tasks against endpoints with a real capacity."""

from __future__ import annotations

import asyncio
import time

import pytest

from agentcompass._errors import ModelError
from agentcompass.models.adaptive import AdaptiveLimiter, LimiterRegistry
from agentcompass.models.clients.openai_chat import OpenAIChatClient
from agentcompass.models.retry import RetryingModelClient, RetryPolicy
from tests.fixtures_scripted import running_scripted_server


class CappedEndpoint:
    """An endpoint that serves ``capacity`` calls at a time and answers 429 beyond that."""

    def __init__(self, capacity: int, latency: float = 0.01) -> None:
        self.capacity = capacity
        self.latency = latency
        self.active = 0
        self.peak = 0
        self.rejected = 0

    async def call(self, limiter: AdaptiveLimiter) -> bool:
        ticket = await limiter.acquire()
        self.active += 1
        self.peak = max(self.peak, self.active)
        try:
            if self.active > self.capacity:
                self.rejected += 1
                await asyncio.sleep(0.001)
                limiter.release(ticket, "rate_limited")
                return False
            await asyncio.sleep(self.latency)
            limiter.release(ticket, "ok")
            return True
        finally:
            self.active -= 1


async def _drive(limiter: AdaptiveLimiter, endpoint: CappedEndpoint, workers: int, calls_each: int) -> int:
    async def worker() -> int:
        ok = 0
        while ok < calls_each:
            if await endpoint.call(limiter):
                ok += 1
        return ok

    return sum(await asyncio.gather(*(worker() for _ in range(workers))))


def test_starts_low_and_never_above_its_max() -> None:
    assert AdaptiveLimiter("e", 100).limit == 4
    assert AdaptiveLimiter("e", 2).limit == 2
    with pytest.raises(ValueError):
        AdaptiveLimiter("e", 0)


async def test_grows_only_while_saturated_and_never_lets_more_than_the_limit_in_flight() -> None:
    limiter = AdaptiveLimiter("e", 50)
    endpoint = CappedEndpoint(capacity=1000)
    # one caller at a time never saturates 4 slots: no reason to grow
    await _drive(limiter, endpoint, workers=1, calls_each=30)
    assert limiter.limit == 4
    await _drive(limiter, endpoint, workers=100, calls_each=3)
    assert limiter.limit > 4
    assert limiter.peak_in_flight <= 50
    assert endpoint.peak <= limiter.max_limit


async def test_a_burst_of_429s_cuts_the_limit_once_per_episode() -> None:
    changes: list[tuple[int, str]] = []
    limiter = AdaptiveLimiter("e", 64, initial=32, on_change=lambda n, why: changes.append((n, why)))
    tickets = [await limiter.acquire() for _ in range(32)]
    for t in tickets[:10]:  # ten 429s of calls that all started before the first cut
        limiter.release(t, "rate_limited")
    # one episode: cut at the first 429 to the 31 calls then in flight, and each refused call of the same
    # episode shows one call fewer fits: 22, the calls the endpoint is still serving
    assert [n for n, why in changes if why == "rate_limited"] == list(range(31, 21, -1))
    assert limiter.cuts == 1 and limiter.rate_limited == 10
    for t in tickets[10:]:
        limiter.release(t, "ok")
    fresh = await limiter.acquire()  # a call started after the cut: its 429 is a new episode
    limiter.release(fresh, "rate_limited")
    assert limiter.cuts == 2 and limiter.limit == 11  # nothing else in flight: halved


async def test_one_episode_never_takes_the_limit_below_half() -> None:
    limiter = AdaptiveLimiter("e", 64, initial=32)
    tickets = [await limiter.acquire() for _ in range(32)]
    for t in tickets:  # every call refused: still one episode
        limiter.release(t, "rate_limited")
    assert limiter.cuts == 1 and limiter.limit == 16


async def test_retry_after_pauses_new_calls_until_then() -> None:
    limiter = AdaptiveLimiter("e", 8)
    t = await limiter.acquire()
    limiter.release(t, "rate_limited", retry_after=0.3)
    t0 = time.monotonic()
    again = await limiter.acquire()
    assert time.monotonic() - t0 >= 0.28
    limiter.release(again, "ok")


async def test_a_cancelled_waiter_does_not_leak_a_slot() -> None:
    limiter = AdaptiveLimiter("e", 1)
    held = await limiter.acquire()
    waiter = asyncio.ensure_future(limiter.acquire())
    await asyncio.sleep(0.01)
    waiter.cancel()
    limiter.release(held, "ok")
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert limiter.in_flight == 0
    async with limiter.slot():
        assert limiter.in_flight == 1
    assert limiter.in_flight == 0


async def test_settles_near_the_endpoints_capacity() -> None:
    limiter = AdaptiveLimiter("e", 200)
    endpoint = CappedEndpoint(capacity=20, latency=0.005)
    done = await _drive(limiter, endpoint, workers=200, calls_each=10)
    assert done == 2000
    assert 15 <= limiter.limit <= 25, limiter
    # most calls were served, not rejected
    assert endpoint.rejected < done / 4


def test_registry_shares_one_limiter_per_endpoint_and_reports_changes() -> None:
    reg = LimiterRegistry()
    seen: list[tuple[str, int, str]] = []
    a = reg.get("http://h/v1/", "m", 10, subscriber="r1", on_change=lambda *e: seen.append(e))
    b = reg.get("http://h/v1", "m", 30, subscriber="r2", on_change=lambda *e: seen.append(e))
    c = reg.get("http://h/v1", "other", 10)
    assert a is b and a is not c and a.max_limit == 30
    assert seen == [("m@http://h/v1", 4, "start"), ("m@http://h/v1", 4, "start")]
    reg.unsubscribe("r1")
    a._change(9, "increase")
    assert seen[-1] == ("m@http://h/v1", 9, "increase") and len(seen) == 3


async def test_the_retrying_client_holds_a_slot_per_try_and_reports_429s() -> None:
    async with running_scripted_server(fail_status=429, fail_every=2, retry_after=0.05) as server:
        limiter = AdaptiveLimiter("e", 4, initial=4)
        inner = OpenAIChatClient("scripted", server.base_url or "")
        client = RetryingModelClient(inner, RetryPolicy(retries=3, backoff=0.01), limiter=limiter)
        try:
            for _ in range(4):
                await client.complete([{"role": "user", "content": "hi"}])
        finally:
            await client.aclose()
        assert limiter.rate_limited == 3 and limiter.in_flight == 0  # requests 2, 4 and 6 of 7
        limiter_no_retry = AdaptiveLimiter("e", 4)
        client2 = RetryingModelClient(OpenAIChatClient("scripted", server.base_url or ""), RetryPolicy(retries=0),
                                      limiter=limiter_no_retry)
        try:
            with pytest.raises(ModelError):
                for _ in range(2):
                    await client2.complete([{"role": "user", "content": "hi"}])
        finally:
            await client2.aclose()
        assert limiter_no_retry.in_flight == 0


async def test_a_shared_limiter_keeps_a_client_within_a_servers_concurrency_limit() -> None:
    async with running_scripted_server({"latency_s": 0.05}, max_concurrent=3, retry_after=0.05) as server:
        limiter = AdaptiveLimiter("e", 30, initial=8)
        client = RetryingModelClient(OpenAIChatClient("scripted", server.base_url or "", max_connections=30),
                                     RetryPolicy(retries=10, backoff=0.01, max_wait=0.1), limiter=limiter)
        try:
            await asyncio.gather(*(client.complete([{"role": "user", "content": f"q{i}"}]) for i in range(60)))
        finally:
            await client.aclose()
    assert server.peak_active_completions <= 3
    assert server.completions_served == 60
    assert 0 < server.rejected_concurrent and limiter.cuts >= 1
    assert limiter.limit <= 4  # learned the server's limit (3, +1 while probing)
