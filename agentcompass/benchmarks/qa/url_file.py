"""One data file of a QA benchmark from the URL its authors publish it at, cached under ``data_dir``.

``url_file(where, url, name, ...)`` returns the local copy ``<data_dir>/url/<sha256(url)[:16]>/<name>`` when a
complete copy is there (its manifest beside it; no network), else downloads it with httpx: the whole transfer
bounded by ``timeout`` seconds (not per read: a server trickling bytes cannot hold the constructor), at most
``max_bytes`` bytes, written to a temporary folder that is renamed into place whole. A machine without network
fails within ``timeout`` with an error naming the URL, the ``url`` param and where to put the file instead.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
import uuid
from pathlib import Path

import msgspec

from ..._errors import ConfigError
from ...common.data_dir import default_data_dir
from ...common.hub import DatasetDownloadError

MANIFEST = "agentcompass-manifest.json"
#: the largest file accepted (the published QA sets are a few MB).
MAX_URL_BYTES = 256 << 20
DEFAULT_TIMEOUT = 60.0


class UrlFile(msgspec.Struct, frozen=True):
    """What was downloaded (the cache folder's manifest; recorded as the benchmark's ``source``)."""

    url: str
    file: str
    sha256: str
    bytes: int


def url_cache_dir(data_dir: str | None, url: str) -> Path:
    """The cache folder of ``url``."""
    return default_data_dir(data_dir) / "url" / hashlib.sha256(url.encode()).hexdigest()[:16]


def _cached(folder: Path, name: str, url: str) -> tuple[Path, UrlFile] | None:
    try:
        manifest = msgspec.json.decode((folder / MANIFEST).read_bytes(), type=UrlFile)
    except (OSError, msgspec.DecodeError):
        return None
    path = folder / name
    if manifest.url != url or manifest.file != name or not path.is_file():
        return None
    return path, manifest


def _download(where: str, url: str, dest: Path, timeout: float, max_bytes: int) -> tuple[str, int]:
    import httpx

    digest = hashlib.sha256()
    size = 0
    deadline = time.monotonic() + timeout
    # httpx's own timeout is per operation (so one read ends by then); the loop checks the whole transfer's.
    with httpx.Client(timeout=httpx.Timeout(timeout), follow_redirects=True, trust_env=True) as client, \
            client.stream("GET", url) as resp:
        if resp.status_code != 200:
            raise DatasetDownloadError(f"{where}: {url} answered HTTP {resp.status_code}")
        announced = resp.headers.get("content-length")
        if announced and announced.isdigit() and int(announced) > max_bytes:
            raise DatasetDownloadError(f"{where}: {url} is {announced} bytes, over the {max_bytes}-byte cap")
        with dest.open("wb") as out:
            for chunk in resp.iter_bytes():  # as received (a chunk size would wait for that many bytes)
                size += len(chunk)
                if size > max_bytes:
                    raise DatasetDownloadError(f"{where}: {url} is over the {max_bytes}-byte cap")
                if time.monotonic() > deadline:
                    raise TimeoutError
                digest.update(chunk)
                out.write(chunk)
    return digest.hexdigest(), size


def url_file(where: str, url: str, name: str, *, data_dir: str | None, timeout: float = DEFAULT_TIMEOUT,
             max_bytes: int = MAX_URL_BYTES, offline: bool = False) -> tuple[Path, UrlFile]:
    """(local file, manifest) of ``url`` saved as ``name`` (see the module doc)."""
    folder = url_cache_dir(data_dir, url)
    hit = _cached(folder, name, url)
    if hit is not None:
        return hit
    put = (f"put the file as {folder / name} with a {MANIFEST} ({{url, file, sha256, bytes}}) beside it (the "
           "data_dir param sets the folder), or point the url param at a reachable copy")
    if offline:
        raise ConfigError(f"{where}: {url} is not in the cache and HF_HUB_OFFLINE is set; unset it, or {put}",
                          field="data_dir")
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = folder.parent / f".partial-{folder.name}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        try:
            sha, size = _download(where, url, tmp / name, timeout, max_bytes)
        except DatasetDownloadError:
            raise
        except Exception as exc:
            what = f"no complete answer within {timeout:g}s" if isinstance(exc, TimeoutError) else \
                f"{type(exc).__name__}: {exc}"
            raise DatasetDownloadError(f"{where}: cannot download {url} ({what}); {put}") from None
        manifest = UrlFile(url=url, file=name, sha256=sha, bytes=size)
        (tmp / MANIFEST).write_bytes(msgspec.json.encode(manifest))
        try:
            os.rename(tmp, folder)
        except OSError:  # another process finished first: its copy is as good
            hit = _cached(folder, name, url)
            if hit is None:
                raise
            return hit
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder / name, manifest


__all__ = ["MAX_URL_BYTES", "UrlFile", "url_cache_dir", "url_file"]
