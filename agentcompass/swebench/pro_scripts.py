"""The per-instance run scripts and parsers of SWE-bench Pro, and the Dockerfiles whose ``ENV`` lines the
official entry script re-exports: ``run_scripts/<instance_id>/{run_script.sh,parser.py}`` and
``dockerfiles/{base,instance}_dockerfile/<instance_id>/Dockerfile`` of the public repository
scaleapi/SWE-bench_Pro-os.

They come from a directory the user gives, else from ``<data_dir>/swebench_pro/scripts/<commit>/`` (the
default source; ``<commit>-<url hash>/`` for a ``scripts_url``), which is filled (when allowed) by
downloading the repository's tarball at a pinned commit: streamed over HTTP with size caps and an overall
deadline, only the ``run_scripts/`` and ``dockerfiles/`` regular files unpacked, into a temporary folder
renamed into place when complete (so a killed download never reads as a scripts folder). A download is used
only for the (commit, url) its manifest names; a folder without a manifest was put there by hand: used when it
has ``run_scripts/``, never replaced or deleted. The files are data for the instance containers: nothing here
runs them.
"""

from __future__ import annotations

import hashlib
import io
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
from dataclasses import dataclass
from pathlib import Path

import msgspec

from .._errors import AgentCompassError, ConfigError

log = logging.getLogger("agentcompass.swebench.pro_scripts")

REPOSITORY = "scaleapi/SWE-bench_Pro-os"
#: the commit whose scripts we grade with (recorded in params.json; ``scripts_commit`` changes it)
DEFAULT_COMMIT = "ca10a60a5fcae51e6948ffe1485d4153d421e6c5"
TARBALL_URL = "https://codeload.github.com/{repo}/tar.gz/{commit}"
#: the whole tarball may not exceed this many bytes
MAX_DOWNLOAD_BYTES = 512 << 20
#: one unpacked file may not exceed this (run scripts, parsers and Dockerfiles are a few kB)
MAX_FILE_BYTES = 4 << 20
#: the unpacked files together may not exceed this many bytes (the real scripts are a few MiB) ...
MAX_UNPACKED_BYTES = 256 << 20
#: ... nor be more than this many (the real repository has a few thousand)
MAX_FILES = 50_000
#: seconds for the whole download, unpacking included
DOWNLOAD_DEADLINE = 900.0
#: seconds to connect / between two reads
HTTP_TIMEOUT = 30.0
MANIFEST = "agentcompass-manifest.json"
KEPT_DIRS = ("run_scripts", "dockerfiles")
RUN_SCRIPT, PARSER = "run_script.sh", "parser.py"
_PARTIAL = ".partial-"
_CHUNK = 1 << 16

ProgressCallback = Callable[[int, int], None]


class ScriptsDownloadError(AgentCompassError):
    """The run scripts could not be fetched (unreachable, refused, too large, too slow or not a tarball)."""


class ScriptsManifest(msgspec.Struct, frozen=True):
    """What a downloaded scripts folder holds and where it came from (recorded in params.json)."""

    url: str
    commit: str
    sha256: str
    bytes: int
    files: int


@dataclass(frozen=True)
class InstanceScripts:
    """The files the evaluation of one instance needs (Dockerfile texts: '' when not shipped)."""

    run_script: str
    parser: str
    base_dockerfile: str = ""
    instance_dockerfile: str = ""


class ScriptsSource:
    """A scripts folder: ``root/run_scripts/<id>/`` (or ``root/<id>/`` when ``root`` is a run_scripts folder
    itself) and, optionally, ``root/dockerfiles/``."""

    def __init__(self, root: Path, origin: str, manifest: ScriptsManifest | None = None) -> None:
        self.root, self.origin, self.manifest = root, origin, manifest
        nested = root / "run_scripts"
        self.run_scripts = nested if nested.is_dir() else root

    def _dir(self, instance_id: str) -> Path:
        if not instance_id or "/" in instance_id or instance_id in (".", ".."):
            raise ConfigError(f"instance_id {instance_id!r} cannot name a scripts folder", field="instance_id")
        return self.run_scripts / instance_id

    def missing(self, instance_ids: list[str]) -> list[str]:
        """The ids among ``instance_ids`` without both a run script and a parser."""
        return [i for i in instance_ids
                if not ((self._dir(i) / RUN_SCRIPT).is_file() and (self._dir(i) / PARSER).is_file())]

    def scripts(self, instance_id: str) -> InstanceScripts:
        """The run script, parser and Dockerfiles of ``instance_id`` (FileNotFoundError without a script)."""
        d = self._dir(instance_id)

        def text(p: Path) -> str:
            return p.read_text(encoding="utf-8", errors="replace")

        def optional(kind: str) -> str:
            p = self.root / "dockerfiles" / f"{kind}_dockerfile" / instance_id / "Dockerfile"
            return text(p) if p.is_file() else ""

        return InstanceScripts(text(d / RUN_SCRIPT), text(d / PARSER), optional("base"), optional("instance"))


def source_url(commit: str, url: str | None = None) -> str:
    """The tarball the scripts of ``commit`` come from: ``url``, else the repository's own."""
    return url or TARBALL_URL.format(repo=REPOSITORY, commit=commit)


def scripts_dir(data_dir: Path, commit: str, url: str | None = None) -> Path:
    """The cache folder of the scripts of ``commit`` from ``url`` (default: the repository's tarball)."""
    name = commit
    if source_url(commit, url) != source_url(commit):  # a mirror's copy never stands in for GitHub's, nor back
        name += "-" + hashlib.sha256(source_url(commit, url).encode()).hexdigest()[:16]
    return data_dir / "swebench_pro" / "scripts" / name


def _read_manifest(folder: Path) -> ScriptsManifest | None:
    try:
        return msgspec.json.decode((folder / MANIFEST).read_bytes(), type=ScriptsManifest)
    except (OSError, msgspec.DecodeError):
        return None


def find_cached(data_dir: Path, commit: str, url: str | None = None) -> ScriptsSource | None:
    """The downloaded scripts of ``commit`` from ``url``, if a complete folder whose manifest names that very
    source is there."""
    folder = scripts_dir(data_dir, commit, url)
    manifest = _read_manifest(folder)
    if manifest is None or (manifest.commit, manifest.url) != (commit, source_url(commit, url)):
        return None
    return ScriptsSource(folder, "download", manifest)


def _placed_by_hand(folder: Path) -> bool:
    """Whether ``folder`` is there but was not written by a download (it has no manifest)."""
    return folder.exists() and not (folder / MANIFEST).exists()


def _find_usable(data_dir: Path, commit: str, url: str | None) -> ScriptsSource | None:
    """The cached download, else a folder placed by hand in the cache folder that has ``run_scripts/``."""
    hit = find_cached(data_dir, commit, url)
    if hit is not None:
        return hit
    folder = scripts_dir(data_dir, commit, url)
    if _placed_by_hand(folder) and (folder / "run_scripts").is_dir():
        return ScriptsSource(folder, "directory")
    return None


def _member_path(name: str) -> str | None:
    """The path to unpack a tarball member to (its top folder dropped), or None to skip it."""
    parts = name.split("/", 1)
    if len(parts) != 2:
        return None
    rel = posixpath.normpath(parts[1])
    if rel.startswith(("/", "..")) or rel.split("/", 1)[0] not in KEPT_DIRS or "\\" in rel or "\0" in rel:
        return None
    return rel


class _Guarded(io.FileIO):
    """The tarball, read only until the deadline or a cancellation (checked at every read, so that even
    skipping a huge member of a compression bomb stops in time)."""

    def __init__(self, path: Path, end: float, deadline: float, cancelled: threading.Event | None) -> None:
        super().__init__(path, "rb")
        self._end, self._deadline, self._cancelled = end, deadline, cancelled

    def read(self, size: int | None = -1, /) -> bytes:
        if self._cancelled is not None and self._cancelled.is_set():
            raise ScriptsDownloadError("unpacking the scripts: cancelled")
        if time.monotonic() > self._end:
            raise ScriptsDownloadError(f"downloading and unpacking the scripts took more than {self._deadline:.0f} s")
        return super().read(size)


def _unpack(tarball: Path, dest: Path, *, end: float, deadline: float, cancelled: threading.Event | None,
            max_bytes: int = MAX_UNPACKED_BYTES, max_files: int = MAX_FILES) -> int:
    """Unpack the kept regular files of ``tarball`` into ``dest`` (by ``end``, a monotonic time, and within
    the caps); the number of files."""
    count = total = 0
    try:
        with _Guarded(tarball, end, deadline, cancelled) as raw, tarfile.open(fileobj=raw, mode="r|gz") as tar:
            for member in tar:
                rel = _member_path(member.name)
                if rel is None or not member.isreg():  # links, devices and everything else: never unpacked
                    continue
                if member.size > MAX_FILE_BYTES:
                    raise ScriptsDownloadError(f"{member.name} in the scripts tarball is {member.size} bytes, "
                                               f"over the {MAX_FILE_BYTES}-byte cap")
                total += member.size
                count += 1
                if total > max_bytes:
                    raise ScriptsDownloadError(f"the scripts tarball unpacks to more than {max_bytes} bytes, over "
                                               f"the cap")
                if count > max_files:
                    raise ScriptsDownloadError(f"the scripts tarball holds more than {max_files} files, over the cap")
                src = tar.extractfile(member)
                if src is None:
                    continue
                target = dest / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                with src, target.open("wb") as out:
                    shutil.copyfileobj(src, out)
    except (tarfile.TarError, EOFError, OSError) as exc:
        if isinstance(exc, ScriptsDownloadError):
            raise
        raise ScriptsDownloadError(f"the scripts download is not a readable .tar.gz ({exc})") from None
    return count


def _fetch(url: str, into: Path, *, max_bytes: int, deadline: float, on_progress: ProgressCallback | None,
           cancelled: threading.Event | None) -> str:
    """Stream ``url`` into the file ``into``; its sha256."""
    import httpx

    digest = hashlib.sha256()
    done = 0
    end = time.monotonic() + deadline
    try:
        # a stalled transfer ends by the read timeout, a slow one at the deadline between two chunks
        timeout = httpx.Timeout(min(HTTP_TIMEOUT, deadline))
        with httpx.Client(timeout=timeout, follow_redirects=True) as client, \
                client.stream("GET", url) as resp:
            if resp.status_code != 200:
                raise ScriptsDownloadError(f"GET {url} answered HTTP {resp.status_code}")
            announced = int(resp.headers.get("content-length") or 0)
            if announced > max_bytes:
                raise ScriptsDownloadError(f"{url} is {announced} bytes, over the {max_bytes}-byte cap")
            with into.open("wb") as out:
                for chunk in resp.iter_bytes(_CHUNK):
                    if cancelled is not None and cancelled.is_set():
                        raise ScriptsDownloadError(f"downloading {url}: cancelled")
                    if time.monotonic() > end:
                        raise ScriptsDownloadError(f"downloading {url} took more than {deadline:.0f} s")
                    done += len(chunk)
                    if done > max_bytes:
                        raise ScriptsDownloadError(f"{url}: more than {max_bytes} bytes received; download stopped")
                    digest.update(chunk)
                    out.write(chunk)
                    if on_progress is not None:
                        on_progress(done, announced or done)
    except httpx.HTTPError as exc:
        raise ScriptsDownloadError(f"downloading {url} failed ({type(exc).__name__}: {exc})") from None
    return digest.hexdigest()


def download(data_dir: Path, commit: str, url: str | None = None, *, max_bytes: int = MAX_DOWNLOAD_BYTES,
             deadline: float = DOWNLOAD_DEADLINE, on_progress: ProgressCallback | None = None,
             cancelled: threading.Event | None = None, max_unpacked_bytes: int = MAX_UNPACKED_BYTES,
             max_files: int = MAX_FILES) -> ScriptsSource:
    """The scripts of ``commit`` from ``url`` (default: the repository's tarball at ``commit``): its cache (or a
    folder placed there by hand), else downloaded into it. A folder in the way that no download wrote is never
    replaced: ScriptsDownloadError."""
    hit = _find_usable(data_dir, commit, url)
    if hit is not None:
        return hit
    final = scripts_dir(data_dir, commit, url)
    if _placed_by_hand(final):
        raise ScriptsDownloadError(f"{final} exists but was not written by a download (no {MANIFEST}) and has no "
                                   f"run_scripts/ folder; it is left alone: move it away")
    url = source_url(commit, url)
    end = time.monotonic() + deadline
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.parent / f"{_PARTIAL}{final.name}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        with tempfile.TemporaryDirectory(dir=final.parent, prefix=_PARTIAL) as spool:
            tarball = Path(spool) / "scripts.tar.gz"
            log.info("downloading the SWE-bench Pro run scripts (%s) from %s", commit[:12], url)
            sha = _fetch(url, tarball, max_bytes=max_bytes, deadline=deadline, on_progress=on_progress,
                         cancelled=cancelled)
            size = tarball.stat().st_size
            count = _unpack(tarball, tmp, end=end, deadline=deadline, cancelled=cancelled,
                            max_bytes=max_unpacked_bytes, max_files=max_files)
        if not (tmp / "run_scripts").is_dir():
            raise ScriptsDownloadError(f"{url} has no run_scripts/ folder: not the SWE-bench Pro repository")
        manifest = ScriptsManifest(url=url, commit=commit, sha256=sha, bytes=size, files=count)
        (tmp / MANIFEST).write_bytes(msgspec.json.encode(manifest))
        if _read_manifest(final) is not None and find_cached(data_dir, commit, url) is None:
            # an earlier download of another source (an older cache layout): ours to replace. Renamed to a
            # partial name first, so that a half-deleted copy never reads as scripts.
            trash = final.parent / f"{_PARTIAL}{final.name}-stale-{uuid.uuid4().hex[:8]}"
            os.rename(final, trash)
            shutil.rmtree(trash, ignore_errors=True)
        try:
            os.rename(tmp, final)
        except OSError:
            if find_cached(data_dir, commit, url) is None:  # not another process that finished first
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    log.info("SWE-bench Pro run scripts in %s", final)
    return ScriptsSource(final, "download", manifest)


def locate(data_dir: Path, *, user_dir: str | None, commit: str, url: str | None, allow_download: bool,
           on_progress: ProgressCallback | None = None,
           cancelled: threading.Event | None = None) -> ScriptsSource:
    """The scripts: ``user_dir``, else the cache, else (``allow_download``) downloaded; a ConfigError saying
    what to provide otherwise."""
    if user_dir:
        root = Path(user_dir).expanduser()
        if not root.is_dir():
            raise ConfigError(f"benchmark swebench_pro: scripts_dir {str(root)!r} is not a directory",
                              field="benchmark.params.scripts_dir")
        return ScriptsSource(root, "directory")
    hit = _find_usable(data_dir, commit, url)
    if hit is not None:
        return hit
    where = scripts_dir(data_dir, commit, url)
    if not allow_download:
        raise ConfigError(f"benchmark swebench_pro: no run scripts of {source_url(commit, url)} in {where} and "
                          f"downloading is off. Put the run_scripts/ and dockerfiles/ folders of {REPOSITORY} "
                          f"(commit {commit}) in a folder and give it as `scripts_dir` (or put them in {where}), "
                          f"or allow the download (scripts_download: true)", field="benchmark.params.scripts_dir")
    try:
        return download(data_dir, commit, url, on_progress=on_progress, cancelled=cancelled)
    except ScriptsDownloadError as exc:
        raise ScriptsDownloadError(f"benchmark swebench_pro: {exc}. Or put the run_scripts/ and dockerfiles/ "
                                   f"folders of {REPOSITORY} in a folder and give it as `scripts_dir`.") from None


__all__ = ["DEFAULT_COMMIT", "MAX_DOWNLOAD_BYTES", "MAX_FILES", "MAX_UNPACKED_BYTES", "REPOSITORY",
           "InstanceScripts", "ScriptsDownloadError", "ScriptsManifest", "ScriptsSource", "download", "find_cached",
           "locate", "scripts_dir", "source_url"]
