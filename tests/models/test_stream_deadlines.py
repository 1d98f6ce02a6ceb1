"""The overall deadline of a model call over real HTTP: keep-alives are not progress, steady streams are.

httpx times each socket read, so only the client's own deadline can end a call whose server keeps the
connection busy (the scripted server's ``ping`` fault) without answering.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from agentcompass._errors import ConfigError, ModelError
from agentcompass.models import create_model_client
from agentcompass.models.clients.anthropic_messages import AnthropicMessagesClient
from agentcompass.models.clients.http import HttpModelClient
from agentcompass.models.clients.openai_chat import OpenAIChatClient
from agentcompass.models.clients.openai_responses import OpenAIResponsesClient
from agentcompass.models.retry import RetryingModelClient
from agentcompass.models.scripted.server import ScriptedServer
from agentcompass.specs import ModelSpec
from tests.fixtures_scripted import running_scripted_server

pytestmark = pytest.mark.timeout(120)

CLIENTS: dict[str, type[HttpModelClient]] = {
    "openai-chat": OpenAIChatClient, "openai-responses": OpenAIResponsesClient,
    "anthropic-messages": AnthropicMessagesClient}
PROTOCOLS = list(CLIENTS)
ECHO = {"echo": True, "bundled": False}
#: streamed in 16-character pieces: with 0.2 s between events it takes several seconds
LONG = "a slow but steady model streams this answer piece by piece, well within its timeout. " * 2
FAST_RETRY = {"retry_backoff": 0.01, "retry_max_wait": 0.05}
#: the connect bound defaults to the stall timeout; these tests bound the stall, and a loaded machine can take
#: longer than 0.6 s to open a loopback connection (CI: ConnectTimeout in the warm-up)
WIDE_CONNECT = {"connect_timeout": 30}


def ask(text: str = "ping") -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


async def warm(srv: ScriptedServer, client: Any, **kw: Any) -> None:
    """One answered call with the faults off: the client's first connection (and what it imports lazily) is not
    paid inside a short deadline under test; on a cold, loaded machine that alone outlasted one."""
    plan, srv.fault_plan = srv.fault_plan, None
    assert (await client.complete(ask("warm"), timeout=30, **kw)).content == "warm"  # its own wide deadline
    srv.fault_plan = plan


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_an_answer_of_only_keepalives_is_cut_at_about_the_timeout(protocol: str, stream: bool) -> None:
    # a keep-alive every 0.05 s keeps httpx's per-read timeout (0.6 s) from ever firing
    async with running_scripted_server(ECHO, faults={"ping": 1.0}, fault_interval_s=0.05) as srv, \
            CLIENTS[protocol]("scripted", srv.base_url or "", params={"timeout": 0.6, **WIDE_CONNECT}) as client:
        await warm(srv, client, stream=stream)
        start = time.monotonic()
        with pytest.raises(ModelError) as info:
            await client.complete(ask(), stream=stream)
        elapsed = time.monotonic() - start
    assert info.value.kind == "model_connection_error"
    expected = "its stream made no progress for 0.6s" if stream else "no response within 0.6s"
    assert expected in str(info.value) and "timed out" in str(info.value)
    assert srv.faults_injected == {"ping": 1}
    assert 0.55 <= elapsed < 60  # hang guard: the pings never end


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_keepalive_stream_is_retried_and_the_calls_then_succeed(protocol: str) -> None:
    kinds: list[str] = []
    async with running_scripted_server(ECHO, faults={"ping": 0.5}, fault_seed=11, fault_interval_s=0.05) as srv:
        client = create_model_client(
            ModelSpec(id="scripted", base_url=srv.base_url, api_protocol=protocol,  # type: ignore[arg-type]
                      params={"stream": True, "timeout": 0.6, "retries": 10, **FAST_RETRY, **WIDE_CONNECT}),
            on_retry=lambda kind, _wait, _try: kinds.append(kind))
        assert isinstance(client, RetryingModelClient)
        try:
            await warm(srv, client)
            kinds.clear()
            responses = [await client.complete(ask(f"question {i}")) for i in range(5)]
        finally:
            await client.aclose()
    assert [r.content for r in responses] == [f"question {i}" for i in range(5)]
    # every keep-alive stream was cut and retried; a loaded machine may also time out an answer's head (retried
    # the same way, no fault drawn), so the client's own records are compared, not the server's fault count
    assert 0 < srv.faults_injected["ping"] <= len(kinds)
    assert sum(r.usage.retries for r in responses) == len(kinds)  # every retry is booked on its call
    assert set(kinds) == {"model_connection_error"}
    assert srv.completions_served == 6  # with the warm-up


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_keepalive_stream_gives_up_after_the_policys_retries(protocol: str) -> None:
    async with running_scripted_server(ECHO, faults={"ping": 1.0}, fault_interval_s=0.05) as srv:
        client = create_model_client(
            ModelSpec(id="scripted", base_url=srv.base_url, api_protocol=protocol,  # type: ignore[arg-type]
                      params={"stream": True, "timeout": 0.5, "retries": 2, "retry_backoff": 0, **WIDE_CONNECT}))
        try:
            await warm(srv, client)
            start = time.monotonic()
            with pytest.raises(ModelError) as info:
                await client.complete(ask())
            elapsed = time.monotonic() - start
        finally:
            await client.aclose()
    assert info.value.kind == "model_connection_error"
    assert "Gave up after 3 tries" in "".join(getattr(info.value, "__notes__", []))
    assert srv.faults_injected == {"ping": 3} and srv.completions_served == 1  # the warm-up
    assert 3 * 0.45 <= elapsed < 120  # hang guard: the pings never end


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_slow_but_steady_stream_is_not_cut_even_when_it_outlasts_the_timeout(protocol: str) -> None:
    async with running_scripted_server(ECHO, stream_interval_s=0.2) as srv, \
            CLIENTS[protocol]("scripted", srv.base_url or "", params={"timeout": 1.0}) as client:
        start = time.monotonic()
        r = await client.complete(ask(LONG), stream=True)
        elapsed = time.monotonic() - start
    assert r.content == LONG
    assert elapsed > 2.0  # the stream really lasted longer than twice the timeout


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_total_timeout_cuts_a_stream_that_keeps_progressing(protocol: str) -> None:
    async with running_scripted_server(ECHO, stream_interval_s=0.2) as srv, \
            CLIENTS[protocol]("scripted", srv.base_url or "", params={"timeout": 5.0, "total_timeout": 1.2}) \
            as client:  # events every 0.2 s: only the total cap may cut, however loaded the machine
        start = time.monotonic()
        with pytest.raises(ModelError) as info:
            await client.complete(ask(LONG), stream=True)
        elapsed = time.monotonic() - start
        # a per-call total_timeout overrides the client's
        start = time.monotonic()
        with pytest.raises(ModelError) as per_call:
            await client.complete(ask(LONG), stream=True, total_timeout=0.6)
        elapsed_per_call = time.monotonic() - start
    assert info.value.kind == per_call.value.kind == "model_connection_error"
    assert "took longer than total_timeout=1.2s" in str(info.value)
    assert "took longer than total_timeout=0.6s" in str(per_call.value)
    assert 1.1 <= elapsed < 60 and 0.55 <= elapsed_per_call < 60  # hang guards
    assert not {"total_timeout", "timeout"} & set(srv.recent_requests[-1])


async def test_calls_after_a_cut_keepalive_stream_get_their_answers_on_the_same_client() -> None:
    async with running_scripted_server(ECHO, faults={"ping": 0.5}, fault_seed=2, fault_interval_s=0.05) as srv, \
            OpenAIChatClient("scripted", srv.base_url or "", max_connections=1,
                             params={"timeout": 0.5, **WIDE_CONNECT}) as client:
        await warm(srv, client, stream=True)
        outcomes = []
        for i in range(6):
            try:
                outcomes.append((await client.complete(ask(f"q{i}"), stream=True)).content)
            except ModelError as exc:
                outcomes.append(exc.kind)
        for _ in range(3000):  # every cut stream's handler ends: nothing is left writing keep-alives (30 s)
            if srv.open_connections <= 1:
                break
            await asyncio.sleep(0.01)
        assert srv.open_connections <= 1
    cut = srv.faults_injected["ping"]
    assert 0 < cut < 6
    assert outcomes.count("model_connection_error") == cut
    assert [o for o in outcomes if o != "model_connection_error"] == [
        f"q{i}" for i, o in enumerate(outcomes) if o != "model_connection_error"]


@pytest.mark.parametrize("value", [0, -1, "10", True, float("nan")])
def test_a_bad_total_timeout_is_a_config_error_naming_the_field(value: object) -> None:
    with pytest.raises(ConfigError) as info:
        OpenAIChatClient("m", "http://127.0.0.1:1/v1", params={"total_timeout": value})
    assert info.value.field == "model_params.total_timeout"
    assert "total_timeout" in str(info.value) and "> 0" in str(info.value)


async def test_a_bad_per_call_total_timeout_is_a_config_error() -> None:
    async with running_scripted_server(ECHO) as srv, OpenAIChatClient("m", srv.base_url or "") as client:
        with pytest.raises(ConfigError) as info:
            await client.complete(ask(), total_timeout=-5)
    assert info.value.field == "model_params.total_timeout"
    assert srv.requests_served == 0
