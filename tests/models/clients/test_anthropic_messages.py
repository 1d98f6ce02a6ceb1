"""The Anthropic Messages client and the scripted server's /v1/messages, over real HTTP on 127.0.0.1."""

from __future__ import annotations

from typing import Any

import httpx
import msgspec
import pytest

from agentcompass._errors import ModelError
from agentcompass.models.clients.anthropic_messages import ANTHROPIC_VERSION, AnthropicMessagesClient
from agentcompass.records import ToolCall
from tests.fixtures_scripted import running_scripted_server
from tests.models._raw_http import http_response, raw_server, sse_response

pytestmark = pytest.mark.timeout(60)

SECRET = "sk-ant-SECRET-0123456789"
SCRIPT = {"bundled": False, "script": [
    {"match": "capital of France", "turns": ["Paris, which is a lovely city to visit."]},
    {"match": "look around", "turns": [{"content": "Looking.", "reasoning": "Start with ls.",
                                        "tool_calls": [{"name": "bash", "arguments": {"cmd": "ls"}}]}]},
]}
HEADERS = {"anthropic-version": ANTHROPIC_VERSION}
OK = {"id": "msg_1", "type": "message", "role": "assistant", "content": [{"type": "text", "text": "hi"}],
      "stop_reason": "end_turn", "usage": {"input_tokens": 3, "output_tokens": 1}}


def ask(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


@pytest.mark.parametrize(("suffix", "path"), [("/v1", "/v1/messages"), ("", "/v1/messages"),
                                              ("/anthropic/v1/", "/anthropic/v1/messages")])
async def test_the_key_goes_in_x_api_key_with_the_version_header_and_the_path_follows_the_base_url(
        suffix: str, path: str) -> None:
    async with raw_server(http_response(200, OK)) as srv:
        base = srv.base_url.removesuffix("/v1") + suffix
        async with AnthropicMessagesClient("claude-x", base, api_key=SECRET,
                                           params={"extra_headers": {"anthropic-beta": "b1"}}) as client:
            r = await client.complete(ask("x"))
    head = srv.heads[0].lower()
    assert head.startswith(f"post {path} http/1.1")
    assert f"x-api-key: {SECRET.lower()}" in head and f"anthropic-version: {ANTHROPIC_VERSION}" in head
    assert "anthropic-beta: b1" in head and "authorization" not in head
    assert r.content == "hi" and r.finish_reason == "stop"


async def test_chat_messages_become_anthropic_turns() -> None:
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "What is the capital of France?"},
                                     {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]},
        {"role": "user", "content": "Answer in one word."},
        {"role": "assistant", "content": "Let me check.", "tool_calls": [
            {"id": "toolu_1", "type": "function", "function": {"name": "search", "arguments": '{"q":"France"}'}},
            {"id": "toolu_2", "type": "function", "function": {"name": "search", "arguments": "not json"}}]},
        {"role": "tool", "tool_call_id": "toolu_1", "content": "Paris"},
        {"role": "tool", "tool_call_id": "toolu_2", "content": [{"type": "text", "text": "?"}]},
        {"role": "user", "content": "So?"},
        {"role": "assistant", "content": ""},  # an empty reply: the API refuses empty text, so it is dropped
        {"role": "developer", "content": "Stay polite."},
        {"role": "user", "content": "Well?"},
    ]
    tools = [{"type": "function", "function": {"name": "search", "description": "Web search.",
                                               "parameters": {"type": "object"}}},
             {"type": "bash_20250124", "name": "bash"}]
    async with running_scripted_server(SCRIPT) as srv, AnthropicMessagesClient("m", srv.base_url or "") as client:
        r = await client.complete(messages, tools=tools, tool_choice="required", stop="END", temperature=0.5)
    body = srv.recent_requests[-1]
    assert body["system"] == "Be brief.\n\nStay polite."
    assert body["messages"] == [
        {"role": "user", "content": [
            {"type": "text", "text": "What is the capital of France?"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
            {"type": "text", "text": "Answer in one word."}]},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Let me check."},
            {"type": "tool_use", "id": "toolu_1", "name": "search", "input": {"q": "France"}},
            {"type": "tool_use", "id": "toolu_2", "name": "search", "input": {"arguments": "not json"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "Paris"},
            {"type": "tool_result", "tool_use_id": "toolu_2", "content": "?"},
            {"type": "text", "text": "So?"},
            {"type": "text", "text": "Well?"}]},
    ]
    assert body["tools"] == [{"name": "search", "description": "Web search.", "input_schema": {"type": "object"}},
                             {"type": "bash_20250124", "name": "bash"}]
    assert body["tool_choice"] == {"type": "any"} and body["stop_sequences"] == ["END"] and "stop" not in body
    assert body["max_tokens"] == 4096 and body["temperature"] == 0.5 and body["stream"] is False
    assert r.content == "Paris, which is a lovely city to visit."


@pytest.mark.parametrize(("params", "expected"), [
    ({}, 4096), ({"max_tokens": 12}, 12), ({"max_completion_tokens": 34}, 34), ({"max_tokens": None}, 4096)])
async def test_max_tokens_is_always_sent(params: dict[str, Any], expected: int) -> None:
    async with running_scripted_server(SCRIPT) as srv, \
            AnthropicMessagesClient("m", srv.base_url or "", params=params) as client:
        await client.complete(ask("capital of France"), tool_choice={"type": "function", "function": {"name": "f"}})
    body = srv.recent_requests[-1]
    assert body["max_tokens"] == expected and "max_completion_tokens" not in body
    assert body["tool_choice"] == {"type": "tool", "name": "f"}


async def test_max_tokens_stop_is_length_thinking_is_reasoning_and_cache_reads_count_as_prompt() -> None:
    body = {"id": "msg_1", "type": "message", "role": "assistant", "stop_reason": "max_tokens",
            "content": [{"type": "thinking", "thinking": "step one", "signature": "sig"},
                        {"type": "redacted_thinking", "data": "xx"},
                        {"type": "text", "text": "The answer is"}],
            "usage": {"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 2,
                      "cache_read_input_tokens": 30}}
    async with raw_server(http_response(200, body)) as srv, AnthropicMessagesClient("m", srv.base_url) as client:
        r = await client.complete(ask("x"))
    assert (r.content, r.reasoning, r.finish_reason) == ("The answer is", "step one", "length")
    assert (r.usage.prompt_tokens, r.usage.completion_tokens, r.usage.total_tokens) == (42, 5, 47)
    assert r.usage.cached_tokens == 30


@pytest.mark.parametrize(("status", "kind"), [(529, "model_server_error"), (429, "model_rate_limit"),
                                              (401, "model_auth"), (400, "model_bad_request")])
async def test_anthropic_error_bodies_map_to_model_error_kinds(status: int, kind: str) -> None:
    err = {"type": "error", "error": {"type": "overloaded_error", "message": f"key {SECRET} is Overloaded"}}
    resp = http_response(status, err, {"retry-after": "4"})
    async with raw_server(resp) as srv, AnthropicMessagesClient("m", srv.base_url, api_key=SECRET) as client:
        with pytest.raises(ModelError) as info:
            await client.complete(ask("x"), stream=True)
    assert (info.value.kind, info.value.status) == (kind, status)
    assert "Overloaded" in str(info.value) and SECRET not in str(info.value)
    assert info.value.retry_after == (4.0 if status in (529, 429) else None)


def _start(index: int, block: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return "content_block_start", {"type": "content_block_start", "index": index, "content_block": block}


def _delta(index: int, delta: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}


async def test_a_stream_is_assembled_from_blocks_and_deltas() -> None:
    events: list[tuple[str | None, object]] = [
        ("message_start", {"type": "message_start", "message": {
            "id": "m", "type": "message", "role": "assistant", "content": [], "stop_reason": None,
            "usage": {"input_tokens": 20, "output_tokens": 1, "cache_read_input_tokens": 4}}}),
        ("ping", {"type": "ping"}),
        _start(0, {"type": "thinking", "thinking": ""}),
        _delta(0, {"type": "thinking_delta", "thinking": "hmm "}),
        _delta(0, {"type": "thinking_delta", "thinking": "ok"}),
        _delta(0, {"type": "signature_delta", "signature": "sig"}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        _start(1, {"type": "text", "text": ""}),
        _delta(1, {"type": "text_delta", "text": "Run"}),
        _delta(1, {"type": "text_delta", "text": "ning."}),
        ("content_block_stop", {"type": "content_block_stop", "index": 1}),
        _start(2, {"type": "tool_use", "id": "toolu_9", "name": "bash", "input": {}}),
        _delta(2, {"type": "input_json_delta", "partial_json": '{"cmd": '}),
        _delta(2, {"type": "input_json_delta", "partial_json": '"ls"}'}),
        ("content_block_stop", {"type": "content_block_stop", "index": 2}),
        _start(3, {"type": "tool_use", "id": "toolu_10", "name": "noop", "input": {}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 3}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use"},
                           "usage": {"output_tokens": 15}}),
        ("message_stop", {"type": "message_stop"}),
    ]
    async with raw_server(sse_response(events)) as srv, AnthropicMessagesClient("m", srv.base_url) as client:
        r = await client.complete(ask("x"), stream=True)
    assert (r.content, r.reasoning, r.finish_reason) == ("Running.", "hmm ok", "tool_calls")
    assert r.tool_calls == [ToolCall(id="toolu_9", name="bash", arguments='{"cmd":"ls"}'),
                            ToolCall(id="toolu_10", name="noop", arguments="{}")]
    assert (r.usage.prompt_tokens, r.usage.completion_tokens, r.usage.cached_tokens) == (24, 15, 4)


@pytest.mark.parametrize(("events", "kind"), [
    ([("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})],
     "model_server_error"),
    ([("error", {"type": "error", "error": {"type": "rate_limit_error", "message": "slow"}})], "model_rate_limit"),
    ([("message_start", {"type": "message_start", "message": {"content": []}})], "model_bad_response"),
    ([_start(0, {"type": "tool_use", "id": "t", "name": "f", "input": {}}),
      _delta(0, {"type": "input_json_delta", "partial_json": '{"cmd": '}),
      ("message_stop", {"type": "message_stop"})], "model_bad_response"),
    ([_delta(5, {"type": "text_delta", "text": "orphan"})], "model_bad_response"),
], ids=["overloaded", "rate-limit", "cut-short", "broken-json", "orphan-delta"])
async def test_errors_inside_a_stream_are_model_errors(events: list[tuple[str, object]], kind: str) -> None:
    async with raw_server(sse_response(events)) as srv, AnthropicMessagesClient("m", srv.base_url) as client:
        with pytest.raises(ModelError) as info:
            await client.complete(ask("x"), stream=True)
    assert info.value.kind == kind


# ---------------------------------------------------------------------- the server's wire format


async def test_the_scripted_messages_json_has_the_api_shape() -> None:
    async with running_scripted_server(SCRIPT) as srv, httpx.AsyncClient(base_url=srv.base_url or "") as http:
        r = await http.post("/messages", headers=HEADERS, json={
            "model": "claude-x", "max_tokens": 100, "messages": [{"role": "user", "content": "look around"}]})
    body = r.json()
    assert r.status_code == 200 and body["type"] == "message" and body["role"] == "assistant"
    assert body["model"] == "claude-x" and body["id"].startswith("msg_") and body["stop_reason"] == "tool_use"
    assert body["content"] == [
        {"type": "thinking", "thinking": "Start with ls.", "signature": body["content"][0]["signature"]},
        {"type": "text", "text": "Looking."},
        {"type": "tool_use", "id": "toolu_0_0", "name": "bash", "input": {"cmd": "ls"}}]
    assert set(body["usage"]) >= {"input_tokens", "output_tokens", "cache_read_input_tokens"}


async def test_the_scripted_messages_stream_has_the_api_event_sequence() -> None:
    async with running_scripted_server(SCRIPT) as srv, httpx.AsyncClient(base_url=srv.base_url or "") as http:
        async with http.stream("POST", "/messages", headers=HEADERS, json={
                "model": "m", "max_tokens": 100, "stream": True,
                "messages": [{"role": "user", "content": "look around"}]}) as r:
            assert r.headers["content-type"].startswith("text/event-stream")
            lines = [line async for line in r.aiter_lines() if line]
    names = [line[7:] for line in lines if line.startswith("event: ")]
    data = [msgspec.json.decode(line[6:]) for line in lines if line.startswith("data: ")]
    assert [d["type"] for d in data] == names
    assert names[:2] == ["message_start", "ping"] and names[-2:] == ["message_delta", "message_stop"]
    starts = [d["content_block"]["type"] for d in data if d["type"] == "content_block_start"]
    assert starts == ["thinking", "text", "tool_use"]
    deltas = {d["delta"]["type"] for d in data if d["type"] == "content_block_delta"}
    assert deltas == {"thinking_delta", "signature_delta", "text_delta", "input_json_delta"}
    assert data[-2]["delta"]["stop_reason"] == "tool_use" and data[-2]["usage"]["output_tokens"] > 0


@pytest.mark.parametrize(("headers", "body", "status", "error_type", "words"), [
    ({}, {"max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}, 400, "invalid_request_error",
     "anthropic-version"),
    (HEADERS, {"messages": [{"role": "user", "content": "hi"}]}, 400, "invalid_request_error", "max_tokens"),
    (HEADERS, {"max_tokens": 5, "messages": [{"role": "tool", "content": "hi"}]}, 400, "invalid_request_error",
     "messages.0.role"),
    (HEADERS, {"max_tokens": 5, "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_5", "name": "f", "input": {}}]},
        {"role": "user", "content": "and?"}]}, 400, "invalid_request_error", "toolu_5"),
    ({**HEADERS, "x-api-key": "sk-wrong"}, {"max_tokens": 5, "messages": []}, 401, "authentication_error",
     "invalid x-api-key"),
    ({**HEADERS, "authorization": "Bearer sk-right"}, {"max_tokens": 5, "messages": []}, 401,
     "authentication_error", "x-api-key header is required"),
], ids=["no-version", "no-max-tokens", "tool-role", "unanswered-tool-use", "wrong-key", "bearer-only"])
async def test_the_scripted_server_refuses_what_the_real_api_refuses_in_anthropic_shape(
        headers: dict[str, str], body: dict[str, Any], status: int, error_type: str, words: str) -> None:
    needs_key = "x-api-key" in headers or "authorization" in headers
    async with running_scripted_server(SCRIPT, require_api_key="sk-right" if needs_key else None) as srv, \
            httpx.AsyncClient(base_url=srv.base_url or "") as http:
        r = await http.post("/messages", headers=headers, json={"model": "m", **body})
    assert r.status_code == status
    assert r.json()["type"] == "error" and r.json()["error"]["type"] == error_type
    assert words in r.json()["error"]["message"] and "sk-wrong" not in r.text
