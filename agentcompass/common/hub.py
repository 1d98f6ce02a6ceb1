"""SWE-bench datasets from the Hugging Face Hub, cached under ``data_dir``.

One split of one dataset revision is one cache folder, ``<data_dir>/hf/<repo>/<revision>/<split>/``, holding
the split's parquet files and a manifest. The folder is filled under a temporary name and renamed into place
only when every file is complete, so a killed download never leaves anything that reads as a dataset. A
cached folder is used without any network request.

``HF_ENDPOINT``, ``HF_TOKEN`` and ``HF_HUB_OFFLINE`` are read at each call and passed to huggingface_hub
explicitly (it reads its own copies at import time); ``os.environ`` is never written.
"""

from __future__ import annotations

import contextlib
import fnmatch
import logging
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import msgspec

from .._errors import AgentCompassError, ConfigError
from .file_lock import LockWaitEnd, file_lock

log = logging.getLogger("agentcompass.common.hub")

DEFAULT_ENDPOINT = "https://huggingface.co"
#: the whole download (all files of a split) may not exceed this many bytes.
MAX_DOWNLOAD_BYTES = 2 << 30
#: seconds to wait for the Hub's metadata answers (the file bodies use huggingface_hub's read timeout,
#: ``HF_HUB_DOWNLOAD_TIMEOUT``, with its resume-on-stall retries).
METADATA_TIMEOUT = 30.0
#: seconds to wait for another process that is downloading the same split.
LOCK_WAIT = 1800.0
#: how often that wait looks at the lock (and at the caller's cancellation)
_LOCK_POLL = 0.2
MANIFEST = "agentcompass-manifest.json"
MIN_HUB_VERSION = (1, 1)
INSTALL_HINT = "pip install 'agentcompass[swebench]'"
_PARTIAL = ".partial-"
_LOG_EVERY = 2.0

ProgressCallback = Callable[[int, int], None]


class DatasetDownloadError(AgentCompassError):
    """The dataset could not be fetched from the Hub (unreachable, refused, too large, or broken files)."""


class HubDataset(msgspec.Struct, frozen=True):
    """What was downloaded: written as the cache folder's manifest and recorded in params.json."""

    repo: str
    revision: str
    commit: str
    split: str
    files: list[str]
    bytes: int


@dataclass(frozen=True)
class HubSettings:
    """Where and how to reach the Hub, from the environment at the time of the call."""

    endpoint: str = DEFAULT_ENDPOINT
    token: str | None = None
    offline: bool = False

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> HubSettings:
        """``HF_ENDPOINT``, ``HF_TOKEN`` and ``HF_HUB_OFFLINE`` (read only)."""
        env = os.environ if environ is None else environ
        offline = (env.get("HF_HUB_OFFLINE") or "").strip().upper() in {"1", "ON", "YES", "TRUE"}
        return cls(endpoint=(env.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/"),
                   token=env.get("HF_TOKEN") or None, offline=offline)


def split_dir(data_dir: Path, repo: str, revision: str, split: str) -> Path:
    """The cache folder of one split of one revision (a branch name with ``/`` stays one folder)."""
    return data_dir / "hf" / repo / quote(revision, safe="") / quote(split, safe="")


def split_files(names: Sequence[str], split: str) -> list[str]:
    """The parquet files of ``split`` among a repo's file names (``data/test-00000-of-00001.parquet``, or the
    ``<config>/<split>/*.parquet`` layout of the Hub's parquet conversion)."""
    pats = [f"data/{split}-*.parquet", f"data/{split}/*.parquet", f"*/{split}/*.parquet"]
    return sorted(n for n in names if any(fnmatch.fnmatchcase(n, p) for p in pats))


def _splits_in(names: Sequence[str]) -> list[str]:
    out = {Path(n).name.split("-", 1)[0] for n in names if n.startswith("data/") and n.endswith(".parquet")}
    return sorted(out)


def find_cached(data_dir: Path, repos: Sequence[str], revision: str,
                split: str) -> tuple[list[Path], HubDataset] | None:
    """The cached files and manifest of the first of ``repos`` that has this split at this revision."""
    for repo in repos:
        folder = split_dir(data_dir, repo, revision, split)
        try:
            manifest = msgspec.json.decode((folder / MANIFEST).read_bytes(), type=HubDataset)
        except (OSError, msgspec.DecodeError):
            continue
        paths = [folder / f for f in manifest.files]
        if all(p.is_file() for p in paths):
            return paths, manifest
    return None


def require_libraries(where: str) -> Any:
    """huggingface_hub (new enough) and pyarrow, or a ConfigError naming the extra to install."""
    try:
        import huggingface_hub
        import pyarrow.parquet  # noqa: F401
    except ImportError as exc:
        raise ConfigError(f"{where}: downloading the dataset from the Hugging Face Hub needs huggingface_hub and "
                          f"pyarrow ({exc.name} is missing): {INSTALL_HINT}", field="benchmark") from None
    try:
        have = tuple(int(p) for p in huggingface_hub.__version__.split(".")[:2])
    except ValueError:
        have = MIN_HUB_VERSION
    if have < MIN_HUB_VERSION:
        raise ConfigError(f"{where}: huggingface_hub {huggingface_hub.__version__} is too old (need >= "
                          f"{'.'.join(map(str, MIN_HUB_VERSION))}): {INSTALL_HINT} --upgrade", field="benchmark")
    return huggingface_hub


class _Progress:
    """Bytes of one download across its files: plain log lines (at most one every 2 s) and a callback."""

    def __init__(self, label: str, total: int, max_bytes: int, on_progress: ProgressCallback | None,
                 cancelled: threading.Event | None = None) -> None:
        self.label, self.total, self.max_bytes, self.on_progress = label, total, max_bytes, on_progress
        self.cancelled = cancelled
        self.done = 0
        self._logged = 0.0

    def add(self, n: int) -> None:
        if self.cancelled is not None and self.cancelled.is_set():
            raise DatasetDownloadError(f"{self.label}: download cancelled")
        self.done = max(0, self.done + n)
        if self.done > self.max_bytes:  # the server sends more than it announced
            raise DatasetDownloadError(f"{self.label}: more than {self.max_bytes} bytes received; download stopped")
        if self.on_progress is not None:
            self.on_progress(self.done, self.total)
        now = time.monotonic()
        if now - self._logged >= _LOG_EVERY or self.done >= self.total:
            self._logged = now
            log.info("downloading %s: %s / %s", self.label, _size(self.done), _size(self.total))


def _size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 100_000 else f"{n} B"


def _bar_class(progress: _Progress) -> type:
    """A tqdm class for huggingface_hub that never draws (no bar spam on a non-tty) and feeds ``progress``."""
    from tqdm import tqdm

    class _Bar(tqdm):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs.pop("name", None)  # huggingface_hub passes it to its own tqdm subclass only (some versions)
            kwargs["disable"] = True
            super().__init__(*args, **kwargs)

        def update(self, n: float | None = 1) -> bool | None:
            progress.add(int(n or 0))
            return None

    return _Bar


def _locked(path: Path, wait: float,
            cancelled: threading.Event | None = None) -> contextlib.AbstractContextManager[None]:
    """An exclusive lock on ``path`` between processes and threads, waited for at most ``wait`` seconds (a
    DatasetDownloadError as soon as ``cancelled`` is set)."""

    def error(end: LockWaitEnd) -> DatasetDownloadError:
        if end == "cancelled":
            return DatasetDownloadError(f"waiting for {path} (another process downloading the same dataset): "
                                        "cancelled")
        return DatasetDownloadError(f"another process holds {path} (downloading the same dataset) for more than "
                                    f"{wait:.0f} s")

    return file_lock(path, wait, error, cancelled=cancelled, poll_s=_LOCK_POLL)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _resolve(hf: Any, settings: HubSettings, repos: Sequence[str], revision: str, where: str) -> tuple[str, Any]:
    """(repo, dataset info at ``revision``) of the first of ``repos`` the Hub knows."""
    from huggingface_hub.errors import OfflineModeIsEnabled, RepositoryNotFoundError, RevisionNotFoundError

    api = hf.HfApi(endpoint=settings.endpoint, token=settings.token, library_name="agentcompass")
    for repo in repos:
        try:
            return repo, api.dataset_info(repo, revision=revision, files_metadata=True, timeout=METADATA_TIMEOUT)
        except RepositoryNotFoundError:
            log.info("%s: %s not found on %s, trying the next name", where, repo, settings.endpoint)
        except RevisionNotFoundError:
            raise ConfigError(f"{where}: revision {revision!r} does not exist in {repo} on {settings.endpoint}; "
                              "give a branch, tag or commit of the dataset",
                              field="benchmark.params.revision") from None
        except OfflineModeIsEnabled:
            raise DatasetDownloadError(f"{where}: huggingface_hub was imported with HF_HUB_OFFLINE set, so it "
                                       "refuses network access in this process") from None
        except Exception as exc:
            raise DatasetDownloadError(f"{where}: cannot read {repo} from the Hugging Face Hub at "
                                       f"{settings.endpoint} ({type(exc).__name__}: {exc})") from None
    raise DatasetDownloadError(f"{where}: no dataset {' or '.join(repos)} on {settings.endpoint} (private or gated "
                               "datasets need HF_TOKEN)")


def download(data_dir: Path, repos: Sequence[str], revision: str, split: str, *, where: str,
             settings: HubSettings | None = None, max_bytes: int = MAX_DOWNLOAD_BYTES,
             on_progress: ProgressCallback | None = None,
             cancelled: threading.Event | None = None) -> tuple[list[Path], HubDataset]:
    """The split's parquet files from the cache, else downloaded from the Hub into it.

    ``repos`` are tried in order (current name, then old ones). Does not look at ``settings.offline``: the
    caller decides what an offline miss means. A set ``cancelled`` (``ComponentContext.cancelled``) stops the
    download, or the wait for another process's, with a DatasetDownloadError.
    """
    hit = find_cached(data_dir, repos, revision, split)
    if hit is not None:
        return hit
    settings = settings or HubSettings.from_env()
    hf = require_libraries(where)
    repo, info = _resolve(hf, settings, repos, revision, where)
    names = [s.rfilename for s in info.siblings or []]
    files = split_files(names, split)
    if not files:
        raise ConfigError(f"{where}: {repo} has no parquet files for split {split!r} at revision {revision!r} "
                          f"(splits seen: {', '.join(_splits_in(names)) or 'none'})", field="benchmark.params.split")
    sizes = {s.rfilename: s.size for s in info.siblings or []}
    total = sum(sizes.get(f) or 0 for f in files)
    if total > max_bytes:
        raise DatasetDownloadError(f"{where}: {repo} split {split} is {total} bytes, over the {max_bytes}-byte cap")
    commit = str(info.sha or revision)
    final = split_dir(data_dir, repo, revision, split)
    label = f"{repo}@{commit[:12]} ({split})"
    with _locked(final.parent / f".{final.name}.lock", LOCK_WAIT, cancelled):
        hit = find_cached(data_dir, [repo], revision, split)  # another process may have finished it meanwhile
        if hit is not None:
            return hit
        for stale in final.parent.glob(f"{_PARTIAL}{final.name}-*"):  # killed earlier downloads (we hold the lock)
            shutil.rmtree(stale, ignore_errors=True)
        tmp = final.parent / f"{_PARTIAL}{final.name}-{uuid.uuid4().hex[:8]}"
        tmp.mkdir(parents=True)
        try:
            log.info("downloading %s from %s: %d file(s), %s", label, settings.endpoint, len(files), _size(total))
            bar = _bar_class(_Progress(label, total, max_bytes, on_progress, cancelled))
            for name in files:
                _fetch_file(hf, settings, repo, commit, name, tmp, bar, where)
                _check_parquet(tmp / name, sizes.get(name), where)
            shutil.rmtree(tmp / ".cache", ignore_errors=True)  # huggingface_hub's local_dir bookkeeping
            manifest = HubDataset(repo=repo, revision=revision, commit=commit, split=split, files=files,
                                  bytes=sum((tmp / f).stat().st_size for f in files))
            (tmp / MANIFEST).write_bytes(msgspec.json.encode(manifest))
            for f in [*files, MANIFEST]:
                _fsync(tmp / f)
            if final.exists():  # a folder without a manifest (find_cached refused it): not ours to keep
                shutil.rmtree(final)
            os.rename(tmp, final)
            _fsync(final.parent)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    log.info("downloaded %s into %s", label, final)
    return [final / f for f in files], manifest


def _fetch_file(hf: Any, settings: HubSettings, repo: str, commit: str, name: str, into: Path, bar: type,
                where: str) -> None:
    try:
        hf.hf_hub_download(repo, name, repo_type="dataset", revision=commit, local_dir=into,
                           endpoint=settings.endpoint, token=settings.token, etag_timeout=METADATA_TIMEOUT,
                           tqdm_class=bar, library_name="agentcompass")
    except (ConfigError, DatasetDownloadError):
        raise
    except Exception as exc:
        raise DatasetDownloadError(f"{where}: downloading {name} of {repo} from {settings.endpoint} failed "
                                   f"({type(exc).__name__}: {exc})") from None


def _check_parquet(path: Path, size: int | None, where: str) -> None:
    import pyarrow.parquet as pq

    if size is not None and path.stat().st_size != size:
        raise DatasetDownloadError(f"{where}: {path.name} has {path.stat().st_size} bytes, the Hub announced {size}")
    try:
        pq.read_metadata(path)
    except Exception as exc:
        raise DatasetDownloadError(f"{where}: {path.name} from the Hub is not a readable parquet file "
                                   f"({exc})") from None


__all__ = ["DatasetDownloadError", "HubDataset", "HubSettings", "download", "find_cached", "require_libraries",
           "split_dir", "split_files"]
