"""Where a task-directory benchmark's tasks come from: a folder the user gives (a copy or a git checkout), else
a cached download under ``data_dir``, else (when allowed) a download of the dataset repository's tarball.

A download is streamed over HTTPS with size caps and an overall deadline into a temporary folder next to the
cache, unpacked (regular files and folders only, the tarball's top folder dropped, executable bits kept) and
renamed into place with a manifest naming its URL, so a killed download never reads as a dataset and a cache
is only used for the URL it came from.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import msgspec

from ..._errors import AgentCompassError
from ...common.tarball_download import MANIFEST, Fetched, ProgressCallback, TarballDownload

log = logging.getLogger("agentcompass.benchmarks.task_dir.benchmark")

#: the whole tarball may not exceed this many bytes
MAX_DOWNLOAD_BYTES = 4 << 30
#: nor unpack to more than this many bytes ...
MAX_UNPACKED_BYTES = 8 << 30
#: ... or files
MAX_FILES = 200_000
#: seconds for the whole download, unpacking included
DOWNLOAD_DEADLINE = 1800.0


class TasksDownloadError(AgentCompassError):
    """The tasks could not be fetched (unreachable, refused, too large, too slow or not a tarball)."""


#: how the tasks tarball is downloaded (the caps above; ``download`` may lower the byte cap and the deadline)
TASKS = TarballDownload(what="tasks", error=TasksDownloadError, max_bytes=MAX_DOWNLOAD_BYTES,
                        max_unpacked_bytes=MAX_UNPACKED_BYTES, max_files=MAX_FILES, deadline=DOWNLOAD_DEADLINE,
                        keep_exec_bits=True)


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
    log.info("downloading tasks from %s", redact(url))

    def seal(tmp: Path, got: Fetched) -> DownloadManifest:
        manifest = DownloadManifest(url=redact(url), url_sha256=_url_hash(url), sha256=got.sha256, bytes=got.bytes,
                                    files=got.files)
        (tmp / MANIFEST).write_bytes(msgspec.json.encode(manifest))
        return manifest

    manifest = TASKS.with_caps(max_bytes=max_bytes, deadline=deadline).download(
        url, final, shown=redact(url), seal=seal, done_elsewhere=lambda: find_cached(final, url) is not None,
        on_progress=on_progress, cancelled=cancelled)
    log.info("tasks from %s in %s", redact(url), final)
    return manifest


__all__ = ["MANIFEST", "DownloadManifest", "TasksDownloadError", "cache_dir", "download", "find_cached", "redact",
           "url_secrets"]
