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
import logging
import os
import shutil
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path

import msgspec

from ..._errors import AgentCompassError, ConfigError
from ...common.tarball_download import MANIFEST, PARTIAL, Fetched, ProgressCallback, TarballDownload

log = logging.getLogger("agentcompass.benchmarks.swebench.pro_scripts")

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
KEPT_DIRS = ("run_scripts", "dockerfiles")
RUN_SCRIPT, PARSER = "run_script.sh", "parser.py"


class ScriptsDownloadError(AgentCompassError):
    """The run scripts could not be fetched (unreachable, refused, too large, too slow or not a tarball)."""


#: how the scripts tarball is downloaded (the caps above; ``download`` may change them and the deadline)
SCRIPTS = TarballDownload(what="scripts", error=ScriptsDownloadError, max_bytes=MAX_DOWNLOAD_BYTES,
                          max_unpacked_bytes=MAX_UNPACKED_BYTES, max_files=MAX_FILES, deadline=DOWNLOAD_DEADLINE,
                          max_file_bytes=MAX_FILE_BYTES, kept_dirs=KEPT_DIRS, mode="r|gz")


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


def _unpack(tarball: Path, dest: Path, *, end: float, deadline: float, cancelled: threading.Event | None,
            max_bytes: int = MAX_UNPACKED_BYTES, max_files: int = MAX_FILES) -> int:
    """Unpack the kept regular files of ``tarball`` into ``dest`` (by ``end``, a monotonic time, and within
    the caps); the number of files."""
    return SCRIPTS.with_caps(deadline=deadline, max_unpacked_bytes=max_bytes, max_files=max_files).unpack(
        tarball, dest, end=end, cancelled=cancelled)


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
    log.info("downloading the SWE-bench Pro run scripts (%s) from %s", commit[:12], url)

    def seal(tmp: Path, got: Fetched) -> ScriptsManifest:
        if not (tmp / "run_scripts").is_dir():
            raise ScriptsDownloadError(f"{url} has no run_scripts/ folder: not the SWE-bench Pro repository")
        manifest = ScriptsManifest(url=url, commit=commit, sha256=got.sha256, bytes=got.bytes, files=got.files)
        (tmp / MANIFEST).write_bytes(msgspec.json.encode(manifest))
        if _read_manifest(final) is not None and find_cached(data_dir, commit, url) is None:
            # an earlier download of another source (an older cache layout): ours to replace. Renamed to a
            # partial name first, so that a half-deleted copy never reads as scripts.
            trash = final.parent / f"{PARTIAL}{final.name}-stale-{uuid.uuid4().hex[:8]}"
            os.rename(final, trash)
            shutil.rmtree(trash, ignore_errors=True)
        return manifest

    spec = SCRIPTS.with_caps(max_bytes=max_bytes, deadline=deadline, max_unpacked_bytes=max_unpacked_bytes,
                             max_files=max_files)
    manifest = spec.download(url, final, shown=url, seal=seal,
                             done_elsewhere=lambda: find_cached(data_dir, commit, url) is not None,
                             on_progress=on_progress, cancelled=cancelled)
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
