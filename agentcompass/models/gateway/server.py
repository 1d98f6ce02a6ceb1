"""The model gateway: an HTTP proxy on the host that sandboxed (and host) agents call instead of the model.

One per launch, started by the engine only when a request needs it. It forwards

- ``POST .../v1/chat/completions``, ``/v1/completions``, ``/v1/responses``, ``/v1/messages``
  (and ``/v1/messages/count_tokens``), ``GET .../v1/models[/<id>]``

to the request's real endpoint with the real key, passing SSE streams through event by event, and books
every call in a ``Ledger`` under the try it belongs to.

Routes and credentials (both work with the OpenAI and Anthropic SDKs):

- ``/r/<route-token>/v1/...``: the token in the path names the try (base_url ``.../r/<token>/v1`` for
  OpenAI clients, ``.../r/<token>`` for Anthropic ones); the key the client sends is ignored;
- ``/v1/...``: the key (``Authorization: Bearer``, ``x-api-key`` or ``api-key``) is a signed envelope
  (see ``envelope.py``) or a route token.

A missing or unknown key gets a 401 with an OpenAI-shaped error body; so does an envelope or token whose try
ended. The request path is percent-decoded once (``%2F``, ``%2e`` included) with empty and dot segments
resolved, and only the routes above match, exactly (a model id's segments are ``[A-Za-z0-9][A-Za-z0-9._:@+~-]*``);
anything else, or a path with a ``%`` left after decoding, a backslash or a ``..`` above the root, is a 404
answered by the gateway: the upstream only ever gets the canonical route.

Every byte relayed back (JSON and error bodies, streams, forwarded response headers) passes a ``Redactor`` of
the secrets the gateway holds (the upstreams' keys, credential-like extra headers, the envelope secret); a
stream goes through a ``StreamRedactor``, so a key cut by chunk borders is masked too.

Clients are sandboxed agents, so what they send is bounded: a request head must be complete within
``header_timeout_s`` of the connection's opening or its previous answer, a body within ``body_timeout_s``
(408); a body over ``max_body_bytes`` gets a 413 (a declared ``Content-Length`` before anything is read); a
body's bytes are taken from a process-wide ``ByteBudget`` before they are buffered (503 when it is full);
connections over ``max_connections`` get a 503 and are closed, calls over ``max_calls_per_grant`` a 429.

The agent's ``model`` field is replaced by the request's model (the key pays for that model only). A chat
stream that did not ask for usage gets ``stream_options.include_usage`` added and the usage-only chunk
removed again, so the client sees the stream it asked for while the ledger still gets the tokens (an
upstream that rejects the option with a 400 is asked again without it).

Each upstream try takes a slot of the endpoint's ``AdaptiveLimiter`` (shared with the in-process client),
holds it until the body or stream is through, and reports 429s and ``Retry-After`` to it. Transient failures
(``common.http_status``: 429, 5xx, connection errors) are retried with ``RetryPolicy`` (Retry-After
honoured); after the last try the upstream's answer (or a 502/504) goes back to the client. Every upstream
call has a timeout; memory per call is bounded (a JSON body up to ``max_buffered_bytes`` is read whole to
find its usage, larger ones stream through; a stream holds at most one event).

Besides httpx's per-read timeouts, each upstream try has the same overall ``Deadline`` as the model clients
(``_deadline.py``), so an upstream that only sends keep-alives or trickles bytes cannot hold a call open: a
JSON answer must be through within ``timeout_s`` of sending the request (else the client gets a 504); a
stream must pass on a content event (SSE comments and ``ping``/``keepalive`` events do not count) at least
every ``timeout_s``; and the whole try must end within ``total_timeout_s``. A stream cut that way ends with
an error event in the protocol's shape and the connection closed before the stream's end, so every client
sees a failed call; the upstream connection is closed and the call is booked as failed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import re
import secrets
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from urllib.parse import unquote

import httpx
import msgspec
from aiohttp import web

from ...common.error_kinds import ErrorKind
from ...common.http_status import TRANSIENT_MODEL_KINDS, model_error_kind
from ...engine.redact import Redactor
from ...records import Usage
from ..adaptive import AdaptiveLimiter, Outcome, Ticket, outcome_of
from ..clients.deadline import Deadline, default_total_timeout
from ..clients.http import DEFAULT_MAX_RESPONSE_BYTES, POOL_CONNECTIONS
from ..clients.liveness import DEFAULT_PROBE_AFTER_S, DEFAULT_PROBE_TIMEOUT_S, Liveness, Unresponsive, probed
from ..clients.openai_chat import parse_retry_after
from ..retry import RetryPolicy
from ..waiting import counting_waits, pause
from .body_budget import PROCESS_BODY_BUDGET, BodyLease, ByteBudget
from .envelope import AttemptKey, EnvelopeError, EnvelopeSigner, is_envelope
from .ledger import (
    EVENT_END,
    CallBudget,
    CallRecord,
    GatewayUsage,
    Ledger,
    Protocol,
    StreamUsage,
    is_keepalive,
    protocol_of,
    usage_from_body,
)
from .stream_redact import StreamRedactor

log = logging.getLogger("agentcompass.models.gateway.server")

ROUTE_PREFIX = "/r/"
_POST_PATHS = frozenset({"chat/completions", "completions", "responses", "messages", "messages/count_tokens"})
#: the calls an attempt's limits count (a token count costs nothing)
_CHARGED_PATHS = _POST_PATHS - {"messages/count_tokens"}
_FORWARD_REQUEST_HEADERS = ("content-type", "accept", "anthropic-version", "anthropic-beta", "openai-beta",
                            "idempotency-key")
_FORWARD_RESPONSE_PREFIXES = ("openai-", "anthropic-", "x-ratelimit-", "x-request-id", "request-id", "retry-after",
                              "content-type", "cache-control")
_ANTHROPIC_VERSION = "2023-06-01"
_ERROR_BODY_CAP = 64 * 1024
_MAX_EVENT_BYTES = 4 * 1024 * 1024
#: how long the error event that ends a cut stream may take to reach the client
_CUT_WRITE_S = 5.0
_ENC = msgspec.json.Encoder()
_DEC = msgspec.json.Decoder()
#: one segment of a model id in ``GET /v1/models/<id>`` (ids like ``org/name:tag@rev`` have several)
_MODEL_ID_SEGMENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@+~-]*\Z")
_MAX_PATH_CHARS = 2048
#: extra upstream headers whose values are credentials (masked in what goes back to the agent)
_SECRET_HEADER = re.compile(r"auth|key|token|secret|cookie|password", re.IGNORECASE)

#: ``on_retry(key, kind, backoff_s, try_no)``: an upstream try failed and is retried after ``backoff_s``.
OnGatewayRetry = Callable[[AttemptKey, str, float, int], None]


def error_response(status: int, message: str, *, type_: str = "invalid_request_error", code: str | None = None,
                   headers: Mapping[str, str] | None = None) -> web.Response:
    """An OpenAI-shaped error answer."""
    body = _ENC.encode({"error": {"message": message, "type": type_, "param": None, "code": code}})
    return web.Response(status=status, body=body, content_type="application/json", headers=headers)


def canonical_path(target: str) -> str | None:
    """The path of a request target percent-decoded once, with empty and dot segments resolved; None for a
    target that is no plain absolute path (a ``%`` left after decoding, a backslash, a control character,
    invalid UTF-8, a ``..`` above the root, over 2048 characters)."""
    path = target.split("?", 1)[0]
    if not path.startswith("/") or len(path) > _MAX_PATH_CHARS:
        return None
    try:
        decoded = unquote(path, errors="strict")
    except UnicodeDecodeError:
        return None
    if "%" in decoded or "\\" in decoded or any(c <= " " or c == "\x7f" for c in decoded):
        return None
    out: list[str] = []
    for seg in decoded.split("/"):
        if seg in ("", "."):
            continue
        if seg == "..":
            if not out:
                return None
            out.pop()
        else:
            out.append(seg)
    return "/" + "/".join(out)


def served_route(path: str) -> tuple[str | None, str] | None:
    """(route token or None, API path below ``/v1``) of a canonical path the gateway serves; None otherwise."""
    segs = path.strip("/").split("/")
    token = None
    if segs[0] == ROUTE_PREFIX.strip("/"):
        if len(segs) < 2:
            return None
        token, segs = segs[1], segs[2:]
    if segs and segs[0] == "v1":
        segs = segs[1:]
    api_path = "/".join(segs)
    if api_path in _POST_PATHS or api_path == "models":
        return token, api_path
    if len(segs) >= 2 and segs[0] == "models" and all(_MODEL_ID_SEGMENT.match(s) for s in segs[1:]):
        return token, api_path
    return None


@dataclass
class GatewayStats:
    """What the gateway refused, by reason (counters since start)."""

    #: request paths outside the served routes (404)
    not_found: int = 0
    #: bodies over ``max_body_bytes``, declared or read (413)
    too_large: int = 0
    #: bodies not through within ``body_timeout_s`` (408)
    body_timeouts: int = 0
    #: bodies refused because the process-wide body budget was full (503)
    busy: int = 0
    #: calls over ``max_calls_per_grant`` (429)
    grant_busy: int = 0
    #: model calls refused because their attempt had reached a limit (``harness_params.*_limit``)
    limit_refused: int = 0
    #: connections over ``max_connections``, answered 503 and closed at once
    refused_connections: int = 0


@dataclass
class Upstream:
    """A request's real endpoint as the gateway calls it."""

    request: str
    model_id: str
    base_url: str
    api_key: str | None
    api_protocol: str
    limiter: AdaptiveLimiter
    policy: RetryPolicy = field(default_factory=RetryPolicy)
    timeout_s: float = 600.0
    connect_timeout_s: float = 30.0
    #: the cap on one upstream try, answer included; None: ``default_total_timeout(timeout_s)``.
    total_timeout_s: float | None = None
    extra_headers: dict[str, str] = field(default_factory=dict)
    http: httpx.AsyncClient | None = None
    #: every pool of the upstream (``http`` is the first; ``add_upstream`` sets them): one per
    #: ``POOL_CONNECTIONS`` of its limiter, and each try takes the next
    pools: list[httpx.AsyncClient] = field(default_factory=list)
    _next: int = 0
    #: the most bytes of one answer relayed; past it the connection is cut (the caller sees a broken body).
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES
    #: a try unanswered this long probes the endpoint (``clients/liveness.py``); at or above ``timeout_s``: never
    probe_after_s: float = DEFAULT_PROBE_AFTER_S
    probe_timeout_s: float = DEFAULT_PROBE_TIMEOUT_S
    liveness: Liveness | None = None

    def pool(self) -> httpx.AsyncClient:
        """The pool the next try goes through (round robin)."""
        self._next = (self._next + 1) % len(self.pools)
        return self.pools[self._next]

    def url(self, api_path: str) -> str:
        """The upstream URL of ``api_path`` (the part below ``/v1``)."""
        base = self.base_url.rstrip("/")
        if base.endswith("/v1") or self.api_protocol != "anthropic-messages":
            return f"{base}/{api_path}"
        return f"{base}/v1/{api_path}"  # an Anthropic base URL is the host, the SDK adds /v1

    def deadline(self) -> Deadline:
        """The overall bound of one upstream try, starting now."""
        return Deadline(self.timeout_s, self.total_timeout_s or default_total_timeout(self.timeout_s))

    def auth_headers(self, api_path: str, incoming: Mapping[str, str]) -> dict[str, str]:
        if not self.api_key:
            return {}
        if api_path.startswith("messages"):
            return {"x-api-key": self.api_key,
                    "anthropic-version": incoming.get("anthropic-version", _ANTHROPIC_VERSION)}
        return {"Authorization": f"Bearer {self.api_key}"}


@dataclass
class Grant:
    """A try's right to call its request's model: a route token and (with ``wrap_api_key``) an envelope."""

    key: AttemptKey
    token: str
    envelope: str | None = None
    inflight: set[asyncio.Task[web.StreamResponse]] = field(default_factory=set)
    #: the try's limits on model use (asked before each model call, charged after it), if it has any
    budget: CallBudget | None = None

    @property
    def api_key(self) -> str:
        """The key to hand to the agent."""
        return self.envelope or self.token


class _Deny(Exception):
    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


class _Refused(Exception):
    """A request body the gateway will not take: ``response`` answers it and the connection is closed."""

    def __init__(self, response: web.Response) -> None:
        super().__init__(response.status)
        response.force_close()
        self.response = response


class _Call:
    """One proxied call while it runs: the answer being streamed (if any) and what the ledger gets."""

    __slots__ = ("api_path", "budget", "passthrough", "redact", "response", "retries", "started", "status",
                 "stream", "usage", "usage_reader")

    def __init__(self, api_path: str) -> None:
        self.api_path = api_path
        self.budget: CallBudget | None = None  # charged with the answer's usage
        self.response: web.StreamResponse | None = None
        self.retries = 0
        self.started = time.monotonic()
        self.status = 0
        self.stream = False
        self.usage: Usage | None = None
        self.usage_reader: StreamUsage | None = None
        self.passthrough = False  # bytes pass on as they come, not event by event
        self.redact: StreamRedactor | None = None  # every byte relayed to the client passes it


@dataclass
class _Answer:
    """An upstream answer to pass on, holding its limiter slot until it has been passed on."""

    resp: httpx.Response
    ticket: Ticket
    deadline: Deadline
    outcome: Outcome = "ok"
    retry_after: float | None = None
    max_bytes: int = DEFAULT_MAX_RESPONSE_BYTES


class Gateway:
    """The launch's model gateway (see the module doc). ``start``, then ``add_upstream`` per request and
    ``open_grant``/``close_grant`` per try; ``aclose`` at the end.

    Limits on what clients (agents, so hostile) send: a connection must deliver a complete request head within
    ``header_timeout_s`` of opening or of its previous answer (idle keep-alive connections are closed after
    it too); a body must be through within ``body_timeout_s``; a body is at most ``max_body_bytes`` (a larger
    declared ``Content-Length`` gets a 413 before anything is read) and its bytes are taken from
    ``body_budget`` (process-wide unless given) before they are buffered; at most ``max_connections``
    connections are open at once and at most ``max_calls_per_grant`` calls per grant are in flight."""

    def __init__(self, signer: EnvelopeSigner, ledger: Ledger | None = None, *, host: str = "127.0.0.1",
                 on_retry: OnGatewayRetry | None = None, max_body_bytes: int = 64 * 1024 * 1024,
                 max_buffered_bytes: int = 32 * 1024 * 1024, revoke_grace_s: float = 2.0,
                 rng: random.Random | None = None, header_timeout_s: float = 30.0, body_timeout_s: float = 120.0,
                 max_connections: int = 4096, max_calls_per_grant: int = 64,
                 body_budget: ByteBudget | None = None) -> None:
        for name, value in (("header_timeout_s", header_timeout_s), ("body_timeout_s", body_timeout_s)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 86400:
                raise ValueError(f"Gateway {name} must be a number of seconds in (0, 86400), got {value!r}")
        for name, count in (("max_body_bytes", max_body_bytes), ("max_connections", max_connections),
                            ("max_calls_per_grant", max_calls_per_grant)):
            if isinstance(count, bool) or not isinstance(count, int) or count < 1:
                raise ValueError(f"Gateway {name} must be a positive integer, got {count!r}")
        self.signer = signer
        self.header_timeout_s = float(header_timeout_s)
        self.body_timeout_s = float(body_timeout_s)
        self.max_connections = max_connections
        self.max_calls_per_grant = max_calls_per_grant
        self.body_budget = body_budget or PROCESS_BODY_BUDGET
        self.stats = GatewayStats()
        self.open_connections = 0
        self._servers: list[asyncio.AbstractServer] = []
        self._secrets: set[str] = {signer.secret_text}
        self._redactor = Redactor(self._secrets)
        self.ledger = ledger or Ledger()
        self.host = host
        self.on_retry = on_retry
        self.max_buffered_bytes = max_buffered_bytes
        self.revoke_grace_s = revoke_grace_s
        self.base_url: str | None = None
        self._max_body = max_body_bytes
        self._rng = rng or random.Random()
        self._upstreams: dict[str, Upstream] = {}
        self._grants: dict[AttemptKey, Grant] = {}
        self._tokens: dict[str, Grant] = {}
        self._runner: web.AppRunner | None = None
        self._listeners: dict[str, str] = {}

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> str:
        """Listen on ``host`` (ephemeral port); returns ``http://host:port``."""
        if self._runner is not None:
            raise RuntimeError("Gateway already started")
        app = web.Application(client_max_size=self._max_body)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        # aiohttp closes a connection whose next request head is not complete within keepalive_timeout of
        # its opening or its last answer: that is the head deadline; a refused body is drained at most 1 s
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=5.0,
                                     keepalive_timeout=self.header_timeout_s,
                                     lingering_time=min(1.0, self.body_timeout_s))
        await self._runner.setup()
        self.base_url = await self.listen_on(self.host)
        return self.base_url

    async def listen_on(self, host: str) -> str:
        """Also listen on ``host`` (e.g. the Docker bridge gateway, for containers); returns its base URL.
        Idempotent per host."""
        if self._runner is None:
            raise RuntimeError("Gateway not started")
        if host in self._listeners:
            return self._listeners[host]
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, 0))
            handlers = self._runner.server
            assert handlers is not None
            server = await asyncio.get_running_loop().create_server(
                lambda: _CappedConnection(self, handlers), sock=sock, backlog=1024)
            self._servers.append(server)
        except BaseException:
            sock.close()
            raise
        port = sock.getsockname()[1]
        url = f"http://[{host}]:{port}" if family == socket.AF_INET6 else f"http://{host}:{port}"
        self._listeners[host] = url
        log.info("model gateway listening on %s", url)
        return url

    async def aclose(self) -> None:
        """Stop listening, end every call, close upstream connections (bounded, idempotent)."""
        for key in list(self._grants):
            self._revoke(key)
        servers, self._servers = self._servers, []
        for server in servers:
            server.close()
        runner, self._runner = self._runner, None
        if runner is not None:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(15):
                    await runner.cleanup()
        ups, self._upstreams = list(self._upstreams.values()), {}
        await asyncio.gather(*(pool.aclose() for u in ups for pool in u.pools),
                             *(u.liveness.aclose() for u in ups if u.liveness is not None), return_exceptions=True)
        self._listeners.clear()

    # ------------------------------------------------------------------ upstreams and grants

    def add_upstream(self, up: Upstream) -> None:
        """Route ``up.request``'s tries to ``up`` (one httpx pool per request, sized to its limiter)."""
        if up.http is None:
            host = httpx.URL(up.base_url).host
            local = host in ("127.0.0.1", "localhost", "::1")
            size = max(up.limiter.max_limit, 1)
            # httpcore's pool scans every connection it holds for each request: one pool of 100 connections
            # served ~370 calls/s at 100 at once here (its own is_socket_readable on every idle connection);
            # pools of POOL_CONNECTIONS kept warm, each allowed the whole limit so nothing queues in one
            up.pools = [httpx.AsyncClient(
                timeout=httpx.Timeout(up.timeout_s, connect=up.connect_timeout_s), trust_env=not local,
                limits=httpx.Limits(max_connections=size, max_keepalive_connections=min(size, POOL_CONNECTIONS)))
                for _ in range(-(-size // POOL_CONNECTIONS))]
            up.http = up.pools[0]
        elif not up.pools:
            up.pools = [up.http]
        if up.liveness is None:
            local = httpx.URL(up.base_url).host in ("127.0.0.1", "localhost", "::1")
            up.liveness = Liveness(up.base_url, verify=True, trust_env=not local, fresh_s=up.probe_after_s / 2)
        self._upstreams[up.request] = up
        held = {up.api_key, *(v for k, v in up.extra_headers.items() if _SECRET_HEADER.search(k))}
        if not held <= self._secrets:
            self._secrets |= {s for s in held if s}
            self._redactor = Redactor(self._secrets)

    async def remove_upstream(self, request: str) -> None:
        """Forget a request (its tries are revoked) and close its connections."""
        for key in [k for k in self._grants if k.request == request]:
            self._revoke(key)
        up = self._upstreams.pop(request, None)
        if up is not None and up.liveness is not None:
            await up.liveness.aclose()
        if up is not None:
            await asyncio.gather(*(pool.aclose() for pool in up.pools))

    def open_grant(self, key: AttemptKey, *, run_id: str = "", envelope_ttl_s: float | None = None,
                   budget: CallBudget | None = None) -> Grant:
        """Let ``key`` call its request's model until ``close_grant``; with ``envelope_ttl_s`` the grant
        carries a signed envelope as its key, else the route token is the key. A model call ``budget`` does
        not admit is answered 400 ``attempt_limit_reached`` without reaching the upstream."""
        if key.request not in self._upstreams:
            raise KeyError(f"no upstream registered for request {key.request!r}")
        self._revoke(key)
        grant = Grant(key=key, token=f"acr1_{secrets.token_urlsafe(24)}", budget=budget)
        if envelope_ttl_s is not None:
            grant.envelope = self.signer.issue(run_id, key, envelope_ttl_s)
        self._grants[key] = grant
        self._tokens[grant.token] = grant
        self.ledger.open(key)
        return grant

    async def close_grant(self, key: AttemptKey) -> GatewayUsage:
        """Revoke ``key`` (new calls get 401), give its calls in flight ``revoke_grace_s`` to finish, cancel
        the rest, and return what it used."""
        tasks = self._revoke(key)
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=self.revoke_grace_s)
            for t in pending:
                t.cancel()
            if pending:
                await asyncio.wait(pending, timeout=5.0)
        return self.ledger.take(key)

    def _revoke(self, key: AttemptKey) -> set[asyncio.Task[web.StreamResponse]]:
        grant = self._grants.pop(key, None)
        if grant is None:
            return set()
        self._tokens.pop(grant.token, None)
        return set(grant.inflight)

    def url_for(self, base: str, grant: Grant, *, anthropic: bool = False) -> str:
        """The base URL an agent uses for ``grant`` given the gateway's ``base`` as the agent reaches it:
        the plain ``/v1`` route for envelopes, the route-token path otherwise."""
        root = base.rstrip("/") if grant.envelope else f"{base.rstrip('/')}{ROUTE_PREFIX}{grant.token}"
        return root if anthropic else f"{root}/v1"

    # ------------------------------------------------------------------ request handling

    def _authorize(self, path_token: str | None, headers: Mapping[str, str]) -> Grant:
        if path_token is not None:
            grant = self._tokens.get(path_token)
            if grant is None:
                raise _Deny("Unknown or expired route: the attempt it belonged to has ended.", "invalid_api_key")
            return grant
        key = ""
        auth = headers.get("authorization", "")
        if auth[:7].lower() == "bearer ":
            key = auth[7:].strip()
        key = key or headers.get("x-api-key", "").strip() or headers.get("api-key", "").strip()
        if not key:
            raise _Deny("No API key provided.", "missing_api_key")
        if is_envelope(key):
            try:
                claims = self.signer.verify(key)
            except EnvelopeError as exc:
                code = "expired_api_key" if exc.reason == "expired" else "invalid_api_key"
                raise _Deny(str(exc), code) from None
            grant = self._grants.get(claims.key)
            if grant is None or grant.envelope is None:
                raise _Deny("The API key envelope belongs to an attempt that has ended.", "expired_api_key")
            return grant
        grant = self._tokens.get(key)
        if grant is None:
            raise _Deny("Incorrect API key provided.", "invalid_api_key")  # never echo the key
        return grant

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        try:
            return await self._route(request)
        except _Refused as refused:
            return refused.response

    async def _route(self, request: web.Request) -> web.StreamResponse:
        path = canonical_path(request.raw_path)
        if path == "/health":
            return web.json_response({"status": "ok"})
        route = served_route(path) if path is not None else None
        if route is None:  # nothing outside the served routes ever reaches an upstream
            self.stats.not_found += 1
            shown = request.raw_path.split("?", 1)[0][:200]
            return error_response(404, f"Unknown request URL: {request.method} {shown!r}; the gateway serves "
                                  "/v1/chat/completions, /v1/completions, /v1/responses, /v1/messages, "
                                  "/v1/messages/count_tokens and /v1/models[/<id>].", code="unknown_url")
        path_token, api_path = route
        declared = request.content_length
        if declared is not None and declared > self._max_body:
            raise _Refused(self._too_large_body(declared))
        try:
            grant = self._authorize(path_token, request.headers)
        except _Deny as deny:
            return error_response(401, str(deny), code=deny.code)
        if api_path in _POST_PATHS:
            if request.method != "POST":
                return error_response(405, f"Method {request.method} not allowed on /v1/{api_path}; use POST.")
        elif request.method != "GET":
            return error_response(405, f"Method {request.method} not allowed on /v1/{api_path}; use GET.")
        up = self._upstreams.get(grant.key.request)
        if up is None:
            return error_response(401, "The request this key belongs to has ended.", code="expired_api_key")
        if len(grant.inflight) >= self.max_calls_per_grant:
            self.stats.grant_busy += 1
            return error_response(429, f"This key already has {len(grant.inflight)} calls in flight "
                                  f"(max_calls_per_grant={self.max_calls_per_grant}); wait for one to end.",
                                  type_="rate_limit_error", code="too_many_calls")
        call = _Call(api_path)
        if grant.budget is not None and api_path in _CHARGED_PATHS:
            refused = grant.budget.admit()
            if refused is not None:
                self.stats.limit_refused += 1
                return error_response(400, f"This attempt may make no more model calls: {refused}.",
                                      code="attempt_limit_reached")
            call.budget = grant.budget
        with counting_waits(grant.budget.wait_clock if grant.budget is not None else None):
            work = asyncio.ensure_future(self._proxy(request, up, grant.key, call))  # inherits the clock
        grant.inflight.add(work)
        try:
            return await work
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # the server is stopping or the client went away
            # revoked while running: the try ended
            if call.response is not None and call.response.prepared:
                return call.response
            return error_response(401, "The attempt this key belongs to has ended.", code="expired_api_key")
        finally:
            grant.inflight.discard(work)

    def _too_large_body(self, size: int) -> web.Response:
        self.stats.too_large += 1
        return error_response(413, f"Request body of {size} bytes or more is larger than the gateway's "
                              f"max_body_bytes={self._max_body}.", code="request_too_large")

    async def _receive_body(self, request: web.Request, lease: BodyLease) -> bytes:
        """The request body, read within ``body_timeout_s`` and taken from the body budget before it is
        buffered (``_Refused`` when it is too large, too slow or does not fit the budget)."""
        if request.method != "POST" or not request.body_exists:
            return b""
        declared = request.content_length
        if declared is not None and not lease.grow_to(declared):
            raise _Refused(self._busy_body(declared))
        chunks: list[bytes] = []
        got = 0
        try:
            async with asyncio.timeout(self.body_timeout_s):
                while chunk := await request.content.readany():
                    got += len(chunk)
                    if got > self._max_body:
                        raise _Refused(self._too_large_body(got))
                    if not lease.grow_to(got):
                        raise _Refused(self._busy_body(got))
                    chunks.append(chunk)
        except TimeoutError:
            self.stats.body_timeouts += 1
            raise _Refused(error_response(
                408, f"The request body was not through within body_timeout_s={self.body_timeout_s:g}s "
                f"({got} bytes read).", code="request_timeout")) from None
        return b"".join(chunks)

    def _busy_body(self, size: int) -> web.Response:
        self.stats.busy += 1
        return error_response(503, f"The gateway's request-body budget ({self.body_budget.limit} bytes for all "
                              f"bodies in flight) has no room for {size} more bytes now; retry shortly.",
                              type_="server_error", code="gateway_busy", headers={"Retry-After": "1"})

    def _prepare_body(self, request: web.Request, raw: bytes, up: Upstream, call: _Call) -> tuple[bytes, bool]:
        """(body to send upstream, whether usage was injected into a chat stream)."""
        if request.method != "POST" or not raw:
            return raw, False
        try:
            body = _DEC.decode(raw)
        except msgspec.DecodeError:
            return raw, False  # the upstream explains what is wrong with it
        if not isinstance(body, dict):
            return raw, False
        changed = False
        if body.get("model") != up.model_id:
            body["model"] = up.model_id
            changed = True
        call.stream = body.get("stream") is True
        injected = False
        if call.stream and protocol_of(call.api_path) == "chat":
            opts = body.get("stream_options")
            if opts is None or (isinstance(opts, dict) and "include_usage" not in opts):
                body["stream_options"] = {**(opts or {}), "include_usage": True}
                injected = changed = True
        return (_ENC.encode(body) if changed else raw), injected

    def _upstream_request(self, request: web.Request, up: Upstream, call: _Call, body: bytes) -> httpx.Request:
        assert up.http is not None
        headers = {k: v for k in _FORWARD_REQUEST_HEADERS if (v := request.headers.get(k))}
        headers["Accept-Encoding"] = "identity"  # usage is read from the bytes as they pass
        headers["User-Agent"] = "agentcompass-gateway"
        headers.update(up.extra_headers)
        headers.update(up.auth_headers(call.api_path, request.headers))
        url = up.url(call.api_path)
        if query := request.rel_url.raw_query_string:
            url = f"{url}?{query}"
        return up.http.build_request(request.method, url, content=body if request.method == "POST" else None,
                                     headers=headers)

    async def _proxy(self, request: web.Request, up: Upstream, key: AttemptKey, call: _Call) -> web.StreamResponse:
        lease = BodyLease(self.body_budget)
        try:
            try:
                raw = await self._receive_body(request, lease)
            except _Refused as refused:
                return refused.response
            except ConnectionError:  # the client went away mid-body: nobody to answer
                return error_response(400, "The client went away.")
            return await self._relay(request, up, key, call, raw)
        finally:
            lease.release()

    async def _relay(self, request: web.Request, up: Upstream, key: AttemptKey, call: _Call,
                     raw: bytes) -> web.StreamResponse:
        error: str | None = None
        try:
            body, injected = self._prepare_body(request, raw, up, call)
            answer = await self._send_with_retries(request, up, key, call, body, injected)
            if isinstance(answer, str):
                error = answer
                return error_response(504 if "timed out" in error else 502, error, type_="upstream_error",
                                      code="upstream_unavailable")
            passed = False
            try:
                out = await self._forward(request, answer, call, injected)
                passed = True
                return out
            except ConnectionError:
                if call.usage_reader is None or not call.usage_reader.finished or call.response is None:
                    raise
                # the client had the whole answer: a Responses client (Codex) hangs up at response.completed
                passed = True
                return call.response
            except TimeoutError:
                if not answer.deadline.scope.expired():
                    raise
                reason = answer.deadline.reason(call.usage_reader is not None)
                error = f"the model endpoint timed out: {reason}"
                await answer.resp.aclose()  # the upstream first: it may be writing keep-alives forever
                return await self._cut(request, call, f"The model endpoint timed out: {reason}.")
            finally:
                up.limiter.release(answer.ticket, answer.outcome if passed else "error", answer.retry_after)
                await answer.resp.aclose()
        except asyncio.CancelledError:
            error = "cancelled (the try ended or the gateway stopped)"
            raise
        except ConnectionError as exc:  # the client went away mid-answer: nobody to answer
            error = f"the client went away ({type(exc).__name__})"
            if call.response is not None and call.response.prepared:
                return call.response
            return error_response(502, "The client went away.", type_="upstream_error")
        except httpx.HTTPError as exc:
            error = f"the model endpoint failed mid-answer ({type(exc).__name__})"
            if call.response is not None and call.response.prepared:
                return call.response
            return error_response(502, f"The model endpoint failed mid-answer ({type(exc).__name__}).",
                                  type_="upstream_error", code="upstream_unavailable")
        finally:
            usage = call.usage_reader.usage if call.usage_reader is not None else call.usage
            self.ledger.record(key, CallRecord(
                path=call.api_path, status=call.status, latency_s=round(time.monotonic() - call.started, 6),
                stream=call.stream, retries=call.retries, usage=usage, error=error))
            if call.budget is not None and 200 <= call.status < 300:
                call.budget.charge(usage)

    async def _send_with_retries(self, request: web.Request, up: Upstream, key: AttemptKey, call: _Call,
                                 body: bytes, injected: bool) -> _Answer | str:
        """The first answer worth passing on (holding its limiter slot), or why there is none."""
        assert up.http is not None and up.liveness is not None
        failures = unresponsive = 0
        while True:
            try:
                async with asyncio.timeout(up.timeout_s):
                    ticket = await up.limiter.acquire()
            except TimeoutError:
                return f"no capacity at the model endpoint within {up.timeout_s:g}s"
            retry_after = None
            deadline = up.deadline()
            try:
                async with deadline.scope:
                    sent = up.pool().send(self._upstream_request(request, up, call, body), stream=True)
                    if up.probe_after_s < up.timeout_s:
                        resp = await probed(sent, up.liveness, up.probe_after_s, up.probe_timeout_s)
                    else:
                        resp = await sent
            except Unresponsive:
                up.limiter.release(ticket, "error")
                unresponsive += 1
                kind = ErrorKind.MODEL_CONNECTION_ERROR
                last = (f"the model endpoint answered neither the call in {up.probe_after_s:g}s nor a probe in "
                        f"{up.probe_timeout_s:g}s")
            except TimeoutError:
                up.limiter.release(ticket, "error")
                if not deadline.scope.expired():
                    raise
                kind = ErrorKind.MODEL_CONNECTION_ERROR
                last = f"the model endpoint timed out ({deadline.reason(False)})"
            except httpx.TimeoutException as exc:
                up.limiter.release(ticket, "error")
                kind, last = ErrorKind.MODEL_CONNECTION_ERROR, f"the model endpoint timed out ({type(exc).__name__})"
            except httpx.RequestError as exc:
                up.limiter.release(ticket, "error")
                kind = ErrorKind.MODEL_CONNECTION_ERROR
                last = f"the model endpoint is unreachable ({type(exc).__name__})"
            except BaseException:
                up.limiter.release(ticket, "error")
                raise
            else:
                call.status = resp.status_code
                if injected and resp.status_code == 400:
                    # an upstream that does not know stream_options: ask again without it, at once
                    up.limiter.release(ticket, "error")
                    await resp.aclose()
                    body, injected = self._without_injection(body), False
                    continue
                if resp.status_code < 400:
                    return _Answer(resp, ticket, deadline, "ok", max_bytes=up.max_response_bytes)
                kind = model_error_kind(resp.status_code)
                outcome = outcome_of(kind)
                if kind not in TRANSIENT_MODEL_KINDS:
                    return _Answer(resp, ticket, deadline, outcome, max_bytes=up.max_response_bytes)
                retry_after = up.policy.cap(parse_retry_after(resp.headers))  # max_backoff_s bounds the pause too
                if not up.policy.allows(kind, failures + 1, 0):
                    # out of tries: the client gets it
                    return _Answer(resp, ticket, deadline, outcome, retry_after, max_bytes=up.max_response_bytes)
                up.limiter.release(ticket, outcome, retry_after)
                await resp.aclose()
                last = f"HTTP {resp.status_code}"
            failures += 1
            if not up.policy.allows(kind, failures, 0, unresponsive):
                return f"{last[0].upper()}{last[1:]} after {failures} tries."
            call.retries = failures
            wait = up.policy.wait_s(failures, retry_after, self._rng)
            log.debug("gateway %s: try %d failed (%s); retrying in %.2fs", key.request, failures, last, wait)
            if self.on_retry is not None:
                self.on_retry(key, kind, wait, failures)
            await pause(wait)

    @staticmethod
    def _without_injection(body: bytes) -> bytes:
        obj = _DEC.decode(body)
        opts = dict(obj.get("stream_options") or {})
        opts.pop("include_usage", None)
        if opts:
            obj["stream_options"] = opts
        else:
            obj.pop("stream_options", None)
        return _ENC.encode(obj)

    # ------------------------------------------------------------------ answering

    def _response_headers(self, resp: httpx.Response) -> dict[str, str]:
        return {k: self._redactor.text(v) for k, v in resp.headers.items()
                if k.lower().startswith(_FORWARD_RESPONSE_PREFIXES)}

    @staticmethod
    async def _send(out: web.StreamResponse, call: _Call, data: bytes) -> None:
        """Relay ``data`` to the client through the call's redactor."""
        assert call.redact is not None
        if masked := call.redact.feed(data):
            await out.write(masked)

    @staticmethod
    async def _end(out: web.StreamResponse, call: _Call) -> None:
        """End a relayed body: what the redactor still holds, then the body's end."""
        assert call.redact is not None
        if tail := call.redact.flush():
            await out.write(tail)
        await out.write_eof()

    async def _forward(self, request: web.Request, answer: _Answer, call: _Call,
                       injected: bool) -> web.StreamResponse:
        """Pass ``answer`` on within its deadline (``TimeoutError`` when it expires)."""
        resp = answer.resp
        headers = self._response_headers(resp)
        protocol: Protocol = protocol_of(call.api_path)
        call.redact = StreamRedactor(self._redactor)
        async with answer.deadline.renew():
            if "text/event-stream" in resp.headers.get("content-type", ""):
                call.stream = True
                return await self._forward_stream(request, resp, call, headers, protocol, injected, answer.deadline,
                                                  answer.max_bytes)
            buf = bytearray()
            chunks = resp.aiter_raw()  # one iterator: a second aiter_raw() of a started body raises
            async for chunk in chunks:
                buf += chunk
                if len(buf) > min(self.max_buffered_bytes, answer.max_bytes):  # stream it through, usage unknown
                    out = web.StreamResponse(status=resp.status_code, headers=headers)
                    call.response = out
                    call.passthrough = True
                    await out.prepare(request)
                    if len(buf) > answer.max_bytes:
                        return self._too_large(request, out, answer.max_bytes)
                    await self._send(out, call, bytes(buf))
                    sent = len(buf)
                    async for more in chunks:
                        sent += len(more)
                        if sent > answer.max_bytes:
                            return self._too_large(request, out, answer.max_bytes)
                        await self._send(out, call, more)
                    await self._end(out, call)
                    return out
        data = bytes(buf)
        if resp.status_code < 400 and protocol != "other":
            call.usage = usage_from_body(data, protocol)
        return web.Response(status=resp.status_code, body=self._redactor.bytes(data), headers=headers)

    async def _forward_stream(self, request: web.Request, resp: httpx.Response, call: _Call,
                              headers: dict[str, str], protocol: Protocol, injected: bool,
                              deadline: Deadline, max_bytes: int) -> web.StreamResponse:
        reader = call.usage_reader = StreamUsage(protocol, drop_injected_usage=injected)
        out = web.StreamResponse(status=resp.status_code, headers=headers)
        call.response = out
        await out.prepare(request)
        pending = b""
        parsing = True
        sent = 0
        async for chunk in resp.aiter_raw():
            sent += len(chunk)
            if sent > max_bytes:
                return self._too_large(request, out, max_bytes)
            if not parsing:
                deadline.seen()
                await self._send(out, call, chunk)
                continue
            pending += chunk
            send = bytearray()
            pos = 0
            progress = False
            for m in EVENT_END.finditer(pending):
                event = pending[pos:m.start()]
                if reader.feed(event):
                    send += pending[pos:m.end()]
                if not progress:
                    progress = not is_keepalive(event)
                pos = m.end()
            pending = pending[pos:]
            if len(pending) > _MAX_EVENT_BYTES:  # an absurd event: stop looking, pass bytes through
                send += pending
                pending = b""
                parsing = False
                call.passthrough = progress = True
            if progress:
                deadline.seen()
            if send:
                await self._send(out, call, bytes(send))
        if pending and (not parsing or reader.feed(pending.rstrip(b"\r\n"))):
            await self._send(out, call, pending)
        await self._end(out, call)
        return out

    @staticmethod
    def _too_large(request: web.Request, out: web.StreamResponse, max_bytes: int) -> web.StreamResponse:
        """Stop relaying an answer past ``max_bytes``: the connection is closed before the body's end."""
        log.warning("upstream answer larger than max_response_bytes=%d: cut", max_bytes)
        if request.transport is not None:
            request.transport.close()
        return out

    async def _cut(self, request: web.Request, call: _Call, message: str) -> web.StreamResponse:
        """End a call whose upstream try ran out of time: a 504 if nothing was sent yet; else an error event
        (when the stream is at an event boundary) and the connection closed before the stream's end."""
        out = call.response
        if out is None or not out.prepared:
            return error_response(504, message, type_="upstream_error", code="upstream_timeout")
        if call.usage_reader is not None and not call.passthrough:
            with contextlib.suppress(ConnectionError, TimeoutError):
                async with asyncio.timeout(_CUT_WRITE_S):
                    held = call.redact.flush() if call.redact is not None else b""
                    await out.write(held + _error_event(call.usage_reader.protocol, message))
        if request.transport is not None:
            request.transport.close()  # no final chunk: the client's read of the body fails
        return out


def _error_event(protocol: Protocol, message: str) -> bytes:
    """An SSE event that each protocol's clients (and SDKs) read as an error ending the stream."""
    if protocol == "messages":
        data = _ENC.encode({"type": "error", "error": {"type": "api_error", "message": message}})
        return b"event: error\ndata: " + data + b"\n\n"
    if protocol == "responses":
        data = _ENC.encode({"type": "error", "code": "upstream_timeout", "message": message, "param": None})
        return b"event: error\ndata: " + data + b"\n\n"
    data = _ENC.encode({"error": {"message": message, "type": "upstream_error", "param": None,
                                  "code": "upstream_timeout"}})
    return b"data: " + data + b"\n\n"


_REFUSED_BODY = _ENC.encode({"error": {"message": "The model gateway has too many open connections; retry shortly.",
                                       "type": "server_error", "param": None, "code": "too_many_connections"}})
_REFUSED = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
            b"Connection: close\r\nContent-Length: " + str(len(_REFUSED_BODY)).encode() + b"\r\n\r\n" + _REFUSED_BODY)


class _CappedConnection(asyncio.Protocol):
    """One accepted connection: counted against ``max_connections`` and handed to aiohttp's handler, or (over
    the cap) answered 503 and closed before aiohttp sees it."""

    __slots__ = ("_gateway", "_handler", "_make")

    def __init__(self, gateway: Gateway, make: Callable[[], asyncio.Protocol]) -> None:
        self._gateway = gateway
        self._make = make
        self._handler: asyncio.Protocol | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        gw = self._gateway
        if gw.open_connections >= gw.max_connections:
            gw.stats.refused_connections += 1
            assert isinstance(transport, asyncio.WriteTransport)
            transport.write(_REFUSED)
            transport.close()
            return
        gw.open_connections += 1
        self._handler = self._make()
        self._handler.connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._handler is not None:
            self._gateway.open_connections -= 1
            handler, self._handler = self._handler, None
            handler.connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._handler is not None:
            self._handler.data_received(data)

    def eof_received(self) -> bool | None:
        return self._handler.eof_received() if self._handler is not None else None

    def pause_writing(self) -> None:
        if self._handler is not None:
            self._handler.pause_writing()

    def resume_writing(self) -> None:
        if self._handler is not None:
            self._handler.resume_writing()
