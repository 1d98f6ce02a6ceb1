"""The scripted model served as a real HTTP server speaking the OpenAI and Anthropic wire formats.

Serves ``POST /v1/chat/completions`` (OpenAI chat), ``POST /v1/responses`` (OpenAI Responses) and
``POST /v1/messages`` (Anthropic Messages; ``x-api-key`` and ``anthropic-version`` headers), each as JSON or
as SSE when ``stream: true``, plus ``GET /v1/models`` and ``GET /health``, over HTTP/1.1 keep-alive. Replies
come from the same ``ScriptedPolicy`` as the in-process client for every protocol (see ``scripted_wire``), so
a run against ``base_url`` behaves exactly like one against the in-process ``scripted`` model. Errors come
in each API's shape.
For tests it can require an API key, add latency, fail every Nth completion with a given status, inject
faults from a seeded random plan (``FaultPlan``: HTTP error statuses, garbage bodies, hangs, closed
connections, keep-alive-only answers, trickled bodies), pace streamed events (``stream_interval_s``), and it
keeps the last request bodies in ``recent_requests``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import email.utils
import hmac
import random
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Iterable, Mapping
from http import HTTPStatus
from typing import Any

import msgspec

from ..._errors import ConfigError
from . import wire
from .model import ScriptedPolicy, tool_names

_MAX_HEADER_BYTES = 64 * 1024
_COMPLETION_PATHS = {"/v1/chat/completions": "openai-chat", "/chat/completions": "openai-chat",
                     "/v1/responses": "openai-responses", "/responses": "openai-responses",
                     "/v1/messages": "anthropic-messages", "/messages": "anthropic-messages"}
_ENC = msgspec.json.Encoder()
_DEC = msgspec.json.Decoder()


class _Reply(Exception):
    """An error answer: status, OpenAI-shaped error body, and whether the connection must close."""

    def __init__(self, status: int, message: str, *, type_: str = "invalid_request_error",
                 code: str | None = None, param: str | None = None, close: bool = False,
                 headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.body = {"error": {"message": message, "type": type_, "param": param, "code": code}}
        self.close = close
        self.headers = dict(headers or {})
        self.protocol = "openai-chat"  # the API whose error shape the answer takes


FAULT_KINDS = ("garbage", "hang", "close", "ping", "trickle", "huge")
#: how much a ``huge`` fault sends at most (generated on the fly, 64 KiB at a time, never held whole).
HUGE_BODY_BYTES = 1 << 30
_GARBAGE = b"<html><body><h1>502 Bad Gateway</h1> upstream sent an invalid response</body></html>"


class FaultPlan:
    """Which completion requests fail, and how: a seeded, reproducible draw per request.

    ``faults`` maps a fault to its probability (their sum at most 1): an HTTP status ``"400"``-``"599"``
    (answered with an OpenAI-shaped error body), ``garbage`` (200 with a body that is not JSON), ``hang``
    (never answer; the connection stays open until the client gives up or the server stops), ``close``
    (close the connection without answering), ``ping`` (a 200 that only ever sends keep-alives: SSE
    ``: ping`` comments, Anthropic ``ping`` events, or whitespace in a chunked JSON body, every
    ``fault_interval_s``) or ``trickle`` (the real answer, one byte every ``fault_interval_s``). The n-th
    completion request always gets the n-th draw of ``random.Random(seed)``, so a plan injects the same faults
    in the same order every run.
    """

    def __init__(self, faults: Mapping[str | int, float], seed: int = 0) -> None:
        allowed = f"an HTTP status 400-599 or one of {', '.join(FAULT_KINDS)}"
        self._ranges: list[tuple[str, float]] = []
        for raw_key, prob in faults.items():
            key = str(raw_key).strip().lower()
            if not (key in FAULT_KINDS or (key.isdigit() and 400 <= int(key) <= 599)):
                raise ConfigError(f"Unknown fault {raw_key!r}; allowed: {allowed}.", field="faults")
            if isinstance(prob, bool) or not isinstance(prob, int | float) or not 0 <= prob <= 1:
                raise ConfigError(f"Fault {key!r} needs a probability between 0 and 1, got {prob!r}.",
                                  field=f"faults.{key}")
            self._ranges.append((key, float(prob)))
        total = sum(p for _, p in self._ranges)
        if total > 1 + 1e-9:
            raise ConfigError(f"Fault probabilities add up to {total:g}; they must add up to at most 1.",
                              field="faults")
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ConfigError(f"fault_seed must be an integer, got {seed!r}.", field="fault_seed")
        # a fixed order, so the plan does not depend on the order the mapping was written in
        self._ranges.sort(key=lambda kp: (not kp[0].isdigit(), kp[0]))
        self._rng = random.Random(seed)
        self.injected: dict[str, int] = {k: 0 for k, _ in self._ranges}

    def draw(self) -> str | None:
        """The fault for the next request, or None to answer normally."""
        x = self._rng.random()
        acc = 0.0
        for key, prob in self._ranges:
            acc += prob
            if x < acc:
                self.injected[key] += 1
                return key
        return None


async def _write(writer: asyncio.StreamWriter, data: bytes, pace: float) -> None:
    """Write ``data``; with ``pace`` > 0, one byte every ``pace`` seconds (a trickling server)."""
    if not pace:
        writer.write(data)
        await writer.drain()
        return
    for i in range(len(data)):
        if i:
            await asyncio.sleep(pace)
        writer.write(data[i:i + 1])
        await writer.drain()


def _head(status: int, headers: Mapping[str, str]) -> bytes:
    # statuses http.HTTPStatus lacks are real too (Anthropic's 529 overloaded)
    phrase = HTTPStatus(status).phrase if status in HTTPStatus._value2member_map_ else "Error"
    lines = [f"HTTP/1.1 {status} {phrase}", "Server: agentcompass-scripted"]
    lines.extend(f"{k}: {v}" for k, v in headers.items())
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


class ScriptedServer:
    """An OpenAI/Anthropic-compatible server answering from a ``ScriptedPolicy``. ``async with`` or start/stop.

    ``fail_status``/``fail_every``/``retry_after`` make every ``fail_every``-th completion fail with that
    status (and a ``Retry-After`` header). ``faults``/``fault_seed`` inject faults from a ``FaultPlan``
    (a 429 gets ``Retry-After: retry_after`` when set: seconds, or a str sent as is, e.g. an HTTP date);
    ``faults_injected`` counts them by kind;
    ``fault_interval_s`` paces the ``ping`` and ``trickle`` faults. ``stream_interval_s`` waits that long
    between the events of every streamed answer (a slow but steadily progressing model).
    ``requests_served`` counts every HTTP request answered,
    ``completions_served`` the successful completions; ``connections_accepted`` and ``peak_connections``
    show how clients pooled their connections.
    """

    def __init__(self, params: Mapping[str, Any] | None = None, *, host: str = "127.0.0.1", port: int = 0,
                 require_api_key: str | None = None, latency_s: float | None = None,
                 model_id: str = "scripted", fail_status: int | None = None, fail_every: int = 1,
                 retry_after: float | str | None = None, faults: Mapping[str | int, float] | None = None,
                 fault_seed: int = 0, fault_interval_s: float = 0.1, stream_interval_s: float = 0.0,
                 record_requests: int = 32,
                 max_body_bytes: int = 16 * 1024 * 1024, idle_timeout: float = 120.0,
                 backlog: int = 1024, max_concurrent: int | None = None) -> None:
        self.policy = ScriptedPolicy(params)
        if max_concurrent is not None and (isinstance(max_concurrent, bool) or not isinstance(max_concurrent, int)
                                           or max_concurrent < 1):
            raise ConfigError(f"max_concurrent must be an integer >= 1, got {max_concurrent!r}.",
                              field="max_concurrent")
        #: completion calls served at once (any protocol); beyond it: 429 with Retry-After (``retry_after``, else 1 s).
        self.max_concurrent = max_concurrent
        self.active_completions = 0
        self.peak_active_completions = 0
        self.rejected_concurrent = 0
        self.host = host
        self.port = port
        self.model_id = model_id
        self.require_api_key = require_api_key or None
        self.latency_s = self.policy.latency_s if latency_s is None else latency_s
        if fail_status is not None and not 400 <= fail_status <= 599:
            raise ConfigError(f"fail_status must be an HTTP error status (400-599), got {fail_status}.",
                              field="fail_status")
        if fail_every < 1:
            raise ConfigError(f"fail_every must be >= 1, got {fail_every}.", field="fail_every")
        self.fail_status = fail_status
        self.fail_every = fail_every
        if isinstance(retry_after, str):
            if email.utils.parsedate_tz(retry_after) is None:
                raise ConfigError(f"retry_after must be a number of seconds >= 0 or an HTTP date, got "
                                  f"{retry_after!r}.", field="retry_after")
        elif retry_after is not None and (isinstance(retry_after, bool) or not isinstance(retry_after, int | float)
                                          or not 0 <= retry_after < float("inf")):
            raise ConfigError(f"retry_after must be a number of seconds >= 0 or an HTTP date, got {retry_after!r}.",
                              field="retry_after")
        self.retry_after = retry_after
        for name, value, low in (("fault_interval_s", fault_interval_s, "> 0"),
                                 ("stream_interval_s", stream_interval_s, ">= 0")):
            if (isinstance(value, bool) or not isinstance(value, int | float) or value < 0
                    or (value == 0 and low == "> 0")):
                raise ConfigError(f"{name} must be a number of seconds {low}, got {value!r}.", field=name)
        self.fault_interval_s = float(fault_interval_s)
        self.stream_interval_s = float(stream_interval_s)
        self.fault_plan = FaultPlan(faults, fault_seed) if faults else None
        self.max_body_bytes = max_body_bytes
        self.idle_timeout = idle_timeout
        self.backlog = backlog
        self.base_url: str | None = None
        self.requests_served = 0
        self.completions_served = 0
        self.connections_accepted = 0
        self.peak_connections = 0
        self.recent_requests: deque[dict[str, Any]] = deque(maxlen=record_requests)
        self._chat_requests = 0
        self._server: asyncio.Server | None = None
        self._conns: set[asyncio.Task[Any]] = set()

    @property
    def faults_injected(self) -> dict[str, int]:
        """How many faults of each kind were injected so far."""
        return dict(self.fault_plan.injected) if self.fault_plan else {}

    @property
    def open_connections(self) -> int:
        """Connections being served right now (a hung request keeps its connection open)."""
        return len(self._conns)

    async def __aenter__(self) -> ScriptedServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def start(self) -> str:
        """Listen and return the base URL (``http://host:port/v1``)."""
        if self._server is not None:
            raise RuntimeError("ScriptedServer already started")
        self._server = await asyncio.start_server(self._on_connect, self.host, self.port,
                                                  limit=_MAX_HEADER_BYTES, backlog=self.backlog)
        self.port = self._server.sockets[0].getsockname()[1]
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.base_url = f"http://{host}:{self.port}/v1"
        return self.base_url

    async def stop(self) -> None:
        """Stop listening and drop every open connection (bounded in time, idempotent)."""
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        conns = list(self._conns)
        for t in conns:
            t.cancel()
        if conns:
            await asyncio.wait(conns, timeout=5.0)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(5.0):
                await server.wait_closed()

    # ------------------------------------------------------------------ connection handling

    async def _on_connect(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._conns.add(task)
        self.connections_accepted += 1
        self.peak_connections = max(self.peak_connections, len(self._conns))
        try:
            await self._serve_connection(reader, writer)
        except asyncio.CancelledError:
            # only stop() cancels; on Python 3.11 a cancelled connection task would be logged as an error
            pass
        except (ConnectionError, asyncio.IncompleteReadError, TimeoutError):
            pass
        finally:
            self._conns.discard(task)
            writer.close()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                async with asyncio.timeout(1.0):
                    await writer.wait_closed()

    async def _serve_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                async with asyncio.timeout(self.idle_timeout):
                    head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, TimeoutError):
                return
            except asyncio.LimitOverrunError:
                await self._send_error(writer, _Reply(431, "Request headers are too large.", close=True))
                return
            try:
                keep_alive = await self._serve_request(head, reader, writer)
            except _Reply as r:
                await self._send_error(writer, r)
                keep_alive = not r.close
            except (ConnectionError, asyncio.IncompleteReadError, TimeoutError):
                raise
            except Exception as exc:  # a bug here must answer 500, not leave the client hanging
                await self._send_error(writer, _Reply(500, f"Internal error: {type(exc).__name__}",
                                                      type_="server_error", close=True))
                return
            if not keep_alive:
                return

    async def _serve_request(self, head: bytes, reader: asyncio.StreamReader,
                             writer: asyncio.StreamWriter) -> bool:
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            raise _Reply(400, "Malformed HTTP request line.", close=True)
        method, target, version = parts
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if not line:
                continue
            name, sep, value = line.partition(":")
            if not sep:
                raise _Reply(400, "Malformed HTTP header line.", close=True)
            headers[name.strip().lower()] = value.strip()
        conn = headers.get("connection", "").lower()
        keep_alive = "keep-alive" in conn if version == "HTTP/1.0" else "close" not in conn

        if "chunked" in headers.get("transfer-encoding", "").lower():
            raise _Reply(411, "Chunked request bodies are not supported; send Content-Length.", close=True)
        try:
            length = int(headers.get("content-length", "0"))
        except ValueError:
            raise _Reply(400, "Invalid Content-Length header.", close=True) from None
        if length < 0:
            raise _Reply(400, "Invalid Content-Length header.", close=True)
        if length > self.max_body_bytes:
            raise _Reply(413, f"Request body of {length} bytes exceeds the limit of {self.max_body_bytes}.",
                         close=True)
        body = b""
        if length:
            if headers.get("expect", "").lower() == "100-continue":
                writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            async with asyncio.timeout(self.idle_timeout):
                body = await reader.readexactly(length)

        path = target.split("?", 1)[0].rstrip("/")
        self.requests_served += 1
        if path == "/health":
            await self._send_json(writer, 200, {"status": "ok"}, keep_alive)
            return keep_alive
        protocol = _COMPLETION_PATHS.get(path)
        if protocol is not None:
            try:
                self._check_auth(headers, protocol)
                if method != "POST":
                    raise _Reply(405, f"Method {method} not allowed on {path}; use POST.")
                return await self._admitted(body, reader, writer, keep_alive, protocol=protocol, headers=headers)
            except _Reply as r:
                r.protocol = protocol
                raise
        self._check_auth(headers)
        if path in ("/v1/models", "/models"):
            if method != "GET":
                raise _Reply(405, f"Method {method} not allowed on {path}; use GET.")
            await self._send_json(writer, 200, {"object": "list", "data": [
                {"id": self.model_id, "object": "model", "created": 0, "owned_by": "agentcompass"}]},
                keep_alive)
            return keep_alive
        raise _Reply(404, f"Unknown request URL: {method} {path}.", code="unknown_url")

    def _check_auth(self, headers: Mapping[str, str], protocol: str = "openai-chat") -> None:
        if protocol == "anthropic-messages":
            if self.require_api_key is not None:
                key = headers.get("x-api-key", "")
                if not key:
                    raise _Reply(401, "x-api-key header is required")
                if not hmac.compare_digest(key.strip().encode(), self.require_api_key.encode()):
                    raise _Reply(401, "invalid x-api-key")
            if not headers.get("anthropic-version"):
                raise _Reply(400, "anthropic-version: header is required")
            return
        if self.require_api_key is None:
            return
        scheme, _, token = headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(),
                                                                 self.require_api_key.encode()):
            # like OpenAI, never echo the key that was sent
            raise _Reply(401, "Incorrect API key provided.", code="invalid_api_key")

    # ------------------------------------------------------------------ completions (all protocols)

    async def _chat(self, raw: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    keep_alive: bool, *, protocol: str = "openai-chat",
                    headers: Mapping[str, str] | None = None) -> bool:
        try:
            body = _DEC.decode(raw)
        except msgspec.DecodeError:
            raise _Reply(400, "We could not parse the JSON body of your request.") from None
        if not isinstance(body, dict):
            raise _Reply(400, "The request body must be a JSON object.")
        try:
            messages = wire.request_messages(protocol, body)
        except wire.WireError as exc:
            raise _Reply(400, str(exc), param=exc.param) from None
        self.recent_requests.append(body)
        self._chat_requests += 1
        if self.fail_status is not None and self._chat_requests % self.fail_every == 0:
            raise self._injected_status(self.fail_status, "failure", always_retry_after=True)
        stream = body.get("stream") is True
        fault = self.fault_plan.draw() if self.fault_plan else None
        if fault is not None and fault != "trickle":
            return await self._inject(fault, reader, writer, keep_alive, protocol=protocol, stream=stream)
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        tools = body.get("tools")
        r = self.policy.respond(messages, tool_names(tools if isinstance(tools, list) else None))
        requested = body.get("model")
        model = requested if isinstance(requested, str) else self.model_id
        n = self._chat_requests
        created = int(time.time())
        # a trickled answer counts once it is all out (a client that gave up never got it)
        pace = self.fault_interval_s if fault == "trickle" else 0.0
        if not pace:
            self.completions_served += 1
        if protocol == "openai-responses":
            rid = f"resp_scripted{n:x}"
            if stream:
                await self._stream(writer, wire.responses_events(r, model, rid, created, body), keep_alive, pace)
            else:
                await self._send_json(writer, 200, wire.responses_json(r, model, rid, created, body), keep_alive,
                                      pace=pace)
        elif protocol == "anthropic-messages":
            mid = f"msg_scripted{n:x}"
            if stream:
                await self._stream(writer, wire.anthropic_events(r, model, mid), keep_alive, pace)
            else:
                await self._send_json(writer, 200, wire.anthropic_json(r, model, mid), keep_alive, pace=pace)
        else:
            cid = f"chatcmpl-scripted-{n:x}"
            if stream:
                opts = body.get("stream_options")
                include_usage = isinstance(opts, dict) and opts.get("include_usage") is True
                await self._stream(writer, wire.chat_events(r, model, cid, created, include_usage), keep_alive,
                                   pace)
            else:
                await self._send_json(writer, 200, wire.chat_json(r, model, cid, created), keep_alive, pace=pace)
        if pace:
            self.completions_served += 1
        return keep_alive

    async def _admitted(self, raw: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                        keep_alive: bool, **kw: Any) -> bool:
        """``_chat`` behind the ``max_concurrent`` gate (a rate-limited endpoint's behaviour)."""
        if self.max_concurrent is not None and self.active_completions >= self.max_concurrent:
            self.rejected_concurrent += 1
            raise _Reply(429, f"Too many concurrent requests (limit {self.max_concurrent}).",
                         type_="rate_limit_exceeded", code="rate_limit_exceeded",
                         headers={"Retry-After": self._retry_after_header(1.0)})
        self.active_completions += 1
        self.peak_active_completions = max(self.peak_active_completions, self.active_completions)
        try:
            return await self._chat(raw, reader, writer, keep_alive, **kw)
        finally:
            self.active_completions -= 1

    def _retry_after_header(self, default: float) -> str:
        ra = default if self.retry_after is None else self.retry_after
        if isinstance(ra, str):
            return ra
        return str(int(ra)) if float(ra).is_integer() else f"{ra:g}"

    def _injected_status(self, status: int, what: str, *, always_retry_after: bool = False) -> _Reply:
        send = self.retry_after is not None and (status == 429 or always_retry_after)
        extra = {"Retry-After": self._retry_after_header(0.0)} if send else {}
        kind = ("rate_limit_exceeded" if status == 429 else "server_error" if status >= 500
                else "invalid_request_error")
        return _Reply(status, f"Injected {what} ({status}).", type_=kind, headers=extra)

    async def _inject(self, fault: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                      keep_alive: bool, *, protocol: str = "openai-chat", stream: bool = False) -> bool:
        """Apply ``fault`` (any but ``trickle``) to this request; returns whether the connection stays open."""
        if fault == "garbage":
            writer.write(_head(200, {"Content-Type": "application/json", "Content-Length": str(len(_GARBAGE)),
                                     "Connection": "keep-alive" if keep_alive else "close"}) + _GARBAGE)
            await writer.drain()
            return keep_alive
        if fault == "hang":
            # never answer: wait for the client to give up (EOF); stop() cancels this wait
            while await reader.read(4096):
                pass
            return False
        if fault == "close":
            return False
        if fault == "ping":
            await self._keepalive_forever(reader, writer, protocol, stream)
            return False
        if fault == "huge":
            await self._huge_body(writer, stream)
            return False
        raise self._injected_status(int(fault), "fault")

    async def _huge_body(self, writer: asyncio.StreamWriter, stream: bool) -> None:
        """A 200 whose body grows to ``HUGE_BODY_BYTES`` (one endless content string or delta events),
        generated 64 KiB at a time, until the client leaves."""
        filler = b"A" * (64 << 10)
        if stream:
            kind = "text/event-stream; charset=utf-8"
            head = b""
            piece = (b'data: {"id":"huge","object":"chat.completion.chunk","created":0,"model":"huge",'
                     b'"choices":[{"index":0,"delta":{"content":"' + filler + b'"}}]}\n\n')
        else:
            kind = "application/json"
            head = b'{"id":"huge","object":"chat.completion","created":0,"model":"huge","choices":[{"index":0,' \
                   b'"message":{"role":"assistant","content":"'
            piece = filler
        writer.write(_head(200, {"Content-Type": kind, "Transfer-Encoding": "chunked", "Connection": "close"}))
        sent = 0
        with contextlib.suppress(ConnectionError):
            if head:
                writer.write(b"%x\r\n%s\r\n" % (len(head), head))
            chunk = b"%x\r\n%s\r\n" % (len(piece), piece)
            while sent < HUGE_BODY_BYTES and not writer.is_closing():
                writer.write(chunk)
                await writer.drain()
                sent += len(piece)

    async def _keepalive_forever(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                                 protocol: str, stream: bool) -> None:
        """A 200 whose body only ever keeps the connection alive, until the client leaves or stop()."""
        if stream:
            kind = "text/event-stream; charset=utf-8"
            beat = (b'event: ping\ndata: {"type": "ping"}\n\n' if protocol == "anthropic-messages"
                    else b": ping\n\n")
        else:  # leading whitespace is valid JSON; proxies send it to keep idle connections open
            kind, beat = "application/json", b"\n"
        writer.write(_head(200, {"Content-Type": kind, "Cache-Control": "no-cache", "Transfer-Encoding": "chunked",
                                 "Connection": "close"}))
        chunk = b"%x\r\n%s\r\n" % (len(beat), beat)
        while not reader.at_eof():
            writer.write(chunk)
            await writer.drain()
            await asyncio.sleep(self.fault_interval_s)

    async def _stream(self, writer: asyncio.StreamWriter, events: Iterable[wire.Event], keep_alive: bool,
                      pace: float = 0.0) -> None:
        """Send ``events`` as SSE in HTTP chunks (``event:`` lines when named), then the last chunk.

        ``stream_interval_s`` apart; with ``pace``, the body goes out one byte every ``pace`` seconds."""
        writer.write(_head(200, {"Content-Type": "text/event-stream; charset=utf-8",
                                 "Cache-Control": "no-cache", "Transfer-Encoding": "chunked",
                                 "Connection": "keep-alive" if keep_alive else "close"}))
        for i, (name, data) in enumerate(events):
            if i and self.stream_interval_s:
                await asyncio.sleep(self.stream_interval_s)
            payload = (b"event: %s\n" % name.encode() if name else b"") + b"data: " + (
                data if isinstance(data, bytes) else _ENC.encode(data)) + b"\n\n"
            await _write(writer, b"%x\r\n%s\r\n" % (len(payload), payload), pace)
        await _write(writer, b"0\r\n\r\n", pace)

    # ------------------------------------------------------------------ writing

    async def _send_json(self, writer: asyncio.StreamWriter, status: int, obj: Any, keep_alive: bool,
                         headers: Mapping[str, str] | None = None, *, pace: float = 0.0) -> None:
        data = _ENC.encode(obj)
        head = _head(status, {"Content-Type": "application/json", "Content-Length": str(len(data)),
                              "Connection": "keep-alive" if keep_alive else "close", **(headers or {})})
        if pace:
            writer.write(head)
        await _write(writer, data if pace else head + data, pace)

    async def _send_error(self, writer: asyncio.StreamWriter, r: _Reply) -> None:
        body = (wire.anthropic_error(r.status, str(r)) if r.protocol == "anthropic-messages" else r.body)
        await self._send_json(writer, r.status, body, not r.close, r.headers)


# ---------------------------------------------------------------------- blocking entry points


def spawn_server_process(*args: str, env: Mapping[str, str] | None = None,
                         capture_stderr: bool = False) -> tuple[subprocess.Popen[str], str]:
    """Start ``agentcompass serve-scripted --port 0 *args`` as a child process; (process, base URL).

    For tests and benchmarks that want the server outside their own event loop. Stop it with
    ``stop_process``."""
    proc = subprocess.Popen([sys.executable, "-m", "agentcompass.cli", "serve-scripted", "--port", "0", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE if capture_stderr else subprocess.DEVNULL,
                            text=True, env=None if env is None else dict(env))
    assert proc.stdout is not None
    line = proc.stdout.readline()
    url = next((w for w in line.split() if w.startswith("http://")), None)
    if url is None:
        proc.kill()
        err = proc.stderr.read() if proc.stderr else ""
        proc.wait(5)
        raise RuntimeError(f"scripted server did not start: {line!r} {err}")
    return proc, url


def stop_process(proc: subprocess.Popen[Any], timeout: float = 10.0) -> None:
    """SIGTERM ``proc``, SIGKILL it if it is still there after ``timeout`` seconds, and reap it."""
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


def serve_forever(host: str = "127.0.0.1", port: int = 8000, params: Mapping[str, Any] | None = None, *,
                  require_api_key: str | None = None, **options: Any) -> None:
    """Run a scripted server until Ctrl-C or SIGTERM; prints the base URL as the first stdout line.

    ``options`` go to ``ScriptedServer`` (e.g. ``faults``, ``fault_seed``, ``retry_after``).
    """

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        with contextlib.suppress(NotImplementedError):  # not on Windows
            loop.add_signal_handler(signal.SIGTERM, stop.set)
        async with ScriptedServer(params, host=host, port=port, require_api_key=require_api_key,
                                  **options) as srv:
            print(srv.base_url, flush=True)
            print("Scripted model server running; press Ctrl-C to stop.", file=sys.stderr, flush=True)
            await stop.wait()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())


def _fault_arg(text: str) -> tuple[str, float]:
    kind, sep, prob = text.partition("=")
    try:
        if not sep:
            raise ValueError
        return kind.strip(), float(prob)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected KIND=PROBABILITY (e.g. 429=0.3), got {text!r}") from None


def serve_scripted_main(argv: list[str] | None = None) -> int:
    """``agentcompass serve-scripted``: parse options and serve until interrupted. Returns an exit code."""
    parser = argparse.ArgumentParser(prog="agentcompass serve-scripted",
                                     description="Serve the scripted model over the OpenAI chat, OpenAI Responses "
                                                 "and Anthropic Messages APIs.")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port (0 picks a free one; default 8000)")
    parser.add_argument("--script-file", action="append", default=[],
                        help="JSON script file (repeatable); bundled scripts are always included")
    parser.add_argument("--api-key", default=None, help="require this API key (Bearer; x-api-key on /v1/messages)")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds of simulated latency per call")
    parser.add_argument("--fault", action="append", default=[], type=_fault_arg, metavar="KIND=P",
                        help="inject a fault into a fraction P of completions (repeatable); KIND is an HTTP "
                             f"status 400-599 or one of {', '.join(FAULT_KINDS)}, e.g. --fault 429=0.3")
    parser.add_argument("--fault-seed", type=int, default=0, help="seed of the fault plan (default 0)")
    parser.add_argument("--retry-after", type=float, default=None,
                        help="seconds sent in the Retry-After header of injected 429s")
    parser.add_argument("--max-concurrent", type=int, default=None,
                        help="answer 429 (with Retry-After) to completion calls beyond this many at once")
    args = parser.parse_args(argv)
    params: dict[str, Any] = {"latency_s": args.latency}
    if args.script_file:
        params["script_file"] = args.script_file
    try:
        serve_forever(args.host, args.port, params, require_api_key=args.api_key, faults=dict(args.fault),
                      fault_seed=args.fault_seed, retry_after=args.retry_after,
                      max_concurrent=args.max_concurrent)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"error: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(serve_scripted_main())
