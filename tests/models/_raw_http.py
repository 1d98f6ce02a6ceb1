"""Raw HTTP servers at the outside edge of the model client: canned answers, or none at all."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import msgspec


def http_response(status: int, body: bytes | str | object, headers: dict[str, str] | None = None) -> bytes:
    """A complete HTTP/1.1 response; non-bytes/str bodies are JSON-encoded."""
    if isinstance(body, str):
        data = body.encode()
    elif isinstance(body, bytes):
        data = body
    else:
        data = msgspec.json.encode(body)
    lines = [f"HTTP/1.1 {status} X", f"Content-Length: {len(data)}", "Content-Type: application/json",
             *(f"{k}: {v}" for k, v in (headers or {}).items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + data


class RawServer:
    """Answers every HTTP request with fixed bytes, or never answers (``response=None``). Records heads."""

    def __init__(self, response: bytes | None) -> None:
        self.response = response
        self.heads: list[str] = []
        self.bodies: list[bytes] = []
        self.base_url = ""
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[object]] = set()

    async def start(self) -> str:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.base_url = f"http://127.0.0.1:{port}/v1"
        return self.base_url

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            while True:
                head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
                length = 0
                for line in head.split("\r\n"):
                    if line.lower().startswith("content-length:"):
                        length = int(line.split(":", 1)[1])
                self.heads.append(head)
                self.bodies.append(await reader.readexactly(length))
                if self.response is None:
                    await asyncio.Event().wait()
                writer.write(self.response or b"")
                await writer.drain()
        except (asyncio.CancelledError, asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self._tasks.discard(task)
            writer.close()

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for t in list(self._tasks):
            t.cancel()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=2)


@contextlib.asynccontextmanager
async def raw_server(response: bytes | None) -> AsyncIterator[RawServer]:
    """Run a ``RawServer`` for the duration of the block."""
    server = RawServer(response)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


def sse_response(events: list[tuple[str | None, object]], status: int = 200) -> bytes:
    """A complete HTTP/1.1 response carrying server-sent events ``(event name or None, data)``.

    Data that is a str is sent as is (``[DONE]``); anything else is JSON-encoded.
    """
    body = b""
    for name, data in events:
        if name:
            body += f"event: {name}\n".encode()
        payload = data.encode() if isinstance(data, str) else msgspec.json.encode(data)
        body += b"data: " + payload + b"\n\n"
    head = (f"HTTP/1.1 {status} X\r\nContent-Type: text/event-stream\r\nContent-Length: {len(body)}\r\n\r\n")
    return head.encode() + body
