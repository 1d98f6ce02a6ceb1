"""The wire formats the scripted server speaks, for the three ``api_protocol`` values.

Requests of each API are read into OpenAI chat messages (what ``ScriptedPolicy`` decides on), checked the
way the real APIs check them (roles, required fields, every tool call answered by exactly one tool
result); a ``ScriptedReply`` is rendered as each API's JSON answer or as its SSE event sequence, with
usage. A call to a tool a Responses request declares ``custom`` (freeform, e.g. Codex's ``apply_patch``) is a
``custom_tool_call`` whose ``input`` is the scripted arguments string as is.
Ids are deterministic: ``<prefix>-scripted-<n>`` per completion, tool calls ``call_<turn>_<i>``
(Anthropic ``toolu_<turn>_<i>``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec

from .model import ScriptedReply, ScriptedToolCall, message_text

PROTOCOLS = ("openai-chat", "openai-responses", "anthropic-messages")
PIECE_CHARS = 16
THINKING_SIGNATURE = "c2NyaXB0ZWQtdGhpbmtpbmc="  # opaque, like the real one
#: an SSE event: (event name or None, data); bytes data is written as is (``[DONE]``).
Event = tuple[str | None, Any]


class WireError(Exception):
    """A request the real API would refuse with 400; ``param`` names the offending field."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


def pieces(text: str) -> list[str]:
    """``text`` cut into the chunks a stream sends it in."""
    return [text[i:i + PIECE_CHARS] for i in range(0, len(text), PIECE_CHARS)]


def _has_text(reply: ScriptedReply) -> bool:
    # a reply that only calls tools has no text part; any other reply has one (even empty)
    return bool(reply.content) or not reply.tool_calls


def _content_text(content: Any) -> str:
    """Text of a content given as a string or a list of parts/blocks with ``text``."""
    return message_text({"content": content})


# ---------------------------------------------------------------------- requests -> chat messages


def request_messages(protocol: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """The conversation of a request body of ``protocol`` as OpenAI chat messages. Raises ``WireError``."""
    if protocol == "openai-responses":
        messages = _responses_messages(body)
    elif protocol == "anthropic-messages":
        messages = _anthropic_messages(body)
    else:
        chat = body.get("messages")
        if not isinstance(chat, list) or not all(isinstance(m, dict) for m in chat):
            raise WireError("`messages` must be a list of message objects.", "messages")
        messages = chat
    _check_tool_results(protocol, messages)
    return messages


def _assistant(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The assistant message being built: consecutive assistant-side items form one turn."""
    if messages and messages[-1].get("role") == "assistant":
        return messages[-1]
    messages.append({"role": "assistant", "content": ""})
    return messages[-1]


def _responses_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    if isinstance(body.get("instructions"), str):
        messages.append({"role": "system", "content": body["instructions"]})
    items = body.get("input")
    if isinstance(items, str):
        return [*messages, {"role": "user", "content": items}]
    if not isinstance(items, list):
        raise WireError("Missing required parameter: 'input'.", "input")
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise WireError(f"Invalid type for 'input[{i}]': expected an object.", f"input[{i}]")
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role")
            if role not in ("user", "assistant", "system", "developer"):
                raise WireError(f"Invalid value for 'input[{i}].role': {role!r}.", f"input[{i}].role")
            text = _content_text(item.get("content"))
            if role == "assistant":
                turn = _assistant(messages)
                turn["content"] += text
            elif role == "user" and messages and messages[-1].get("role") == "user":
                # consecutive user items are one user turn: Codex sends its <environment_context> as its own
                # user message before the task, and the script matches the task in the first user turn
                messages[-1]["content"] += "\n\n" + text
            else:
                messages.append({"role": role, "content": text})
        elif kind == "function_call":
            if not isinstance(item.get("call_id"), str) or not isinstance(item.get("name"), str):
                raise WireError(f"Missing required parameter: 'input[{i}].call_id' or 'name'.", f"input[{i}]")
            _assistant(messages).setdefault("tool_calls", []).append(
                {"id": item["call_id"], "type": "function",
                 "function": {"name": item["name"], "arguments": str(item.get("arguments", ""))}})
        elif kind == "custom_tool_call":
            if not isinstance(item.get("call_id"), str) or not isinstance(item.get("name"), str):
                raise WireError(f"Missing required parameter: 'input[{i}].call_id' or 'name'.", f"input[{i}]")
            _assistant(messages).setdefault("tool_calls", []).append(
                {"id": item["call_id"], "type": "custom",
                 "function": {"name": item["name"], "arguments": str(item.get("input", ""))}})
        elif kind in ("function_call_output", "custom_tool_call_output"):
            if not isinstance(item.get("call_id"), str):
                raise WireError(f"Missing required parameter: 'input[{i}].call_id'.", f"input[{i}].call_id")
            output = item.get("output")
            messages.append({"role": "tool", "tool_call_id": item["call_id"],
                             "content": output if isinstance(output, str) else _content_text(output)})
        elif kind == "reasoning":
            _assistant(messages)
    return messages


def _anthropic_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    max_tokens = body.get("max_tokens")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise WireError("max_tokens: Field required (an integer >= 1)", "max_tokens")
    messages: list[dict[str, Any]] = []
    system = body.get("system")
    if system is not None:
        if not isinstance(system, str | list):
            raise WireError("system: Input should be a valid string or list of text blocks", "system")
        messages.append({"role": "system", "content": _content_text(system)})
    turns = body.get("messages")
    if not isinstance(turns, list):
        raise WireError("messages: Field required", "messages")
    for i, m in enumerate(turns):
        role = m.get("role") if isinstance(m, dict) else None
        if role == "system" and isinstance(m, dict):
            # system text between the turns (Claude Code sends its environment block so; the API takes it)
            messages.append({"role": "system", "content": _content_text(m.get("content") or "")})
            continue
        if role not in ("user", "assistant"):
            raise WireError(f"messages.{i}.role: Input should be 'user', 'assistant' or 'system'",
                            f"messages.{i}.role")
        content = m.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(blocks, list) or not all(isinstance(b, dict) for b in blocks):
            raise WireError(f"messages.{i}.content: Input should be a string or a list of blocks",
                            f"messages.{i}.content")
        if role == "assistant":
            turn = _assistant(messages)
            for b in blocks:
                if b.get("type") == "text":
                    turn["content"] += str(b.get("text", ""))
                elif b.get("type") == "tool_use":
                    args = msgspec.json.encode(b.get("input")).decode()
                    turn.setdefault("tool_calls", []).append(
                        {"id": b.get("id"), "type": "function", "function": {"name": b.get("name"), "arguments": args}})
            continue
        text: list[str] = []
        for b in blocks:
            if b.get("type") == "tool_result":
                result = b.get("content", "")
                if text:  # the real API wants tool results before any text in the turn
                    messages.append({"role": "user", "content": "".join(text)})
                    text = []
                messages.append({"role": "tool", "tool_call_id": b.get("tool_use_id"),
                                 "content": result if isinstance(result, str) else _content_text(result)})
            elif b.get("type") == "text":
                text.append(str(b.get("text", "")))
        if text or not any(b.get("type") == "tool_result" for b in blocks):
            messages.append({"role": "user", "content": "".join(text)})
    return messages


def _unanswered(protocol: str, ids: list[Any]) -> WireError:
    shown = ", ".join(map(str, ids))
    if protocol == "openai-responses":
        return WireError(f"No tool output found for function call {ids[0]}.", "input")
    if protocol == "anthropic-messages":
        return WireError(f"`tool_use` ids were found without `tool_result` blocks immediately after: {shown}. Each "
                         "`tool_use` block must have a corresponding `tool_result` block in the next message.",
                         "messages")
    return WireError("An assistant message with 'tool_calls' must be followed by tool messages responding to each "
                     f"'tool_call_id'. The following tool_call_ids did not have response messages: {shown}",
                     "messages")


def _unexpected(protocol: str, tid: Any) -> WireError:
    if protocol == "openai-responses":
        return WireError(f"No tool call found for function call output with call_id {tid}.", "input")
    if protocol == "anthropic-messages":
        return WireError(f"unexpected `tool_use_id` found in `tool_result` blocks: {tid}. Each `tool_result` block "
                         "must have a corresponding `tool_use` block in the previous message.", "messages")
    return WireError("Invalid parameter: messages with role 'tool' must be a response to a preceding message with "
                     "'tool_calls'.", "messages")


def _check_tool_results(protocol: str, messages: list[dict[str, Any]]) -> None:
    """Every tool call is answered right after its turn, and every tool result answers a call."""
    pending: list[Any] = []
    for m in [*messages, {"role": "end"}]:
        role = m.get("role")
        if role == "tool":
            tid = m.get("tool_call_id")
            if tid not in pending:
                raise _unexpected(protocol, tid)
            pending.remove(tid)
            continue
        if pending:
            raise _unanswered(protocol, pending)
        if role == "assistant":
            calls = m.get("tool_calls") or []
            pending = [c.get("id") for c in calls if isinstance(c, dict)]


# ---------------------------------------------------------------------- OpenAI chat completions


def _chat_usage(r: ScriptedReply) -> dict[str, Any]:
    return {"prompt_tokens": r.prompt_tokens, "completion_tokens": r.completion_tokens,
            "total_tokens": r.prompt_tokens + r.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": len(r.reasoning or "") // 4}}


def chat_json(r: ScriptedReply, model: str, cid: str, created: int) -> dict[str, Any]:
    """A ``chat.completion`` object."""
    message: dict[str, Any] = {"role": "assistant", "content": r.content if _has_text(r) else None}
    if r.reasoning is not None:
        message["reasoning_content"] = r.reasoning
    if r.tool_calls:
        message["tool_calls"] = [{"id": c.id, "type": "function",
                                  "function": {"name": c.name, "arguments": c.arguments}} for c in r.tool_calls]
    return {"id": cid, "object": "chat.completion", "created": created, "model": model,
            "choices": [{"index": 0, "message": message, "logprobs": None,
                         "finish_reason": "tool_calls" if r.tool_calls else "stop"}],
            "usage": _chat_usage(r)}


def chat_events(r: ScriptedReply, model: str, cid: str, created: int, include_usage: bool) -> Iterator[Event]:
    """``chat.completion.chunk`` events, then the usage chunk (when asked for) and ``[DONE]``."""
    extra = {"usage": None} if include_usage else {}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> Event:
        return None, {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                      "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}], **extra}

    yield chunk({"role": "assistant", "content": "" if _has_text(r) else None})
    for piece in pieces(r.reasoning or ""):
        yield chunk({"reasoning_content": piece})
    for piece in pieces(r.content):
        yield chunk({"content": piece})
    for i, c in enumerate(r.tool_calls):
        yield chunk({"tool_calls": [{"index": i, "id": c.id, "type": "function",
                                     "function": {"name": c.name, "arguments": ""}}]})
        for piece in pieces(c.arguments):
            yield chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
    yield chunk({}, "tool_calls" if r.tool_calls else "stop")
    if include_usage:
        yield None, {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                     "choices": [], "usage": _chat_usage(r)}
    yield None, b"[DONE]"


# ---------------------------------------------------------------------- OpenAI responses


def custom_tool_names(body: dict[str, Any]) -> frozenset[str]:
    """The names of the request's ``custom`` (freeform) tools: a call to one is a ``custom_tool_call`` whose
    ``input`` is the scripted arguments string as is (e.g. Codex's ``apply_patch``)."""
    tools = body.get("tools")
    if not isinstance(tools, list):
        return frozenset()
    return frozenset(t["name"] for t in tools
                     if isinstance(t, dict) and t.get("type") == "custom" and isinstance(t.get("name"), str))


def _responses_items(r: ScriptedReply, rid: str, custom: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
    tag = rid.removeprefix("resp_")
    items: list[dict[str, Any]] = []
    if r.reasoning is not None:
        items.append({"id": f"rs_{tag}", "type": "reasoning",
                      "summary": [{"type": "summary_text", "text": r.reasoning}]})
    if _has_text(r):
        items.append({"id": f"msg_{tag}", "type": "message", "status": "completed", "role": "assistant",
                      "content": [{"type": "output_text", "text": r.content, "annotations": [], "logprobs": []}]})
    for i, c in enumerate(r.tool_calls):
        if c.name in custom:
            items.append({"id": f"ctc_{tag}_{i}", "type": "custom_tool_call", "status": "completed", "call_id": c.id,
                          "name": c.name, "input": c.arguments})
            continue
        items.append({"id": f"fc_{tag}_{i}", "type": "function_call", "status": "completed", "call_id": c.id,
                      "name": c.name, "arguments": c.arguments})
    return items


def responses_json(r: ScriptedReply, model: str, rid: str, created: int, body: dict[str, Any],
                   status: str = "completed") -> dict[str, Any]:
    """A ``response`` object; ``status`` ``in_progress`` gives the one ``response.created`` carries."""
    done = status == "completed"
    asked = body.get("reasoning")
    reasoning: dict[str, Any] = asked if isinstance(asked, dict) else {}
    return {
        "id": rid, "object": "response", "created_at": created, "status": status, "error": None,
        "incomplete_details": None, "instructions": body.get("instructions"),
        "max_output_tokens": body.get("max_output_tokens"), "model": model,
        "output": _responses_items(r, rid, custom_tool_names(body)) if done else [],
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "previous_response_id": body.get("previous_response_id"),
        "reasoning": {"effort": reasoning.get("effort"), "summary": reasoning.get("summary")},
        "store": body.get("store", True), "temperature": body.get("temperature", 1.0),
        "text": {"format": {"type": "text"}}, "tool_choice": body.get("tool_choice", "auto"),
        "tools": body.get("tools", []), "top_p": body.get("top_p", 1.0), "truncation": "disabled",
        "usage": {"input_tokens": r.prompt_tokens, "input_tokens_details": {"cached_tokens": 0},
                  "output_tokens": r.completion_tokens,
                  "output_tokens_details": {"reasoning_tokens": len(r.reasoning or "") // 4},
                  "total_tokens": r.prompt_tokens + r.completion_tokens} if done else None,
        "user": None, "metadata": {},
    }


def responses_events(r: ScriptedReply, model: str, rid: str, created: int, body: dict[str, Any]) -> Iterator[Event]:
    """The Responses streaming events, ``response.created`` to ``response.completed`` (no ``[DONE]``)."""
    seq = 0

    def ev(kind: str, **fields: Any) -> Event:
        nonlocal seq
        seq += 1
        return kind, {"type": kind, "sequence_number": seq - 1, **fields}

    yield ev("response.created", response=responses_json(r, model, rid, created, body, "in_progress"))
    yield ev("response.in_progress", response=responses_json(r, model, rid, created, body, "in_progress"))
    for out, item in enumerate(_responses_items(r, rid, custom_tool_names(body))):
        ids = {"item_id": item["id"], "output_index": out}
        if item["type"] == "reasoning":
            text = item["summary"][0]["text"]
            yield ev("response.output_item.added", output_index=out, item={**item, "summary": []})
            yield ev("response.reasoning_summary_part.added", **ids, summary_index=0,
                     part={"type": "summary_text", "text": ""})
            for piece in pieces(text):
                yield ev("response.reasoning_summary_text.delta", **ids, summary_index=0, delta=piece)
            yield ev("response.reasoning_summary_text.done", **ids, summary_index=0, text=text)
            yield ev("response.reasoning_summary_part.done", **ids, summary_index=0,
                     part={"type": "summary_text", "text": text})
        elif item["type"] == "message":
            part = item["content"][0]
            yield ev("response.output_item.added", output_index=out,
                     item={**item, "status": "in_progress", "content": []})
            yield ev("response.content_part.added", **ids, content_index=0, part={**part, "text": ""})
            for piece in pieces(part["text"]):
                yield ev("response.output_text.delta", **ids, content_index=0, delta=piece, logprobs=[])
            yield ev("response.output_text.done", **ids, content_index=0, text=part["text"], logprobs=[])
            yield ev("response.content_part.done", **ids, content_index=0, part=part)
        elif item["type"] == "custom_tool_call":
            yield ev("response.output_item.added", output_index=out,
                     item={**item, "status": "in_progress", "input": ""})
            for piece in pieces(item["input"]):
                yield ev("response.custom_tool_call_input.delta", **ids, delta=piece)
            yield ev("response.custom_tool_call_input.done", **ids, input=item["input"])
        else:
            yield ev("response.output_item.added", output_index=out,
                     item={**item, "status": "in_progress", "arguments": ""})
            for piece in pieces(item["arguments"]):
                yield ev("response.function_call_arguments.delta", **ids, delta=piece)
            yield ev("response.function_call_arguments.done", **ids, name=item["name"], arguments=item["arguments"])
        yield ev("response.output_item.done", output_index=out, item=item)
    yield ev("response.completed", response=responses_json(r, model, rid, created, body))


# ---------------------------------------------------------------------- Anthropic messages


def _tool_input(c: ScriptedToolCall) -> dict[str, Any]:
    try:
        value = msgspec.json.decode(c.arguments)
    except msgspec.DecodeError:
        value = None
    return value if isinstance(value, dict) else {"arguments": c.arguments}  # `input` must be an object


def _anthropic_blocks(r: ScriptedReply) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if r.reasoning is not None:
        blocks.append({"type": "thinking", "thinking": r.reasoning, "signature": THINKING_SIGNATURE})
    if _has_text(r):
        blocks.append({"type": "text", "text": r.content})
    for c in r.tool_calls:
        blocks.append({"type": "tool_use", "id": "toolu_" + c.id.removeprefix("call_"), "name": c.name,
                       "input": _tool_input(c)})
    return blocks


def _anthropic_usage(r: ScriptedReply, output_tokens: int) -> dict[str, Any]:
    return {"input_tokens": r.prompt_tokens, "output_tokens": output_tokens,
            "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}


def anthropic_json(r: ScriptedReply, model: str, mid: str) -> dict[str, Any]:
    """A ``message`` object."""
    return {"id": mid, "type": "message", "role": "assistant", "model": model, "content": _anthropic_blocks(r),
            "stop_reason": "tool_use" if r.tool_calls else "end_turn", "stop_sequence": None,
            "usage": _anthropic_usage(r, r.completion_tokens)}


def anthropic_events(r: ScriptedReply, model: str, mid: str) -> Iterator[Event]:
    """The Messages streaming events, ``message_start`` to ``message_stop``."""
    start = {**anthropic_json(r, model, mid), "content": [], "stop_reason": None, "usage": _anthropic_usage(r, 1)}
    yield "message_start", {"type": "message_start", "message": start}
    yield "ping", {"type": "ping"}
    for i, block in enumerate(_anthropic_blocks(r)):
        kind = block["type"]
        if kind == "thinking":
            head: dict[str, Any] = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [{"type": "thinking_delta", "thinking": p} for p in pieces(block["thinking"])]
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        elif kind == "text":
            head = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": p} for p in pieces(block["text"])]
        else:
            head = {**block, "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": p}
                      for p in pieces(msgspec.json.encode(block["input"]).decode())]
        yield "content_block_start", {"type": "content_block_start", "index": i, "content_block": head}
        for d in deltas:
            yield "content_block_delta", {"type": "content_block_delta", "index": i, "delta": d}
        yield "content_block_stop", {"type": "content_block_stop", "index": i}
    yield "message_delta", {"type": "message_delta",
                            "delta": {"stop_reason": "tool_use" if r.tool_calls else "end_turn", "stop_sequence": None},
                            "usage": {"output_tokens": r.completion_tokens}}
    yield "message_stop", {"type": "message_stop"}


_ANTHROPIC_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                          404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
                          529: "overloaded_error"}


def anthropic_error(status: int, message: str) -> dict[str, Any]:
    """An Anthropic-shaped error body for ``status``."""
    kind = _ANTHROPIC_ERROR_TYPES.get(status) or ("api_error" if status >= 500 else "invalid_request_error")
    return {"type": "error", "error": {"type": kind, "message": message}}
