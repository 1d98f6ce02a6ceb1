"""A stand-in for web search APIs on 127.0.0.1, speaking their real wire formats, and a page to fetch.

    with SearchStandIn(results={"capital of australia": [("Canberra - Wikipedia", "https://en.wikipedia.org/wiki/Canberra",
                                                         "Canberra is the capital city of Australia.")]}) as api:
        ...  # search={"provider": "brave", "base_url": api.url, "api_key": api.key}
        api.requests  # every (path, query, headers) served

Brave Search: ``GET /res/v1/web/search?q=...&count=N`` with ``X-Subscription-Token`` (401 with Brave's error body
when it is wrong), answering ``{"type": "search", "query": {...}, "web": {"type": "search", "results": [{"title",
"url", "description", ...}]}}``. SearXNG: ``GET /search?q=...&format=json`` answering ``{"query", "results":
[{"title", "url", "content", "engine"}]}``. ``GET /page/<name>`` serves ``pages[name]`` as HTML.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

Hit = tuple[str, str, str]


class SearchStandIn:
    """Brave and SearXNG JSON APIs over a fixed table of results (keyed by the lower-cased query)."""

    def __init__(self, results: dict[str, list[Hit]] | None = None, pages: dict[str, str] | None = None,
                 key: str = "brave-test-key-0123456789", echo_token: bool = False) -> None:
        #: answer a refused token with the token in the error (as some proxies do)
        self.echo_token = echo_token
        self.results = {k.lower(): v for k, v in (results or {}).items()}
        self.pages = pages or {}
        self.key = key
        self.requests: list[tuple[str, dict[str, list[str]], dict[str, str]]] = []
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> SearchStandIn:
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                stand_in._serve(self)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, name="search-standin", daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def _send(self, h: BaseHTTPRequestHandler, status: int, body: bytes, ctype: str = "application/json") -> None:
        h.send_response(status)
        h.send_header("Content-Type", ctype)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    def _serve(self, h: BaseHTTPRequestHandler) -> None:
        parts = urlsplit(h.path)
        query = parse_qs(parts.query)
        self.requests.append((parts.path, query, {k.lower(): v for k, v in h.headers.items()}))
        q = (query.get("q") or [""])[0]
        hits = self.results.get(q.lower(), [])
        if parts.path == "/res/v1/web/search":
            if h.headers.get("X-Subscription-Token") != self.key:
                error: dict[str, Any] = {"id": "0", "status": 401, "code": "SUBSCRIPTION_TOKEN_INVALID",
                                         "detail": "The provided subscription token is invalid."}
                if self.echo_token:
                    error["detail"] += f" (got {h.headers.get('X-Subscription-Token')})"
                body: dict[str, Any] = {"type": "ErrorResponse", "error": error}
                return self._send(h, 401, json.dumps(body).encode())
            count = int((query.get("count") or ["20"])[0])
            results = [{"type": "search_result", "title": t, "url": u, "description": d, "is_source_local": False,
                        "language": "en", "family_friendly": True} for t, u, d in hits[:count]]
            body = {"type": "search", "query": {"original": q, "more_results_available": False},
                    "mixed": {"type": "mixed", "main": []}, "web": {"type": "search", "results": results}}
            return self._send(h, 200, json.dumps(body).encode())
        if parts.path == "/search" and (query.get("format") or [""])[0] == "json":
            body = {"query": q, "number_of_results": len(hits),
                    "results": [{"title": t, "url": u, "content": d, "engine": "standin"} for t, u, d in hits],
                    "answers": [], "suggestions": []}
            return self._send(h, 200, json.dumps(body).encode())
        if parts.path.startswith("/page/") and parts.path[6:] in self.pages:
            return self._send(h, 200, self.pages[parts.path[6:]].encode(), "text/html; charset=utf-8")
        self._send(h, 404, b'{"error": "not found"}')


__all__ = ["SearchStandIn"]
