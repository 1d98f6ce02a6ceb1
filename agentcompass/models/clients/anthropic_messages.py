"""Anthropic Messages API (``POST <base_url>/v1/messages``) client on httpx, JSON or SSE (``stream: true``).

``base_url`` may end in ``/v1`` (then ``/messages`` is appended) or not (``/v1/messages``). The key goes in
``x-api-key``; every request carries ``anthropic-version: 2023-06-01`` (``extra_headers`` can override it
or add ``anthropic-beta``).

Messages come in OpenAI chat format: system/developer messages become the top-level ``system`` prompt;
user/assistant messages become content blocks (``image_url`` parts -> ``image`` blocks, assistant
``tool_calls`` -> ``tool_use`` blocks with the arguments decoded to an object); ``tool`` messages become
``tool_result`` blocks in a user turn; consecutive turns of the same role are merged (so tool results and
the next user text share one user turn, results first) and empty text is dropped (the API refuses it).
Chat-format tools become ``{"name", "description", "input_schema"}``; ``tool_choice`` ``auto``/``none``/
``required``/a function maps to ``auto``/``none``/``any``/``tool``. Tools already in Anthropic shape pass.

Params: ``max_tokens`` is required by the API and defaults to 4096 (``max_completion_tokens`` is accepted
as its alias); ``stop`` becomes ``stop_sequences``; any other key (``temperature``, ``top_p``, ``top_k``,
``thinking``, ``metadata``...) goes into the body as given, ``extra_body`` is merged last, and the reserved
keys of ``agentcompass.models.clients.http`` configure the client. A stream's ``ping`` events only keep the
connection alive: they do not count as progress for the ``timeout`` between events.

The answer: ``content`` joins the text blocks (None without one), ``reasoning`` the ``thinking`` blocks,
``tool_calls`` the ``tool_use`` blocks (arguments: the input as a compact JSON string); ``stop_reason``
``end_turn``/``stop_sequence`` -> ``stop``, ``max_tokens`` -> ``length``, ``tool_use`` -> ``tool_calls``,
``refusal`` -> ``content_filter``. ``prompt_tokens`` counts cached input too (``input_tokens`` +
``cache_creation_input_tokens`` + ``cache_read_input_tokens``), as OpenAI's ``prompt_tokens`` does, and
``usage.cached_tokens`` is ``cache_read_input_tokens``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, ClassVar

import httpx
import msgspec

from ..._errors import ModelError
from ...common.error_kinds import ErrorKind
from ...interfaces import ModelResponse
from ...records import ToolCall, Usage
from .http import HttpModelClient, decode_as, json_arguments, parts_text

ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096

_FINISH = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_calls",
           "refusal": "content_filter", "model_context_window_exceeded": "length"}
_ERROR_KINDS = {"rate_limit_error": ErrorKind.MODEL_RATE_LIMIT, "overloaded_error": ErrorKind.MODEL_SERVER_ERROR,
                "api_error": ErrorKind.MODEL_SERVER_ERROR, "authentication_error": ErrorKind.MODEL_AUTH,
                "permission_error": ErrorKind.MODEL_AUTH, "invalid_request_error": ErrorKind.MODEL_BAD_REQUEST,
                "request_too_large": ErrorKind.MODEL_BAD_REQUEST, "not_found_error": ErrorKind.MODEL_BAD_REQUEST}


class _Block(msgspec.Struct):
    type: str = ""
    text: str | None = None
    thinking: str | None = None
    id: str | None = None
    name: str = ""
    input: Any = None


class _Usage(msgspec.Struct):
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_creation_input_tokens: int | None = None
    cache_read_input_tokens: int | None = None


class _Message(msgspec.Struct):
    content: list[_Block]
    stop_reason: str | None = None
    usage: _Usage | None = None


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _bad_request(message: str) -> ModelError:
    return ModelError(message, kind=ErrorKind.MODEL_BAD_REQUEST)


def _tool_input(arguments: Any) -> Any:
    """Chat tool-call arguments (a JSON string) as the object Anthropic wants."""
    if isinstance(arguments, dict):
        return arguments
    if not arguments:
        return {}
    try:
        value = msgspec.json.decode(arguments)
    except (msgspec.DecodeError, TypeError):
        value = None
    # a model that wrote invalid JSON: keep what it wrote rather than fail the conversation
    return value if isinstance(value, dict) else {"arguments": arguments}


def _user_blocks(content: Any) -> list[dict[str, Any]]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    if not isinstance(content, list):
        raise _bad_request(f"message content must be a string or a list of parts, got {type(content).__name__}.")
    blocks: list[dict[str, Any]] = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            if part.get("text"):
                blocks.append({"type": "text", "text": part["text"]})
        elif kind == "image_url":
            image = part.get("image_url")
            url = image.get("url", "") if isinstance(image, dict) else str(image)
            head, sep, data = url.partition(";base64,")
            if url.startswith("data:") and sep:
                blocks.append({"type": "image", "source": {"type": "base64", "media_type": head[5:], "data": data}})
            else:
                blocks.append({"type": "image", "source": {"type": "url", "url": url}})
        elif isinstance(part, dict):  # already an Anthropic block
            blocks.append(part)
    return blocks


def to_messages(messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """OpenAI chat ``messages`` as (system prompt, Anthropic messages). Raises ``ModelError`` (bad request)."""
    if not isinstance(messages, list):
        raise _bad_request(f"messages must be a list of chat messages, got {type(messages).__name__}.")
    system: list[str] = []
    turns: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if not blocks:
            return
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})

    for i, m in enumerate(messages):
        role = m.get("role") if isinstance(m, dict) else None
        if role in ("system", "developer"):
            text = parts_text(m.get("content"))
            if text:
                system.append(text)
        elif role == "user":
            add("user", _user_blocks(m.get("content")))
        elif role == "assistant":
            text = parts_text(m.get("content"))
            blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
            for c in m.get("tool_calls") or ():
                if not isinstance(c, dict):
                    continue
                fn = c.get("function") or {}
                blocks.append({"type": "tool_use", "id": c.get("id"), "name": fn.get("name", ""),
                               "input": _tool_input(fn.get("arguments"))})
            add("assistant", blocks)
        elif role == "tool":
            add("user", [{"type": "tool_result", "tool_use_id": m.get("tool_call_id"),
                          "content": parts_text(m.get("content")) or ""}])
        else:
            raise _bad_request(f"messages[{i}] has role {role!r}; allowed: system, developer, user, assistant, "
                               "tool.")
    return "\n\n".join(system), turns


def to_tool(tool: dict[str, Any]) -> dict[str, Any]:
    """A chat-format function tool in Anthropic shape; other tools unchanged."""
    fn = tool.get("function")
    if tool.get("type") != "function" or not isinstance(fn, dict):
        return tool
    out = {"name": fn.get("name", ""), "input_schema": fn.get("parameters") or {"type": "object", "properties": {}}}
    if fn.get("description"):
        out["description"] = fn["description"]
    return out


def _tool_choice(choice: Any) -> Any:
    if choice in ("auto", "none"):
        return {"type": choice}
    if choice == "required":
        return {"type": "any"}
    if isinstance(choice, dict) and choice.get("type") == "function" and isinstance(choice.get("function"), dict):
        return {"type": "tool", "name": choice["function"].get("name")}
    return choice


class AnthropicMessagesClient(HttpModelClient):
    """A ``ModelClient`` for the Anthropic Messages API (and servers that implement it)."""

    protocol: ClassVar[str] = "anthropic-messages"

    def endpoint(self, base_url: httpx.URL) -> str:
        versioned = base_url.path.rstrip("/").endswith("/v1")
        return f"{self.base_url}/messages" if versioned else f"{self.base_url}/v1/messages"

    def auth_headers(self, api_key: str) -> dict[str, str]:
        return {"x-api-key": api_key}

    def protocol_headers(self) -> dict[str, str]:
        return {"anthropic-version": ANTHROPIC_VERSION}

    def build_body(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                   params: dict[str, Any], stream: bool) -> dict[str, Any]:
        body = dict(params)
        if "max_completion_tokens" in body:
            value = body.pop("max_completion_tokens")
            body.setdefault("max_tokens", value)
        if body.get("max_tokens") is None:
            body["max_tokens"] = DEFAULT_MAX_TOKENS
        if "stop" in body:
            stop = body.pop("stop")
            if stop is not None:
                body.setdefault("stop_sequences", [stop] if isinstance(stop, str) else stop)
        if "tool_choice" in body:
            body["tool_choice"] = _tool_choice(body["tool_choice"])
        system, turns = to_messages(messages)
        if system:
            body["system"] = system
        body["model"] = self.model_id
        body["messages"] = turns
        body["stream"] = stream
        if tools:
            body["tools"] = [to_tool(t) for t in tools]
        return body

    def parse_body(self, data: bytes, status: int) -> ModelResponse:
        return self._response(decode_as(data, _Message, self, status))

    def _response(self, parsed: _Message) -> ModelResponse:
        texts: list[str] | None = None
        thinking: list[str] = []
        calls: list[ToolCall] = []
        for block in parsed.content:
            if block.type == "text":
                texts = texts if texts is not None else []
                texts.append(block.text or "")
            elif block.type == "thinking" and block.thinking:
                thinking.append(block.thinking)
            elif block.type == "tool_use":
                calls.append(ToolCall(id=block.id or f"toolu_{len(calls)}", name=block.name,
                                      arguments=json_arguments(block.input if block.input is not None else {})))
        u = parsed.usage or _Usage()
        prompt = (u.input_tokens or 0) + (u.cache_creation_input_tokens or 0) + (u.cache_read_input_tokens or 0)
        completion = u.output_tokens or 0
        usage = Usage(prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion, calls=1,
                      cached_tokens=u.cache_read_input_tokens or 0)
        finish = _FINISH.get(parsed.stop_reason or "", parsed.stop_reason)
        return ModelResponse(content=None if texts is None else "".join(texts),
                             reasoning="\n\n".join(thinking) or None, tool_calls=calls, finish_reason=finish,
                             usage=usage)

    async def parse_stream(self, events: AsyncIterator[tuple[str, Any]]) -> ModelResponse:
        blocks: dict[int, dict[str, Any]] = {}
        partial_json: dict[int, list[str]] = {}
        usage: dict[str, Any] = {}
        stop_reason: Any = None
        done = False
        async for name, ev in events:
            if ev is None:
                continue
            if not isinstance(ev, dict):
                raise self.bad_response(f"sent a stream event that is not an object: {ev!r:.300}")
            kind = ev.get("type") or name
            if kind == "message_start":
                usage.update(_obj(_obj(ev.get("message")).get("usage")))
            elif kind == "content_block_start" and isinstance(ev.get("content_block"), dict):
                blocks[ev.get("index", len(blocks))] = dict(ev["content_block"])
            elif kind == "content_block_delta":
                block = blocks.get(ev.get("index", -1))
                delta = _obj(ev.get("delta"))
                if block is None:
                    raise self.bad_response(f"sent a delta for content block {ev.get('index')!r} that never started.")
                dt = delta.get("type")
                if dt == "text_delta":
                    block["text"] = (block.get("text") or "") + str(delta.get("text", ""))
                elif dt == "thinking_delta":
                    block["thinking"] = (block.get("thinking") or "") + str(delta.get("thinking", ""))
                elif dt == "signature_delta":
                    block["signature"] = delta.get("signature")
                elif dt == "input_json_delta":
                    partial_json.setdefault(ev["index"], []).append(str(delta.get("partial_json", "")))
            elif kind == "message_delta":
                stop_reason = _obj(ev.get("delta")).get("stop_reason", stop_reason)
                usage.update({k: v for k, v in _obj(ev.get("usage")).items() if v is not None})
            elif kind == "message_stop":
                done = True
                break
            elif kind == "error":
                err = _obj(ev.get("error"))
                raise self.stream_error(_ERROR_KINDS.get(err.get("type", ""), ErrorKind.MODEL_SERVER_ERROR),
                                        f"{err.get('type')}: {err.get('message')}")
        if not done:
            raise self.bad_response("the stream ended before message_stop.")
        for index, pieces in partial_json.items():  # tool inputs arrive as JSON text in pieces
            text = "".join(pieces)
            if text:
                try:
                    blocks[index]["input"] = msgspec.json.decode(text)
                except msgspec.DecodeError:
                    raise self.bad_response(f"streamed tool input that is not JSON: {text[:300]!r}") from None
        assembled = {"content": [blocks[k] for k in sorted(blocks)], "stop_reason": stop_reason, "usage": usage}
        return self._response(decode_as(assembled, _Message, self))
