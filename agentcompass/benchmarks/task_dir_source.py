"""Where a task-directory benchmark's tasks come from: a folder the user gives (a copy or a git checkout), else
a cached download under ``data_dir``, else (when allowed) a download of the dataset repository's tarball.

A download is streamed over HTTPS with size caps and an overall deadline into a temporary folder next to the
cache, unpacked (regular files and folders only, the tarball's top folder dropped, executable bits kept) and
renamed into place with a manifest naming its URL, so a killed download never reads as a dataset and a cache
is only used for the URL it came from.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import posixpath
import shutil
import tarfile
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import msgspec

from .._errors import AgentCompassError

log = logging.getLogger("agentcompass.benchmarks.task_dir")

#: the whole tarball may not exceed this many bytes
MAX_DOWNLOAD_BYTES = 4 << 30
#: nor unpack to more than this many bytes ...
MAX_UNPACKED_BYTES = 8 << 30
#: ... or files
MAX_FILES = 200_000
#: seconds for the whole download, unpacking included
DOWNLOAD_DEADLINE = 1800.0
#: seconds to connect / between two reads
HTTP_TIMEOUT = 30.0
MANIFEST = "agentcompass-manifest.json"
_PARTIAL = ".partial-"

ProgressCallback = Callable[[int, int], None]


class TasksDownloadError(AgentCompassError):
    """The tasks could not be fetched (unreachable, refused, too large, too slow or not a tarball)."""


class DownloadManifest(msgspec.Struct, frozen=True):
    """What a downloaded folder holds and where it came from (``url`` without credentials or query; the full
    URL only as ``url_sha256``)."""

    url: str
    url_sha256: str
    sha256: str
    bytes: int
    files: int


def redact(url: str) -> str:
    """``url`` without its user, password, query and fragment: what may be logged or recorded."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port is not None else host
    hidden = parts.username is not None or parts.password is not None or parts.query or parts.fragment
    return urlunsplit((parts.scheme, netloc, parts.path, "", "")) + ("?<redacted>" if hidden else "")


def url_secrets(url: str) -> tuple[str, ...]:
    """The secret parts of ``url`` (password, query and each of its parameters, fragment), for the engine's
    redactor. The user name is not among them: masking a common word everywhere would garble the records."""
    parts = urlsplit(url)
    found = (parts.password, parts.query, parts.fragment, *parts.query.split("&"))
    return tuple(s for s in found if s)


def _url_hash(url: str) -> str:
    return hashlib.sha256(url.encode()).hexdigest()


def cache_dir(data_dir: Path, name: str, url: str) -> Path:
    """The cache folder of benchmark ``name``'s tasks downloaded from ``url``."""
    return data_dir / name / _url_hash(url)[:16]


def find_cached(folder: Path, url: str) -> DownloadManifest | None:
    """The manifest of a complete download of ``url`` in ``folder``, else None."""
    try:
        manifest = msgspec.json.decode((folder / MANIFEST).read_bytes(), type=DownloadManifest)
    except (OSError, msgspec.DecodeError):
        return None
    return manifest if manifest.url_sha256 == _url_hash(url) else None


class _HideUrl(logging.Filter):
    """Shows a URL redacted in the records of the logger it filters."""

    def __init__(self, url: str, shown: str) -> None:
        super().__init__()
        self.url, self.shown = url, shown

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if self.url in text:
            record.msg, record.args = text.replace(self.url, self.shown), None
        return True


async def _transfer(url: str, into: Path, *, max_bytes: int, on_progress: ProgressCallback | None,
                    cancelled: threading.Event | None, digest: Any) -> None:
    import httpx

    shown = redact(url)
    done = 0
    async with httpx.AsyncClient(timeout=httpx.Timeout(HTTP_TIMEOUT), follow_redirects=True) as client, \
            client.stream("GET", url) as resp:
        if resp.status_code != 200:
            raise TasksDownloadError(f"GET {shown} answered HTTP {resp.status_code}")
        announced = int(resp.headers.get("content-length") or 0)
        if announced > max_bytes:
            raise TasksDownloadError(f"{shown} is {announced} bytes, over the {max_bytes}-byte cap")
        with into.open("wb") as out:
            async for chunk in resp.aiter_bytes():  # as the bytes arrive; the deadline is the caller's
                if cancelled is not None and cancelled.is_set():
                    raise TasksDownloadError(f"downloading {shown}: cancelled")
                done += len(chunk)
                if done > max_bytes:
                    raise TasksDownloadError(f"{shown}: more than {max_bytes} bytes received; download stopped")
                digest.update(chunk)
                out.write(chunk)
                if on_progress is not None:
                    on_progress(done, announced or done)


async def _fetch_async(url: str, into: Path, *, max_bytes: int, end: float, on_progress: ProgressCallback | None,
                       cancelled: threading.Event | None, digest: Any,
                       handle: list[tuple[asyncio.AbstractEventLoop, asyncio.Task[Any]]]) -> None:
    import httpx

    shown = redact(url)
    current = asyncio.current_task()
    assert current is not None
    handle.append((asyncio.get_running_loop(), current))
    hide = _HideUrl(url, shown)
    logging.getLogger("httpx").addFilter(hide)  # it logs each request's full URL
    try:
        async with asyncio.timeout(max(0.0, end - time.monotonic())):  # the whole transfer, however it trickles
            await _transfer(url, into, max_bytes=max_bytes, on_progress=on_progress, cancelled=cancelled,
                            digest=digest)
    except TimeoutError:
        raise TasksDownloadError(f"downloading {shown} did not finish by its deadline") from None
    except asyncio.CancelledError:
        raise TasksDownloadError(f"downloading {shown}: cancelled") from None
    except httpx.HTTPError as exc:
        raise TasksDownloadError(f"downloading {shown} failed ({type(exc).__name__}: "
                                 f"{str(exc).replace(url, shown)})") from None
    finally:
        logging.getLogger("httpx").removeFilter(hide)


def _fetch(url: str, into: Path, *, max_bytes: int, end: float, on_progress: ProgressCallback | None,
           cancelled: threading.Event | None) -> str:
    """Stream ``url`` into the file ``into`` by ``end`` (a monotonic time, enforced on the whole transfer, not
    per read); its sha256. The transfer runs on its own event loop in a thread (callers may be inside one);
    this thread watches ``cancelled`` and cancels it."""
    digest = hashlib.sha256()
    outcome: list[BaseException | None] = []
    handle: list[tuple[asyncio.AbstractEventLoop, asyncio.Task[Any]]] = []

    def work() -> None:
        try:
            asyncio.run(_fetch_async(url, into, max_bytes=max_bytes, end=end, on_progress=on_progress,
                                     cancelled=cancelled, digest=digest, handle=handle))
            outcome.append(None)
        except BaseException as exc:  # handed to the caller's thread
            outcome.append(exc)

    worker = threading.Thread(target=work, name="task-dir-download", daemon=True)
    worker.start()
    hard_end = end + 30.0  # the loop's own timeout ends the transfer first
    while worker.is_alive() and time.monotonic() < hard_end:
        worker.join(0.2)
        if cancelled is not None and cancelled.is_set() and handle:
            loop, task = handle.pop()
            try:
                loop.call_soon_threadsafe(task.cancel)
            except RuntimeError:  # the loop already ended
                pass
    if not outcome:
        raise TasksDownloadError(f"downloading {redact(url)} did not end by its deadline")
    if outcome[0] is not None:
        raise outcome[0]
    return digest.hexdigest()


def _member_path(name: str) -> str | None:
    """Where a tarball member goes (its top folder dropped), or None to skip it."""
    parts = name.split("/", 1)
    if len(parts) != 2 or not parts[1]:
        return None
    rel = posixpath.normpath(parts[1])
    if rel.startswith(("/", "..")) or rel == "." or "\\" in rel or "\0" in rel:
        return None
    return rel


def _unpack(tarball: Path, dest: Path, *, end: float, cancelled: threading.Event | None) -> int:
    """Unpack the regular files of ``tarball`` into ``dest`` within the caps; the number of files."""
    count = total = 0
    try:
        with tarfile.open(tarball, mode="r:*") as tar:
            for member in tar:
                if (cancelled is not None and cancelled.is_set()) or time.monotonic() > end:
                    raise TasksDownloadError("unpacking the tasks: cancelled or past the deadline")
                rel = _member_path(member.name)
                if rel is None or not member.isreg():  # links, devices and everything else: never unpacked
                    continue
                total += member.size
                count += 1
                if total > MAX_UNPACKED_BYTES or count > MAX_FILES:
                    raise TasksDownloadError(f"the tasks tarball unpacks to more than {MAX_UNPACKED_BYTES} bytes "
                                             f"or {MAX_FILES} files, over the cap")
                src = tar.extractfile(member)
                if src is None:
                    continue
                target = dest / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                with src, target.open("wb") as out:
                    shutil.copyfileobj(src, out)
                os.chmod(target, 0o755 if member.mode & 0o111 else 0o644)
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise TasksDownloadError(f"the tasks download is not a readable tarball ({exc})") from None
    return count


def download(url: str, final: Path, *, on_progress: ProgressCallback | None = None,
             cancelled: threading.Event | None = None, max_bytes: int = MAX_DOWNLOAD_BYTES,
             deadline: float = DOWNLOAD_DEADLINE) -> DownloadManifest:
    """Download the tarball at ``url`` and unpack it as ``final`` (atomically: a temporary folder renamed into
    place); a complete copy already there is kept."""
    hit = find_cached(final, url)
    if hit is not None:
        return hit
    if final.exists():
        raise TasksDownloadError(f"{final} exists but holds no complete download of {redact(url)}; it is left alone: "
                                 f"move it away")
    end = time.monotonic() + deadline
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.parent / f"{_PARTIAL}{final.name}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        with tempfile.TemporaryDirectory(dir=final.parent, prefix=_PARTIAL) as spool:
            tarball = Path(spool) / "tasks.tar.gz"
            log.info("downloading tasks from %s", redact(url))
            sha = _fetch(url, tarball, max_bytes=max_bytes, end=end, on_progress=on_progress, cancelled=cancelled)
            size = tarball.stat().st_size
            count = _unpack(tarball, tmp, end=end, cancelled=cancelled)
        manifest = DownloadManifest(url=redact(url), url_sha256=_url_hash(url), sha256=sha, bytes=size, files=count)
        (tmp / MANIFEST).write_bytes(msgspec.json.encode(manifest))
        try:
            os.rename(tmp, final)
        except OSError:
            if find_cached(final, url) is None:  # not another process that finished first
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    log.info("tasks from %s in %s", redact(url), final)
    return manifest


__all__ = ["MANIFEST", "DownloadManifest", "TasksDownloadError", "cache_dir", "download", "find_cached", "redact",
           "url_secrets"]
