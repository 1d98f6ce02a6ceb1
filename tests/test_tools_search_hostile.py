"""Hostile search-API answers: a deeply nested body and a huge one built to make tag stripping quadratic are tool
errors or bounded text the model sees, never a crash of the tool call nor a stalled event loop."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from agentcompass.tools import ToolError
from agentcompass.tools_search import SearchSettings, WebToolSession
from tests.loop_ticks import loop_ticks


@contextmanager
def _serving(body: bytes) -> Iterator[str]:
    """A stand-in search API on 127.0.0.1 answering every GET with ``body`` (application/json)."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        host, port = server.server_address[:2]
        yield f"http://{host!s}:{port}"
    finally:
        server.shutdown()
        server.server_close()


def _session(url: str, provider: str) -> WebToolSession:
    return WebToolSession([{"role": "user", "content": "q"}], ("web_search",),
                          SearchSettings(provider=provider, base_url=url))  # type: ignore[arg-type]


@pytest.mark.parametrize("provider", ["brave", "searxng"])
async def test_a_deeply_nested_search_answer_is_a_tool_error(provider: str) -> None:
    deep = b'{"web": {"results": ' + b"[" * 5000 + b"]" * 5000 + b'}, "results": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    with _serving(deep) as url:
        session = _session(url, provider)
        try:
            with pytest.raises(ToolError, match="nested deeper than"):
                await session.call("web_search", {"query": "anything"})
        finally:
            await session.aclose()
    assert "nested deeper than" in session.record()["calls"][0]["error"]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("provider", ["brave", "searxng"])
async def test_a_huge_answer_built_against_tag_stripping_gives_bounded_text(provider: str) -> None:
    # under the 4 MB cap, unclosed tag openers: a regex scanning from each '<' to the end is quadratic (hours)
    bomb = "<a" * 500_000 + "<script" * 30_000
    text_field = "description" if provider == "brave" else "content"
    hit = {"title": bomb, "url": "https://example.org/" + "x" * 500_000, text_field: bomb}
    body = json.dumps({"web": {"results": [hit]}} if provider == "brave" else {"results": [hit]}).encode()
    assert len(body) < 4 << 20
    with _serving(body) as url:
        session = _session(url, provider)
        try:
            async with loop_ticks() as ticks:
                out = await session.call("web_search", {"query": "anything"})
        finally:
            await session.aclose()
    assert out.startswith("[1] ") and len(out) < 5_000
    assert ticks.count > 0
