"""A stand-in for the Hugging Face Hub's dataset endpoints on 127.0.0.1, as huggingface_hub calls them.

    with HubStandIn() as hub:
        commit = hub.add_dataset("SWE-bench/SWE-bench_Verified", {"data/test-00000-of-00001.parquet": data})
        ...  # HF_ENDPOINT=hub.url
        hub.requests  # every (method, path, authorization) served

It answers ``GET /api/datasets/{repo}/revision/{rev}`` (``?blobs=true`` adds sizes), and ``HEAD``/``GET``
``/datasets/{repo}/resolve/{rev}/{path}`` with the Hub's headers (``X-Repo-Commit``, ``ETag``,
``X-Linked-Etag``/``X-Linked-Size`` for LFS files, ``Content-Length``, ``Range``), and the Hub's errors (401 +
``X-Error-Code: RepoNotFound`` for an unknown repo, 404 + ``RevisionNotFound`` / ``EntryNotFound``). No Xet
headers: huggingface_hub then downloads over plain HTTP. Threaded, so blocking clients on any thread or event
loop can use it.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlsplit

_API = re.compile(r"^/api/datasets/(?P<repo>[^/]+/[^/]+)(?:/revision/(?P<rev>[^/]+))?$")
_RESOLVE = re.compile(r"^/datasets/(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<path>.+)$")


def swebench_parquet(rows: list[dict[str, Any]]) -> bytes:
    """A parquet file of SWE-bench rows as the Hub's datasets store them (test lists JSON-encoded)."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    encoded = [{k: json.dumps(v) if isinstance(v, list) else v for k, v in r.items()} for r in rows]
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(encoded), buf)
    return buf.getvalue()


class _Repo:
    def __init__(self) -> None:
        self.commits: dict[str, dict[str, bytes]] = {}
        self.refs: dict[str, str] = {}


class HubStandIn:
    """The Hub's dataset file layout served from memory; ``requests`` counts what was asked."""

    def __init__(self) -> None:
        self.repos: dict[str, _Repo] = {}
        self.requests: list[tuple[str, str, str | None]] = []
        #: ``path -> n``: a GET of that file never sends past byte n: it drops the connection there (each retry).
        self.cut_after: dict[str, int] = {}
        #: ``path -> n``: a GET of that file sends up to byte n, then hangs until ``stop()`` (a stuck transfer).
        self.stall_after: dict[str, int] = {}
        self._release = threading.Event()
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ content

    def add_dataset(self, repo: str, files: dict[str, bytes], ref: str = "main") -> str:
        """A commit holding ``files`` (plus a README), pointed at by ``ref``; returns its 40-hex sha."""
        files = {"README.md": f"# {repo}\n".encode(), ".gitattributes": b"*.parquet filter=lfs\n", **files}
        h = hashlib.sha1(repo.encode())
        for name in sorted(files):
            h.update(name.encode() + b"\0" + files[name])
        sha = h.hexdigest()
        r = self.repos.setdefault(repo, _Repo())
        r.commits[sha] = files
        r.refs[ref] = sha
        return sha

    def downloads(self) -> list[str]:
        """Paths of the file bodies served (GET on resolve)."""
        return [p for m, p, _ in self.requests if m == "GET" and "/resolve/" in p]

    # ------------------------------------------------------------------ server

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> HubStandIn:
        """Listen on 127.0.0.1 (ephemeral port) in a background thread."""
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                stand_in._serve(self, head=False)

            def do_HEAD(self) -> None:
                stand_in._serve(self, head=True)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="hf-hub-standin", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening."""
        self._release.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> HubStandIn:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ handlers

    def _commit(self, repo: str, rev: str) -> tuple[str, dict[str, bytes]] | None:
        r = self.repos[repo]
        sha = r.refs.get(rev, rev)
        return (sha, r.commits[sha]) if sha in r.commits else None

    def _serve(self, h: BaseHTTPRequestHandler, head: bool) -> None:
        parts = urlsplit(h.path)
        path = parts.path
        with self._lock:
            self.requests.append(("HEAD" if head else "GET", path, h.headers.get("Authorization")))
        if m := _API.match(path):
            return self._api(h, unquote(m["repo"]), unquote(m["rev"] or "main"), "blobs=true" in parts.query.lower())
        if m := _RESOLVE.match(path):
            return self._resolve(h, unquote(m["repo"]), unquote(m["rev"]), unquote(m["path"]), head)
        self._error(h, 404, None, "Not Found", head)

    def _error(self, h: BaseHTTPRequestHandler, status: int, code: str | None, msg: str, head: bool = False,
               commit: str | None = None) -> None:
        body = json.dumps({"error": msg}).encode()
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        if code:
            h.send_header("X-Error-Code", code)
        h.send_header("X-Error-Message", msg)
        if commit:
            h.send_header("X-Repo-Commit", commit)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        if not head:
            h.wfile.write(body)

    def _api(self, h: BaseHTTPRequestHandler, repo: str, rev: str, blobs: bool) -> None:
        if repo not in self.repos:  # the Hub answers 401 for unknown (or private) repos without credentials
            return self._error(h, 401, "RepoNotFound", "Repository not found")
        found = self._commit(repo, rev)
        if found is None:
            return self._error(h, 404, "RevisionNotFound", f"Invalid rev id: {rev}")
        sha, files = found
        siblings: list[dict[str, Any]] = []
        for name, data in sorted(files.items()):
            sib: dict[str, Any] = {"rfilename": name}
            if blobs:
                sib.update(size=len(data), blobId=hashlib.sha1(data).hexdigest())
                if name.endswith(".parquet"):
                    sib["lfs"] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest(), "pointerSize": 134}
            siblings.append(sib)
        body = json.dumps({"_id": sha[:24], "id": repo, "author": repo.split("/")[0], "sha": sha, "private": False,
                           "gated": False, "disabled": False, "downloads": 0, "likes": 0, "tags": [],
                           "lastModified": "2024-08-01T00:00:00.000Z", "createdAt": "2024-08-01T00:00:00.000Z",
                           "siblings": siblings, "cardData": {}}).encode()
        h.send_response(200)
        h.send_header("Content-Type", "application/json; charset=utf-8")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    def _resolve(self, h: BaseHTTPRequestHandler, repo: str, rev: str, name: str, head: bool) -> None:
        if repo not in self.repos:
            return self._error(h, 401, "RepoNotFound", "Repository not found", head)
        found = self._commit(repo, rev)
        if found is None:
            return self._error(h, 404, "RevisionNotFound", f"Invalid rev id: {rev}", head)
        sha, files = found
        if name not in files:
            return self._error(h, 404, "EntryNotFound", f"{name} does not exist on {rev}", head, commit=sha)
        data = files[name]
        lfs = name.endswith(".parquet")
        etag = hashlib.sha256(data).hexdigest() if lfs else hashlib.sha1(data).hexdigest()
        start = 0
        rng = re.match(r"bytes=(\d+)-$", h.headers.get("Range", ""))
        if rng and not head:
            start = min(int(rng[1]), len(data))
        body = data[start:]
        h.send_response(206 if start else 200)
        h.send_header("Content-Type", "application/octet-stream")
        h.send_header("X-Repo-Commit", sha)
        h.send_header("ETag", f'"{etag}"')
        if lfs:
            h.send_header("X-Linked-Etag", f'"{etag}"')
            h.send_header("X-Linked-Size", str(len(data)))
        if start:
            h.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        h.send_header("Accept-Ranges", "bytes")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        if head:
            return
        cut, stall = self.cut_after.get(name), self.stall_after.get(name)
        limit = cut if cut is not None else stall
        if limit is None:
            h.wfile.write(body)
            return
        h.wfile.write(body[:max(0, limit - start)])
        h.wfile.flush()
        if stall is not None:
            self._release.wait(120)
        h.close_connection = True
        h.connection.shutdown(2)  # the peer sees the transfer end short of Content-Length


__all__ = ["HubStandIn", "swebench_parquet"]
