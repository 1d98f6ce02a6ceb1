"""A PEP 503 "simple" package index on 127.0.0.1 serving wheels written in the test, for pip to install from.

    with SimpleIndex() as index:
        index.add_wheel("acdep-demo", "1.0", {"acdep_demo/__init__.py": "ANSWER = 42\n"}, gated=True)
        ...  # pip install --index-url index.url acdep-demo
        index.release()  # a gated wheel's download is held until then (or until ``gate_deadline_s``)

``downloads`` counts the wheel downloads per project; ``requested`` is set once a gated download is waiting.
Responses say ``Cache-Control: no-store`` so pip's HTTP cache never answers for the index.
"""

from __future__ import annotations

import base64
import hashlib
import html
import io
import re
import threading
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any


def normalize(name: str) -> str:
    """PEP 503 name normalization."""
    return re.sub(r"[-_.]+", "-", name).lower()


def build_wheel(name: str, version: str, files: dict[str, str], *,
                executables: frozenset[str] = frozenset()) -> tuple[str, bytes]:
    """A pure-Python wheel (filename, bytes) holding ``files`` (path -> text), with METADATA, WHEEL and RECORD;
    the paths in ``executables`` get mode 755 (pip keeps it)."""
    dist = re.sub(r"[-_.]+", "_", name)
    info = f"{dist}-{version}.dist-info"
    entries = dict(files)
    entries[f"{info}/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    entries[f"{info}/WHEEL"] = "Wheel-Version: 1.0\nGenerator: agentcompass-tests\nRoot-Is-Purelib: true\n" \
                               "Tag: py3-none-any\n"
    record = []
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for path, text in entries.items():
            data = text.encode()
            info_ = zipfile.ZipInfo(path)
            info_.compress_type = zipfile.ZIP_DEFLATED
            info_.external_attr = (0o100755 if path in executables else 0o600) << 16  # 0o600: writestr's default
            zf.writestr(info_, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{path},sha256={digest},{len(data)}")
        record.append(f"{info}/RECORD,,")
        zf.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    return f"{dist}-{version}-py3-none-any.whl", buf.getvalue()


class SimpleIndex:
    """The index server (a thread); ``url`` is what ``PIP_INDEX_URL`` / ``--index-url`` takes."""

    def __init__(self, gate_deadline_s: float = 120.0) -> None:
        self.gate_deadline_s = gate_deadline_s
        self._projects: dict[str, dict[str, tuple[bytes, bool]]] = {}
        self._lock = threading.Lock()
        self._gate = threading.Event()
        #: set when a gated download arrived and is being held
        self.requested = threading.Event()
        #: who let the held downloads go: "test" (``release()``) or "deadline"
        self.released_by: str | None = None
        self.downloads: dict[str, int] = {}
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="simple-index", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/simple/"

    def add_wheel(self, name: str, version: str, files: dict[str, str], *, gated: bool = False,
                  executables: frozenset[str] = frozenset()) -> str:
        """Serve a wheel of project ``name``; its downloads wait for ``release()`` when ``gated``."""
        filename, data = build_wheel(name, version, files, executables=executables)
        with self._lock:
            self._projects.setdefault(normalize(name), {})[filename] = (data, gated)
        return filename

    def release(self, by: str = "test") -> None:
        with self._lock:
            if self.released_by is None:
                self.released_by = by
        self._gate.set()

    def _hold(self) -> None:
        self.requested.set()
        if not self._gate.wait(self.gate_deadline_s):
            self.release("deadline")

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        index = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _send(self, status: int, body: bytes, ctype: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                parts = [p for p in self.path.split("?")[0].split("/") if p]
                with index._lock:
                    projects = {k: dict(v) for k, v in index._projects.items()}
                if len(parts) == 2 and parts[0] == "simple" and normalize(parts[1]) in projects:
                    links = "".join(
                        f'<a href="/files/{html.escape(fn)}#sha256={hashlib.sha256(data).hexdigest()}">'
                        f"{html.escape(fn)}</a>\n" for fn, (data, _) in projects[normalize(parts[1])].items())
                    self._send(200, f"<!DOCTYPE html><html><body>\n{links}</body></html>".encode(), "text/html")
                    return
                if len(parts) == 2 and parts[0] == "files":
                    for project, wheels in projects.items():
                        if parts[1] in wheels:
                            data, gated = wheels[parts[1]]
                            if gated:
                                index._hold()
                            with index._lock:
                                index.downloads[project] = index.downloads.get(project, 0) + 1
                            self._send(200, data, "application/octet-stream")
                            return
                self._send(404, b"not found", "text/plain")

        return Handler

    def __enter__(self) -> SimpleIndex:
        self._thread.start()
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.release("test-exit")
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(10)
