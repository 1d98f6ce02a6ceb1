"""SWE-bench instances from the user's files (JSONL, JSON or parquet) or the Hugging Face Hub.

The user's files in ``data_dir`` come first; the official datasets are then taken from the Hub download cache
under ``data_dir``, downloading them when missing (``hub.py``). Offline (``HF_HUB_OFFLINE=1``) with nothing
cached, a ConfigError says which file to put where.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec

from ..._errors import ConfigError
from ...common.data_dir import default_data_dir
from ...common.dataset_source import DatasetSource
from ...common.hub import DatasetDownloadError, HubSettings, ProgressCallback, download, find_cached, split_dir
from ..selection import SELECTION_PARAM, select_tasks

#: benchmark id -> its Hugging Face dataset names, current first, then the old ones (tried in order).
HF_DATASETS: dict[str, tuple[str, ...]] = {
    "swebench": ("SWE-bench/SWE-bench", "princeton-nlp/SWE-bench"),
    "swebench_verified": ("SWE-bench/SWE-bench_Verified", "princeton-nlp/SWE-bench_Verified"),
    "swebench_lite": ("SWE-bench/SWE-bench_Lite", "princeton-nlp/SWE-bench_Lite"),
    "swebench_multilingual": ("SWE-bench/SWE-bench_Multilingual",),
    "swebench_pro": ("ScaleAI/SWE-bench_Pro",),
}
DEFAULT_REVISION = "main"


REQUIRED_FIELDS = ("instance_id", "repo", "base_commit", "problem_statement", "patch", "test_patch",
                   "FAIL_TO_PASS", "PASS_TO_PASS")
LIST_FIELDS = ("FAIL_TO_PASS", "PASS_TO_PASS")
SUFFIXES = (".jsonl", ".json", ".parquet")


def candidate_files(data_dir: Path, name: str, split: str = "test") -> list[Path]:
    """Where the instances of benchmark ``name`` are looked for, in order."""
    stems = [name]
    hf = HF_DATASETS.get(name)
    if hf:
        stems.append(hf[0].split("/", 1)[1])  # e.g. SWE-bench_Verified
    out: list[Path] = []
    for stem in stems:
        out += [data_dir / f"{stem}{s}" for s in SUFFIXES]
        out += [data_dir / stem / f"{split}{s}" for s in SUFFIXES]
    return out


def _as_list(value: Any, field: str, where: str) -> list[str]:
    if isinstance(value, str):  # the HF dataset stores these lists JSON-encoded
        try:
            value = json.loads(value) if value.strip() else []
        except json.JSONDecodeError:
            raise ConfigError(f"{where}: {field} is a string but not a JSON list", field=field) from None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: {field} must be a list of test names", field=field)
    return value


def normalize_instance(row: dict[str, Any], where: str) -> dict[str, Any]:
    """Check the SWE-bench fields of one row; FAIL_TO_PASS/PASS_TO_PASS become lists."""
    missing = [f for f in REQUIRED_FIELDS if f not in row]
    if missing:
        raise ConfigError(f"{where}: instance {row.get('instance_id', '?')!r} lacks the SWE-bench field(s) "
                          f"{', '.join(missing)} (required: {', '.join(REQUIRED_FIELDS)})", field="data_dir")
    out = dict(row)
    for f in LIST_FIELDS:
        out[f] = _as_list(row[f], f, where)
    for f in ("instance_id", "repo", "base_commit", "patch", "test_patch"):
        if not isinstance(out[f], str):
            raise ConfigError(f"{where}: field {f} of {row['instance_id']!r} must be a string", field="data_dir")
    out.setdefault("version", "")
    out.setdefault("environment_setup_commit", out["base_commit"])
    return out


#: checks one row and returns it normalised (``normalize_instance`` for SWE-bench-format rows)
RowNormalizer = Callable[[dict[str, Any], str], dict[str, Any]]


def read_instances_file(path: Path, normalize: RowNormalizer = normalize_instance) -> list[dict[str, Any]]:
    """Rows of a JSONL, JSON (a list, or {"instances"|"data": [...]}) or parquet file, each through
    ``normalize``."""
    where = str(path)
    if path.suffix == ".parquet":
        try:
            import pyarrow.parquet as pq  # optional
        except ImportError:
            raise ConfigError(f"{where} is a parquet file; reading it needs pyarrow (pip install pyarrow), or "
                              "convert it to JSONL.", field="data_dir") from None
        rows: list[dict[str, Any]] = pq.read_table(path).to_pylist()
    elif path.suffix == ".jsonl":
        rows = []
        with path.open("rb") as f:
            for n, line in enumerate(f, 1):
                if line.strip():
                    try:
                        rows.append(msgspec.json.decode(line))
                    except msgspec.DecodeError as exc:
                        raise ConfigError(f"{where}:{n}: not valid JSON ({exc})", field="data_dir") from None
    else:
        try:
            data = msgspec.json.decode(path.read_bytes())
        except msgspec.DecodeError as exc:
            raise ConfigError(f"{where}: not valid JSON ({exc})", field="data_dir") from None
        if isinstance(data, dict):
            data = data.get("instances", data.get("data"))
        if not isinstance(data, list):
            raise ConfigError(f"{where}: expected a JSON list of instances", field="data_dir")
        rows = data
    return [normalize(r, where) for r in rows if isinstance(r, dict)]


def load_instances(name: str, data_dir: str | None, *, split: str = "test", dataset_file: str | None = None,
                   hub: bool = True, revision: str | None = None, environ: Mapping[str, str] | None = None,
                   on_progress: ProgressCallback | None = None, cancelled: threading.Event | None = None,
                   normalize: RowNormalizer = normalize_instance,
                   columns: Sequence[str] = REQUIRED_FIELDS) -> tuple[list[dict[str, Any]], DatasetSource]:
    """(instances, where they came from) for benchmark ``name``: ``dataset_file``, else a file in ``data_dir``,
    else (``hub``) the Hugging Face dataset at ``revision``, cached under ``data_dir`` and downloaded when
    missing; a ConfigError saying what to provide. ``environ`` (default ``os.environ``) is only read; a set
    ``cancelled`` stops a download (or the wait for another process's) with a DatasetDownloadError. Rows go
    through ``normalize``; ``columns`` are the ones the not-found error asks for."""
    if dataset_file:
        path = Path(dataset_file).expanduser()
        if not path.is_file():
            raise ConfigError(f"benchmark {name}: dataset_file {str(path)!r} does not exist", field="dataset_file")
        return read_instances_file(path, normalize), DatasetSource("file", path=str(path))
    base = default_data_dir(data_dir)
    candidates = candidate_files(base, name, split)
    for path in candidates:
        if path.is_file():
            return read_instances_file(path, normalize), DatasetSource("file", path=str(path))
    repos = HF_DATASETS.get(name)
    rev = revision or DEFAULT_REVISION
    where = f"benchmark {name}"

    def missing(why: str) -> ConfigError:
        return ConfigError(
            f"{where}: dataset not found{why}. Put the SWE-bench instances (JSONL, JSON or parquet with the "
            f"columns {', '.join(columns)}) at {candidates[0]}; set `data_dir` to use another folder. "
            f"Looked in: {', '.join(str(p) for p in candidates[:3])}, ...", field="data_dir")

    if not repos or not hub:
        raise missing("")
    settings = HubSettings.from_env(environ)
    if settings.offline and find_cached(base, repos, rev, split) is None:
        raise missing(f" and HF_HUB_OFFLINE is set, so {repos[0]} (revision {rev}, split {split}) is not "
                      f"downloaded into {split_dir(base, repos[0], rev, split)}")
    try:
        files, got = download(base, repos, rev, split, where=where, settings=settings, on_progress=on_progress,
                              cancelled=cancelled)
    except DatasetDownloadError as exc:
        raise DatasetDownloadError(f"{exc}. Or put the instances at {candidates[0]} yourself.") from None
    source = DatasetSource("hub", path=str(split_dir(base, got.repo, got.revision, split)), repo=got.repo,
                           revision=got.revision, commit=got.commit, files=got.files)
    rows: list[dict[str, Any]] = []
    for f in files:
        rows += read_instances_file(f, normalize)
    return rows, source


def select(instances: Iterable[dict[str, Any]], sample_ids: list[str] | None, name: str) -> list[dict[str, Any]]:
    """The instances named by ``sample_ids`` (in dataset order), or all; unknown ids are an error."""
    return select_tasks(instances, sample_ids, field=SELECTION_PARAM, where=f"benchmark {name}",
                        id_of=lambda r: str(r["instance_id"]))
