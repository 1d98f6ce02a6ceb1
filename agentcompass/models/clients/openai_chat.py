"""OpenAI-compatible ``POST <base_url>/chat/completions`` client on httpx, JSON or SSE (``stream: true``).

Model params go into the request body as given (``temperature``, ``max_tokens``, ``top_p``, ``stop``,
``seed`` and any other key, e.g. ``reasoning_effort`` or vLLM's ``top_k``); ``extra_body`` (a dict) is
merged into the body last. ``stream: true`` streams the answer over SSE (with
``stream_options.include_usage``, so usage arrives in the last chunk) and assembles the same
``ModelResponse`` as a JSON answer. Keys reserved for the client itself (``RESERVED_PARAMS``, not sent):

- ``timeout`` (s): read/write/pool timeout, overrides the factory's ``timeout``; also the longest wait for
  a whole non-streaming answer, and for each new event of a stream (keep-alives do not count);
- ``total_timeout`` (s): cap on one whole HTTP exchange (default ``max(10 * timeout, 1800)``);
- ``connect_timeout`` (s): connect timeout (default ``min(timeout, 30)``);
- ``max_connections``: pool size, overrides the factory's ``max_connections``;
- ``extra_headers``: dict of extra HTTP headers sent with every request;
- ``return_raw``: when true, ``ModelResponse.raw`` holds the decoded response body (a list of the decoded
  SSE events when streaming).

``model`` and ``messages`` in params are ignored: the client sets them. The API key goes in
``Authorization: Bearer``. Reasoning comes from ``reasoning_content`` or ``reasoning``; tool calls come back
as ``records.ToolCall`` with JSON-string arguments; ``finish_reason`` is ``stop``, ``length`` or
``tool_calls`` (the legacy ``function_call`` is reported as ``tool_calls``; other values pass through);
``usage.cached_tokens`` comes from ``prompt_tokens_details.cached_tokens``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, ClassVar

import httpx
import msgspec

from ...common.error_kinds import ErrorKind
from ...interfaces import ModelResponse
from ...records import ToolCall, Usage
from .http import RESERVED_PARAMS, HttpModelClient, decode_as, json_arguments, parse_retry_after, parts_text

__all__ = ["RESERVED_PARAMS", "OpenAIChatClient", "parse_retry_after"]


class _Function(msgspec.Struct):
    name: str = ""
    arguments: Any = ""


class _ToolCall(msgspec.Struct):
    id: str | None = None
    function: _Function = msgspec.field(default_factory=_Function)


class _Message(msgspec.Struct):
    content: Any = None
    reasoning_content: str | None = None
    reasoning: str | None = None
    tool_calls: list[_ToolCall] | None = None


class _Choice(msgspec.Struct):
    message: _Message
    finish_reason: str | None = None


class _PromptDetails(msgspec.Struct):
    cached_tokens: int | None = None


class _Usage(msgspec.Struct):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    prompt_tokens_details: _PromptDetails | None = None


class _Completion(msgspec.Struct):
    choices: list[_Choice]
    usage: _Usage | None = None


def _finish(reason: str | None) -> str | None:
    return "tool_calls" if reason == "function_call" else reason


class OpenAIChatClient(HttpModelClient):
    """A ``ModelClient`` for any OpenAI-compatible chat-completions endpoint."""

    protocol: ClassVar[str] = "openai-chat"

    def endpoint(self, base_url: httpx.URL) -> str:
        return f"{self.base_url}/chat/completions"

    def build_body(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                   params: dict[str, Any], stream: bool) -> dict[str, Any]:
        body = dict(params)
        options = body.pop("stream_options", None)
        body["model"] = self.model_id
        body["messages"] = messages
        body["stream"] = stream
        if stream:  # stream_options is only valid with stream: true
            body["stream_options"] = {**(options if isinstance(options, dict) else {}), "include_usage": True}
        if tools:
            body["tools"] = tools
        return body

    def parse_body(self, data: bytes, status: int) -> ModelResponse:
        return self._response(decode_as(data, _Completion, self, status), status)

    def _response(self, parsed: _Completion, status: int = 200) -> ModelResponse:
        if not parsed.choices:
            raise self.bad_response("returned no choices.", status)
        choice = parsed.choices[0]
        msg = choice.message
        calls = [ToolCall(id=tc.id or f"call_{i}", name=tc.function.name,
                          arguments=json_arguments(tc.function.arguments))
                 for i, tc in enumerate(msg.tool_calls or ())]
        u = parsed.usage or _Usage()
        prompt, completion = u.prompt_tokens or 0, u.completion_tokens or 0
        cached = (u.prompt_tokens_details.cached_tokens if u.prompt_tokens_details else None) or 0
        usage = Usage(prompt_tokens=prompt, completion_tokens=completion,
                      total_tokens=u.total_tokens or prompt + completion, calls=1, cached_tokens=cached)
        return ModelResponse(content=parts_text(msg.content), reasoning=msg.reasoning_content or msg.reasoning,
                             tool_calls=calls, finish_reason=_finish(choice.finish_reason), usage=usage)

    async def parse_stream(self, events: AsyncIterator[tuple[str, Any]]) -> ModelResponse:
        content: list[str] | None = None
        reasoning: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        finish: str | None = None
        usage: Any = None
        done = False
        async for _, chunk in events:
            if chunk is None:  # data: [DONE]
                done = True
                break
            if not isinstance(chunk, dict):
                raise self.bad_response(f"sent a stream chunk that is not an object: {chunk!r:.300}")
            if chunk.get("error"):
                err = chunk["error"]
                detail = str(err.get("message") if isinstance(err, dict) else err)
                raise self.stream_error(ErrorKind.MODEL_SERVER_ERROR, detail)
            if isinstance(chunk.get("usage"), dict):
                usage = chunk["usage"]
            for choice in chunk.get("choices") or ():
                if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                    continue
                delta = choice.get("delta") or {}
                if isinstance(delta.get("content"), str):
                    if content is None:
                        content = []
                    content.append(delta["content"])
                piece = delta.get("reasoning_content") or delta.get("reasoning")
                if isinstance(piece, str):
                    reasoning.append(piece)
                for tc in delta.get("tool_calls") or ():
                    if not isinstance(tc, dict):
                        continue
                    slot = calls.setdefault(tc.get("index", len(calls)), {"id": None, "name": "", "arguments": []})
                    if tc.get("id"):
                        slot["id"] = tc["id"]
                    fn = tc.get("function") or {}
                    if fn.get("name"):
                        slot["name"] = fn["name"]
                    if fn.get("arguments") is not None:
                        slot["arguments"].append(json_arguments(fn["arguments"]))
                if choice.get("finish_reason"):
                    finish = choice["finish_reason"]
        if not done and finish is None:
            raise self.bad_response("the stream ended before the completion finished.")
        message = {
            "content": None if content is None else "".join(content),
            "reasoning_content": "".join(reasoning) or None,
            "tool_calls": [{"id": c["id"], "function": {"name": c["name"], "arguments": "".join(c["arguments"])}}
                           for _, c in sorted(calls.items())] or None,
        }
        assembled = {"choices": [{"message": message, "finish_reason": finish}], "usage": usage}
        return self._response(decode_as(assembled, _Completion, self))
