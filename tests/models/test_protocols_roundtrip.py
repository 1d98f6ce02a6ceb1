"""Every api_protocol over real HTTP against the scripted server: one normalised answer, streamed or not.

Also: the official ``openai`` SDK reads the scripted server (it speaks the real wire format), and a whole
``run_evaluation`` passes with each protocol.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import openai
import pytest

import agentcompass
from agentcompass._errors import ModelError
from agentcompass.interfaces import ModelResponse
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
KEY = "sk-scripted-SECRET-0123"
TOOLS = [{"type": "function", "function": {
    "name": "bash", "description": "Run a shell command.",
    "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}}}]
SCRIPT = {"bundled": False, "script": [
    {"match": "count to three", "turns": ["one", "two", "three"]},
    {"match": "list the files", "turns": [
        {"reasoning": "I should look at the workspace before answering.",
         "tool_calls": [{"name": "bash", "arguments": {"cmd": "ls -la"}}]},
        {"content": "Two files; let me read both of them.",
         "tool_calls": [{"name": "bash", "arguments": {"cmd": "cat a.txt"}},
                        {"name": "bash", "arguments": {"cmd": "cat b.txt"}}]},
        "a.txt holds alpha and b.txt holds beta; nothing else is there.",
    ]},
]}


def client_for(protocol: str, base_url: str, api_key: str | None = KEY, **params: Any) -> HttpModelClient:
    return CLIENTS[protocol]("scripted-m", base_url, api_key, params=params)


def timeless(r: ModelResponse) -> ModelResponse:
    return msgspec.structs.replace(r, latency_s=0.0)


def assistant_turn(r: ModelResponse) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": r.content}
    if r.tool_calls:
        msg["tool_calls"] = [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                             for c in r.tool_calls]
    return msg


async def converse(client: HttpModelClient, *, stream: bool) -> list[ModelResponse]:
    """Three turns of the tool-calling script; each tool call gets its result back."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a careful agent."},
                                      {"role": "user", "content": "Please list the files here."}]
    replies = []
    for _ in range(3):
        r = await client.complete(messages, tools=TOOLS, stream=stream)
        replies.append(r)
        messages.append(assistant_turn(r))
        for c in r.tool_calls:
            cmd = msgspec.json.decode(c.arguments)["cmd"]
            messages.append({"role": "tool", "tool_call_id": c.id, "content": f"output of {cmd}"})
    return replies


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_tool_calling_conversation_is_identical_streamed_or_not(protocol: str) -> None:
    async with running_scripted_server(SCRIPT, require_api_key=KEY) as srv:
        async with client_for(protocol, srv.base_url or "") as client:
            plain = await converse(client, stream=False)
            streamed = await converse(client, stream=True)
    assert [timeless(r) for r in plain] == [timeless(r) for r in streamed]
    first, second, third = plain
    assert first.content is None and first.finish_reason == "tool_calls"
    assert first.reasoning == "I should look at the workspace before answering."
    assert [(c.name, c.arguments) for c in first.tool_calls] == [("bash", '{"cmd":"ls -la"}')]
    assert second.content == "Two files; let me read both of them." and second.finish_reason == "tool_calls"
    assert [c.arguments for c in second.tool_calls] == ['{"cmd":"cat a.txt"}', '{"cmd":"cat b.txt"}']
    assert len({c.id for r in plain for c in r.tool_calls}) == 3
    assert third.content == "a.txt holds alpha and b.txt holds beta; nothing else is there."
    assert third.finish_reason == "stop" and third.tool_calls == [] and third.reasoning is None
    for r in plain + streamed:
        assert r.usage.calls == 1 and r.usage.prompt_tokens > 0 and r.usage.completion_tokens > 0
        assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
        assert r.latency_s > 0
    assert first.usage.prompt_tokens < third.usage.prompt_tokens  # the tool results were sent back


async def test_every_protocol_gives_the_same_normalised_answers() -> None:
    answers = {}
    async with running_scripted_server(SCRIPT) as srv:
        for protocol in PROTOCOLS:
            async with client_for(protocol, srv.base_url or "", None) as client:
                answers[protocol] = [(r.content, r.reasoning, r.finish_reason, r.usage,
                                      [(c.name, c.arguments) for c in r.tool_calls])
                                     for r in await converse(client, stream=False)]
    assert answers["openai-responses"] == answers["openai-chat"]
    assert answers["anthropic-messages"] == answers["openai-chat"]


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_tools_and_tool_results_travel_in_the_protocols_native_shape(protocol: str) -> None:
    async with running_scripted_server(SCRIPT) as srv:
        async with client_for(protocol, srv.base_url or "") as client:
            replies = await converse(client, stream=False)
    last = srv.recent_requests[-1]
    ids = [c.id for r in replies for c in r.tool_calls]
    if protocol == "openai-chat":
        assert last["tools"] == TOOLS
        assert [m["tool_call_id"] for m in last["messages"] if m["role"] == "tool"] == ids
    elif protocol == "openai-responses":
        fn = TOOLS[0]["function"]
        assert last["tools"] == [{"type": "function", "name": "bash", "description": fn["description"],
                                  "parameters": fn["parameters"]}]
        items = last["input"]
        assert [i["call_id"] for i in items if i.get("type") == "function_call"] == ids
        assert [i["call_id"] for i in items if i.get("type") == "function_call_output"] == ids
        assert items[0] == {"role": "system", "content": "You are a careful agent."}
    else:
        fn = TOOLS[0]["function"]
        assert last["tools"] == [{"name": "bash", "description": fn["description"],
                                  "input_schema": fn["parameters"]}]
        assert last["system"] == "You are a careful agent." and last["max_tokens"] == 4096
        turns = last["messages"]
        assert [t["role"] for t in turns] == ["user", "assistant", "user", "assistant", "user"]
        assert [b["tool_use_id"] for t in turns for b in t["content"] if b["type"] == "tool_result"] == ids
        uses = [b for t in turns for b in t["content"] if b["type"] == "tool_use"]
        assert [b["input"] for b in uses] == [{"cmd": "ls -la"}, {"cmd": "cat a.txt"}, {"cmd": "cat b.txt"}]


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_tool_call_without_its_result_is_refused_as_the_real_api_does(protocol: str) -> None:
    messages = [{"role": "user", "content": "Please list the files here."},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"id": "call_9", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]},
                {"role": "user", "content": "go on"}]
    async with running_scripted_server(SCRIPT) as srv, client_for(protocol, srv.base_url or "") as client:
        with pytest.raises(ModelError) as info:
            await client.complete(messages, tools=TOOLS)
    assert info.value.kind == "model_bad_request" and info.value.status == 400
    assert "call_9" in str(info.value)


_NAMES = {"openai-chat": ("max_tokens", "stop"), "openai-responses": ("max_output_tokens", "stop"),
          "anthropic-messages": ("max_tokens", "stop_sequences")}


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_model_params_reach_the_body_under_the_protocols_names_and_reserved_keys_do_not(
        protocol: str) -> None:
    params = {"temperature": 0.3, "top_p": 0.9, "seed": 5, "max_tokens": 50, "stop": ["END"],
              "vendor_knob": {"depth": 2}, "extra_body": {"top_k": 7, "temperature": 0.1},
              "timeout": 30, "connect_timeout": 5, "max_connections": 2, "extra_headers": {"X-Trace": "t"},
              "return_raw": False, "retries": 2, "retry_backoff": 0.01, "retry_max_wait": 1}
    async with running_scripted_server(SCRIPT) as srv:
        client = create_model_client(ModelSpec(id="my-model", base_url=srv.base_url, api_protocol=protocol,
                                               params=params))  # type: ignore[arg-type]
        try:
            await client.complete([{"role": "user", "content": "count to three"}])
            await client.complete([{"role": "user", "content": "count to three"}], seed=6, vendor_knob=None)
        finally:
            await client.aclose()
    first, second = srv.recent_requests
    max_name, stop_name = _NAMES[protocol]
    assert first["model"] == "my-model" and first["stream"] is False
    assert (first["top_p"], first["seed"], first["vendor_knob"], first["top_k"]) == (0.9, 5, {"depth": 2}, 7)
    assert first["temperature"] == 0.1  # extra_body is merged last
    assert first[max_name] == 50 and first[stop_name] == ["END"]
    assert not {"timeout", "connect_timeout", "max_connections", "extra_headers", "return_raw", "retries",
                "retry_backoff", "retry_max_wait", "extra_body"} & set(first)
    assert (second["seed"], second["vendor_knob"]) == (6, None)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize(("status", "kind", "retry_after"), [
    (429, "model_rate_limit", 2.0), (503, "model_server_error", None), (500, "model_server_error", None),
    (400, "model_bad_request", None), (404, "model_bad_request", None)])
async def test_http_errors_map_to_the_same_model_error_kinds(protocol: str, stream: bool, status: int, kind: str,
                                                             retry_after: float | None) -> None:
    async with running_scripted_server(SCRIPT, fail_status=status, retry_after=2 if status == 429 else None) as srv, \
            client_for(protocol, srv.base_url or "") as client:
        with pytest.raises(ModelError) as info:
            await client.complete([{"role": "user", "content": "count to three"}], stream=stream)
    assert (info.value.kind, info.value.status, info.value.retry_after) == (kind, status, retry_after)
    assert f"HTTP {status}" in str(info.value) and "Injected failure" in str(info.value)


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_garbage_is_a_bad_response_and_a_hang_a_bounded_connection_error(protocol: str) -> None:
    async with running_scripted_server(SCRIPT, faults={"garbage": 1.0}) as srv, \
            client_for(protocol, srv.base_url or "") as client:
        with pytest.raises(ModelError) as garbage:
            await client.complete([{"role": "user", "content": "count to three"}])
    async with running_scripted_server(SCRIPT, faults={"hang": 1.0}) as srv, \
            client_for(protocol, srv.base_url or "", timeout=0.3) as client:
        with pytest.raises(ModelError) as hang:
            await client.complete([{"role": "user", "content": "count to three"}], stream=True)
    assert garbage.value.kind == "model_bad_response"
    assert hang.value.kind == "model_connection_error" and "timed out" in str(hang.value)


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_wrong_or_missing_key_is_a_401_model_auth_error_that_never_shows_the_key(protocol: str) -> None:
    async with running_scripted_server(SCRIPT, require_api_key="sk-the-right-one") as srv:
        async with client_for(protocol, srv.base_url or "", KEY) as wrong, \
                client_for(protocol, srv.base_url or "", None) as missing:
            errors = []
            for client in (wrong, missing):
                with pytest.raises(ModelError) as info:
                    await client.complete([{"role": "user", "content": "count to three"}])
                errors.append(info.value)
        async with client_for(protocol, srv.base_url or "", "sk-the-right-one") as right:
            ok = await right.complete([{"role": "user", "content": "count to three"}])
    assert [(e.kind, e.status) for e in errors] == [("model_auth", 401)] * 2
    assert all(KEY not in str(e) and "sk-the-right-one" not in str(e) for e in errors)
    assert ok.content == "one"


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_the_retrying_client_rides_out_rate_limits_for_every_protocol(protocol: str) -> None:
    async with running_scripted_server(SCRIPT, faults={"429": 0.5, "503": 0.1}, fault_seed=4,
                                       retry_after=0.01) as srv:
        client = create_model_client(ModelSpec(id="m", base_url=srv.base_url, api_protocol=protocol,  # type: ignore[arg-type]
                                               params={"retries": 20, "retry_backoff": 0.01, "stream": True}))
        try:
            assert isinstance(client, RetryingModelClient) and isinstance(client.inner, CLIENTS[protocol])
            replies = [await client.complete([{"role": "user", "content": "count to three"}]) for _ in range(12)]
        finally:
            await client.aclose()
    assert [r.content for r in replies] == ["one"] * 12
    assert sum(r.usage.retries for r in replies) == sum(srv.faults_injected.values()) > 0


# ---------------------------------------------------------------------- the official openai SDK


async def test_the_official_openai_sdk_reads_chat_completions_from_the_scripted_server() -> None:
    async with running_scripted_server(SCRIPT, require_api_key=KEY) as srv:
        sdk = openai.AsyncOpenAI(base_url=srv.base_url, api_key=KEY, max_retries=0)
        try:
            messages: Any = [{"role": "user", "content": "Please list the files here."}]
            plain = await sdk.chat.completions.create(model="m", messages=messages, tools=TOOLS)  # type: ignore[arg-type]
            stream = await sdk.chat.completions.create(model="m", messages=messages, tools=TOOLS,  # type: ignore[arg-type]
                                                       stream=True, stream_options={"include_usage": True})
            chunks = [c async for c in stream]
        finally:
            await sdk.close()
    choice = plain.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    call = choice.message.tool_calls[0]  # type: ignore[index]
    assert (call.id, call.function.name, call.function.arguments) == ("call_0_0", "bash", '{"cmd":"ls -la"}')  # type: ignore[union-attr]
    assert plain.usage is not None and plain.usage.total_tokens > 0
    deltas = [tc for c in chunks if c.choices for tc in c.choices[0].delta.tool_calls or ()]
    args = "".join(tc.function.arguments or "" for tc in deltas if tc.function)
    assert args == '{"cmd":"ls -la"}'
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "tool_calls"
    assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens == plain.usage.total_tokens


async def test_the_official_openai_sdk_reads_responses_from_the_scripted_server() -> None:
    async with running_scripted_server(SCRIPT, require_api_key=KEY) as srv:
        sdk = openai.AsyncOpenAI(base_url=srv.base_url, api_key=KEY, max_retries=0)
        try:
            plain = await sdk.responses.create(model="m", input="count to three")
            async with sdk.responses.stream(model="m", input="Please list the files here.") as stream:
                kinds = [event.type async for event in stream]
                final = await stream.get_final_response()
        finally:
            await sdk.close()
    assert plain.status == "completed" and plain.output_text == "one"
    assert plain.usage is not None and plain.usage.total_tokens == plain.usage.input_tokens + plain.usage.output_tokens
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert "response.reasoning_summary_text.delta" in kinds and "response.function_call_arguments.delta" in kinds
    calls = [i for i in final.output if i.type == "function_call"]
    assert [(c.call_id, c.name, c.arguments) for c in calls] == [("call_0_0", "bash", '{"cmd":"ls -la"}')]  # type: ignore[union-attr]
    reasoning = [i for i in final.output if i.type == "reasoning"]
    assert reasoning[0].summary[0].text == "I should look at the workspace before answering."  # type: ignore[union-attr]


# ---------------------------------------------------------------------- end to end

SAMPLE = ["files/hello_world", "text/reverse_lines", "answer/count_lines"]


@pytest.fixture(scope="module")
def threaded_server() -> Iterator[ScriptedServer]:
    """A scripted server (bundled scripts) on its own event loop in a thread, so a sync run can use it."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    server = ScriptedServer(record_requests=1000)
    asyncio.run_coroutine_threadsafe(server.start(), loop).result(10)
    try:
        yield server
    finally:
        asyncio.run_coroutine_threadsafe(server.stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


_SHAPE_KEY = {"openai-chat": "messages", "openai-responses": "input", "anthropic-messages": "system"}


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_run_evaluation_with_the_shell_agent_passes_over_every_protocol(protocol: str, stream: bool, tmp_path: Path,
                                                                        threaded_server: ScriptedServer) -> None:
    threaded_server.recent_requests.clear()
    out = agentcompass.run_evaluation(
        "shell_tasks", "shell_agent", "scripted", model_base_url=threaded_server.base_url,
        model_api_protocol=protocol, model_params={"stream": stream}, benchmark_params={"sample_ids": SAMPLE},
        results_dir=str(tmp_path), progress="none")
    assert out.ok, out.error
    bodies = list(threaded_server.recent_requests)
    assert bodies and all(_SHAPE_KEY[protocol] in b and b["stream"] is stream for b in bodies)
    assert out.metrics["tasks"] == len(SAMPLE) and out.metrics["pass@1"] == 1.0
    assert out.paths is not None
    details = [msgspec.json.decode(p.read_bytes()) for p in Path(out.paths.details_dir).glob("*.json")]
    steps = [s for d in details for s in d["attempts"]["1"]["trajectory"]["steps"]]
    assert len(details) == len(SAMPLE) and steps
    assert all(s["prompt_tokens"] > 0 and s["completion_tokens"] > 0 and s["finish_reason"] == "stop" for s in steps)
