"""The gateway's usage ledger and the usage parsers for the three wire protocols.

Every call through the gateway ends as one ``CallRecord`` (status, latency, tokens, retries) added to the
ledger under its ``AttemptKey`` (request, task, attempt, try). The engine takes an attempt's aggregate
when the try ends (``Ledger.take``); per-request totals are kept for the whole launch. Memory is bounded
by the number of open tries, not by the number of calls.

Token usage is read from JSON bodies and from the final usage events of SSE streams:

- chat completions: ``usage.{prompt_tokens, completion_tokens, prompt_tokens_details.cached_tokens}``
  (in a stream: the chunk carrying ``usage``, sent when ``stream_options.include_usage`` is set);
- responses: ``usage.{input_tokens, output_tokens, input_tokens_details.cached_tokens}`` (in a stream:
  the ``response`` of ``response.completed`` / ``response.incomplete`` / ``response.failed``);
- anthropic messages: ``usage.{input_tokens, output_tokens, cache_read_input_tokens,
  cache_creation_input_tokens}`` (in a stream: ``message_start`` then the cumulative ``message_delta``);
  ``prompt_tokens`` counts all input, cached or not, as in the OpenAI protocols.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal
from typing import Protocol as _Protocol

import msgspec

from ...records import Usage
from ..clients.deadline import KEEPALIVE_EVENTS
from ..waiting import WaitClock
from .envelope import AttemptKey

Protocol = Literal["chat", "responses", "messages", "other"]
_DEC = msgspec.json.Decoder()
#: SSE event boundary: a blank line (``\n\n``, ``\r\n\r\n`` or mixed).
EVENT_END = re.compile(rb"\r?\n\r?\n")


def protocol_of(path: str) -> Protocol:
    """The wire protocol of a path below ``/v1`` (``chat/completions``, ``responses``, ``messages``)."""
    p = path.strip("/")
    if p == "chat/completions" or p == "completions":
        return "chat"
    if p == "responses":
        return "responses"
    if p == "messages":
        return "messages"
    return "other"


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def usage_from(u: Any, protocol: Protocol) -> Usage | None:
    """A ``Usage`` (calls=0) from a protocol's usage object, or None when there is none."""
    if not isinstance(u, Mapping):
        return None
    if "prompt_tokens" in u or "completion_tokens" in u:
        prompt, completion = _int(u.get("prompt_tokens")), _int(u.get("completion_tokens"))
        details = u.get("prompt_tokens_details")
        cached = _int(details.get("cached_tokens")) if isinstance(details, Mapping) else 0
        return Usage(prompt_tokens=prompt, completion_tokens=completion,
                     total_tokens=_int(u.get("total_tokens")) or prompt + completion, cached_tokens=cached)
    if "input_tokens" in u or "output_tokens" in u:
        inp, out = _int(u.get("input_tokens")), _int(u.get("output_tokens"))
        if protocol == "messages" or "cache_read_input_tokens" in u or "cache_creation_input_tokens" in u:
            cached = _int(u.get("cache_read_input_tokens"))
            prompt = inp + cached + _int(u.get("cache_creation_input_tokens"))
            return Usage(prompt_tokens=prompt, completion_tokens=out, total_tokens=prompt + out,
                         cached_tokens=cached)
        details = u.get("input_tokens_details")
        cached = _int(details.get("cached_tokens")) if isinstance(details, Mapping) else 0
        return Usage(prompt_tokens=inp, completion_tokens=out,
                     total_tokens=_int(u.get("total_tokens")) or inp + out, cached_tokens=cached)
    return None


def usage_from_body(body: bytes, protocol: Protocol) -> Usage | None:
    """Usage of a (non-streamed) JSON response body; None when it has none or is not JSON."""
    try:
        obj = _DEC.decode(body)
    except msgspec.DecodeError:
        return None
    return usage_from(obj.get("usage"), protocol) if isinstance(obj, dict) else None


def _event_data(event: bytes) -> bytes:
    lines = []
    for line in event.splitlines():
        if line.startswith(b"data:"):
            value = line[5:]
            lines.append(value[1:] if value.startswith(b" ") else value)
    return b"\n".join(lines)


def is_keepalive(event: bytes) -> bool:
    """Whether one SSE event (without its blank line) only keeps the connection alive: comments or other
    fields without data, or an event whose name or data ``type`` is ``ping``/``keepalive`` (Anthropic).
    ``data: [DONE]`` is progress. Content events without those words are told apart without decoding."""
    if not (event.startswith(b"data") or b"\ndata" in event):
        return True
    if b"ping" not in event and b"keepalive" not in event:
        return False
    for line in event.splitlines():
        if line.startswith(b"event:") and line[6:].strip().decode("utf-8", "replace") in KEEPALIVE_EVENTS:
            return True
    try:
        obj = _DEC.decode(_event_data(event))
    except msgspec.DecodeError:
        return False
    kind = obj.get("type") if isinstance(obj, dict) else None
    return isinstance(kind, str) and kind in KEEPALIVE_EVENTS


class StreamUsage:
    """Reads usage out of one SSE stream, event by event (``feed`` each complete event).

    With ``drop_injected_usage`` (the gateway asked a chat stream for usage the client did not ask for)
    ``feed`` returns False for the usage-only chunk, so the client sees the stream it asked for.
    """

    def __init__(self, protocol: Protocol, *, drop_injected_usage: bool = False) -> None:
        self.protocol = protocol
        self.drop_injected_usage = drop_injected_usage
        self.usage: Usage | None = None
        #: the stream's terminal event went by (``response.completed`` / ``response.incomplete``)
        self.finished = False

    def feed(self, event: bytes) -> bool:
        """Look at one event (without its terminating blank line); returns whether to forward it."""
        if b"usage" not in event:  # content deltas: the vast majority, not decoded
            return True
        data = _event_data(event)
        if not data or data == b"[DONE]":
            return True
        try:
            obj = _DEC.decode(data)
        except msgspec.DecodeError:
            return True
        if not isinstance(obj, dict):
            return True
        if self.protocol == "responses" or obj.get("type", "").startswith("response."):
            resp = obj.get("response")
            if obj.get("type") in ("response.completed", "response.incomplete"):
                self.finished = True
            if isinstance(resp, dict) and resp.get("usage") is not None:
                self.usage = usage_from(resp.get("usage"), "responses") or self.usage
            return True
        if self.protocol == "messages" or obj.get("type") in ("message_start", "message_delta"):
            self._anthropic(obj)
            return True
        found = usage_from(obj.get("usage"), "chat")
        if found is not None:
            self.usage = found
            if self.drop_injected_usage and not obj.get("choices"):
                return False
        return True

    def _anthropic(self, obj: dict[str, Any]) -> None:
        kind = obj.get("type")
        if kind == "message_start" and isinstance(obj.get("message"), dict):
            self.usage = usage_from(obj["message"].get("usage"), "messages") or self.usage
        elif kind == "message_delta" and isinstance(obj.get("usage"), Mapping):
            delta = obj["usage"]
            base = self.usage or Usage()
            # output_tokens is cumulative; newer APIs may restate the input counts here too
            merged = usage_from({"input_tokens": 0, **delta}, "messages") or Usage()
            prompt = merged.prompt_tokens or base.prompt_tokens
            cached = merged.cached_tokens or base.cached_tokens
            out = merged.completion_tokens or base.completion_tokens
            self.usage = Usage(prompt_tokens=prompt, completion_tokens=out, total_tokens=prompt + out,
                               cached_tokens=cached)


class CallBudget(_Protocol):
    """A try's limits on model use (the engine's ``AttemptBudget``): asked before each call, charged after."""

    def admit(self) -> str | None:
        """None when the call may be made; else why not."""
        ...

    def charge(self, usage: Usage | None) -> None:
        """Count one answered call and its tokens."""
        ...

    @property
    def wait_clock(self) -> WaitClock | None:
        """Where the try's calls report their time waiting for a slot or a retry (None: not counted)."""
        ...


class CallRecord(msgspec.Struct, omit_defaults=True):
    """One call through the gateway (after its retries)."""

    path: str
    status: int
    latency_s: float
    stream: bool = False
    retries: int = 0
    usage: Usage | None = None
    error: str | None = None


class GatewayUsage(msgspec.Struct, omit_defaults=True):
    """What the gateway saw for one key (or one request): calls, failures, tokens and time."""

    calls: int = 0
    failed: int = 0
    retries: int = 0
    no_usage: int = 0  # successful calls whose response carried no usage
    latency_s: float = 0.0
    usage: Usage = msgspec.field(default_factory=Usage)

    def add(self, rec: CallRecord) -> None:
        self.calls += 1
        self.retries += rec.retries
        self.latency_s = round(self.latency_s + rec.latency_s, 6)
        if rec.status >= 400 or rec.error is not None:
            self.failed += 1
        elif rec.usage is None:
            self.no_usage += 1
        u = Usage(calls=1, retries=rec.retries)
        if rec.usage is not None:
            u.add(rec.usage)
        self.usage.add(u)

    def merge(self, other: GatewayUsage) -> None:
        self.calls += other.calls
        self.failed += other.failed
        self.retries += other.retries
        self.no_usage += other.no_usage
        self.latency_s = round(self.latency_s + other.latency_s, 6)
        self.usage.add(other.usage)


class Ledger:
    """Aggregates per open key and per request."""

    def __init__(self) -> None:
        self._open: dict[AttemptKey, GatewayUsage] = {}
        self.by_request: dict[str, GatewayUsage] = {}

    def record(self, key: AttemptKey, rec: CallRecord) -> None:
        """Book one finished call."""
        entry = self._open.get(key)
        if entry is not None:  # else the try already ended (a straggler): counted for its request only
            entry.add(rec)
        self.by_request.setdefault(key.request, GatewayUsage()).add(rec)

    def open(self, key: AttemptKey) -> None:
        """Start collecting for ``key``."""
        self._open.setdefault(key, GatewayUsage())

    def take(self, key: AttemptKey) -> GatewayUsage:
        """Stop collecting for ``key`` and return what it used."""
        return self._open.pop(key, None) or GatewayUsage()
