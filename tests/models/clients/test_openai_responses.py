"""The OpenAI Responses client and the scripted server's /v1/responses, over real HTTP on 127.0.0.1."""

from __future__ import annotations

from typing import Any

import httpx
import msgspec
import pytest

from agentcompass._errors import ModelError
from agentcompass.models.clients.openai_responses import OpenAIResponsesClient
from agentcompass.records import ToolCall
from tests.fixtures_scripted import running_scripted_server
from tests.models._raw_http import http_response, raw_server, sse_response

pytestmark = pytest.mark.timeout(60)

SCRIPT = {"bundled": False, "script": [
    {"match": "capital of France", "turns": ["Paris, which is a lovely city to visit."]},
    {"match": "look around", "turns": [{"content": "Looking.", "reasoning": "Start with ls.",
                                        "tool_calls": [{"name": "bash", "arguments": {"cmd": "ls"}}]}]},
]}


def ask(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


async def test_chat_messages_become_responses_input_items() -> None:
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "What is the capital of France? "},
                                     {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]},
        {"role": "assistant", "content": "Let me check.", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "search", "arguments": '{"q":"France"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": [{"type": "text", "text": "Paris"}]},
        {"role": "assistant", "content": "Paris."},
        {"role": "user", "content": "Sure?"},
    ]
    async with running_scripted_server(SCRIPT) as srv, OpenAIResponsesClient("m", srv.base_url or "") as client:
        r = await client.complete(messages)
    assert srv.recent_requests[-1]["input"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "input_text", "text": "What is the capital of France? "},
                                     {"type": "input_image", "image_url": "data:image/png;base64,AAAA",
                                      "detail": "auto"}]},
        {"role": "assistant", "content": "Let me check."},
        {"type": "function_call", "call_id": "call_1", "name": "search", "arguments": '{"q":"France"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "Paris"},
        {"role": "assistant", "content": "Paris."},
        {"role": "user", "content": "Sure?"},
    ]
    assert r.content == "Paris, which is a lovely city to visit."


async def test_params_are_mapped_to_responses_names() -> None:
    tools = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}, "strict": True}},
             {"type": "web_search"}]
    params = {"max_tokens": 99, "reasoning_effort": "high", "reasoning": {"summary": "auto"},
              "tool_choice": {"type": "function", "function": {"name": "bash"}}, "text": {"verbosity": "low"}}
    async with running_scripted_server(SCRIPT) as srv, \
            OpenAIResponsesClient("m", srv.base_url or "", params=params) as client:
        await client.complete(ask("capital of France"), tools=tools)
        await client.complete(ask("capital of France"), store=True, max_output_tokens=7, max_tokens=3)
    first, second = srv.recent_requests
    assert first["max_output_tokens"] == 99 and "max_tokens" not in first and "reasoning_effort" not in first
    assert first["reasoning"] == {"effort": "high", "summary": "auto"}
    assert first["tool_choice"] == {"type": "function", "name": "bash"}
    assert first["tools"] == [{"type": "function", "name": "bash", "parameters": {"type": "object"}, "strict": True},
                              {"type": "web_search"}]
    assert first["store"] is False and first["text"] == {"verbosity": "low"} and first["stream"] is False
    assert second["store"] is True and second["max_output_tokens"] == 7


def _response(output: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"id": "resp_1", "object": "response", "status": "completed", "output": output,
            "usage": {"input_tokens": 12, "input_tokens_details": {"cached_tokens": 8}, "output_tokens": 5,
                      "output_tokens_details": {"reasoning_tokens": 2}, "total_tokens": 17}, **extra}


async def test_an_incomplete_response_is_length_and_usage_counts_cached_tokens() -> None:
    body = _response([{"type": "reasoning", "id": "rs", "summary": [],
                       "content": [{"type": "reasoning_text", "text": "raw thoughts"}]},
                      {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Par"}]}],
                     status="incomplete", incomplete_details={"reason": "max_output_tokens"})
    async with raw_server(http_response(200, body)) as srv, OpenAIResponsesClient("m", srv.base_url) as client:
        r = await client.complete(ask("x"), return_raw=True)
    assert (r.content, r.reasoning, r.finish_reason) == ("Par", "raw thoughts", "length")
    assert (r.usage.prompt_tokens, r.usage.completion_tokens, r.usage.total_tokens) == (12, 5, 17)
    assert r.usage.cached_tokens == 8 and r.raw == body
    assert srv.heads[0].lower().startswith("post /v1/responses http/1.1")


async def test_a_refusal_is_the_content_and_a_failed_response_is_a_model_error() -> None:
    refusal = _response([{"type": "message", "role": "assistant",
                          "content": [{"type": "refusal", "refusal": "I can't help with that."}]}])
    async with raw_server(http_response(200, refusal)) as srv, OpenAIResponsesClient("m", srv.base_url) as client:
        r = await client.complete(ask("x"))
    assert r.content == "I can't help with that." and r.finish_reason == "stop"
    failed = _response([], status="failed", error={"code": "rate_limit_exceeded", "message": "slow down"})
    async with raw_server(http_response(200, failed)) as srv, OpenAIResponsesClient("m", srv.base_url) as client:
        with pytest.raises(ModelError) as info:
            await client.complete(ask("x"))
    assert info.value.kind == "model_rate_limit" and "slow down" in str(info.value)


async def test_a_stream_of_deltas_alone_is_assembled() -> None:
    # a server that sends only added items and deltas, and no output in response.completed
    events: list[tuple[str | None, object]] = [
        ("response.created", {"type": "response.created", "response": {"id": "r", "output": []}}),
        ("response.output_item.added", {"type": "response.output_item.added", "output_index": 0,
                                        "item": {"type": "reasoning", "id": "rs", "summary": []}}),
        ("response.reasoning_summary_text.delta", {"type": "response.reasoning_summary_text.delta",
                                                   "output_index": 0, "summary_index": 0, "delta": "think "}),
        ("response.reasoning_summary_text.delta", {"type": "response.reasoning_summary_text.delta",
                                                   "output_index": 0, "summary_index": 0, "delta": "hard"}),
        ("response.output_item.added", {"type": "response.output_item.added", "output_index": 1,
                                        "item": {"type": "message", "id": "m", "role": "assistant", "content": []}}),
        ("response.output_text.delta", {"type": "response.output_text.delta", "output_index": 1,
                                        "content_index": 0, "delta": "Hel"}),
        ("response.output_text.delta", {"type": "response.output_text.delta", "output_index": 1,
                                        "content_index": 0, "delta": "lo"}),
        ("response.output_item.added", {"type": "response.output_item.added", "output_index": 2,
                                        "item": {"type": "function_call", "id": "fc", "call_id": "call_7",
                                                 "name": "bash", "arguments": ""}}),
        ("response.function_call_arguments.delta", {"type": "response.function_call_arguments.delta",
                                                    "output_index": 2, "delta": '{"cmd":'}),
        ("response.function_call_arguments.delta", {"type": "response.function_call_arguments.delta",
                                                    "output_index": 2, "delta": '"ls"}'}),
        ("response.completed", {"type": "response.completed", "response": {
            "id": "r", "status": "completed", "output": [],
            "usage": {"input_tokens": 3, "output_tokens": 4, "total_tokens": 7}}}),
    ]
    async with raw_server(sse_response(events)) as srv, OpenAIResponsesClient("m", srv.base_url) as client:
        r = await client.complete(ask("x"), stream=True, return_raw=True)
    assert (r.content, r.reasoning, r.finish_reason) == ("Hello", "think hard", "tool_calls")
    assert r.tool_calls == [ToolCall(id="call_7", name="bash", arguments='{"cmd":"ls"}')]
    assert (r.usage.prompt_tokens, r.usage.completion_tokens) == (3, 4)
    assert isinstance(r.raw, list) and len(r.raw) == len(events)


@pytest.mark.parametrize(("events", "kind"), [
    ([("error", {"type": "error", "code": "rate_limit_exceeded", "message": "Rate limit reached"})],
     "model_rate_limit"),
    ([("error", {"type": "error", "code": "server_error", "message": "boom"})], "model_server_error"),
    ([("response.failed", {"type": "response.failed", "response": {
        "status": "failed", "output": [], "error": {"code": "server_error", "message": "boom"}}})],
     "model_server_error"),
    ([("response.created", {"type": "response.created", "response": {"output": []}})], "model_bad_response"),
    ([("response.created", "{not json")], "model_bad_response"),
], ids=["rate-limit-event", "error-event", "failed", "cut-short", "not-json"])
async def test_errors_inside_a_stream_are_model_errors(events: list[tuple[str, object]], kind: str) -> None:
    async with raw_server(sse_response(events)) as srv, OpenAIResponsesClient("m", srv.base_url) as client:
        with pytest.raises(ModelError) as info:
            await client.complete(ask("x"), stream=True)
    assert info.value.kind == kind


async def test_a_server_that_ignores_stream_and_answers_json_is_still_read() -> None:
    body = _response([{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hi"}]}])
    async with raw_server(http_response(200, body)) as srv, OpenAIResponsesClient("m", srv.base_url) as client:
        r = await client.complete(ask("x"), stream=True)
    assert r.content == "hi" and msgspec.json.decode(srv.bodies[0])["stream"] is True


async def test_an_unknown_role_is_a_bad_request_before_anything_is_sent() -> None:
    async with raw_server(None) as srv, OpenAIResponsesClient("m", srv.base_url) as client:
        with pytest.raises(ModelError) as info:
            await client.complete([{"role": "robot", "content": "beep"}])
    assert info.value.kind == "model_bad_request" and "robot" in str(info.value)
    assert srv.heads == []


# ---------------------------------------------------------------------- the server's wire format


async def test_the_scripted_responses_json_has_the_api_shape() -> None:
    async with running_scripted_server(SCRIPT) as srv, httpx.AsyncClient(base_url=srv.base_url or "") as http:
        r = await http.post("/responses", json={"model": "gpt-x", "input": "look around", "instructions": "hi"})
    body = r.json()
    assert r.status_code == 200 and body["object"] == "response" and body["status"] == "completed"
    assert body["model"] == "gpt-x" and body["id"].startswith("resp_") and body["instructions"] == "hi"
    assert [i["type"] for i in body["output"]] == ["reasoning", "message", "function_call"]
    reasoning, message, call = body["output"]
    assert reasoning["summary"] == [{"type": "summary_text", "text": "Start with ls."}]
    assert message["role"] == "assistant" and message["content"][0]["type"] == "output_text"
    assert message["content"][0]["text"] == "Looking." and message["content"][0]["annotations"] == []
    assert (call["call_id"], call["name"], call["arguments"]) == ("call_0_0", "bash", '{"cmd":"ls"}')
    u = body["usage"]
    assert u["total_tokens"] == u["input_tokens"] + u["output_tokens"]
    assert u["output_tokens_details"]["reasoning_tokens"] >= 1


async def test_the_scripted_responses_stream_names_every_event_and_numbers_it() -> None:
    async with running_scripted_server(SCRIPT) as srv, httpx.AsyncClient(base_url=srv.base_url or "") as http:
        async with http.stream("POST", "/responses", json={"model": "m", "input": "look around",
                                                           "stream": True}) as r:
            assert r.headers["content-type"].startswith("text/event-stream")
            lines = [line async for line in r.aiter_lines() if line]
    names = [line[7:] for line in lines if line.startswith("event: ")]
    data = [msgspec.json.decode(line[6:]) for line in lines if line.startswith("data: ")]
    assert len(names) == len(data) and [d["type"] for d in data] == names
    assert [d["sequence_number"] for d in data] == list(range(len(data)))
    assert names[:2] == ["response.created", "response.in_progress"] and names[-1] == "response.completed"
    assert data[0]["response"]["status"] == "in_progress" and data[-1]["response"]["usage"]["total_tokens"] > 0
    text = "".join(d["delta"] for d in data if d["type"] == "response.output_text.delta")
    args = "".join(d["delta"] for d in data if d["type"] == "response.function_call_arguments.delta")
    assert (text, args) == ("Looking.", '{"cmd":"ls"}')


async def test_the_scripted_server_refuses_a_function_output_without_its_call() -> None:
    async with running_scripted_server(SCRIPT) as srv, httpx.AsyncClient(base_url=srv.base_url or "") as http:
        r = await http.post("/responses", json={"model": "m", "input": [
            {"role": "user", "content": "look around"},
            {"type": "function_call_output", "call_id": "call_x", "output": "?"}]})
        missing = await http.post("/responses", json={"model": "m"})
    assert r.status_code == 400 and "call_x" in r.json()["error"]["message"]
    assert missing.status_code == 400 and missing.json()["error"]["param"] == "input"
