"""OpenAI Responses API (``POST <base_url>/responses``) client on httpx, JSON or SSE (``stream: true``).

Messages come in OpenAI chat format and become ``input`` items: system/developer/user/assistant messages
(text parts -> ``input_text``, ``image_url`` parts -> ``input_image``), assistant ``tool_calls`` ->
``function_call`` items, ``tool`` messages -> ``function_call_output`` items. Chat-format tools
(``{"type": "function", "function": {...}}``) and ``tool_choice`` are flattened to the Responses shape;
tools already in that shape pass through.

Params: ``max_tokens`` / ``max_completion_tokens`` become ``max_output_tokens``, ``reasoning_effort``
becomes ``reasoning.effort``, ``store`` defaults to false (every call sends the whole conversation, so
nothing needs to be kept server-side); any other key goes into the body as given, ``extra_body`` is merged
last, and the reserved keys of ``agentcompass.models.clients.http`` configure the client. The key goes in
``Authorization: Bearer``.

The answer: ``content`` joins the ``output_text`` (or refusal) parts of message items (None without a
message item), ``reasoning`` the reasoning summaries (or the raw ``reasoning_text`` when there is no
summary), ``tool_calls`` the ``function_call`` items (id = ``call_id``). ``finish_reason``: ``stop``,
``tool_calls`` when a function was called, ``length`` for ``incomplete`` at ``max_output_tokens``,
``content_filter``; a ``failed`` response raises ``ModelError``. ``usage.cached_tokens`` comes from
``input_tokens_details.cached_tokens``. A stream is assembled from its item and
delta events, or from the output of ``response.completed`` when present, into the same ``ModelResponse``.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from typing import Any, ClassVar

import httpx
import msgspec

from ..._errors import ModelError
from ...common.error_kinds import ErrorKind
from ...interfaces import ModelResponse
from ...records import ToolCall, Usage
from .http import HttpModelClient, decode_as, json_arguments, parts_text


class _Part(msgspec.Struct):
    type: str = ""
    text: str | None = None
    refusal: str | None = None


class _Item(msgspec.Struct):
    type: str = ""
    id: str | None = None
    call_id: str | None = None
    name: str = ""
    arguments: Any = ""
    content: list[_Part] | None = None
    summary: list[_Part] | None = None


class _Details(msgspec.Struct):
    reason: str | None = None


class _Error(msgspec.Struct):
    code: str | None = None
    message: str | None = None


class _InputDetails(msgspec.Struct):
    cached_tokens: int | None = None


class _Usage(msgspec.Struct):
    input_tokens_details: _InputDetails | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None


class _Response(msgspec.Struct):
    output: list[_Item]
    status: str | None = None
    incomplete_details: _Details | None = None
    error: _Error | None = None
    usage: _Usage | None = None


def _error_kind(code: str | None) -> ErrorKind:
    if code == "rate_limit_exceeded":
        return ErrorKind.MODEL_RATE_LIMIT
    if code and code.startswith("invalid"):
        return ErrorKind.MODEL_BAD_REQUEST
    return ErrorKind.MODEL_SERVER_ERROR


def _input_content(content: Any) -> Any:
    if not isinstance(content, list):
        return "" if content is None else content
    out: list[Any] = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            out.append({"type": "input_text", "text": part.get("text", "")})
        elif kind == "image_url":
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, dict) else image
            detail = image.get("detail", "auto") if isinstance(image, dict) else "auto"
            out.append({"type": "input_image", "image_url": url, "detail": detail})
        else:  # already a Responses part
            out.append(part)
    return out


def to_input(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI chat ``messages`` as Responses ``input`` items. Raises ``ModelError`` (bad request)."""
    if not isinstance(messages, list):
        raise ModelError(f"messages must be a list of chat messages, got {type(messages).__name__}.",
                         kind=ErrorKind.MODEL_BAD_REQUEST)
    items: list[dict[str, Any]] = []
    for i, m in enumerate(messages):
        role = m.get("role") if isinstance(m, dict) else None
        if role in ("system", "developer", "user"):
            items.append({"role": role, "content": _input_content(m.get("content"))})
        elif role == "assistant":
            text = parts_text(m.get("content")) or ""
            calls = [c for c in m.get("tool_calls") or () if isinstance(c, dict)]
            if text or not calls:
                items.append({"role": "assistant", "content": text})
            for c in calls:
                fn = c.get("function") or {}
                items.append({"type": "function_call", "call_id": c.get("id"), "name": fn.get("name", ""),
                              "arguments": json_arguments(fn.get("arguments", "{}"))})
        elif role == "tool":
            items.append({"type": "function_call_output", "call_id": m.get("tool_call_id"),
                          "output": parts_text(m.get("content")) or ""})
        else:
            raise ModelError(f"messages[{i}] has role {role!r}; allowed: system, developer, user, assistant, tool.",
                             kind=ErrorKind.MODEL_BAD_REQUEST)
    return items


def to_tool(tool: dict[str, Any]) -> dict[str, Any]:
    """A chat-format function tool flattened to the Responses shape; other tools unchanged."""
    fn = tool.get("function")
    if tool.get("type") != "function" or not isinstance(fn, dict):
        return tool
    out = {"type": "function", "name": fn.get("name", ""),
           "parameters": fn.get("parameters") or {"type": "object", "properties": {}}}
    for key in ("description", "strict"):
        if key in fn:
            out[key] = fn[key]
    return out


def _tool_choice(choice: Any) -> Any:
    if isinstance(choice, dict) and choice.get("type") == "function" and isinstance(choice.get("function"), dict):
        return {"type": "function", "name": choice["function"].get("name")}
    return choice


def _slot(parts: list[Any], index: Any, default: dict[str, Any]) -> dict[str, Any]:
    i = index if isinstance(index, int) and index >= 0 else 0
    while len(parts) <= i:
        parts.append(dict(default))
    if not isinstance(parts[i], dict):
        parts[i] = dict(default)
    slot: dict[str, Any] = parts[i]
    return slot


class OpenAIResponsesClient(HttpModelClient):
    """A ``ModelClient`` for the OpenAI Responses API (and servers that implement it, e.g. vLLM)."""

    protocol: ClassVar[str] = "openai-responses"
    client_set: ClassVar[frozenset[str]] = frozenset({"model", "input"})

    def endpoint(self, base_url: httpx.URL) -> str:
        return f"{self.base_url}/responses"

    def build_body(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                   params: dict[str, Any], stream: bool) -> dict[str, Any]:
        body = dict(params)
        for key in ("max_tokens", "max_completion_tokens"):
            if key in body:
                value = body.pop(key)
                body.setdefault("max_output_tokens", value)
        if "reasoning_effort" in body:
            effort = body.pop("reasoning_effort")
            given = body.get("reasoning")
            body["reasoning"] = {"effort": effort, **(given if isinstance(given, dict) else {})}
        if "tool_choice" in body:
            body["tool_choice"] = _tool_choice(body["tool_choice"])
        body.setdefault("store", False)
        body["model"] = self.model_id
        body["input"] = to_input(messages)
        body["stream"] = stream
        if tools:
            body["tools"] = [to_tool(t) for t in tools]
        return body

    def parse_body(self, data: bytes, status: int) -> ModelResponse:
        return self._response(decode_as(data, _Response, self, status), status)

    def _response(self, parsed: _Response, status: int = 200) -> ModelResponse:
        if parsed.status == "failed":
            err = parsed.error or _Error()
            raise ModelError(self.redact(f"Model {self.model_id!r} at {self.url}: the response failed: "
                                         f"{err.code}: {err.message}"), kind=_error_kind(err.code), status=status)
        texts: list[str] | None = None
        summaries: list[str] = []
        thoughts: list[str] = []
        calls: list[ToolCall] = []
        for item in parsed.output:
            if item.type == "message":
                texts = texts or []
                for p in item.content or ():
                    piece = p.text if p.type == "output_text" else p.refusal if p.type == "refusal" else None
                    if piece:
                        texts.append(piece)
            elif item.type == "function_call":
                calls.append(ToolCall(id=item.call_id or item.id or f"call_{len(calls)}", name=item.name,
                                      arguments=json_arguments(item.arguments)))
            elif item.type == "reasoning":
                summaries.extend(p.text for p in item.summary or () if p.text)
                thoughts.extend(p.text for p in item.content or () if p.text)
        if parsed.status == "incomplete":
            reason = parsed.incomplete_details.reason if parsed.incomplete_details else None
            finish: str | None = "length" if reason in (None, "max_output_tokens") else reason
        elif parsed.status in (None, "completed"):
            finish = "tool_calls" if calls else "stop"
        else:
            finish = parsed.status
        u = parsed.usage or _Usage()
        prompt, completion = u.input_tokens or 0, u.output_tokens or 0
        cached = (u.input_tokens_details.cached_tokens if u.input_tokens_details else None) or 0
        usage = Usage(prompt_tokens=prompt, completion_tokens=completion,
                      total_tokens=u.total_tokens or prompt + completion, calls=1, cached_tokens=cached)
        return ModelResponse(content=None if texts is None else "".join(texts),
                             reasoning="\n\n".join(summaries or thoughts) or None, tool_calls=calls,
                             finish_reason=finish, usage=usage)

    async def parse_stream(self, events: AsyncIterator[tuple[str, Any]]) -> ModelResponse:
        items: dict[int, dict[str, Any]] = {}
        final: Any = None
        async for name, ev in events:
            if ev is None:  # not part of this protocol, but harmless
                continue
            if not isinstance(ev, dict):
                raise self.bad_response(f"sent a stream event that is not an object: {ev!r:.300}")
            kind = ev.get("type") or name
            if kind == "error":
                raise self.stream_error(_error_kind(ev.get("code")), f"{ev.get('code')}: {ev.get('message')}")
            if kind in ("response.completed", "response.incomplete", "response.failed"):
                final = ev.get("response")
                break
            index = ev.get("output_index")
            if not isinstance(index, int):
                continue
            if kind in ("response.output_item.added", "response.output_item.done"):
                if isinstance(ev.get("item"), dict):
                    items[index] = copy.deepcopy(ev["item"])
                continue
            item = items.setdefault(index, {})
            delta: str = ev["delta"] if isinstance(ev.get("delta"), str) else ""
            if kind == "response.content_part.added" and isinstance(ev.get("part"), dict):
                _slot(item.setdefault("content", []), ev.get("content_index"), {}).update(ev["part"])
            elif kind == "response.output_text.delta":
                part = _slot(item.setdefault("content", []), ev.get("content_index"), {"type": "output_text"})
                part["text"] = (part.get("text") or "") + delta
            elif kind == "response.refusal.delta":
                part = _slot(item.setdefault("content", []), ev.get("content_index"), {"type": "refusal"})
                part["refusal"] = (part.get("refusal") or "") + delta
            elif kind == "response.function_call_arguments.delta":
                item["arguments"] = (item.get("arguments") or "") + delta
            elif kind == "response.reasoning_summary_text.delta":
                part = _slot(item.setdefault("summary", []), ev.get("summary_index"), {"type": "summary_text"})
                part["text"] = (part.get("text") or "") + delta
            elif kind == "response.reasoning_text.delta":
                part = _slot(item.setdefault("content", []), ev.get("content_index"), {"type": "reasoning_text"})
                part["text"] = (part.get("text") or "") + delta
        if not isinstance(final, dict):
            raise self.bad_response("the stream ended before response.completed.")
        if not final.get("output"):
            final = {**final, "output": [items[k] for k in sorted(items)]}
        return self._response(decode_as(final, _Response, self))
