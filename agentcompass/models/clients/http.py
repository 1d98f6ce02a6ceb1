"""What every HTTP model client shares: settings, connection pools, one POST (JSON or SSE), error mapping.

A protocol client subclasses ``HttpModelClient`` and supplies the endpoint, the auth headers, the request
body, and how to read a JSON answer and an SSE stream into a ``ModelResponse``. Everything else (timeouts,
pooling, ``stream``/``extra_body``/reserved params, HTTP status -> ``ModelError`` kinds, key redaction) is
the same for all protocols, so ``RetryingModelClient`` treats them alike.

Timeouts: httpx times each socket operation, so a server that keeps sending keep-alive bytes never trips
it. On top of that, every call has an overall deadline (``Deadline``): a non-streaming answer must be
complete within ``timeout`` of sending the request; a stream must deliver a new event (SSE comments and
``ping``/``keepalive`` events do not count) at least every ``timeout`` seconds; and the whole exchange must
end within ``total_timeout``. Each expiry is a ``model_connection_error``, like a read timeout.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import email.utils
import math
import ssl
import time
from collections.abc import AsyncGenerator, AsyncIterator, Coroutine, Mapping
from datetime import UTC, datetime
from typing import Annotated, Any, ClassVar

import httpx
import msgspec

from ..._errors import ConfigError, ModelError
from ..._validate import Count, Seconds, seconds
from ...common.error_kinds import ErrorKind
from ...common.http_status import RETRY_AFTER_KINDS, model_error_kind
from ...interfaces import ModelResponse
from ...params import as_params
from .deadline import KEEPALIVE_EVENTS, Deadline, default_total_timeout
from .liveness import DEFAULT_PROBE_AFTER_S, DEFAULT_PROBE_TIMEOUT_S, Liveness, Unresponsive, probed
from .sse import sse_events

#: params that configure the client itself and never reach the request body.
RESERVED_PARAMS = frozenset({"timeout", "connect_timeout", "total_timeout", "max_connections", "extra_headers",
                             "return_raw", "max_response_bytes", "probe_after", "probe_timeout"})
#: the most bytes of one model answer (decoded body) the client reads; more is ``model_response_too_large``.
DEFAULT_MAX_RESPONSE_BYTES = 32 << 20
MAX_RESPONSE_BYTES_CAP = 1 << 30


#: what one exchange gives: (response, body) of a JSON call, or (None, b"", the parsed answer) of a stream
_Exchanged = tuple[httpx.Response | None, bytes, ModelResponse | None]

#: ``stream`` picks SSE over JSON; ``extra_body`` (a dict) is merged into the body last.
BODY_CONTROL_PARAMS = frozenset({"stream", "extra_body"})


class HttpClientParams(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """The model params the HTTP clients interpret themselves (``RESERVED_PARAMS`` and ``BODY_CONTROL_PARAMS``).

    Every other model param (``temperature``, ``max_tokens``...) is the upstream API's and goes into the
    request body as given, so it stays free-form. ``None`` for a timeout or ``max_connections``: the
    client's default."""

    timeout: Seconds | None = None
    connect_timeout: Seconds | None = None
    total_timeout: Seconds | None = None
    #: a call without an answer this long probes the endpoint (``liveness.py``); above ``timeout``: never
    probe_after: Seconds | None = None
    probe_timeout: Seconds | None = None
    max_connections: Count | None = None
    extra_headers: dict[str, str] | None = None
    return_raw: bool = False
    max_response_bytes: Annotated[int, msgspec.Meta(ge=1024, le=MAX_RESPONSE_BYTES_CAP)] = DEFAULT_MAX_RESPONSE_BYTES
    stream: bool = False
    extra_body: dict[str, Any] | None = None


_CLIENT_KEYS = frozenset(HttpClientParams.__struct_fields__)
_NO_CALL_PARAMS = HttpClientParams()


def client_params(params: Mapping[str, Any], model_id: str) -> HttpClientParams:
    """The params out of a model's ``params`` that the client interprets, checked (the others are not read):
    ConfigError naming ``model_params.<key>`` and what is allowed."""
    own = {k: v for k, v in params.items() if k in _CLIENT_KEYS}
    return as_params(HttpClientParams, own, f"model {model_id}", field_prefix="model_params.")

_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})
ERROR_SNIPPET = 300
# httpcore's pool scans every queued request against every connection on each event, so its cost grows
# with (requests x connections): measured ~4x less CPU for 300 concurrent calls with pools of 8 behind
# semaphores than with one pool of 300. Requests go to the least-loaded shard. (The gateway's upstreams too.)
POOL_CONNECTIONS = 8

class _Shard:
    """One httpx pool and the semaphore that keeps requests from queueing inside it."""

    __slots__ = ("http", "load", "sem")

    def __init__(self, http: httpx.AsyncClient, size: int) -> None:
        self.http = http
        self.sem = asyncio.Semaphore(size)
        self.load = 0  # requests assigned: waiting for the semaphore or in flight


def _load(shard: _Shard) -> int:
    return shard.load


def parse_retry_after(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` / ``Retry-After`` (seconds or an HTTP date), else None.

    Not capped here (the retry policy's ``max_backoff`` is); ``nan``/``inf`` are ignored."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            if math.isfinite(seconds := float(ms) / 1000.0):
                return max(0.0, seconds)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        seconds = float(value)
        return max(0.0, seconds) if math.isfinite(seconds) else None
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    current = datetime.now(UTC).timestamp() if now is None else now
    return max(0.0, when.timestamp() - current)


def positive(value: Any, field: str) -> float:
    """``value`` as seconds > 0 (finite, capped), else ``ConfigError`` naming ``model_params.<field>``."""
    return seconds(value, f"model_params.{field}")


def parts_text(content: Any) -> str | None:
    """Text of a message content: a string, or the ``text`` of a list of content parts (None stays None)."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict)
                       and isinstance(p.get("text"), str))
    return str(content)


def json_arguments(value: Any) -> str:
    """Tool-call arguments as a JSON string (a string is kept as sent; an object is encoded compactly)."""
    return value if isinstance(value, str) else msgspec.json.encode(value).decode()


class HttpModelClient:
    """Base of the httpx model clients. Subclasses set ``path`` and implement the four protocol hooks.

    Params (client-wide at construction, or per call in ``complete``): ``stream`` (bool: use SSE),
    ``extra_body`` (dict merged into the body), the reserved ``RESERVED_PARAMS``, and any other key, which
    goes into the request body after the subclass has mapped the keys its protocol names differently.
    """

    protocol: ClassVar[str] = ""
    #: body keys the client sets itself; the same keys in params are ignored.
    client_set: ClassVar[frozenset[str]] = frozenset({"model", "messages"})

    def __init__(self, model_id: str, base_url: str, api_key: str | None = None,
                 params: Mapping[str, Any] | None = None, max_connections: int = 100,
                 timeout: float = 600.0) -> None:
        params = dict(params or {})
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise ConfigError(f"model_base_url must start with http:// or https://, got {base_url!r}.",
                              field="model_base_url")
        self.model_id = model_id
        self.base_url = base_url.rstrip("/")
        self._api_key = api_key or None
        p = client_params(params, model_id)
        timeout = p.timeout if p.timeout is not None else positive(timeout, "timeout")
        #: the cap on one whole HTTP exchange; None: ``default_total_timeout`` of the call's ``timeout``.
        self.total_timeout: float | None = p.total_timeout
        connect = p.connect_timeout if p.connect_timeout is not None else min(timeout, 30.0)
        conns = p.max_connections or max_connections
        extra = p.extra_headers or {}
        self._return_raw = p.return_raw
        self._stream = p.stream
        self._extra_body = p.extra_body or {}
        #: answers are read in chunks and cut at this many bytes, so one answer cannot exhaust memory.
        self.max_response_bytes = p.max_response_bytes
        #: the upstream API's params (free-form), sent in every body.
        self.params = {k: v for k, v in params.items() if k not in _CLIENT_KEYS and k not in self.client_set}
        self.max_connections = conns
        self.timeout = httpx.Timeout(connect=connect, read=timeout, write=timeout, pool=timeout)
        self.probe_after = p.probe_after if p.probe_after is not None else DEFAULT_PROBE_AFTER_S
        self.probe_timeout = p.probe_timeout if p.probe_timeout is not None else DEFAULT_PROBE_TIMEOUT_S
        try:
            url = httpx.URL(self.base_url)
        except httpx.InvalidURL as exc:
            raise ConfigError(f"model_base_url {base_url!r} is not a valid URL: {exc}.",
                              field="model_base_url") from None
        if not url.host:
            raise ConfigError(f"model_base_url {base_url!r} has no host.", field="model_base_url")
        self.url = self.endpoint(url)

        headers = {"Content-Type": "application/json", "Accept": "application/json",
                   "User-Agent": "agentcompass"}
        if self._api_key:
            headers.update(self.auth_headers(self._api_key))
        headers.update(self.protocol_headers())
        headers.update(extra)
        local = url.host in _LOOPBACK
        # one TLS context for all shards (building one costs tens of ms); plain http to a local
        # endpoint never needs one. A local endpoint must never go through an environment proxy.
        verify: ssl.SSLContext | bool = (False if local and url.scheme == "http"
                                         else httpx.create_ssl_context(trust_env=not local))
        n = -(-conns // POOL_CONNECTIONS)
        self._shards = [
            _Shard(httpx.AsyncClient(
                headers=headers, timeout=self.timeout, verify=verify, trust_env=not local,
                limits=httpx.Limits(max_connections=size, max_keepalive_connections=size)), size)
            for size in (conns // n + (1 if i < conns % n else 0) for i in range(n))
        ]
        #: the probe of a call that has had no answer for ``probe_after`` seconds (``liveness.py``)
        self.liveness = Liveness(self.url, verify=verify, trust_env=not local, fresh_s=self.probe_after / 2)

    # ------------------------------------------------------------------ protocol hooks

    def endpoint(self, base_url: httpx.URL) -> str:
        """The URL to POST to."""
        raise NotImplementedError

    def auth_headers(self, api_key: str) -> dict[str, str]:
        """Headers carrying the API key (Bearer by default)."""
        return {"Authorization": f"Bearer {api_key}"}

    def protocol_headers(self) -> dict[str, str]:
        """Headers every request of this protocol carries."""
        return {}

    def build_body(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                   params: dict[str, Any], stream: bool) -> dict[str, Any]:
        """The request body from OpenAI-chat ``messages``/``tools`` and the merged params."""
        raise NotImplementedError

    def parse_body(self, data: bytes, status: int) -> ModelResponse:
        """A ``ModelResponse`` from a JSON answer (``latency_s``/``raw`` are filled in by the caller)."""
        raise NotImplementedError

    async def parse_stream(self, events: AsyncIterator[tuple[str, Any]]) -> ModelResponse:
        """A ``ModelResponse`` from SSE events ``(name, decoded data)``; data ``[DONE]`` arrives as None."""
        raise NotImplementedError

    # ------------------------------------------------------------------ shared machinery

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model_id={self.model_id!r}, base_url={self.base_url!r})"

    async def __aenter__(self) -> HttpModelClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def redact(self, text: str) -> str:
        """``text`` with the API key replaced by ``***``."""
        if self._api_key and self._api_key in text:
            text = text.replace(self._api_key, "***")
        return text

    def bad_response(self, what: str, status: int | None = 200) -> ModelError:
        """A ``model_bad_response`` error about this endpoint."""
        return ModelError(self.redact(f"Model {self.model_id!r} at {self.url}: {what}"),
                          kind=ErrorKind.MODEL_BAD_RESPONSE, status=status)

    def stream_error(self, kind: ErrorKind, detail: str) -> ModelError:
        """An error the server reported inside a 200 SSE stream."""
        return ModelError(self.redact(f"Model {self.model_id!r} at {self.url} reported an error in its stream: "
                                      f"{detail[:ERROR_SNIPPET]}"), kind=kind, status=200)

    async def complete(self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None = None,
                       **params: Any) -> ModelResponse:
        """POST one completion; per-call ``params`` override the client's. Raises ``ModelError``."""
        given = _CLIENT_KEYS.intersection(params)
        call = client_params(params, self.model_id) if given else _NO_CALL_PARAMS
        return_raw = call.return_raw if "return_raw" in given else self._return_raw
        stream = call.stream if "stream" in given else self._stream
        extra_body = (call.extra_body or {}) if "extra_body" in given else self._extra_body
        call_headers = call.extra_headers
        merged = dict(self.params)
        for k, v in params.items():
            if k not in _CLIENT_KEYS and k not in self.client_set:
                merged[k] = v
        body = self.build_body(messages, tools, merged, stream)
        body.update(extra_body)
        try:
            payload = msgspec.json.encode(body)
        except (TypeError, msgspec.EncodeError) as exc:
            raise ModelError(f"Request for model {self.model_id!r} is not JSON-serialisable: {exc}",
                             kind=ErrorKind.MODEL_BAD_REQUEST) from None
        timeout: httpx.Timeout | Any = httpx.USE_CLIENT_DEFAULT
        stall = self.timeout.read
        assert stall is not None  # always set in __init__
        if call.timeout is not None:
            stall = call.timeout
            timeout = httpx.Timeout(stall, connect=self.timeout.connect)
        if call.total_timeout is not None:
            total = call.total_timeout
        else:
            total = self.total_timeout or default_total_timeout(stall)

        start = time.perf_counter()
        raw: list[Any] | None = [] if return_raw else None
        shard = min(self._shards, key=_load)
        shard.load += 1
        try:
            try:
                async with asyncio.timeout(self.timeout.pool):
                    await shard.sem.acquire()
            except TimeoutError:
                raise ModelError(f"Model {self.model_id!r}: no free connection within {self.timeout.pool:g}s "
                                 f"(max_connections={self.max_connections}).",
                                 kind=ErrorKind.MODEL_CONNECTION_ERROR) from None
            try:
                exchange = self._exchange(shard.http, payload, call_headers, timeout, raw, Deadline(stall, total),
                                          stream)
                if self.probe_after < stall:
                    resp, answer, result = await self._probed(exchange)
                else:
                    resp, answer, result = await exchange
            finally:
                shard.sem.release()
        except httpx.TimeoutException as exc:
            raise ModelError(self.redact(
                f"Model {self.model_id!r} at {self.url} timed out ({type(exc).__name__})."),
                kind=ErrorKind.MODEL_CONNECTION_ERROR) from None
        except httpx.DecodingError as exc:
            raise ModelError(self.redact(
                f"Model {self.model_id!r} at {self.url} sent an undecodable body: {exc}"),
                kind=ErrorKind.MODEL_BAD_RESPONSE) from None
        except httpx.RequestError as exc:
            raise ModelError(self.redact(
                f"Model {self.model_id!r} at {self.url} is unreachable or dropped the connection: "
                f"{type(exc).__name__}: {exc}"), kind=ErrorKind.MODEL_CONNECTION_ERROR) from None
        finally:
            shard.load -= 1

        if resp is not None:
            if resp.status_code >= 300:
                raise self._status_error(resp, answer)
            result = self._parse_json(answer, resp.status_code, raw)
        assert result is not None  # a stream's exchange parsed it
        result.latency_s = time.perf_counter() - start
        if raw is not None:
            result.raw = raw[0] if not stream else raw
        return result

    async def _exchange(self, http: httpx.AsyncClient, payload: bytes, headers: Any, timeout: Any,
                        raw: list[Any] | None, deadline: Deadline, stream: bool) -> _Exchanged:
        """One POST under ``deadline``: (response, body) of a JSON call, or the parsed stream."""
        try:
            async with deadline.scope:
                if stream:
                    return None, b"", await self._post_stream(http, payload, headers, timeout, raw, deadline)
                resp, answer = await self._post_json(http, payload, headers, timeout)
                return resp, answer, None
        except TimeoutError:
            if not deadline.scope.expired():
                raise
            raise self._deadline_error(deadline, stream) from None

    async def _probed(self, exchange: Coroutine[Any, Any, _Exchanged]) -> _Exchanged:
        """``exchange``, ended as an unresponsive ``model_connection_error`` when the endpoint answers neither it
        nor a probe (``liveness.py``)."""
        try:
            return await probed(exchange, self.liveness, self.probe_after, self.probe_timeout)
        except Unresponsive:
            raise ModelError(self.redact(
                f"Model {self.model_id!r} at {self.url}: no answer in {self.probe_after:g}s, and the endpoint did "
                f"not answer a probe (GET, any status) within {self.probe_timeout:g}s either: nothing is answering "
                "there (model params `probe_after`, `probe_timeout`)."),
                kind=ErrorKind.MODEL_CONNECTION_ERROR, unresponsive=True) from None

    def _parse_json(self, body: bytes, status: int, raw: list[Any] | None) -> ModelResponse:
        result = self.parse_body(body, status)
        if raw is not None:
            raw.append(msgspec.json.decode(body))
        return result

    def _too_large(self, status: int) -> ModelError:
        return ModelError(self.redact(
            f"Model {self.model_id!r} at {self.url} sent an answer larger than max_response_bytes="
            f"{self.max_response_bytes}; the rest was not read."), kind=ErrorKind.MODEL_RESPONSE_TOO_LARGE,
            status=status)

    async def _read_capped(self, resp: httpx.Response) -> bytes:
        """The decoded body, read in chunks; past ``max_response_bytes`` the read stops with an error."""
        chunks: list[bytes] = []
        size = 0
        async for chunk in resp.aiter_bytes():
            size += len(chunk)
            if size > self.max_response_bytes:
                raise self._too_large(resp.status_code)
            chunks.append(chunk)
        return b"".join(chunks)

    async def _capped_lines(self, resp: httpx.Response) -> AsyncGenerator[str, None]:
        """The body's text lines (like ``aiter_lines``), counting bytes so a stream cannot pass the cap
        (httpx's line splitter would buffer a line without end in memory)."""
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        size = 0
        parts: list[str] = []  # the unfinished line, joined only once it ends
        async for chunk in resp.aiter_bytes():
            size += len(chunk)
            if size > self.max_response_bytes:
                raise self._too_large(resp.status_code)
            text = decoder.decode(chunk)
            parts.append(text)
            if "\n" in text:
                *lines, rest = "".join(parts).split("\n")
                parts = [rest]
                for line in lines:
                    yield line.removesuffix("\r")
        last = ("".join(parts) + decoder.decode(b"", final=True)).removesuffix("\r")
        if last:
            yield last

    async def _post_json(self, http: httpx.AsyncClient, payload: bytes, headers: Any,
                         timeout: Any) -> tuple[httpx.Response, bytes]:
        async with http.stream("POST", self.url, content=payload, headers=headers, timeout=timeout) as resp:
            return resp, await self._read_capped(resp)

    def _deadline_error(self, deadline: Deadline, stream: bool) -> ModelError:
        what = deadline.reason(stream)
        return ModelError(self.redact(f"Model {self.model_id!r} at {self.url} timed out: {what}."),
                          kind=ErrorKind.MODEL_CONNECTION_ERROR)

    async def _post_stream(self, http: httpx.AsyncClient, payload: bytes, headers: Any, timeout: Any,
                           raw: list[Any] | None, deadline: Deadline) -> ModelResponse:
        async with http.stream("POST", self.url, content=payload, headers=headers, timeout=timeout) as resp:
            if resp.status_code >= 300:
                raise self._status_error(resp, await self._read_capped(resp))
            if not resp.headers.get("content-type", "").startswith("text/event-stream"):
                # a server that ignores `stream` and answers with one JSON body
                return self._parse_json(await self._read_capped(resp), resp.status_code, raw)
            lines = self._capped_lines(resp)
            async with contextlib.aclosing(self._decoded(sse_events(lines), raw, deadline)) as events:
                return await self.parse_stream(events)

    async def _decoded(self, events: AsyncIterator[tuple[str, str]], raw: list[Any] | None,
                       deadline: Deadline) -> AsyncGenerator[tuple[str, Any], None]:
        async for name, data in events:
            if data.strip() == "[DONE]":
                deadline.seen()
                yield name, None
                continue
            try:
                obj = msgspec.json.decode(data)
            except msgspec.DecodeError:
                raise self.bad_response(f"sent an SSE event that is not JSON: {data[:ERROR_SNIPPET]!r}") from None
            if raw is not None:
                raw.append(obj)
            kind = obj.get("type") if type(obj) is dict else None
            if name not in KEEPALIVE_EVENTS and not (isinstance(kind, str) and kind in KEEPALIVE_EVENTS):
                deadline.seen()
            yield name, obj

    def _status_error(self, resp: httpx.Response, body: bytes) -> ModelError:
        status = resp.status_code
        detail = body[:ERROR_SNIPPET * 4].decode("utf-8", "replace")[:ERROR_SNIPPET]
        try:
            err = msgspec.json.decode(body)
            if isinstance(err, dict) and isinstance(err.get("error"), dict):
                detail = str(err["error"].get("message") or detail)[:ERROR_SNIPPET]
        except msgspec.DecodeError:
            pass
        kind = model_error_kind(status)
        retry_after = parse_retry_after(resp.headers) if kind in RETRY_AFTER_KINDS else None
        message = self.redact(f"Model {self.model_id!r} at {self.url} answered HTTP {status}: {detail}")
        return ModelError(message, kind=kind, status=status, retry_after=retry_after)

    async def aclose(self) -> None:
        """Close every connection (idempotent)."""
        await asyncio.gather(self.liveness.aclose(), *(sh.http.aclose() for sh in self._shards))


def decode_as(data: bytes | Any, type_: Any, client: HttpModelClient, status: int = 200,
              snippet: bytes | str | None = None) -> Any:
    """``data`` (JSON bytes or decoded objects) as ``type_``; anything unusable is ``model_bad_response``."""
    try:
        if isinstance(data, bytes):
            return msgspec.json.decode(data, type=type_)
        return msgspec.convert(data, type_)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        shown = snippet if snippet is not None else data
        text = shown.decode("utf-8", "replace") if isinstance(shown, bytes) else str(shown)
        raise client.bad_response(f"returned an unusable response ({exc}): {text[:ERROR_SNIPPET]!r}",
                                  status) from None
