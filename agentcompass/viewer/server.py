"""The viewer's HTTP server: a JSON API over the run directories under one path, and the static page.

Stdlib only (``ThreadingHTTPServer``). No request ever names a file: runs are looked up by the key the runs
list gave, tasks through the run's index, static files from a fixed list.

Routes (all GET):
    /                      the page;  /static/app.js, /static/app.css
    /api/runs              every run under the path, with status, counts and headline metrics
    /api/run?run=KEY       one run: info, metrics, by category, errors by kind, params, index stats
    /api/tasks?run=KEY&offset&limit&sort&desc&q&status&outcome&category&flag&error_kind
                           one page of the task table
    /api/task?run=KEY&task=TASK_ID
                           one task's detail (all attempts, trajectories), its table row and log tail
    /api/progress?run=KEY&offset=N
                           progress events from byte N of progress.jsonl (whole lines only)
"""

from __future__ import annotations

import ipaddress
import socket
import socketserver
import sys
import threading
import webbrowser
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import msgspec

from .._errors import ConfigError
from ..engine.run_dir import safe_name, task_log_lines
from ..records import TaskDetail
from ..rundata import find_runs, mask_secrets
from .index import RunIndex
from .progress import read_progress
from .runs import is_inside, read_json, read_regular, run_overview

STATIC = {"/": ("index.html", "text/html; charset=utf-8"),
          "/static/app.js": ("app.js", "text/javascript; charset=utf-8"),
          "/static/app.css": ("app.css", "text/css; charset=utf-8")}
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
LOG_TAIL = 64 << 10
DETAIL_LIMIT = 256 << 20
_LOOPBACK_NAMES = {"localhost", "127.0.0.1", "::1"}
_detail_decoder = msgspec.json.Decoder(TaskDetail)
_encoder = msgspec.json.Encoder()


class NotFound(Exception):
    """A run, task or route that does not exist (or is outside the viewed path)."""


class Viewer:
    """The state behind the API: the viewed path, the runs found under it, and one index per opened run."""

    def __init__(self, path: str | Path) -> None:
        p = Path(path).expanduser()
        if not p.is_dir():
            raise ConfigError(f"Invalid `path` {str(path)!r}: not a directory. Pass a results directory or one "
                              "run directory (the one holding run_info.json).", field="path")
        self.root = p.resolve()
        self._lock = threading.Lock()
        self._runs: dict[str, Path] = {}
        self._indexes: dict[str, RunIndex] = {}
        self._static: dict[str, bytes] = {}

    # -- runs
    def runs(self) -> dict[str, Path]:
        found = find_runs(self.root)
        with self._lock:
            self._runs = found
        return found

    def run_path(self, key: str) -> Path:
        path = self._runs.get(key) or self.runs().get(key)
        if path is None or not is_inside(self.root, path):
            raise NotFound(f"no run {key!r} under the viewed path")
        return path

    def index(self, key: str) -> RunIndex:
        path = self.run_path(key)
        with self._lock:
            idx = self._indexes.get(key)
            if idx is None:
                idx = self._indexes[key] = RunIndex(path / "details")
        details = path / "details"
        if not details.is_symlink() and is_inside(self.root, details):
            idx.refresh()
        return idx

    def prebuild(self, max_runs: int = 20) -> None:
        """Build the task indexes of the most recent runs ahead of the first page view (run in a thread)."""
        for run in self.api_runs()["runs"][:max_runs]:
            try:
                self.index(run["key"])
            except (NotFound, OSError):
                continue

    # -- API
    def api_runs(self) -> dict[str, Any]:
        runs = [run_overview(self.root, key, path) for key, path in self.runs().items()]
        runs.sort(key=lambda r: (-(r["started_at"] or 0), r["key"]))
        return {"root": str(self.root), "runs": runs}

    def api_run(self, key: str) -> dict[str, Any]:
        path = self.run_path(key)
        idx = self.index(key)
        overview = run_overview(self.root, key, path)
        summary = read_json(self.root, path / "summary.json") or {}
        info = read_json(self.root, path / "run_info.json") or {}
        params = read_json(self.root, path / "params.json")
        progress = path / "progress.jsonl"
        final = summary and info.get("status", summary.get("status")) != "running"
        return {
            **overview,
            "path": path.relative_to(self.root).as_posix(),
            "error": info.get("error"),
            "finished_at": info.get("finished_at"),
            "updated_at": info.get("updated_at"),
            "by_category": summary.get("by_category") if final and summary.get("by_category") else
            idx.by_category(),
            "errors_by_kind": summary.get("errors_by_kind") if final else _error_kinds(idx),
            "reuse": summary.get("reuse") or {},
            "params": mask_secrets(params) if params else None,
            "progress_size": progress.stat().st_size if progress.is_file() and not progress.is_symlink() else 0,
            "index": {"rows": len(idx), "build_s": idx.build_s, "last_scan_s": idx.last_scan_s,
                      "version": idx.version, "unreadable": idx.unreadable[:50]},
            "facets": idx.facets(),
        }

    def api_tasks(self, key: str, qs: dict[str, str]) -> dict[str, Any]:
        idx = self.index(key)
        return idx.query(offset=_int(qs, "offset", 0), limit=_int(qs, "limit", 100), sort=qs.get("sort") or "task_id",
                         desc=qs.get("desc", "") in ("1", "true"), q=qs.get("q", ""), status=qs.get("status", ""),
                         outcome=qs.get("outcome", ""), category=qs.get("category", ""), flag=qs.get("flag", ""),
                         error_kind=qs.get("error_kind", ""))

    def api_task(self, key: str, task_id: str) -> dict[str, Any]:
        path = self.run_path(key)
        idx = self.index(key)
        file = idx.detail_file(task_id)
        data = read_regular(self.root, file, DETAIL_LIMIT) if file is not None else None
        if data is None:
            raise NotFound(f"no task {task_id!r} in run {key!r}")
        try:
            detail = _detail_decoder.decode(data)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise NotFound(f"the detail of task {task_id!r} does not decode: {exc}") from None
        except RecursionError:  # rewritten since it was indexed
            raise NotFound(f"the detail of task {task_id!r} is nested too deeply to read") from None
        # earlier runs kept a file per task (logs/tasks/); now its lines are cut from run.log
        log = read_regular(self.root, path / "logs" / "tasks" / f"{safe_name(task_id)}.log", 1 << 30)
        if log is None:
            run_log = read_regular(self.root, path / "logs" / "run.log", 1 << 30)
            log = (task_log_lines(run_log, task_id) or None) if run_log is not None else None
        return {"run": key, "detail": detail, "row": idx.row(task_id),
                "log": log[-LOG_TAIL:].decode("utf-8", "replace") if log else None,
                "log_truncated": bool(log and len(log) > LOG_TAIL)}

    def api_progress(self, key: str, offset: int) -> Any:
        path = self.run_path(key) / "progress.jsonl"
        if path.is_symlink() or not is_inside(self.root, path.parent):
            raise NotFound("no progress file")
        return read_progress(path, offset)

    def static(self, name: str) -> bytes:
        data = self._static.get(name)
        if data is None:
            data = self._static[name] = resources.files("agentcompass.viewer").joinpath("static", name).read_bytes()
        return data


def _error_kinds(idx: RunIndex) -> dict[str, int]:
    return dict(idx.facets()["error_kind"])


def _int(qs: dict[str, str], name: str, default: int) -> int:
    raw = qs.get(name)
    if raw in (None, ""):
        return default
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(f"Invalid `{name}` {raw!r}: expected an integer.", field=name) from None


class _Handler(BaseHTTPRequestHandler):
    server: ViewerServer
    protocol_version = "HTTP/1.1"
    server_version = "agentcompass-view"
    sys_version = ""

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.verbose:
            super().log_message(format, *args)

    def do_HEAD(self) -> None:
        self._dispatch(head=True)

    def do_GET(self) -> None:
        self._dispatch(head=False)

    def _method_not_allowed(self) -> None:
        self._send_json(HTTPStatus.METHOD_NOT_ALLOWED, {"error": "only GET is supported"}, head=False,
                        extra={"Allow": "GET, HEAD"})

    do_POST = do_PUT = do_DELETE = do_PATCH = _method_not_allowed

    def _dispatch(self, head: bool) -> None:
        if not self._host_ok():
            self._send_json(HTTPStatus.MISDIRECTED_REQUEST, {"error": "unexpected Host header"}, head)
            return
        url = urlsplit(self.path)
        route = url.path
        qs = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        viewer = self.server.viewer
        try:
            if route == "/favicon.ico":
                self._send(HTTPStatus.NO_CONTENT, b"", "image/x-icon", head=True, cache="max-age=86400")
                return
            if route in STATIC:
                name, ctype = STATIC[route]
                self._send(HTTPStatus.OK, viewer.static(name), ctype, head, cache="no-cache")
                return
            if route == "/api/runs":
                body: Any = viewer.api_runs()
            elif route == "/api/run":
                body = viewer.api_run(_need(qs, "run"))
            elif route == "/api/tasks":
                body = viewer.api_tasks(_need(qs, "run"), qs)
            elif route == "/api/task":
                body = viewer.api_task(_need(qs, "run"), _need(qs, "task"))
            elif route == "/api/progress":
                body = viewer.api_progress(_need(qs, "run"), _int(qs, "offset", 0))
            else:
                raise NotFound(f"no route {route!r}")
        except NotFound as exc:
            self._send_json(HTTPStatus.NOT_FOUND, {"error": str(exc)}, head)
            return
        except ConfigError as exc:
            self._send_json(HTTPStatus.BAD_REQUEST, {"error": str(exc), "field": exc.field}, head)
            return
        except OSError as exc:  # a file vanished or became unreadable between listing and reading
            self._send_json(HTTPStatus.INTERNAL_SERVER_ERROR, {"error": f"cannot read: {exc.strerror or exc}"}, head)
            return
        self._send_json(HTTPStatus.OK, body, head)

    def _host_ok(self) -> bool:
        if not self.server.loopback_only:
            return True
        host = self.headers.get("Host", "")
        name = host.rsplit(":", 1)[0] if not host.startswith("[") else host[1:].split("]", 1)[0]
        return name.lower() in _LOOPBACK_NAMES  # DNS rebinding: a page elsewhere cannot name our port

    def _send_json(self, status: HTTPStatus, body: Any, head: bool, extra: dict[str, str] | None = None) -> None:
        self._send(status, _encoder.encode(body), "application/json", head, cache="no-store", extra=extra)

    def _send(self, status: HTTPStatus, data: bytes, ctype: str, head: bool, cache: str,
              extra: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", cache)
        self.send_header("Content-Security-Policy", CSP)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Cross-Origin-Resource-Policy", "same-origin")
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if not head:
            self.wfile.write(data)


def _need(qs: dict[str, str], name: str) -> str:
    value = qs.get(name)
    if not value:
        raise ConfigError(f"Missing query parameter `{name}`.", field=name)
    return value


class ViewerServer(ThreadingHTTPServer):
    """The viewer bound to ``host:port`` (port 0: any free port). ``start()`` serves from a thread."""

    daemon_threads = True
    block_on_close = False

    def __init__(self, path: str | Path, host: str = "127.0.0.1", port: int = 0, verbose: bool = False) -> None:
        self.viewer = Viewer(path)
        self.verbose = verbose
        try:
            self.loopback_only = ipaddress.ip_address(host).is_loopback
        except ValueError:
            self.loopback_only = host == "localhost"
        if ":" in host:
            self.address_family = socket.AF_INET6
        try:
            super().__init__((host, port), _Handler)
        except OSError as exc:
            raise ConfigError(f"Cannot listen on {host}:{port}: {exc.strerror or exc}. Pick another `--port` "
                              "(0 picks a free one) or `--host`.", field="port") from None
        self._thread: threading.Thread | None = None

    def server_bind(self) -> None:
        # HTTPServer.server_bind resolves the host's FQDN, which can stall for seconds without DNS.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name, self.server_port = str(host), int(port)

    @property
    def url(self) -> str:
        host = self.server_name
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{self.server_port}/"

    def start(self) -> ViewerServer:
        """Serve in a daemon thread; ``close()`` stops it."""
        self._thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.2},
                                        name="agentcompass-view", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving and release the socket (idempotent)."""
        if self._thread is not None:
            self.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self.server_close()

    def __enter__(self) -> ViewerServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def run_viewer(path: str, host: str = "127.0.0.1", port: int = 0, open_browser: bool = True,
               verbose: bool = False) -> int:
    """``agentcompass view``: serve until interrupted. Prints the URL first (a line with ``http://``)."""
    server = ViewerServer(path, host, port, verbose=verbose)
    try:
        n = len(server.viewer.runs())
        print(f"agentcompass view: {server.url} ({n} run{'s' * (n != 1)} under {server.viewer.root})", flush=True)
        if not server.loopback_only:
            print(f"warning: listening on {host}, reachable from other machines; the viewer has no login.",
                  file=sys.stderr, flush=True)
        threading.Thread(target=server.viewer.prebuild, name="agentcompass-view-index", daemon=True).start()
        if open_browser:
            threading.Timer(0.2, _open, (server.url,)).start()
        server.serve_forever(poll_interval=0.5)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


def _open(url: str) -> None:
    try:
        webbrowser.open(url)
    except Exception:  # no browser on this machine: the URL was printed
        pass

