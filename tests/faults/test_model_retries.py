"""RetryingModelClient over real HTTP against the scripted server's fault plan."""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import msgspec
import pytest

from agentcompass._errors import ConfigError, ModelError
from agentcompass.interfaces import ModelResponse
from agentcompass.models.clients.openai_chat import OpenAIChatClient
from agentcompass.models.factory import create_model_client
from agentcompass.models.retry import RETRY_AFTER_CEILING_S, RetryingModelClient, RetryPolicy
from agentcompass.models.scripted.model import ScriptedClient
from agentcompass.models.scripted.server import ScriptedServer
from agentcompass.records import Usage
from agentcompass.specs import ModelSpec
from tests.fixtures_scripted import running_scripted_server

pytestmark = pytest.mark.timeout(60)

ECHO = {"echo": True, "bundled": False}
FAST = {"retry_backoff": 0.01, "retry_max_wait": 0.05}


def ask(text: str = "ping") -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


class Retries:
    """Records every on_retry call: (kind, backoff_s, try_no)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, float, int]] = []
        self.seen = asyncio.Event()

    def __call__(self, kind: str, backoff_s: float, try_no: int) -> None:
        self.calls.append((kind, backoff_s, try_no))
        self.seen.set()


@asynccontextmanager
async def served(server_options: dict[str, Any], params: dict[str, Any] | None = None, *,
                 max_connections: int = 8, on_retry: Retries | None = None,
                 api_key: str | None = None,
                 timeout: float = 10) -> AsyncIterator[tuple[ScriptedServer, RetryingModelClient]]:
    """A scripted server with ``server_options`` and the factory's client for it."""
    async with running_scripted_server(ECHO, **server_options) as srv:
        client = create_model_client(ModelSpec(id="scripted", base_url=srv.base_url, api_key=api_key,
                                               params=params or {}),
                                     max_connections=max_connections, timeout=timeout, on_retry=on_retry)
        assert isinstance(client, RetryingModelClient)
        try:
            yield srv, client
        finally:
            await client.aclose()


async def warm(srv: ScriptedServer, client: RetryingModelClient, retries: Retries) -> None:
    """One answered call with the faults off, forgotten by ``retries``: the client's first connection (and what it
    imports lazily) is not paid inside the short deadline under test; on a cold, loaded machine it outlasted one."""
    plan, srv.fault_plan = srv.fault_plan, None
    assert (await client.complete(ask("warm"), timeout=30)).content == "warm"  # its own wide deadline
    srv.fault_plan = plan
    retries.calls.clear()


@pytest.mark.parametrize("faults", [
    {"429": 0.5}, {"500": 0.5}, {"502": 0.3, "503": 0.3}, {"garbage": 0.3}, {"close": 0.5}, {"hang": 0.3},
    {"ping": 0.3, "trickle": 0.2},
    {"429": 0.2, "500": 0.1, "garbage": 0.1, "close": 0.1, "hang": 0.1},
])
async def test_it_recovers_through_transient_faults_and_reports_the_retries_in_usage(
        faults: dict[str, float]) -> None:
    retries = Retries()
    params = {**FAST, "timeout": 0.3, "connect_timeout": 30, "retries": 10}
    async with served({"faults": faults, "fault_seed": 5}, params, on_retry=retries) as (srv, client):
        await warm(srv, client, retries)
        responses = [await client.complete(ask(f"question {i}")) for i in range(12)]
    assert [r.content for r in responses] == [f"question {i}" for i in range(12)]
    injected = sum(srv.faults_injected.values())
    # every fault was retried; a loaded machine may also time out a plain answer (retried as well, no fault
    # drawn): the client's own records must agree, and cover every fault
    assert 0 < injected <= len(retries.calls)
    assert sum(r.usage.retries for r in responses) == len(retries.calls)
    assert srv.completions_served == 13  # with the warm-up
    assert {kind for kind, _, _ in retries.calls} <= {"model_rate_limit", "model_server_error",
                                                      "model_bad_response", "model_connection_error"}


async def test_retry_after_is_honoured_even_beyond_retry_max_wait() -> None:
    retries = Retries()
    async with served({"fail_status": 429, "fail_every": 2, "retry_after": 0.3},
                      {"retry_backoff": 0, "retry_max_wait": 0.05}, on_retry=retries) as (srv, client):
        await client.complete(ask())  # request 1 succeeds, request 2 is a 429
        start = time.monotonic()
        r = await client.complete(ask())
        elapsed = time.monotonic() - start
    assert r.usage.retries == 1 and r.content == "ping"
    assert srv.requests_served == 3
    assert retries.calls == [("model_rate_limit", 0.3, 1)]
    assert elapsed >= 0.3  # the wait itself is the recorded decision above


def test_a_retry_after_longer_than_the_ceiling_is_capped() -> None:
    rng = random.Random(0)
    assert RetryPolicy(max_wait=30).wait_s(1, 10_000, rng) == RETRY_AFTER_CEILING_S
    assert RetryPolicy(max_wait=300, backoff=0).wait_s(1, 10_000, rng) == RETRY_AFTER_CEILING_S
    assert RetryPolicy(max_wait=30, backoff=0).wait_s(1, 45, rng) == 45
    # max_backoff (the request's max_backoff_s) caps every wait: Retry-After and exponential alike
    assert RetryPolicy(max_backoff=5).wait_s(1, 99_999_999, rng) == 5
    assert RetryPolicy(backoff=100, max_wait=1000, max_backoff=2).wait_s(9, None, rng) <= 2


def test_backoff_is_full_jitter_growing_exponentially_up_to_max_wait() -> None:
    policy = RetryPolicy(backoff=0.5, max_wait=3.0)
    rng = random.Random(1)
    for failures, cap in [(1, 0.5), (2, 1.0), (3, 2.0), (4, 3.0), (10, 3.0), (200, 3.0)]:
        waits = [policy.wait_s(failures, None, rng) for _ in range(500)]
        assert all(0 <= w <= cap for w in waits)
        assert max(waits) > 0.9 * cap and min(waits) < 0.1 * cap


async def test_it_gives_up_after_retries_and_raises_the_last_model_error() -> None:
    retries = Retries()
    async with served({"faults": {"500": 1.0}}, {"retries": 3, "retry_backoff": 0},
                      on_retry=retries) as (srv, client):
        with pytest.raises(ModelError) as info:
            await client.complete(ask())
    assert info.value.kind == "model_server_error" and info.value.status == 500
    assert "Gave up after 4 tries" in "".join(getattr(info.value, "__notes__", []))
    assert srv.requests_served == 4
    assert [(k, n) for k, _, n in retries.calls] == [("model_server_error", 1), ("model_server_error", 2),
                                                     ("model_server_error", 3)]


async def test_a_bad_response_is_retried_at_most_twice() -> None:
    async with served({"faults": {"garbage": 1.0}}, {"retries": 6, "retry_backoff": 0}) as (srv, client):
        with pytest.raises(ModelError) as info:
            await client.complete(ask())
    assert info.value.kind == "model_bad_response"
    assert srv.requests_served == 3


async def test_a_hung_server_is_bounded_by_the_timeout_on_every_try() -> None:
    retries = Retries()
    params = {"retries": 1, "retry_backoff": 0, "timeout": 0.3, "connect_timeout": 30}
    async with served({"faults": {"hang": 1.0}}, params, on_retry=retries) as (srv, client):
        await warm(srv, client, retries)
        start = time.monotonic()
        with pytest.raises(ModelError) as info:
            await client.complete(ask())
        elapsed = time.monotonic() - start
    assert info.value.kind == "model_connection_error"
    assert srv.requests_served == 3  # the warm-up and both tries
    assert elapsed >= 0.6  # both tries waited their timeout
    assert elapsed < 60  # hang guard: the server never answers


async def test_auth_errors_are_not_retried() -> None:
    async with served({"require_api_key": "right"}, {"retry_backoff": 0}, api_key="wrong") as (srv, client):
        with pytest.raises(ModelError) as info:
            await client.complete(ask())
    assert info.value.kind == "model_auth"
    assert srv.requests_served == 1


async def test_bad_requests_are_not_retried() -> None:
    async with served({"faults": {"400": 1.0}}, {"retry_backoff": 0}) as (srv, client):
        with pytest.raises(ModelError) as info:
            await client.complete(ask())
    assert info.value.kind == "model_bad_request"
    assert srv.requests_served == 1


@pytest.mark.timeout(150)
async def test_300_concurrent_completions_through_a_30_and_5_percent_fault_plan_all_succeed() -> None:
    retries = Retries()
    async with served({"faults": {"429": 0.30, "500": 0.05}, "fault_seed": 1234, "retry_after": 0.02},
                      {**FAST, "retries": 12}, max_connections=64, on_retry=retries, timeout=30) as (srv, client):
        responses = await asyncio.gather(*(client.complete(ask(f"task {i}")) for i in range(300)))
    assert [r.content for r in responses] == [f"task {i}" for i in range(300)]
    injected = srv.faults_injected
    assert injected["429"] > 50 and injected["500"] > 5
    total = Usage()
    for r in responses:
        total.add(r.usage)
    assert total.calls == 300
    assert total.retries == len(retries.calls)
    kinds = Counter(kind for kind, _, _ in retries.calls)
    assert set(kinds) <= {"model_rate_limit", "model_server_error", "model_connection_error"}, kinds
    # every retry is one the client decided on: a fault it was sent, or a call it gave up waiting for (a loaded
    # machine can stretch one past the client's timeout; the server may have answered it, counted but unread)
    gave_up = kinds["model_connection_error"]
    assert kinds["model_rate_limit"] <= injected["429"] and kinds["model_server_error"] <= injected["500"]
    assert 0 <= srv.completions_served - 300 <= gave_up
    unread = srv.requests_served - 300 - kinds["model_rate_limit"] - kinds["model_server_error"]
    assert 0 <= unread <= gave_up, (unread, gave_up)
    if gave_up == 0:  # nothing given up on: every fault was retried once, every completion read once
        assert srv.completions_served == 300
        assert total.retries == injected["429"] + injected["500"]


async def test_cancelling_during_a_backoff_sleep_ends_promptly() -> None:
    retries = Retries()
    async with served({"faults": {"429": 1.0}, "retry_after": 30}, on_retry=retries) as (srv, client):
        call = asyncio.create_task(client.complete(ask()))
        await asyncio.wait_for(retries.seen.wait(), 30)
        assert retries.calls[0][1] >= 30
        start = time.monotonic()
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        assert time.monotonic() - start < 15  # hang guard: the backoff was 30 s
    assert srv.requests_served == 1


async def test_per_call_retry_params_override_the_policy_and_never_reach_the_server() -> None:
    async with served({"faults": {"500": 1.0}}, {"retries": 5, "retry_backoff": 0}) as (srv, client):
        with pytest.raises(ModelError):
            await client.complete(ask(), retries=0, temperature=0.5)
    assert srv.requests_served == 1
    body = srv.recent_requests[-1]
    assert body["temperature"] == 0.5
    assert not {"retries", "retry_backoff", "retry_max_wait"} & set(body)


async def test_the_factory_consumes_the_retry_params_and_forwards_the_rest() -> None:
    params = {"retries": 2, "retry_backoff": 0.25, "retry_max_wait": 4, "temperature": 0, "timeout": 9}
    async with served({}, params) as (srv, client):
        r = await client.complete(ask())
    assert r.usage.retries == 0 and r.content == "ping"
    assert client.policy == RetryPolicy(retries=2, backoff=0.25, max_wait=4.0)
    assert isinstance(client.inner, OpenAIChatClient) and client.inner.timeout.read == 9
    body = srv.recent_requests[-1]
    assert body["temperature"] == 0
    assert not {"retries", "retry_backoff", "retry_max_wait", "timeout"} & set(body)


def test_the_in_process_scripted_model_is_not_wrapped_but_its_retry_params_are_checked() -> None:
    assert isinstance(create_model_client(ModelSpec(id="scripted", params={"retries": 3})), ScriptedClient)
    with pytest.raises(ConfigError) as info:
        create_model_client(ModelSpec(id="scripted", params={"retries": "3"}))
    assert info.value.field == "model_params.retries"


@pytest.mark.parametrize(("key", "value"), [
    ("retries", -1), ("retries", "3"), ("retries", True), ("retries", 1.5),
    ("retry_backoff", -0.1), ("retry_backoff", "fast"), ("retry_backoff", float("inf")),
    ("retry_max_wait", None), ("retry_max_wait", False),
])
def test_bad_retry_params_raise_config_error_naming_the_field(key: str, value: object) -> None:
    spec = ModelSpec(id="m", base_url="http://127.0.0.1:1/v1", params={key: value})
    with pytest.raises(ConfigError) as info:
        create_model_client(spec)
    assert info.value.field == f"model_params.{key}"
    assert key in str(info.value)


class _Flaky:
    """A ModelClient at the outside edge: fails with the given kinds, then answers."""

    model_id = "flaky"

    def __init__(self, kinds: list[str]) -> None:
        self.kinds = kinds
        self.calls = 0

    async def complete(self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None = None,
                       **params: Any) -> ModelResponse:
        self.calls += 1
        if self.kinds:
            raise ModelError("flaky", kind=self.kinds.pop(0))
        return ModelResponse(content="ok", usage=Usage(calls=1, retries=1))

    async def aclose(self) -> None:
        pass


async def test_any_model_client_can_be_wrapped_and_inner_retries_add_up() -> None:
    inner = _Flaky(["model_connection_error", "model_rate_limit"])
    client = RetryingModelClient(inner, RetryPolicy(backoff=0))
    r = await client.complete(ask())
    assert (r.content, r.usage.retries, inner.calls) == ("ok", 3, 3)


async def test_unknown_error_kinds_are_not_retried() -> None:
    inner = _Flaky(["model_error", "model_rate_limit"])
    with pytest.raises(ModelError) as info:
        await RetryingModelClient(inner, RetryPolicy(backoff=0)).complete(ask())
    assert info.value.kind == "model_error" and inner.calls == 1


def test_usage_add_sums_retries_and_omits_them_when_zero() -> None:
    total = Usage(calls=1)
    total.add(Usage(calls=2, retries=3))
    total.add(Usage(calls=1, retries=2))
    assert (total.calls, total.retries) == (4, 5)
    assert b"retries" not in msgspec.json.encode(Usage(calls=1))
    assert msgspec.json.decode(msgspec.json.encode(total), type=Usage) == total
