"""A Responses client that hangs up as soon as it has ``response.completed`` (Codex does) had a served call: the
gateway books it as such (no failure, its usage), even though the upstream's stream was still open."""

from __future__ import annotations

import asyncio
import contextlib
from urllib.parse import urlsplit

import msgspec

from ..gateway_helpers import KEY, running_gateway

USAGE = {"input_tokens": 11, "output_tokens": 3, "total_tokens": 14}
COMPLETED = {"type": "response.completed", "sequence_number": 1,
             "response": {"id": "resp_1", "object": "response", "status": "completed", "output": [], "usage": USAGE}}


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


async def _upstream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client_gone: asyncio.Event) -> None:
    """Answers one streamed call: ``response.completed``, then (once the client is gone) a keep-alive and the end."""
    with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
        length = next(int(line.split(":", 1)[1]) for line in head.split("\r\n")
                      if line.lower().startswith("content-length:"))
        await reader.readexactly(length)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
        writer.write(_chunk(b"event: response.completed\ndata: " + msgspec.json.encode(COMPLETED) + b"\n\n"))
        await writer.drain()
        async with asyncio.timeout(30):
            await client_gone.wait()
        writer.write(_chunk(b": keep-alive\n\n") + b"0\r\n\r\n")
        await writer.drain()
    writer.close()


async def test_a_client_leaving_after_response_completed_had_a_served_call() -> None:
    client_gone = asyncio.Event()
    server = await asyncio.start_server(lambda r, w: _upstream(r, w, client_gone), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with running_gateway(f"http://127.0.0.1:{port}/v1", protocol="openai-responses") as gw:
            assert gw.base_url is not None
            url = urlsplit(gw.url_for(gw.base_url, gw.open_grant(KEY)))
            body = msgspec.json.encode({"model": "m", "stream": True, "input": "hi"})
            reader, writer = await asyncio.open_connection(url.hostname, url.port)
            writer.write(f"POST {url.path}/responses HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
            seen = b""
            async with asyncio.timeout(10):
                while b"response.completed" not in seen:
                    seen += await reader.read(4096)
            writer.transport.abort()  # the client has its answer and hangs up
            client_gone.set()  # the upstream sends the rest: the gateway meets the closed connection relaying it
            for _ in range(3000):  # until the gateway books the call (bounded: 30 s), not for some time
                if KEY.request in gw.ledger.by_request:
                    break
                await asyncio.sleep(0.01)
            used = await gw.close_grant(KEY)
    finally:
        server.close()
        await server.wait_closed()
    assert seen.startswith(b"HTTP/1.1 200")
    assert used.calls == 1 and used.failed == 0, used
    assert used.usage.prompt_tokens == 11 and used.usage.completion_tokens == 3
