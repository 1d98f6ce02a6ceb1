"""A stand-in for a plain file host (e.g. a repository's tarball download) on 127.0.0.1.

    with FileHost() as host:
        host.files["/owner/repo/tar.gz/abc"] = data
        url = host.url + "/owner/repo/tar.gz/abc"
        host.requests  # every path asked for

``redirects`` maps a path to another (answered 302), ``stall_after`` a path to a byte count after which the
answer hangs until ``stop()`` (a stuck transfer), ``drip`` a path to the seconds between the bytes of its answer
(a transfer that trickles without ever pausing long enough for a read timeout). Unknown paths answer 404.
Threaded.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class FileHost:
    """Serves ``files`` by path; ``requests`` records what was asked."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.redirects: dict[str, str] = {}
        self.stall_after: dict[str, int] = {}
        self.drip: dict[str, float] = {}
        self.requests: list[str] = []
        self._release = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> FileHost:
        host = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                host._serve(self)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._release.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def __enter__(self) -> FileHost:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _serve(self, h: BaseHTTPRequestHandler) -> None:
        self.requests.append(h.path)
        if h.path in self.redirects:
            h.send_response(302)
            h.send_header("Location", self.redirects[h.path])
            h.send_header("Content-Length", "0")
            h.end_headers()
            return
        data = self.files.get(h.path)
        if data is None:
            h.send_response(404)
            h.send_header("Content-Length", "0")
            h.end_headers()
            return
        h.send_response(200)
        h.send_header("Content-Type", "application/x-gzip")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        cut = self.stall_after.get(h.path)
        try:
            if h.path in self.drip:
                for i in range(len(data)):
                    if self._release.wait(self.drip[h.path]):
                        return
                    h.wfile.write(data[i:i + 1])
                    h.wfile.flush()
                return
            if cut is None:
                h.wfile.write(data)
                return
            h.wfile.write(data[:cut])
            h.wfile.flush()
            self._release.wait(60)  # bounded: stop() releases it at once
        except (BrokenPipeError, ConnectionResetError):
            pass
