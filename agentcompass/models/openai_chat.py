"""OpenAI-compatible ``/chat/completions`` client on httpx (non-streaming).

Model params go into the request body as given (``temperature``, ``max_tokens``, ``top_p``, ``stop``,
``seed`` and any other key, e.g. ``reasoning_effort`` or vLLM's ``top_k``), except the keys reserved for
the client itself (``RESERVED_PARAMS``):

- ``timeout`` (s): read/write/pool timeout, overrides the factory's ``timeout``;
- ``connect_timeout`` (s): connect timeout (default ``min(timeout, 30)``);
- ``max_connections``: pool size, overrides the factory's ``max_connections``;
- ``extra_headers``: dict of extra HTTP headers sent with every request;
- ``return_raw``: when true, ``ModelResponse.raw`` holds the decoded response body.

``model``, ``messages`` and ``stream`` in params are ignored: the client sets them.
"""

from __future__ import annotations

import asyncio
import email.utils
import ssl
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import httpx
import msgspec

from .._errors import ConfigError, ModelError
from ..interfaces import ModelResponse
from ..records import ToolCall, Usage

RESERVED_PARAMS = frozenset({"timeout", "connect_timeout", "max_connections", "extra_headers", "return_raw"})
_CLIENT_SET = frozenset({"model", "messages", "stream"})
_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})
_ERROR_SNIPPET = 300
# httpcore's pool scans every queued request against every connection on each event, so its cost grows
# with (requests x connections): measured ~4x less CPU for 300 concurrent calls with pools of 8 behind
# semaphores than with one pool of 300. Requests go to the least-loaded shard.
_SHARD_CONNECTIONS = 8


class _Shard:
    """One httpx pool and the semaphore that keeps requests from queueing inside it."""

    __slots__ = ("http", "load", "sem")

    def __init__(self, http: httpx.AsyncClient, size: int) -> None:
        self.http = http
        self.sem = asyncio.Semaphore(size)
        self.load = 0  # requests assigned: waiting for the semaphore or in flight


def _load(shard: _Shard) -> int:
    return shard.load


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


class _Usage(msgspec.Struct):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None


class _Completion(msgspec.Struct):
    choices: list[_Choice]
    usage: _Usage | None = None


def parse_retry_after(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` / ``Retry-After`` (seconds or an HTTP date), else None."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
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


def _positive(value: Any, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ConfigError(f"Model param `{field}` must be a number > 0, got {value!r}.",
                          field=f"model_params.{field}")
    return float(value)


def _text(content: Any) -> str | None:
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):  # some servers answer with content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict)
                       and isinstance(p.get("text"), str))
    return str(content)


class OpenAIChatClient:
    """A ``ModelClient`` for any OpenAI-compatible chat-completions endpoint."""

    def __init__(self, model_id: str, base_url: str, api_key: str | None = None,
                 params: Mapping[str, Any] | None = None, max_connections: int = 100,
                 timeout: float = 600.0) -> None:
        params = dict(params or {})
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise ConfigError(f"model_base_url must start with http:// or https://, got {base_url!r}.",
                              field="model_base_url")
        self.model_id = model_id
        self.base_url = base_url.rstrip("/")
        self._url = f"{self.base_url}/chat/completions"
        self._api_key = api_key or None
        timeout = _positive(params.get("timeout", timeout), "timeout")
        connect = _positive(params.get("connect_timeout", min(timeout, 30.0)), "connect_timeout")
        conns = params.get("max_connections", max_connections)
        if isinstance(conns, bool) or not isinstance(conns, int) or conns < 1:
            raise ConfigError(f"Model param `max_connections` must be an integer >= 1, got {conns!r}.",
                              field="model_params.max_connections")
        extra = params.get("extra_headers") or {}
        if not isinstance(extra, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                  for k, v in extra.items()):
            raise ConfigError("Model param `extra_headers` must be a mapping of strings to strings.",
                              field="model_params.extra_headers")
        self._return_raw = bool(params.get("return_raw", False))
        self.params = {k: v for k, v in params.items() if k not in RESERVED_PARAMS and k not in _CLIENT_SET}
        self.max_connections = conns
        self.timeout = httpx.Timeout(connect=connect, read=timeout, write=timeout, pool=timeout)

        headers = {"Content-Type": "application/json", "Accept": "application/json",
                   "User-Agent": "agentcompass", **extra}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        try:
            url = httpx.URL(self.base_url)
        except httpx.InvalidURL as exc:
            raise ConfigError(f"model_base_url {base_url!r} is not a valid URL: {exc}.",
                              field="model_base_url") from None
        if not url.host:
            raise ConfigError(f"model_base_url {base_url!r} has no host.", field="model_base_url")
        local = url.host in _LOOPBACK
        # one TLS context for all shards (building one costs tens of ms); plain http to a local
        # endpoint never needs one. A local endpoint must never go through an environment proxy.
        verify: ssl.SSLContext | bool = (False if local and url.scheme == "http"
                                         else httpx.create_ssl_context(trust_env=not local))
        n = -(-conns // _SHARD_CONNECTIONS)
        self._shards = [
            _Shard(httpx.AsyncClient(
                headers=headers, timeout=self.timeout, verify=verify, trust_env=not local,
                limits=httpx.Limits(max_connections=size, max_keepalive_connections=size)), size)
            for size in (conns // n + (1 if i < conns % n else 0) for i in range(n))
        ]

    def __repr__(self) -> str:
        return f"OpenAIChatClient(model_id={self.model_id!r}, base_url={self.base_url!r})"

    async def __aenter__(self) -> OpenAIChatClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _redact(self, text: str) -> str:
        if self._api_key and self._api_key in text:
            text = text.replace(self._api_key, "***")
        return text

    async def complete(self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None = None,
                       **params: Any) -> ModelResponse:
        """POST one chat completion; per-call ``params`` override the client's. Raises ``ModelError``."""
        return_raw = bool(params.pop("return_raw", self._return_raw))
        call_timeout = params.pop("timeout", None)
        call_headers = params.pop("extra_headers", None)
        timeout = self.timeout if call_timeout is None else httpx.Timeout(
            _positive(call_timeout, "timeout"), connect=self.timeout.connect)
        body: dict[str, Any] = {**self.params}
        for k, v in params.items():
            if k not in RESERVED_PARAMS and k not in _CLIENT_SET:
                body[k] = v
        body["model"] = self.model_id
        body["messages"] = messages
        body["stream"] = False
        if tools:
            body["tools"] = tools
        try:
            payload = msgspec.json.encode(body)
        except (TypeError, msgspec.EncodeError) as exc:
            raise ModelError(f"Request for model {self.model_id!r} is not JSON-serialisable: {exc}",
                             kind="model_bad_request") from None

        start = time.perf_counter()
        shard = min(self._shards, key=_load)
        shard.load += 1
        try:
            try:
                async with asyncio.timeout(self.timeout.pool):
                    await shard.sem.acquire()
            except TimeoutError:
                raise ModelError(f"Model {self.model_id!r}: no free connection within {self.timeout.pool:g}s "
                                 f"(max_connections={self.max_connections}).",
                                 kind="model_connection_error") from None
            try:
                if call_timeout is not None or call_headers:
                    resp = await shard.http.post(self._url, content=payload, headers=call_headers,
                                                 timeout=timeout)
                else:
                    resp = await shard.http.post(self._url, content=payload)
            finally:
                shard.sem.release()
        except httpx.TimeoutException as exc:
            raise ModelError(self._redact(
                f"Model {self.model_id!r} at {self._url} timed out ({type(exc).__name__})."),
                kind="model_connection_error") from None
        except httpx.DecodingError as exc:
            raise ModelError(self._redact(
                f"Model {self.model_id!r} at {self._url} sent an undecodable body: {exc}"),
                kind="model_bad_response") from None
        except httpx.RequestError as exc:
            raise ModelError(self._redact(
                f"Model {self.model_id!r} at {self._url} is unreachable: {type(exc).__name__}: {exc}"),
                kind="model_connection_error") from None
        finally:
            shard.load -= 1
        latency = time.perf_counter() - start

        if resp.status_code >= 300:
            raise self._status_error(resp)
        try:
            parsed = msgspec.json.decode(resp.content, type=_Completion)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise ModelError(self._redact(
                f"Model {self.model_id!r} returned an unusable response ({exc}): "
                f"{resp.text[:_ERROR_SNIPPET]!r}"),
                kind="model_bad_response", status=resp.status_code) from None
        if not parsed.choices:
            raise ModelError(f"Model {self.model_id!r} returned no choices.", kind="model_bad_response",
                             status=resp.status_code)
        choice = parsed.choices[0]
        msg = choice.message
        calls = []
        for i, tc in enumerate(msg.tool_calls or ()):
            args = tc.function.arguments
            if not isinstance(args, str):
                args = msgspec.json.encode(args).decode()
            calls.append(ToolCall(id=tc.id or f"call_{i}", name=tc.function.name, arguments=args))
        u = parsed.usage or _Usage()
        prompt, completion = u.prompt_tokens or 0, u.completion_tokens or 0
        usage = Usage(prompt_tokens=prompt, completion_tokens=completion,
                      total_tokens=u.total_tokens or prompt + completion, calls=1)
        return ModelResponse(
            content=_text(msg.content), reasoning=msg.reasoning_content or msg.reasoning,
            tool_calls=calls, finish_reason=choice.finish_reason, usage=usage, latency_s=latency,
            raw=msgspec.json.decode(resp.content) if return_raw else None)

    def _status_error(self, resp: httpx.Response) -> ModelError:
        status = resp.status_code
        detail = resp.text[:_ERROR_SNIPPET]
        try:
            err = msgspec.json.decode(resp.content)
            if isinstance(err, dict) and isinstance(err.get("error"), dict):
                detail = str(err["error"].get("message") or detail)[:_ERROR_SNIPPET]
        except msgspec.DecodeError:
            pass
        retry_after = None
        if status == 429:
            kind = "model_rate_limit"
            retry_after = parse_retry_after(resp.headers)
        elif status >= 500:
            kind = "model_server_error"
            retry_after = parse_retry_after(resp.headers)  # 503s often say when to come back
        elif status in (401, 403):
            kind = "model_auth"
        elif status >= 400:
            kind = "model_bad_request"
        else:
            kind = "model_bad_response"
        message = self._redact(f"Model {self.model_id!r} at {self._url} answered HTTP {status}: {detail}")
        return ModelError(message, kind=kind, status=status, retry_after=retry_after)

    async def aclose(self) -> None:
        """Close every connection (idempotent)."""
        await asyncio.gather(*(sh.http.aclose() for sh in self._shards))
