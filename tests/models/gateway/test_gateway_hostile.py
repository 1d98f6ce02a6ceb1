"""The model gateway against hostile clients (sandboxed agents) and echoing upstreams: raw sockets, real servers.

Timing tests configure small deadlines and assert on what the gateway decided (the status it answered, the
connection it closed, its counters), never on how long anything took; the long bounds are only there so a
gateway that never decides fails instead of hanging.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest

from agentcompass.models.adaptive import AdaptiveLimiter
from agentcompass.models.gateway.envelope import AttemptKey, EnvelopeSigner
from agentcompass.models.gateway.server import Gateway, Upstream

from .._raw_http import http_response, raw_server
from ..gateway_helpers import FAST_RETRIES, KEY

REAL_KEY = "sk-real-0123456789abcdefghijklmnopqrstuvwxyzABCDEF"
#: a bound on anything the gateway must decide; a gateway that never decides fails at it instead of hanging
DECIDE_BOUND_S = 15.0
OK_MODELS = http_response(200, {"object": "list", "data": [{"id": "scripted", "object": "model"}]})


@contextlib.asynccontextmanager
async def gateway(base_url: str, **kwargs: Any) -> AsyncIterator[Gateway]:
    """A started gateway with ``kwargs`` routing request "req" to ``base_url`` with the real key."""
    gw = Gateway(EnvelopeSigner(), revoke_grace_s=0.3, **kwargs)
    await gw.start()
    try:
        gw.add_upstream(Upstream(request="req", model_id="scripted", base_url=base_url, api_key=REAL_KEY,
                                 api_protocol="openai-chat", limiter=AdaptiveLimiter("test", 8), policy=FAST_RETRIES,
                                 timeout_s=10.0, connect_timeout_s=2.0))
        yield gw
    finally:
        await gw.aclose()


async def connect(base_url: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    host, port = base_url.removeprefix("http://").split(":")
    return await asyncio.open_connection(host, int(port))


async def raw_exchange(base_url: str, data: bytes) -> bytes:
    """Send ``data`` on a new connection and read until the gateway closes it."""
    reader, writer = await connect(base_url)
    try:
        writer.write(data)
        await writer.drain()
        async with asyncio.timeout(DECIDE_BOUND_S):
            return await reader.read()
    finally:
        writer.close()


def status_of(answer: bytes) -> int:
    assert answer.startswith(b"HTTP/1.1 "), answer[:200]
    return int(answer.split(b" ", 2)[1])


def body_of(answer: bytes) -> Any:
    return json.loads(answer.split(b"\r\n\r\n", 1)[1])


async def until(cond: Callable[[], bool], what: str) -> None:
    """Wait (bounded) until ``cond()`` holds."""
    async with asyncio.timeout(DECIDE_BOUND_S):
        while not cond():  # noqa: ASYNC110 - the gateway's counters have nothing to await
            await asyncio.sleep(0.01)
    assert cond(), what


# ---------------------------------------------------------------------------------------- path traversal

TRAVERSALS = [
    "/v1/models/../../secret",
    "/v1/models/..%2F..%2Fsecret",
    "/v1/models/%2e%2e/%2e%2e/secret",
    "/v1/models/%2E%2E%2f%2E%2E%2fsecret",
    "/v1/models/.%2e/.%2e/secret",
    "/v1//models/..//..//secret",
    "/v1/models/x/../../../secret",
    "/v1/models/%252e%252e/%252e%252e/secret",
    "/v1/models/..%5C..%5Csecret",
    "/v1/models%2F..%2F..%2Fsecret",
    "/r/{token}/v1/models/../../../../secret",
    "/r/{token}/v1/models/..%2F..%2F..%2F..%2Fsecret",
]


@pytest.mark.parametrize("path", TRAVERSALS)
async def test_a_path_outside_the_served_routes_is_a_404_that_never_reaches_the_upstream(path: str) -> None:
    async with raw_server(OK_MODELS) as upstream, gateway(upstream.base_url) as gw:
        assert gw.base_url is not None
        grant = gw.open_grant(KEY)
        head = (f"GET {path.format(token=grant.token)} HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer {grant.token}"
                "\r\nConnection: close\r\n\r\n")
        answer = await raw_exchange(gw.base_url, head.encode())
        # control: the served route does reach the upstream, with the key, on its canonical path
        served = await raw_exchange(gw.base_url, f"GET /v1//models/./ HTTP/1.1\r\nHost: gw\r\nAuthorization: "
                                                  f"Bearer {grant.token}\r\nConnection: close\r\n\r\n".encode())
    assert [h.split("\r\n")[0] for h in upstream.heads] == ["GET /v1/models HTTP/1.1"], upstream.heads
    assert status_of(answer) == 404, answer[:300]
    assert body_of(answer)["error"]["code"] == "unknown_url"
    assert REAL_KEY.encode() not in answer
    assert status_of(served) == 200


# ---------------------------------------------------------------------------------------- key echo

class EchoUpstream:
    """Answers each request with ``answer(authorization header)``, written in ``parts``; each part after the
    first waits for ``go`` (set by the test once the client saw what came before)."""

    def __init__(self, answer: Callable[[str], list[bytes]]) -> None:
        self.answer = answer
        self.go = asyncio.Event()
        self.base_url = ""
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> EchoUpstream:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.base_url = f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}/v1"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
            auth, length = "", 0
            for line in head.split("\r\n")[1:]:
                name, _, value = line.partition(":")
                if name.lower() == "authorization":
                    auth = value.strip()
                elif name.lower() == "content-length":
                    length = int(value)
            await reader.readexactly(length)
            parts = self.answer(auth)
            for i, part in enumerate(parts):
                if i:
                    async with asyncio.timeout(DECIDE_BOUND_S):
                        await self.go.wait()
                writer.write(part)
                await writer.drain()
            await reader.read()
        except (asyncio.IncompleteReadError, ConnectionError, TimeoutError):
            pass
        finally:
            writer.close()


def _echo_401(auth: str) -> list[bytes]:
    return [http_response(401, {"error": {"message": f"Invalid header Authorization: {auth}", "type": "auth"}},
                          {"x-request-id": auth})]


async def test_an_upstream_error_quoting_the_key_reaches_the_agent_masked() -> None:
    async with EchoUpstream(_echo_401) as upstream, gateway(upstream.base_url) as gw:
        grant = gw.open_grant(KEY)
        async with httpx.AsyncClient(timeout=DECIDE_BOUND_S) as http:
            resp = await http.post(f"{gw.url_for(gw.base_url or '', grant)}/chat/completions",
                                   json={"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    assert resp.status_code == 401
    assert "Bearer ***" in resp.json()["error"]["message"]  # the upstream did echo it: the test can fail
    seen = resp.text + json.dumps(dict(resp.headers))
    assert REAL_KEY not in seen and REAL_KEY[:24] not in seen, seen


def _split_key_answer(kind: str) -> Callable[[str], list[bytes]]:
    """An answer echoing the Authorization header, cut into two writes in the middle of the key."""

    def answer(auth: str) -> list[bytes]:
        cut = len("Bearer ") + len(REAL_KEY) // 2
        if kind == "sse":
            first = b'data: {"id":"c1","object":"chat.completion.chunk","choices":[]}\n\n'
            body = first + f'data: {{"echo":"{auth}"}}\n\ndata: [DONE]\n\n'.encode()
            split = len(first) + len('data: {"echo":"') + cut
            ctype = "text/event-stream"
        else:
            pad = '{"pad":"' + "x" * 8192 + '","echo":"'
            body = (pad + auth + '"}').encode()
            split = len(pad) + cut
            ctype = "application/json"
        head = f"HTTP/1.1 200 OK\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n\r\n".encode()
        return [head + body[:split], body[split:]]

    return answer


@pytest.mark.parametrize("kind", ["sse", "json-passthrough"])
async def test_a_key_split_across_chunks_of_a_relayed_body_is_masked(kind: str) -> None:
    """The first part (ending mid-key) is relayed before the upstream writes the second; the client must
    never see the key whole or its first half."""
    async with EchoUpstream(_split_key_answer(kind)) as upstream, \
            gateway(upstream.base_url, max_buffered_bytes=1024) as gw:
        grant = gw.open_grant(KEY)
        got = b""
        async with httpx.AsyncClient(timeout=DECIDE_BOUND_S) as http, \
                http.stream("POST", f"{gw.url_for(gw.base_url or '', grant)}/chat/completions",
                            json={"model": "m", "stream": kind == "sse",
                                  "messages": [{"role": "user", "content": "hi"}]}) as resp:
            assert resp.status_code == 200
            async for chunk in resp.aiter_raw():
                got += chunk
                if not upstream.go.is_set() and (b"chat.completion.chunk" in got or got.count(b"x") >= 8192):
                    upstream.go.set()  # the first part went through on its own: now the rest
    assert upstream.go.is_set()
    assert b"Bearer ***" in got, got[-300:]
    assert REAL_KEY[: len(REAL_KEY) // 2].encode() not in got, got[-300:]


# ---------------------------------------------------------------------------------------- read deadlines

async def _trickle_until_closed(base_url: str, first: bytes, drip: bytes) -> bytes:
    """Send ``first``, then ``drip`` a byte at a time until the gateway answers or closes the connection; what
    it answered (the drip stops at the answer's first byte; a byte sent just as the gateway closed resets the
    connection, which counts as closed with what was read before)."""
    reader, writer = await connect(base_url)
    read = asyncio.ensure_future(reader.read(65536))
    try:
        writer.write(first)
        async with asyncio.timeout(DECIDE_BOUND_S):
            i = 0
            while not read.done():
                try:
                    writer.write(drip[i % len(drip):i % len(drip) + 1])
                    await writer.drain()
                except ConnectionError:
                    break
                i += 1
                await asyncio.wait([read], timeout=0.02)  # pacing of the drip, not synchronisation
            answer = b""
            try:  # a drip byte that lands after the gateway's close makes the kernel reset: closed all the same
                answer = await read
                while answer and (more := await reader.read(65536)):
                    answer += more
            except ConnectionResetError:
                pass
            return answer
    finally:
        read.cancel()
        writer.close()


@pytest.mark.parametrize("first", [b"", b"POST /v1/chat/completions HTTP/1.1\r\n"], ids=["silent", "trickled-head"])
async def test_a_head_not_complete_within_the_header_deadline_is_cut(first: bytes) -> None:
    async with raw_server(OK_MODELS) as upstream, gateway(upstream.base_url, header_timeout_s=0.3) as gw:
        assert gw.base_url is not None
        drip = b"X-Slow: y\r\n" if first else b""
        if drip:
            answer = await _trickle_until_closed(gw.base_url, first, drip)
        else:
            answer = await raw_exchange(gw.base_url, b"")
        assert answer == b""  # closed, nothing answered
        await until(lambda: gw.open_connections == 0, "the gateway still counts the connection")
    assert upstream.heads == []


async def test_a_body_slower_than_the_body_deadline_gets_408_and_the_connection_closed() -> None:
    async with raw_server(OK_MODELS) as upstream, gateway(upstream.base_url, body_timeout_s=0.3) as gw:
        assert gw.base_url is not None
        grant = gw.open_grant(KEY)
        head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer {grant.token}\r\n"
                "Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n")
        answer = await _trickle_until_closed(gw.base_url, head.encode(), b"x")
        assert status_of(answer) == 408, answer[:300]
        assert "body" in body_of(answer)["error"]["message"]
        assert gw.stats.body_timeouts == 1
        assert gw.body_budget.used == 0
    assert upstream.heads == []


async def test_a_declared_length_over_the_cap_gets_413_before_any_body_is_read() -> None:
    async with raw_server(OK_MODELS) as upstream, gateway(upstream.base_url, max_body_bytes=1 << 20) as gw:
        assert gw.base_url is not None
        grant = gw.open_grant(KEY)
        head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer {grant.token}\r\n"
                "Content-Type: application/json\r\nContent-Length: 1000000000000\r\n\r\n")
        answer = await raw_exchange(gw.base_url, head.encode())  # no body byte is ever sent
        assert status_of(answer) == 413, answer[:300]
        assert body_of(answer)["error"]["code"] == "request_too_large"
        assert gw.stats.too_large == 1 and gw.body_budget.used == 0
    assert upstream.heads == []


async def test_an_undeclared_body_over_the_cap_gets_413() -> None:
    async with raw_server(OK_MODELS) as upstream, gateway(upstream.base_url, max_body_bytes=64 << 10) as gw:
        assert gw.base_url is not None
        grant = gw.open_grant(KEY)
        chunk = b"x" * (16 << 10)
        body = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(8)) + b"0\r\n\r\n"
        head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer {grant.token}\r\n"
                "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
        answer = await raw_exchange(gw.base_url, head.encode() + body)
        assert status_of(answer) == 413, answer[:300]
        assert gw.stats.too_large == 1 and gw.body_budget.used == 0
    assert upstream.heads == []


async def test_connections_over_the_total_cap_are_refused_until_one_closes() -> None:
    async with raw_server(OK_MODELS) as upstream, gateway(upstream.base_url, max_connections=3) as gw:
        assert gw.base_url is not None
        held = [await connect(gw.base_url) for _ in range(3)]
        await until(lambda: gw.open_connections == 3, "the gateway did not count the open connections")
        refused = await raw_exchange(gw.base_url, b"GET /health HTTP/1.1\r\nHost: gw\r\n\r\n")
        assert status_of(refused) == 503, refused[:300]
        assert gw.stats.refused_connections == 1
        held.pop()[1].close()
        await until(lambda: gw.open_connections == 2, "the gateway still counts a closed connection")
        ok = await raw_exchange(gw.base_url, b"GET /health HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n")
        assert status_of(ok) == 200
        for _, w in held:
            w.close()
    assert upstream.heads == []


async def test_calls_over_the_per_grant_cap_get_429_while_other_grants_still_call() -> None:
    other = AttemptKey("req", "task-2", 1, 1)
    async with raw_server(None) as upstream, gateway(upstream.base_url, max_calls_per_grant=2) as gw:
        grant, grant2 = gw.open_grant(KEY), gw.open_grant(other)
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        async with httpx.AsyncClient(timeout=DECIDE_BOUND_S) as http:
            def call(g: Any) -> Awaitable[httpx.Response]:
                return http.post(f"{gw.url_for(gw.base_url or '', g)}/chat/completions", json=body)

            hanging = [asyncio.ensure_future(call(grant)) for _ in range(2)]
            await until(lambda: len(upstream.heads) == 2, "two calls did not reach the upstream")
            over = await call(grant)
            third = asyncio.ensure_future(call(grant2))
            await until(lambda: len(upstream.heads) == 3, "another grant's call did not reach the upstream")
            await gw.close_grant(KEY)
            await gw.close_grant(other)
            await asyncio.gather(*hanging, third, return_exceptions=True)
    assert over.status_code == 429, over.text
    assert over.json()["error"]["code"] == "too_many_calls"
    assert gw.stats.grant_busy == 1


# ---------------------------------------------------------------------------------------- body memory

async def test_bodies_over_the_process_budget_are_refused_and_the_budget_returns_to_zero() -> None:
    from agentcompass.models.gateway.body_budget import ByteBudget

    size = 100_000
    budget = ByteBudget(2 * size + size // 2)  # room for two bodies, not three
    async with raw_server(OK_MODELS) as upstream, gateway(upstream.base_url, body_budget=budget) as gw:
        assert gw.base_url is not None
        grant = gw.open_grant(KEY)
        body = json.dumps({"model": "m", "messages": []}).encode()
        body += b" " * (size - len(body))
        head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer {grant.token}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {size}\r\nConnection: close\r\n\r\n").encode()
        # two bodies half sent: both are admitted and hold their bytes of the budget
        held = [await connect(gw.base_url) for _ in range(2)]
        for _, w in held:
            w.write(head + body[: size // 2])
        await until(lambda: budget.used == 2 * size, "the admitted bodies are not counted")
        refused = await asyncio.gather(*(raw_exchange(gw.base_url, head + body) for _ in range(4)))
        assert [status_of(a) for a in refused] == [503] * 4, [a[:200] for a in refused]
        assert "budget" in body_of(refused[0])["error"]["message"]
        assert gw.stats.busy == 4
        for _, w in held:
            w.write(body[size // 2:])
        answers = []
        for r, _ in held:
            async with asyncio.timeout(DECIDE_BOUND_S):
                answers.append(await r.read())
        assert [status_of(a) for a in answers] == [200, 200], [a[:200] for a in answers]
        for _, w in held:
            w.close()
        await until(lambda: budget.used == 0, "the budget did not return to zero")
    assert len(upstream.heads) == 2
