"""The data files of a QA benchmark from a Hugging Face Hub dataset repo, cached under ``data_dir``.

``hub_files(where, repo, patterns, ...)`` returns the repo's files matching ``patterns`` (fnmatch over the repo's
paths: ``data/test-*.parquet``, ``simple_qa_test_set.csv``, ``olympiad/test.jsonl``) at ``revision``, from the cache
``<data_dir>/hf/<repo>/<revision>/files/`` when a complete copy is there (no network), else downloaded with
huggingface_hub (``HF_ENDPOINT``, ``HF_TOKEN`` and ``HF_HUB_OFFLINE`` read at the call, passed explicitly). The
copy is made in a temporary folder and renamed into place whole. Every wait is bounded: the Hub's metadata
answer by ``timeout`` seconds, so a machine without network fails fast with an error naming the dataset,
``HF_ENDPOINT`` and where to put the files instead.

``read_rows(path)`` reads a CSV, JSONL or parquet file into dicts.
"""

from __future__ import annotations

import csv
import fnmatch
import io
import os
import shutil
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

import msgspec

from ..._errors import ConfigError
from ...common.data_dir import default_data_dir
from ...common.hub import DatasetDownloadError, HubSettings

MANIFEST = "agentcompass-manifest.json"
#: all files of one benchmark together may not exceed this many bytes.
MAX_DOWNLOAD_BYTES = 2 << 30
#: seconds to wait for the Hub's metadata answer (and each file's first bytes).
DEFAULT_TIMEOUT = 20.0
INSTALL_HINT = "pip install 'agentcompass[judged-qa]'"


class HubFiles(msgspec.Struct, frozen=True):
    """What was downloaded (the cache folder's manifest; recorded as the benchmark's ``source``)."""

    repo: str
    revision: str
    commit: str
    files: list[str]
    bytes: int


def cache_dir(data_dir: str | None, repo: str, revision: str) -> Path:
    """The cache folder of ``repo`` at ``revision``."""
    return default_data_dir(data_dir) / "hf" / repo / quote(revision, safe="") / "files"


def _cached(folder: Path) -> tuple[dict[str, Path], HubFiles] | None:
    try:
        manifest = msgspec.json.decode((folder / MANIFEST).read_bytes(), type=HubFiles)
    except (OSError, msgspec.DecodeError):
        return None
    paths = {f: folder / f for f in manifest.files}
    return (paths, manifest) if all(p.is_file() for p in paths.values()) else None


def _hub() -> Any:
    try:
        import huggingface_hub
    except ImportError:
        raise ConfigError(f"downloading the dataset from the Hugging Face Hub needs huggingface_hub: {INSTALL_HINT}",
                          field="benchmark") from None
    return huggingface_hub


def hub_files(where: str, repo: str, patterns: Sequence[str], *, data_dir: str | None, revision: str = "main",
              timeout: float = DEFAULT_TIMEOUT, settings: HubSettings | None = None,
              max_bytes: int = MAX_DOWNLOAD_BYTES) -> tuple[dict[str, Path], HubFiles]:
    """({repo path: local file}, manifest) of the files of ``repo`` matching ``patterns`` (see the module doc)."""
    folder = cache_dir(data_dir, repo, revision)
    hit = _cached(folder)
    if hit is not None:
        return hit
    settings = settings or HubSettings.from_env()
    put = (f"put the files ({', '.join(patterns)}) of the dataset with a {MANIFEST} into {folder} (the data_dir "
           "param sets the folder)")
    if settings.offline:
        raise ConfigError(f"{where}: the dataset {repo} is not in the cache and HF_HUB_OFFLINE is set; unset it, "
                          f"or {put}", field="data_dir")
    hf = _hub()
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError, RevisionNotFoundError

    api = hf.HfApi(endpoint=settings.endpoint, token=settings.token, library_name="agentcompass")
    try:
        info = api.dataset_info(repo, revision=revision, files_metadata=True, timeout=timeout)
    except GatedRepoError:
        raise DatasetDownloadError(f"{where}: the dataset {repo} on {settings.endpoint} is gated: accept its terms "
                                   "on the Hub and set HF_TOKEN, or " + put) from None
    except RepositoryNotFoundError:
        raise DatasetDownloadError(f"{where}: no dataset {repo} on {settings.endpoint} (a gated or private dataset "
                                   "needs HF_TOKEN); set HF_ENDPOINT to a Hub that has it, or " + put) from None
    except RevisionNotFoundError:
        raise ConfigError(f"{where}: revision {revision!r} does not exist in {repo} on {settings.endpoint}",
                          field="benchmark.params.revision") from None
    except Exception as exc:
        raise DatasetDownloadError(f"{where}: cannot read the dataset {repo} from the Hugging Face Hub at "
                                   f"{settings.endpoint} (HF_ENDPOINT) within {timeout:g}s ({type(exc).__name__}: "
                                   f"{exc}); set HF_ENDPOINT to a reachable Hub or mirror, or {put}") from None
    sizes = {s.rfilename: s.size for s in info.siblings or []}
    names = sorted(n for n in sizes if any(fnmatch.fnmatchcase(n, p) for p in patterns))
    missing = [p for p in patterns if not any(fnmatch.fnmatchcase(n, p) for n in names)]
    if missing:
        raise DatasetDownloadError(f"{where}: {repo} on {settings.endpoint} has no file matching "
                                   f"{', '.join(missing)} (it has {', '.join(sorted(sizes)[:10]) or 'nothing'})")
    total = sum(sizes.get(n) or 0 for n in names)
    if total > max_bytes:
        raise DatasetDownloadError(f"{where}: {repo}'s files are {total} bytes, over the {max_bytes}-byte cap")
    commit = str(info.sha or revision)
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = folder.parent / f".partial-files-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        for name in names:
            try:
                hf.hf_hub_download(repo, name, repo_type="dataset", revision=commit, local_dir=tmp,
                                   endpoint=settings.endpoint, token=settings.token, etag_timeout=timeout,
                                   library_name="agentcompass")
            except Exception as exc:
                raise DatasetDownloadError(f"{where}: downloading {name} of {repo} from {settings.endpoint} failed "
                                           f"({type(exc).__name__}: {exc})") from None
            got = (tmp / name).stat().st_size
            if sizes.get(name) is not None and got != sizes[name]:
                raise DatasetDownloadError(f"{where}: {name} has {got} bytes, the Hub announced {sizes[name]}")
        shutil.rmtree(tmp / ".cache", ignore_errors=True)  # huggingface_hub's local_dir bookkeeping
        manifest = HubFiles(repo=repo, revision=revision, commit=commit, files=names,
                            bytes=sum((tmp / n).stat().st_size for n in names))
        (tmp / MANIFEST).write_bytes(msgspec.json.encode(manifest))
        try:
            os.rename(tmp, folder)
        except OSError:  # another process finished first: its copy is as good
            hit = _cached(folder)
            if hit is None:
                raise
            return hit
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {n: folder / n for n in names}, manifest


def read_rows(path: Path, columns: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """The rows of a CSV (header line), JSONL or parquet file (``columns``: only those, for parquet)."""
    where = str(path)
    if path.suffix == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise ConfigError(f"{where} is a parquet file; reading it needs pyarrow: {INSTALL_HINT}",
                              field="benchmark") from None
        schema = pq.read_schema(path)
        cols = [c for c in columns if c in schema.names] if columns else None
        rows: list[dict[str, Any]] = pq.read_table(path, columns=cols).to_pylist()
        return rows
    text = path.read_text(encoding="utf-8-sig")
    if path.suffix == ".csv":
        csv.field_size_limit(min(sys.maxsize, 1 << 30))
        return [dict(r) for r in csv.DictReader(io.StringIO(text, newline=""))]
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                row = msgspec.json.decode(line)
            except msgspec.DecodeError as exc:
                raise ConfigError(f"{where}:{n}: not valid JSON ({exc})", field="data_dir") from None
            if isinstance(row, dict):
                out.append(row)
    return out


__all__ = ["HubFiles", "cache_dir", "hub_files", "read_rows"]
