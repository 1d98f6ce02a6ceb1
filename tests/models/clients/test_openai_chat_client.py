"""The OpenAI-chat client over real HTTP on 127.0.0.1: round trips, params, errors, pooling."""

from __future__ import annotations

import asyncio
import contextlib
import time

import pytest

from agentcompass._errors import ConfigError, ModelError
from agentcompass.interfaces import ModelResponse
from agentcompass.models.clients.http import BODY_CONTROL_PARAMS, RESERVED_PARAMS, HttpClientParams
from agentcompass.models.clients.openai_chat import OpenAIChatClient, parse_retry_after
from agentcompass.records import ToolCall
from tests.fixtures_scripted import running_scripted_server, start_scripted_server
from tests.models._raw_http import http_response, raw_server, sse_response

pytestmark = pytest.mark.timeout(60)

SCRIPT = {"script": [{"match": "count to three", "turns": ["one", "two", "three"]}], "bundled": False}
SECRET = "sk-test-SECRET-0123456789"


def user(text: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": "be brief"}, {"role": "user", "content": text}]


async def test_round_trip_against_the_scripted_server_follows_the_script() -> None:
    async with start_scripted_server(SCRIPT) as base_url:
        client = OpenAIChatClient("scripted", base_url + "/")
        try:
            msgs = user("please count to three")
            replies = []
            for _ in range(4):
                r = await client.complete(msgs)
                replies.append(r.content)
                msgs = [*msgs, {"role": "assistant", "content": r.content or ""},
                        {"role": "user", "content": "next"}]
        finally:
            await client.aclose()
    assert replies == ["one", "two", "three", "three"]
    assert isinstance(r, ModelResponse)
    assert r.finish_reason == "stop" and r.tool_calls == [] and r.raw is None
    assert r.usage.calls == 1 and r.usage.prompt_tokens > 0
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    assert r.latency_s > 0


async def test_params_are_forwarded_into_the_body_but_reserved_keys_are_not() -> None:
    params = {"temperature": 0.2, "max_tokens": 64, "top_p": 0.9, "stop": ["END"], "seed": 7,
              "top_k": 5, "reasoning_effort": "low", "timeout": 30, "max_connections": 4,
              "extra_headers": {"X-Trace": "t1"}, "model": "other", "extra_body": {"top_k": 6, "min_p": 0.1}}
    tools = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]
    async with running_scripted_server(SCRIPT) as srv:
        async with OpenAIChatClient("my-model", srv.base_url or "", params=params) as client:
            await client.complete(user("count to three"))
            await client.complete(user("count to three"), tools=tools, temperature=0.9, seed=None, stream=True)
    first, second = srv.recent_requests
    assert {k: first[k] for k in ("temperature", "max_tokens", "top_p", "stop", "seed", "top_k", "min_p",
                                  "reasoning_effort")} == {
        "temperature": 0.2, "max_tokens": 64, "top_p": 0.9, "stop": ["END"], "seed": 7, "top_k": 6,
        "min_p": 0.1, "reasoning_effort": "low"}
    assert first["model"] == "my-model" and first["stream"] is False
    assert not {"timeout", "max_connections", "extra_headers", "extra_body", "tools", "stream_options"} & set(first)
    assert second["temperature"] == 0.9 and second["seed"] is None and second["tools"] == tools
    assert second["stream"] is True and second["stream_options"] == {"include_usage": True}


async def test_extra_headers_and_bearer_token_are_sent() -> None:
    ok = http_response(200, {"choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}]})
    async with raw_server(ok) as srv:
        async with OpenAIChatClient("m", srv.base_url, api_key=SECRET,
                                    params={"extra_headers": {"X-Trace": "t1"}}) as client:
            r = await client.complete(user("x"))
    head = srv.heads[0].lower()
    assert head.startswith("post /v1/chat/completions http/1.1")
    assert f"authorization: bearer {SECRET.lower()}" in head
    assert "x-trace: t1" in head
    assert r.content == "hi" and r.usage.calls == 1 and r.usage.total_tokens == 0


async def test_reasoning_and_tool_calls_are_parsed() -> None:
    body = {"id": "x", "object": "chat.completion", "choices": [{"index": 0, "finish_reason": "tool_calls",
            "message": {"role": "assistant", "content": None, "reasoning_content": "think first",
                        "tool_calls": [
                            {"id": "call_1", "type": "function",
                             "function": {"name": "bash", "arguments": "{\"cmd\": \"ls\"}"}},
                            {"id": "call_2", "type": "function",
                             "function": {"name": "read", "arguments": {"path": "a.txt"}}}]}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}
    async with raw_server(http_response(200, body)) as srv, OpenAIChatClient("m", srv.base_url) as client:
        r = await client.complete(user("x"), return_raw=True)
    assert r.content is None and r.reasoning == "think first" and r.finish_reason == "tool_calls"
    assert r.tool_calls == [ToolCall(id="call_1", name="bash", arguments='{"cmd": "ls"}'),
                            ToolCall(id="call_2", name="read", arguments='{"path":"a.txt"}')]
    assert (r.usage.prompt_tokens, r.usage.completion_tokens, r.usage.total_tokens) == (10, 5, 15)
    assert r.raw == body


async def test_wrong_api_key_is_model_auth_and_the_key_never_appears_in_the_error() -> None:
    async with start_scripted_server(SCRIPT, require_api_key="the-right-key") as base_url:
        async with OpenAIChatClient("m", base_url, api_key=SECRET) as client:
            with pytest.raises(ModelError) as info:
                await client.complete(user("count to three"))
    assert info.value.kind == "model_auth" and info.value.status == 401
    assert "Incorrect API key" in str(info.value)
    assert SECRET not in str(info.value) and SECRET not in repr(info.value) and SECRET not in repr(client)


async def test_a_server_echoing_the_key_in_its_error_body_is_redacted() -> None:
    leak = http_response(403, {"error": {"message": f"key {SECRET} is not allowed"}})
    async with raw_server(leak) as srv, OpenAIChatClient("m", srv.base_url, api_key=SECRET) as client:
        with pytest.raises(ModelError) as info:
            await client.complete(user("x"))
    assert info.value.kind == "model_auth"
    assert SECRET not in str(info.value) and "***" in str(info.value)


async def test_429_is_model_rate_limit_with_retry_after() -> None:
    async with start_scripted_server(SCRIPT, fail_status=429, retry_after=7) as base_url, \
            OpenAIChatClient("m", base_url) as client:
        with pytest.raises(ModelError) as info:
            await client.complete(user("count to three"))
    assert info.value.kind == "model_rate_limit" and info.value.status == 429
    assert info.value.retry_after == 7.0


@pytest.mark.parametrize(("status", "kind"), [(500, "model_server_error"), (503, "model_server_error"),
                                              (400, "model_bad_request"), (404, "model_bad_request"),
                                              (403, "model_auth")])
async def test_http_statuses_map_to_error_kinds(status: int, kind: str) -> None:
    async with start_scripted_server(SCRIPT, fail_status=status) as base_url, \
            OpenAIChatClient("m", base_url) as client:
        with pytest.raises(ModelError) as info:
            await client.complete(user("count to three"))
    assert (info.value.kind, info.value.status, info.value.retry_after) == (kind, status, None)
    assert f"HTTP {status}" in str(info.value)


async def test_a_request_the_server_rejects_is_model_bad_request() -> None:
    async with start_scripted_server(SCRIPT) as base_url, OpenAIChatClient("m", base_url) as client:
        with pytest.raises(ModelError) as info:
            await client.complete("not a list")  # type: ignore[arg-type]
    assert info.value.kind == "model_bad_request" and "messages" in str(info.value)


@pytest.mark.parametrize("response", [
    http_response(200, "<html>not json</html>"),
    http_response(200, {"error": {"message": "upstream exploded"}}),
    http_response(200, {"choices": []}),
    http_response(200, {"choices": [{"no_message": True}]}),
])
async def test_unusable_200_responses_are_model_bad_response(response: bytes) -> None:
    async with raw_server(response) as srv, OpenAIChatClient("m", srv.base_url) as client:
        with pytest.raises(ModelError) as info:
            await client.complete(user("x"))
    assert info.value.kind == "model_bad_response"


async def test_connection_refused_is_model_connection_error(refused_base_url: str) -> None:
    async with OpenAIChatClient("m", refused_base_url, api_key=SECRET) as client:
        with pytest.raises(ModelError) as info:
            await client.complete(user("x"))
    assert info.value.kind == "model_connection_error"
    assert SECRET not in str(info.value)


async def test_a_server_that_never_answers_times_out_in_bounded_time() -> None:
    async with raw_server(None) as srv:
        async with OpenAIChatClient("m", srv.base_url, params={"timeout": 0.3}) as client:
            start = time.perf_counter()
            with pytest.raises(ModelError) as info:
                await client.complete(user("x"))
            elapsed = time.perf_counter() - start
            # a per-call timeout overrides the client's
            start2 = time.perf_counter()
            with pytest.raises(ModelError):
                await client.complete(user("x"), timeout=0.2)
            elapsed2 = time.perf_counter() - start2
    assert info.value.kind == "model_connection_error" and "timed out" in str(info.value)
    assert 0.3 <= elapsed < 60 and 0.2 <= elapsed2 < 60  # hang guards: the server never answers


async def test_300_concurrent_completions_share_a_pool_of_50_connections() -> None:
    async with running_scripted_server(SCRIPT, latency_s=0.05) as srv:
        async with OpenAIChatClient("m", srv.base_url or "", max_connections=50) as client:
            rs = await asyncio.gather(*(client.complete(user(f"count to three #{i}")) for i in range(300)))
    assert [r.content for r in rs] == ["one"] * 300
    assert srv.completions_served == 300
    assert srv.peak_connections <= 50 and srv.connections_accepted <= 50
    assert srv.peak_connections >= 40  # the pool was actually used in parallel


async def test_waiting_for_a_free_connection_is_bounded_by_the_pool_timeout() -> None:
    async with raw_server(None) as srv:
        async with OpenAIChatClient("m", srv.base_url, max_connections=1,
                                    params={"timeout": 0.5, "connect_timeout": 30}) as client:
            # the first call holds the one connection for up to 60 s (its own stall bound): only the pool bound
            # (0.5 s) can end the second, however loaded the machine
            holder = asyncio.create_task(client.complete(user("a"), timeout=60))
            for _ in range(3000):  # its request reached the server (30 s)
                if srv.heads:
                    break
                await asyncio.sleep(0.01)
            assert len(srv.heads) == 1
            with pytest.raises(ModelError) as info:
                await client.complete(user("b"))
            still_holding = not holder.done()
            holder.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await holder
    assert still_holding
    assert info.value.kind == "model_connection_error"
    assert "no free connection within 0.5s (max_connections=1)" in str(info.value)
    assert len(srv.heads) == 1  # the second call never reached the server


def test_retry_after_accepts_seconds_milliseconds_and_http_dates() -> None:
    assert parse_retry_after({"retry-after": "2.5"}) == 2.5
    assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert parse_retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:10 GMT"},
                             now=1445412480.0) == pytest.approx(10.0)
    assert parse_retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, now=1445412490.0) == 0.0
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"base_url": "ftp://x/v1"}, "model_base_url"),
    ({"base_url": "http:///v1"}, "model_base_url"),
    ({"params": {"timeout": 0}}, "model_params.timeout"),
    ({"params": {"max_connections": "many"}}, "model_params.max_connections"),
    ({"params": {"extra_headers": ["X: y"]}}, "model_params.extra_headers"),
])
def test_bad_client_settings_raise_config_error_naming_the_field(kwargs: dict[str, object],
                                                                   field: str) -> None:
    args: dict[str, object] = {"model_id": "m", "base_url": "http://127.0.0.1:1/v1", **kwargs}
    with pytest.raises(ConfigError) as info:
        OpenAIChatClient(**args)  # type: ignore[arg-type]
    assert info.value.field == field


async def test_a_cancelled_call_gives_its_connection_back() -> None:
    async with raw_server(None) as srv:
        client = OpenAIChatClient("m", srv.base_url, max_connections=1, params={"timeout": 0.5})
        first = asyncio.create_task(client.complete(user("a")))
        await asyncio.sleep(0.1)
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        with pytest.raises(ModelError) as info:
            await client.complete(user("b"))
        await client.aclose()
        await client.aclose()  # idempotent
    # it got the connection and waited for an answer, rather than waiting for a free connection
    assert "timed out" in str(info.value)


def _chunk(delta: dict[str, object], finish: str | None = None) -> tuple[None, dict[str, object]]:
    return None, {"id": "c", "object": "chat.completion.chunk",
                  "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


async def test_a_stream_is_assembled_from_reasoning_content_and_tool_call_deltas() -> None:
    events = [
        _chunk({"role": "assistant", "content": None}),
        _chunk({"reasoning": "plan "}), _chunk({"reasoning": "it"}),
        _chunk({"content": "Run"}), _chunk({"content": "ning."}),
        _chunk({"tool_calls": [{"index": 0, "id": "call_a", "type": "function",
                                "function": {"name": "bash", "arguments": ""}}]}),
        _chunk({"tool_calls": [{"index": 1, "id": "call_b", "type": "function",
                                "function": {"name": "read", "arguments": '{"p":'}}]}),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"cmd":'}}]}),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"ls"}'}}]}),
        _chunk({"tool_calls": [{"index": 1, "function": {"arguments": '"a"}'}}]}),
        _chunk({}, "tool_calls"),
        (None, {"id": "c", "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13,
                                                    "prompt_tokens_details": {"cached_tokens": 6}}}),
        (None, "[DONE]"),
    ]
    async with raw_server(sse_response(events)) as srv, OpenAIChatClient("m", srv.base_url) as client:
        r = await client.complete(user("x"), stream=True)
    assert (r.content, r.reasoning, r.finish_reason) == ("Running.", "plan it", "tool_calls")
    assert r.tool_calls == [ToolCall(id="call_a", name="bash", arguments='{"cmd":"ls"}'),
                            ToolCall(id="call_b", name="read", arguments='{"p":"a"}')]
    assert (r.usage.prompt_tokens, r.usage.completion_tokens, r.usage.cached_tokens) == (9, 4, 6)


@pytest.mark.parametrize(("events", "kind"), [
    ([_chunk({"content": "par"})], "model_bad_response"),
    ([_chunk({"content": "par"}), (None, {"error": {"message": "upstream died"}})], "model_server_error"),
    ([(None, "{oops")], "model_bad_response"),
], ids=["cut-short", "error-chunk", "not-json"])
async def test_a_broken_stream_is_a_model_error(events: list[tuple[None, object]], kind: str) -> None:
    async with raw_server(sse_response(events)) as srv, OpenAIChatClient("m", srv.base_url, api_key=SECRET) as client:
        with pytest.raises(ModelError) as info:
            await client.complete(user("x"), stream=True)
    assert info.value.kind == kind and SECRET not in str(info.value)


async def test_a_stream_without_done_that_finished_is_accepted() -> None:
    events = [_chunk({"content": "hi"}), _chunk({}, "length")]
    async with raw_server(sse_response(events)) as srv, OpenAIChatClient("m", srv.base_url) as client:
        r = await client.complete(user("x"), stream=True)
    assert (r.content, r.finish_reason, r.usage.calls, r.usage.total_tokens) == ("hi", "length", 1, 0)


def test_the_client_types_only_the_params_it_reads_and_says_what_is_allowed() -> None:
    assert set(HttpClientParams.__struct_fields__) == RESERVED_PARAMS | BODY_CONTROL_PARAMS
    with pytest.raises(ConfigError, match=r"'extra_headers' of model m must be a mapping of \(a string\) to "
                                          r"\(a string\).*got \{'X-N': 1\}") as info:
        OpenAIChatClient("m", "http://127.0.0.1:1/v1", params={"extra_headers": {"X-N": 1}})
    assert info.value.field == "model_params.extra_headers"
    client = OpenAIChatClient("m", "http://127.0.0.1:1/v1",
                              params={"temperature": "free-form", "max_connections": 3, "timeout": 5})
    assert client.params == {"temperature": "free-form"} and client.max_connections == 3
    assert client.timeout.read == 5 and client.timeout.connect == 5

    async def per_call() -> None:
        async with client:
            with pytest.raises(ConfigError, match="'stream' of model m must be true or false") as info:
                await client.complete(user("x"), stream="yes")  # refused before any request is sent
            assert info.value.field == "model_params.stream"

    asyncio.run(per_call())


def test_stream_and_extra_body_params_are_checked() -> None:
    with pytest.raises(ConfigError) as bad_stream:
        OpenAIChatClient("m", "http://127.0.0.1:1/v1", params={"stream": "yes"})
    with pytest.raises(ConfigError) as bad_extra:
        OpenAIChatClient("m", "http://127.0.0.1:1/v1", params={"extra_body": ["x"]})
    assert bad_stream.value.field == "model_params.stream" and bad_extra.value.field == "model_params.extra_body"
