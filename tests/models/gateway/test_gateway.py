"""The model gateway against real upstreams (the scripted server, raw canned servers): SDKs, streams, ledger."""

from __future__ import annotations

import asyncio
import time

import httpx
import msgspec
import openai
import pytest

from agentcompass._errors import ModelError
from agentcompass.models.adaptive import AdaptiveLimiter
from agentcompass.models.clients.anthropic_messages import AnthropicMessagesClient
from agentcompass.models.clients.http import HttpModelClient
from agentcompass.models.clients.openai_chat import OpenAIChatClient
from agentcompass.models.clients.openai_responses import OpenAIResponsesClient
from agentcompass.models.gateway.envelope import AttemptKey
from agentcompass.models.gateway.server import Gateway, Grant, Upstream
from agentcompass.models.scripted.server import ScriptedServer
from tests.fixtures_scripted import running_scripted_server

from .._raw_http import http_response, raw_server
from ..gateway_helpers import FAST_RETRIES, KEY, running_gateway

SCRIPT = [{"match": "capital of France", "turns": ["Paris is the capital of France."]}]
TOOL_SCRIPT = [{"match": "list files", "turns": [
    {"content": "", "tool_calls": [{"name": "bash", "arguments": {"cmd": "ls -la"}}]}, "Done: two files."]}]
BASH_TOOL = {"type": "function", "function": {"name": "bash", "parameters": {
    "type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}}}


async def test_openai_sdk_chat_through_the_gateway_books_tokens_of_plain_and_streamed_calls() -> None:
    async with running_scripted_server({"script": SCRIPT}, require_api_key="sk-real-key") as server, \
            running_gateway(server.base_url or "", api_key="sk-real-key") as gw:
        assert gw.base_url is not None
        grant = gw.open_grant(KEY)
        assert grant.api_key != "sk-real-key"
        client = openai.AsyncOpenAI(base_url=gw.url_for(gw.base_url, grant), api_key=grant.api_key, max_retries=0)
        msgs = [{"role": "user", "content": "What is the capital of France?"}]
        resp = await client.chat.completions.create(model="whatever-the-agent-says", messages=msgs)  # type: ignore[arg-type]
        assert resp.choices[0].message.content == "Paris is the capital of France."
        assert resp.usage is not None
        stream = await client.chat.completions.create(model="x", messages=msgs, stream=True)  # type: ignore[arg-type]
        chunks = [c async for c in stream]  # type: ignore[union-attr]
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert text == "Paris is the capital of France."
        # the client did not ask for usage: the chunk the gateway asked for on its behalf is not forwarded
        assert all(c.choices for c in chunks)
        await client.close()
        used = await gw.close_grant(KEY)
    assert used.calls == 2 and used.failed == 0 and used.no_usage == 0
    assert used.usage.prompt_tokens == 2 * resp.usage.prompt_tokens
    assert used.usage.completion_tokens == 2 * resp.usage.completion_tokens
    assert all(body["model"] == "scripted" for body in server.recent_requests)  # the request's model, not the agent's
    assert gw.ledger.by_request["req"].calls == 2


async def test_route_token_in_the_path_or_as_the_key_reaches_the_upstream_with_the_real_key() -> None:
    async with running_scripted_server({"script": SCRIPT}, require_api_key="sk-real-key") as server, \
            running_gateway(server.base_url or "", api_key="sk-real-key") as gw:
        grant = gw.open_grant(KEY)
        body = {"model": "m", "messages": [{"role": "user", "content": "capital of France?"}]}
        async with httpx.AsyncClient(timeout=10) as http:
            by_path = await http.post(f"{gw.url_for(gw.base_url or '', grant)}/chat/completions", json=body,
                                      headers={"Authorization": "Bearer anything"})
            by_key = await http.post(f"{gw.base_url}/v1/chat/completions", json=body,
                                     headers={"Authorization": f"Bearer {grant.token}"})
            models = await http.get(f"{gw.base_url}/r/{grant.token}/v1/models")
            unknown = await http.post(f"{gw.base_url}/r/not-a-token/v1/chat/completions", json=body)
            no_key = await http.post(f"{gw.base_url}/v1/chat/completions", json=body)
            real_key = await http.post(f"{gw.base_url}/v1/chat/completions", json=body,
                                       headers={"Authorization": "Bearer sk-real-key"})
        assert by_path.status_code == by_key.status_code == 200, (by_path.text, by_key.text)
        assert models.status_code == 200 and models.json()["data"][0]["id"] == "scripted"
        for denied in (unknown, no_key, real_key):
            assert denied.status_code == 401
            err = denied.json()["error"]
            assert set(err) >= {"message", "type", "code"} and "sk-real-key" not in denied.text
        used = await gw.close_grant(KEY)
        assert used.calls == 3


async def test_a_closed_grant_is_refused_and_its_unfinished_call_is_ended() -> None:
    async with raw_server(None) as hang, running_gateway(hang.base_url) as gw:
        grant = gw.open_grant(KEY)
        url = gw.url_for(gw.base_url or "", grant)
        async with httpx.AsyncClient(timeout=10) as http:
            pending = asyncio.ensure_future(http.post(f"{url}/chat/completions", json={"messages": []}))
            for _ in range(500):  # until the upstream has the request
                if hang.heads:
                    break
                await asyncio.sleep(0.01)
            t0 = asyncio.get_running_loop().time()
            used = await gw.close_grant(KEY)
            assert asyncio.get_running_loop().time() - t0 < 3.0
            ended = await pending
            after = await http.post(f"{url}/chat/completions", json={"messages": []})
        assert ended.status_code == 401 and after.status_code == 401
        assert used.calls == 1 and used.failed == 1


async def test_429_and_5xx_are_retried_honouring_retry_after_and_counted() -> None:
    async with running_scripted_server({"script": SCRIPT}, fail_status=429, fail_every=2, retry_after=0.2) as server, \
            running_gateway(server.base_url or "") as gw:
        retries: list[tuple[AttemptKey, str, float, int]] = []
        gw.on_retry = lambda *args: retries.append(args)
        grant = gw.open_grant(KEY)
        client = openai.AsyncOpenAI(base_url=gw.url_for(gw.base_url or "", grant), api_key=grant.api_key,
                                    max_retries=0)
        msgs = [{"role": "user", "content": "capital of France"}]
        await client.chat.completions.create(model="m", messages=msgs)  # type: ignore[arg-type]  # 1st: ok
        t0 = asyncio.get_running_loop().time()
        resp = await client.chat.completions.create(model="m", messages=msgs)  # type: ignore[arg-type]  # 2nd: 429
        waited = asyncio.get_running_loop().time() - t0
        await client.close()
        used = await gw.close_grant(KEY)
    assert resp.choices[0].message.content == "Paris is the capital of France."
    assert waited >= 0.2
    assert used.calls == 2 and used.retries == 1 and used.failed == 0
    assert [(k, kind, n) for k, kind, _, n in retries] == [(KEY, "model_rate_limit", 1)] and retries[0][2] >= 0.2


async def test_out_of_retries_the_client_gets_the_upstream_answer_and_an_unreachable_one_gets_502(
        refused_base_url: str) -> None:
    async with running_scripted_server({"script": SCRIPT}, fail_status=503) as server, \
            running_gateway(server.base_url or "") as gw, running_gateway(refused_base_url) as dead:
        body = {"messages": [{"role": "user", "content": "hi"}]}
        async with httpx.AsyncClient(timeout=10) as http:
            g1 = gw.open_grant(KEY)
            r1 = await http.post(f"{gw.url_for(gw.base_url or '', g1)}/chat/completions", json=body)
            g2 = dead.open_grant(KEY)
            r2 = await http.post(f"{dead.url_for(dead.base_url or '', g2)}/chat/completions", json=body)
        assert r1.status_code == 503 and r1.json()["error"]["type"] == "server_error"
        assert r2.status_code == 502 and r2.json()["error"]["code"] == "upstream_unavailable"
        assert (await gw.close_grant(KEY)).retries == 3
        dead_usage = await dead.close_grant(KEY)
        assert dead_usage.failed == 1 and dead_usage.retries == 3


async def test_tool_calls_round_trip_through_the_gateway() -> None:
    async with running_scripted_server({"script": TOOL_SCRIPT}) as server, \
            running_gateway(server.base_url or "") as gw:
        grant = gw.open_grant(KEY)
        client = openai.AsyncOpenAI(base_url=gw.url_for(gw.base_url or "", grant), api_key=grant.api_key,
                                    max_retries=0)
        msgs: list[dict[str, object]] = [{"role": "user", "content": "Please list files here."}]
        first = await client.chat.completions.create(model="m", messages=msgs, tools=[BASH_TOOL])  # type: ignore[arg-type, list-item]
        calls = first.choices[0].message.tool_calls
        assert calls and calls[0].function.name == "bash"  # type: ignore[union-attr]
        assert msgspec.json.decode(calls[0].function.arguments) == {"cmd": "ls -la"}  # type: ignore[union-attr]
        msgs += [first.choices[0].message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": calls[0].id, "content": "a.txt\nb.txt"}]
        second = await client.chat.completions.create(model="m", messages=msgs, tools=[BASH_TOOL])  # type: ignore[arg-type, list-item]
        await client.close()
        assert second.choices[0].message.content == "Done: two files."
        sent = server.recent_requests[-1]
        assert sent["tools"] == [BASH_TOOL] and sent["messages"][-1]["tool_call_id"] == calls[0].id
        assert (await gw.close_grant(KEY)).calls == 2


async def test_openai_sdk_responses_api_through_the_gateway_plain_and_streamed() -> None:
    async with running_scripted_server({"script": SCRIPT}, require_api_key="sk-real-key") as server, \
            running_gateway(server.base_url or "", api_key="sk-real-key", protocol="openai-responses") as gw:
        grant = gw.open_grant(KEY)
        client = openai.AsyncOpenAI(base_url=gw.url_for(gw.base_url or "", grant), api_key=grant.api_key,
                                    max_retries=0)
        resp = await client.responses.create(model="m", input="What is the capital of France?")
        assert resp.output_text == "Paris is the capital of France."
        stream = await client.responses.create(model="m", input="What is the capital of France?", stream=True)
        events = [e async for e in stream]
        await client.close()
        assert events[-1].type == "response.completed"
        used = await gw.close_grant(KEY)
    assert resp.usage is not None
    assert used.calls == 2 and used.no_usage == 0
    assert used.usage.prompt_tokens == 2 * resp.usage.input_tokens
    assert used.usage.completion_tokens == 2 * resp.usage.output_tokens


async def test_anthropic_messages_through_the_gateway_use_x_api_key_and_book_usage() -> None:
    async with running_scripted_server({"script": SCRIPT}, require_api_key="sk-ant-real") as server, \
            running_gateway(server.base_url or "", api_key="sk-ant-real", protocol="anthropic-messages") as gw:
        grant = gw.open_grant(KEY)
        base = gw.url_for(gw.base_url or "", grant, anthropic=True)  # what ANTHROPIC_BASE_URL gets
        body = {"model": "claude", "max_tokens": 64,
                "messages": [{"role": "user", "content": "What is the capital of France?"}]}
        headers = {"x-api-key": grant.api_key, "anthropic-version": "2023-06-01"}
        async with httpx.AsyncClient(timeout=10) as http:
            plain = await http.post(f"{base}/v1/messages", json=body, headers=headers)
            async with http.stream("POST", f"{base}/v1/messages", json={**body, "stream": True},
                                   headers=headers) as streamed:
                raw = b"".join([c async for c in streamed.aiter_raw()])
        used = await gw.close_grant(KEY)
    assert plain.status_code == 200, plain.text
    assert plain.json()["content"][0]["text"] == "Paris is the capital of France."
    assert b"event: message_stop" in raw and b"Paris" in raw
    u = plain.json()["usage"]
    assert used.calls == 2 and used.no_usage == 0
    assert used.usage.prompt_tokens == 2 * u["input_tokens"]
    assert used.usage.completion_tokens == 2 * u["output_tokens"]


async def test_a_stream_passes_through_event_by_event_unchanged() -> None:
    events = [b'data: {"id":"1","choices":[{"index":0,"delta":{"content":"he"}}]}\n\n',
              b'data: {"id":"1","choices":[{"index":0,"delta":{"content":"llo"}}]}\r\n\r\n',
              b'data: {"id":"1","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":2,"total_tokens":9}}\n\n',
              b"data: [DONE]\n\n"]
    stream = b"".join(events)
    answer = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n%s"
              % (len(stream), stream))
    async with raw_server(answer) as upstream, running_gateway(upstream.base_url) as gw:
        grant = gw.open_grant(KEY)
        body = {"messages": [], "stream": True, "stream_options": {"include_usage": True}}
        async with httpx.AsyncClient(timeout=10) as http, http.stream(
                "POST", f"{gw.url_for(gw.base_url or '', grant)}/chat/completions", json=body) as resp:
            got = b"".join([c async for c in resp.aiter_raw()])
        used = await gw.close_grant(KEY)
    assert got == stream  # the client asked for usage: nothing dropped, bytes as sent
    assert used.usage.prompt_tokens == 7 and used.usage.completion_tokens == 2


async def test_unknown_paths_and_wrong_methods_are_refused_without_reaching_the_upstream() -> None:
    async with raw_server(http_response(200, {})) as upstream, running_gateway(upstream.base_url) as gw:
        grant = gw.open_grant(KEY)
        url = gw.url_for(gw.base_url or "", grant)
        async with httpx.AsyncClient(timeout=10) as http:
            r404 = await http.post(f"{url}/files", json={})
            r405 = await http.get(f"{url}/chat/completions")
        assert r404.status_code == 404 and r405.status_code == 405
        assert upstream.heads == []
        await gw.close_grant(KEY)


async def test_two_tries_are_billed_separately() -> None:
    other = AttemptKey("req", "task-1", 1, 2)
    async with running_scripted_server({"script": SCRIPT}) as server, running_gateway(server.base_url or "") as gw:
        g1, g2 = gw.open_grant(KEY), gw.open_grant(other)
        body = {"messages": [{"role": "user", "content": "capital of France"}]}
        async with httpx.AsyncClient(timeout=10) as http:
            for _ in range(3):
                assert (await http.post(f"{gw.url_for(gw.base_url or '', g2)}/chat/completions", json=body)
                        ).status_code == 200
            assert (await http.post(f"{gw.url_for(gw.base_url or '', g1)}/chat/completions", json=body)
                    ).status_code == 200
        assert (await gw.close_grant(KEY)).calls == 1
        assert (await gw.close_grant(other)).calls == 3


@pytest.mark.parametrize("protocol", ["openai-chat", "anthropic-messages"])
def test_upstream_urls_follow_each_protocols_base_url_convention(protocol: str) -> None:
    from agentcompass.models.adaptive import AdaptiveLimiter
    from agentcompass.models.gateway.server import Upstream

    up = Upstream(request="r", model_id="m", base_url="https://api.example.com", api_key="k",
                  api_protocol=protocol, limiter=AdaptiveLimiter("x", 1))
    v1 = Upstream(request="r", model_id="m", base_url="https://api.example.com/v1/", api_key="k",
                  api_protocol=protocol, limiter=AdaptiveLimiter("x", 1))
    assert v1.url("messages") == "https://api.example.com/v1/messages"
    want = "https://api.example.com/v1/messages" if protocol == "anthropic-messages" \
        else "https://api.example.com/messages"
    assert up.url("messages") == want


async def test_a_client_leaving_mid_stream_is_booked_and_the_gateway_keeps_serving() -> None:
    long_script = [{"match": "long story", "turns": ["word " * 20000]}]
    async with running_scripted_server({"script": long_script}) as server, \
            running_gateway(server.base_url or "") as gw:
        grant = gw.open_grant(KEY)
        url = httpx.URL(f"{gw.url_for(gw.base_url or '', grant)}/chat/completions")
        body = msgspec.json.encode({"messages": [{"role": "user", "content": "a long story"}], "stream": True})
        reader, writer = await asyncio.open_connection(url.host, url.port)
        writer.write(b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                     % (url.raw_path, len(body), body))
        await writer.drain()
        assert (await reader.read(200)).startswith(b"HTTP/1.1 200")
        writer.close()  # gone after the first bytes
        async with httpx.AsyncClient(timeout=10) as http:
            ok = await http.post(str(url), json={"messages": [{"role": "user", "content": "a long story"}]})
        assert ok.status_code == 200
        for _ in range(200):
            if gw.ledger.by_request["req"].calls == 2:
                break
            await asyncio.sleep(0.01)
        assert gw.ledger.by_request["req"].calls == 2
        await gw.close_grant(KEY)


async def test_anthropic_sdk_through_the_gateway_with_an_envelope() -> None:
    anthropic = pytest.importorskip("anthropic")
    async with running_scripted_server({"script": SCRIPT}, require_api_key="sk-ant-real") as server, \
            running_gateway(server.base_url or "", api_key="sk-ant-real", protocol="anthropic-messages") as gw:
        grant = gw.open_grant(KEY, envelope_ttl_s=60)
        client = anthropic.AsyncAnthropic(base_url=gw.url_for(gw.base_url or "", grant, anthropic=True),
                                          api_key=grant.api_key, max_retries=0)
        msgs = [{"role": "user", "content": "What is the capital of France?"}]
        msg = await client.messages.create(model="claude-x", max_tokens=64, messages=msgs)
        async with client.messages.stream(model="claude-x", max_tokens=64, messages=msgs) as stream:
            text = "".join([t async for t in stream.text_stream])
        await client.close()
        used = await gw.close_grant(KEY)
    assert msg.content[0].text == text == "Paris is the capital of France."
    assert used.calls == 2 and used.no_usage == 0
    assert used.usage.prompt_tokens == 2 * msg.usage.input_tokens
    assert used.usage.completion_tokens == 2 * msg.usage.output_tokens


# ---------------------------------------------------------------------- the overall bound of an upstream try

CLIENTS: dict[str, type[HttpModelClient]] = {
    "openai-chat": OpenAIChatClient, "openai-responses": OpenAIResponsesClient,
    "anthropic-messages": AnthropicMessagesClient}
ECHO = {"echo": True, "bundled": False}
#: streamed in 16-character pieces: with 0.2 s between events it takes several seconds
LONG = "a slow but steady model streams this answer piece by piece, well within its timeout. " * 2


def bounded_upstream(gw: Gateway, base_url: str, protocol: str, *, timeout_s: float,
                     total_timeout_s: float | None = None) -> AdaptiveLimiter:
    """Route ``KEY``'s request to ``base_url`` with these timeouts; returns the upstream's limiter."""
    limiter = AdaptiveLimiter("test", 8)
    gw.add_upstream(Upstream(request=KEY.request, model_id="scripted", base_url=base_url, api_key=None,
                             api_protocol=protocol, limiter=limiter, policy=FAST_RETRIES, timeout_s=timeout_s,
                             total_timeout_s=total_timeout_s, connect_timeout_s=2.0))
    return limiter


def agent_client(gw: Gateway, grant: Grant, protocol: str) -> HttpModelClient:
    """The agent's client: its own deadline is far away, so any cut comes from the gateway."""
    return CLIENTS[protocol]("agent-model", gw.url_for(gw.base_url or "", grant), api_key=grant.api_key,
                             params={"timeout": 30.0})


async def wait_for_connections(srv: ScriptedServer, at_most: int) -> int:
    """The upstream's open connections once at most ``at_most`` are left (or after 3 s)."""
    for _ in range(300):
        if srv.open_connections <= at_most:
            break
        await asyncio.sleep(0.01)
    return srv.open_connections


@pytest.mark.timeout(120)
@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("protocol", list(CLIENTS))
@pytest.mark.parametrize("fault", ["ping", "trickle"])
async def test_an_upstream_that_only_keeps_alive_or_trickles_is_cut_at_about_the_timeout_and_the_gateway_serves_on(
        fault: str, protocol: str, stream: bool) -> None:
    # a keep-alive (or one byte) every 0.05 s: httpx's per-read timeout (0.6 s) never fires. The same 0.6 s
    # bounds the try's request up to the answer's head, so on a loaded (or cold: first connection, lazy
    # imports) machine a try may time out before any answer and be retried, legitimately. The verdict is on
    # what the gateway decided: which tries had an answer (httpx's response hook on the gateway's own pool),
    # which it retried and why, and how the call ended; never on how many such head timeouts happened.
    async with running_scripted_server(ECHO, faults={fault: 1.0}, fault_interval_s=0.05) as srv, \
            running_gateway(srv.base_url or "", requests=()) as gw:
        limiter = AdaptiveLimiter("test", 8)
        up = Upstream(request=KEY.request, model_id="scripted", base_url=srv.base_url or "", api_key=None,
                      api_protocol=protocol, limiter=limiter, policy=FAST_RETRIES, timeout_s=0.6,
                      connect_timeout_s=2.0)
        gw.add_upstream(up)
        assert up.http is not None
        answered: list[int] = []  # the status of each upstream try that got an answer, in order

        async def on_answer(resp: httpx.Response) -> None:
            answered.append(resp.status_code)
        up.http.event_hooks["response"].append(on_answer)
        retried: list[str] = []
        gw.on_retry = lambda _key, kind, _wait, _n: retried.append(kind)
        grant = gw.open_grant(KEY)
        async with agent_client(gw, grant, protocol) as client:
            start = time.monotonic()
            with pytest.raises(ModelError) as info:
                await client.complete([{"role": "user", "content": "first"}], stream=stream)
            elapsed = time.monotonic() - start
            first_answered, first_retried = list(answered), list(retried)
            injected = dict(srv.faults_injected)
            srv.fault_plan = None  # the upstream recovers
            # the next call only shows the gateway serves on: a deadline it cannot blow on a loaded machine
            up.timeout_s = 60.0
            up.http.timeout = httpx.Timeout(60.0, connect=up.connect_timeout_s)
            after = await client.complete([{"role": "user", "content": "second"}], stream=stream)
        for _ in range(3000):  # the cut upstream connection gets closed (bounded: 30 s)
            if srv.open_connections <= 1:
                break
            await asyncio.sleep(0.01)
        left = srv.open_connections
        used = await gw.close_grant(KEY)
    expected = "its stream made no progress for 0.6s" if stream else "no response within 0.6s"
    assert "timed out" in str(info.value) and expected in str(info.value), str(info.value)
    assert info.value.kind in ("model_server_error", "model_connection_error")  # retried by the agent's client
    assert 0.55 <= elapsed < 60  # never cut early; hang guard
    # the first call: exactly one try got an answer, it was the last (the cut is never retried), and every
    # retry before it was a try without an answer
    assert first_answered == [200], first_answered
    assert all(kind == "model_connection_error" for kind in first_retried), first_retried
    assert set(injected) == {fault} and 1 <= injected[fault] <= len(first_retried) + 1, (injected, first_retried)
    assert after.content == "second"
    assert answered == [200, 200] and all(kind == "model_connection_error" for kind in retried), (answered, retried)
    assert left <= 1 and limiter.in_flight == 0
    assert used.calls == 2 and used.failed == 1 and used.retries == len(retried)
    assert gw.ledger.by_request[KEY.request].failed == 1


async def test_a_cut_stream_ends_with_an_error_event_and_no_proper_end_so_any_client_sees_it_fail() -> None:
    async with running_scripted_server(ECHO, faults={"ping": 1.0}, fault_interval_s=0.05) as srv, \
            running_gateway(srv.base_url or "", requests=()) as gw:
        bounded_upstream(gw, srv.base_url or "", "openai-chat", timeout_s=0.6)
        grant = gw.open_grant(KEY)
        base = gw.url_for(gw.base_url or "", grant)
        body = {"messages": [{"role": "user", "content": "hi"}], "stream": True}
        got = bytearray()
        async with httpx.AsyncClient(timeout=30) as http:
            with pytest.raises(httpx.RemoteProtocolError):  # the body ends without its final chunk
                async with http.stream("POST", f"{base}/chat/completions", json=body) as resp:
                    assert resp.status_code == 200
                    async for chunk in resp.aiter_raw():
                        got += chunk
        sdk = openai.AsyncOpenAI(base_url=base, api_key=grant.api_key, max_retries=0)
        with pytest.raises(openai.APIError) as info:
            stream = await sdk.chat.completions.create(model="m", messages=body["messages"], stream=True)  # type: ignore[call-overload]
            async for _ in stream:
                pass
        await sdk.close()
        used = await gw.close_grant(KEY)
    assert got.startswith(b": ping\n\n")  # keep-alives pass through to the client
    last = bytes(got).rstrip().rsplit(b"\n\n", 1)[-1]
    error = msgspec.json.decode(last.removeprefix(b"data: "))["error"]
    assert error["code"] == "upstream_timeout" and "made no progress for 0.6s" in error["message"]
    assert "made no progress for 0.6s" in info.value.message
    assert used.calls == 2 and used.failed == 2


async def test_the_anthropic_sdk_sees_a_keepalive_only_stream_cut_by_the_gateway_as_an_error() -> None:
    anthropic = pytest.importorskip("anthropic")
    async with running_scripted_server(ECHO, faults={"ping": 1.0}, fault_interval_s=0.05) as srv, \
            running_gateway(srv.base_url or "", requests=()) as gw:
        bounded_upstream(gw, srv.base_url or "", "anthropic-messages", timeout_s=0.6)
        grant = gw.open_grant(KEY)
        client = anthropic.AsyncAnthropic(base_url=gw.url_for(gw.base_url or "", grant, anthropic=True),
                                          api_key=grant.api_key, max_retries=0)
        with pytest.raises(anthropic.APIError) as info:
            async with client.messages.stream(model="claude-x", max_tokens=64,
                                              messages=[{"role": "user", "content": "hi"}]) as stream:
                async for _ in stream.text_stream:
                    pass
        await client.close()
        used = await gw.close_grant(KEY)
    assert "made no progress for 0.6s" in str(info.value)
    assert used.calls == 1 and used.failed == 1


@pytest.mark.timeout(120)
@pytest.mark.parametrize("protocol", list(CLIENTS))
async def test_a_slow_but_steady_upstream_stream_is_not_cut_even_when_it_outlasts_the_timeout(protocol: str) -> None:
    async with running_scripted_server(ECHO, stream_interval_s=0.2) as srv, \
            running_gateway(srv.base_url or "", requests=()) as gw:
        limiter = bounded_upstream(gw, srv.base_url or "", protocol, timeout_s=1.0)
        grant = gw.open_grant(KEY)
        async with agent_client(gw, grant, protocol) as client:
            start = time.monotonic()
            r = await client.complete([{"role": "user", "content": LONG}], stream=True)
            elapsed = time.monotonic() - start
        used = await gw.close_grant(KEY)
    assert r.content == LONG
    assert elapsed > 2.0  # the stream really lasted longer than twice the timeout
    assert used.calls == 1 and used.failed == 0 and used.no_usage == 0 and limiter.in_flight == 0


async def test_the_gateways_total_timeout_cuts_a_stream_that_keeps_progressing() -> None:
    async with running_scripted_server(ECHO, stream_interval_s=0.2) as srv, \
            running_gateway(srv.base_url or "", requests=()) as gw:
        limiter = bounded_upstream(gw, srv.base_url or "", "openai-chat", timeout_s=1.0, total_timeout_s=1.2)
        grant = gw.open_grant(KEY)
        async with agent_client(gw, grant, "openai-chat") as client:
            start = time.monotonic()
            with pytest.raises(ModelError) as info:
                await client.complete([{"role": "user", "content": LONG}], stream=True)
            elapsed = time.monotonic() - start
        used = await gw.close_grant(KEY)
    assert "took longer than total_timeout=1.2s" in str(info.value)
    assert 1.1 <= elapsed < 60  # hang guard: the stream keeps progressing
    assert used.calls == 1 and used.failed == 1 and limiter.in_flight == 0
