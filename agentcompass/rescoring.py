"""Re-score a finished run: grade its recorded attempts again, with the same grader or another (a newer grading
version, another judge), as Inspect's ``inspect score`` does; nothing of the run is changed.

``rescore(run_dir)`` runs the run's benchmark once more through the engine with the ``recorded`` harness, which
gives each attempt back as the run recorded it (its answer, its patch, its trajectory; no agent, no model call),
on the run's environment (for a verifier, e.g. SWE-bench's containers) unless another is given. The regrading is
a run of its own under ``<run_dir>/rescore/`` (its details hold the new verdicts). Then each attempt the run
graded takes the new verdict, everything else of it (tries, usage, timings, trajectory) stays as recorded, and
the summary is computed again from those details, in the order the run committed them, into
``<run_dir>/summary.<rescore_id>.json`` beside the old ``summary.json``: with the same grader it is the same,
byte for byte. Only benchmarks that grade from the record can be re-scored (``Benchmark.rescorable``).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

from ._errors import ConfigError
from .benchmarks.selection import SELECTION_ALIASES, SELECTION_PARAM
from .engine.accounting import RequestAccount, task_detail
from .engine.resolve import not_rescorable
from .engine.run_dir import rescored_summary_path, summary_bytes, write_atomic
from .interfaces import ComponentContext, TaskSpec
from .metrics import DefaultAccumulator
from .records import AttemptRecord, RequestCounts, Summary, TaskDetail
from .registry import Registries
from .rundata import is_run_dir, iter_details, read_json, run_liveness

__all__ = ["RESCORE_DIR", "RescoreResult", "rescore"]

#: the folder of a run directory that holds its re-scores' regrading runs
RESCORE_DIR = "rescore"
#: attempts the regrading may change (graded ones); the rest keep their record as it is
_GRADED = ("completed", "eval_error")
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
#: the most bytes of progress.jsonl read for the order the run committed its tasks in
MAX_PROGRESS_BYTES = 1 << 30


class RescoreResult(msgspec.Struct, kw_only=True):
    """What ``rescore`` did: ``summary`` (the new summary's path) and its ``metrics`` against the run's
    (``metrics_before``), the tasks whose verdict changed, and the regrading run's directory and status."""

    run_dir: str
    rescore_id: str
    status: str
    summary: str | None = None
    metrics_before: dict[str, Any] = {}
    metrics: dict[str, Any] = {}
    changed: list[str] = []
    regrade_run_dir: str | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        """Whether the new summary was written."""
        return self.summary is not None


def _run_docs(path: Path) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    if not is_run_dir(path) or not (path / "details").is_dir():
        raise ConfigError(f"Invalid `run_dir` {str(path)!r}: not a run directory (no run_info.json, summary.json "
                          "and details/).", field="run_dir")
    params, summary, info = (read_json(path / name) for name in ("params.json", "summary.json", "run_info.json"))
    if params is None or not isinstance(params.get("spec"), dict):
        raise ConfigError(f"Invalid `run_dir` {str(path)!r}: its params.json is missing or unreadable.",
                          field="run_dir")
    live, _ = run_liveness((info or {}).get("status"), info or {})
    if live or summary is None:
        raise ConfigError(f"Invalid `run_dir` {str(path)!r}: only a finished run can be re-scored (it "
                          f"{'is still running' if live else 'has no summary.json'}).", field="run_dir")
    return params, summary, info or {}


def _masked(value: Any, where: str) -> str | None:
    """The first place in ``value`` holding a secret the run masked (``***``), e.g. a judge's ``api_key``."""
    if value == "***":
        return where
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        found = _masked(item, f"{where}.{key}")
        if found:
            return found
    return None


def _new_id(path: Path, given: str | None) -> str:
    if given is not None:
        if not _ID.match(given):
            raise ConfigError(f"Invalid `rescore_id` {given!r}: letters, digits, '.', '_' and '-' only, at most 64.",
                              field="rescore_id")
        if rescored_summary_path(path, given).exists() or (path / RESCORE_DIR / given).exists():
            raise ConfigError(f"Invalid `rescore_id` {given!r}: the run already has a re-score of that name; "
                              "pick another (nothing earlier is overwritten).", field="rescore_id")
        return given
    n = 1
    while rescored_summary_path(path, f"rescore-{n}").exists() or (path / RESCORE_DIR / f"rescore-{n}").exists():
        n += 1
    return f"rescore-{n}"


def _commit_order(path: Path, info: dict[str, Any]) -> Iterator[str]:
    """Task ids in the order the run committed them (its ``task_finished`` events), each once."""
    progress = Path(str((info.get("paths") or {}).get("progress") or path / "progress.jsonl"))
    if not progress.is_file():
        progress = path / "progress.jsonl"
    seen: set[str] = set()
    read = 0
    try:
        with progress.open("rb") as f:
            for line in f:
                read += len(line)
                if read > MAX_PROGRESS_BYTES:
                    return
                if b'"task_finished"' not in line:
                    continue
                try:
                    ev = json.loads(line)
                except ValueError:
                    continue
                tid = ev.get("task_id") if isinstance(ev, dict) and ev.get("event") == "task_finished" else None
                if isinstance(tid, str) and tid not in seen:
                    seen.add(tid)
                    yield tid
    except OSError:
        return


def _merged(old: TaskDetail, new: TaskDetail | None) -> tuple[TaskDetail, bool]:
    """``old`` with each graded attempt's verdict from ``new``; whether a verdict changed."""
    if new is None:
        return old, False
    attempts: dict[int, AttemptRecord] = {}
    changed = False
    for key, a in old.attempts.items():
        b = new.attempts.get(key)
        if a.status in _GRADED and b is not None and b.status in _GRADED:
            merged = msgspec.structs.replace(a, status=b.status, correct=b.correct, score=b.score, extra=b.extra,
                                             analysis=b.analysis, error=b.error, error_kind=b.error_kind)
            changed = changed or (merged.status, merged.correct, merged.score) != (a.status, a.correct, a.score)
            a = merged
        attempts[int(key)] = a
    detail = task_detail(TaskSpec(task_id=old.task_id, category=old.category), old.identity or "", attempts, old.k)
    return msgspec.structs.replace(detail, identity=old.identity, reused_from=old.reused_from), changed


def _accumulator(spec: dict[str, Any], bench_params: dict[str, Any], data_dir: str | None) -> Any:
    """A fresh metrics accumulator of the benchmark, as the engine makes one for a request."""
    registries = Registries([])
    name = spec["benchmark"]["id"]
    cls = registries["benchmark"].resolve(name, field="benchmark")
    bench = cls(registries["benchmark"].convert_params(cls, bench_params, name),
                ComponentContext(run_id="rescore", data_dir=data_dir, benchmark=name))
    made = bench.new_accumulator()
    return made if made is not None else DefaultAccumulator(bench.k or 1)


def _summary(old: dict[str, Any], details: list[TaskDetail], accumulator: Any) -> Summary:
    """The run's summary computed again from ``details`` (in commit order); what grading does not decide (the
    run's identity, status, duration, reuse, images) is the old summary's."""
    account = RequestAccount()
    account.accumulator = accumulator
    for d in details:
        account.add(d)
    metrics, by_category = accumulator.result()
    counts = msgspec.convert(old.get("counts") or {}, RequestCounts)
    recounted = account.counts
    counts = msgspec.structs.replace(counts, correct=recounted.correct, errors=recounted.errors,
                                     engine_errors=recounted.engine_errors, skipped=recounted.skipped)
    return msgspec.convert({**old, "metrics": metrics, "by_category": by_category,
                            "errors_by_kind": account.errors_by_kind, "counts": msgspec.to_builtins(counts),
                            "analysis": dict(sorted(account.analysis_counts.items()))}, Summary)


def rescore(run_dir: str | Path, *, benchmark_params: dict[str, Any] | None = None,
            environment: str | None = None, environment_params: dict[str, Any] | None = None,
            rescore_id: str | None = None, task_concurrency: int | None = None, progress: str = "auto",
            on_progress: Any = None, data_dir: str | None = None) -> RescoreResult:
    """Grade the finished run at ``run_dir`` again (see the module doc). ``benchmark_params`` override the run's
    (e.g. another ``judge_model`` or ``grading_version``); ``environment`` / ``environment_params`` replace its
    environment (the verifier's); the new summary is ``<run_dir>/summary.<rescore_id>.json``."""
    from .api import launch

    path = Path(run_dir).expanduser().resolve()
    params, old_summary, info = _run_docs(path)
    spec: dict[str, Any] = params["spec"]
    details = {d.task_id: d for _, d in iter_details(path)}
    if not details:
        raise ConfigError(f"Invalid `run_dir` {str(path)!r}: it has no task details to grade again.",
                          field="run_dir")
    bench_cls = Registries([])["benchmark"].resolve(spec["benchmark"]["id"], field="benchmark")
    if not bench_cls.rescorable:
        raise not_rescorable(spec["benchmark"]["id"])
    rid = _new_id(path, rescore_id)
    bench_params = {k: v for k, v in (spec["benchmark"].get("params") or {}).items()
                    if k not in (SELECTION_PARAM, *SELECTION_ALIASES, "limit")}
    bench_params.update(benchmark_params or {})
    bench_params[SELECTION_PARAM] = list(details)
    masked = _masked(bench_params, "benchmark_params")
    if masked:
        raise ConfigError(f"Invalid `{masked}`: the run kept this secret masked (***), so the grader cannot use it; "
                          "give it again in benchmark_params (for a judge, `api_key_env` names a variable instead).",
                          field=masked)
    env = spec["environment"]
    if environment is not None and environment != env.get("id"):
        env = {"id": environment, "params": environment_params or {}}
    elif environment_params is not None:
        env = {"id": env.get("id"), "params": environment_params}
    data = data_dir if data_dir is not None else spec.get("data_dir")
    request: dict[str, Any] = {key: spec[key] for key in ("max_retries", "max_backoff_s", "retry_pattern_list",
                                                          "auto_install_dependencies", "enable_analysis",
                                                          "task_concurrency", "file_log_level") if key in spec}
    request.update(
        name=f"rescore/{spec.get('name') or path.name}", run_id=rid, results_dir=str(path / RESCORE_DIR),
        benchmark={"id": spec["benchmark"]["id"], "params": bench_params},
        harness={"id": "recorded", "params": {"run_dir": str(path)}},
        model={"id": spec["model"]["id"]}, environment=env, data_dir=data)
    if task_concurrency is not None:
        request["task_concurrency"] = task_concurrency
    outcome = launch({"requests": [request], "progress": progress}, on_progress=on_progress).outcomes[0]
    regrade_dir = outcome.paths.run_dir if outcome.paths is not None else None
    result = RescoreResult(run_dir=str(path), rescore_id=rid, status=outcome.status,
                           metrics_before=old_summary.get("metrics") or {}, regrade_run_dir=regrade_dir)
    if outcome.status != "completed" or regrade_dir is None:
        result.error = outcome.error or f"the regrading run ended {outcome.status}"
        return result
    new = {d.task_id: d for _, d in iter_details(regrade_dir)}
    order = list(dict.fromkeys([t for t in _commit_order(path, info) if t in details] + sorted(details)))
    merged: list[TaskDetail] = []
    for tid in order:
        detail, changed = _merged(details[tid], new.get(tid))
        merged.append(detail)
        if changed:
            result.changed.append(tid)
    accumulator = _accumulator(spec, bench_params, data)
    summary = _summary(old_summary, merged, accumulator)
    target = rescored_summary_path(path, rid)
    write_atomic(target, summary_bytes(summary))
    result.summary, result.metrics = str(target), summary.metrics
    return result


async def async_rescore(run_dir: str | Path, **kwargs: Any) -> RescoreResult:
    """``rescore`` from a running event loop (in a worker thread: it runs the engine on a loop of its own)."""
    return await asyncio.to_thread(rescore, run_dir, **kwargs)
