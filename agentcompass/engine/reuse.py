"""Reuse: which run directory a request writes to, and which of its tasks earlier details already answer.

Reads run directories; writes nothing (the RequestActor commits what this decides).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._errors import ConfigError
from ..interfaces import TaskSpec
from ..records import TaskDetail
from ..specs import RunRequestSpec
from .failures import stored_policy
from .identity import task_identity
from .run_dir import read_detail_file, request_dir, run_changes, safe_name

_REUSE_LIST_CAP = 200
#: the label of the request's own run directory as a reuse source
THIS_RUN = "this run"


@dataclass(frozen=True)
class RunChoice:
    """Where the request writes and what it may copy from."""

    run_id: str
    #: (label, details dir) of ``reuse_run_id``, or of the latest run of this selection made with other params
    reuse_source: tuple[str, Path] | None = None
    #: an earlier run at ``run_id`` that ``overwrite`` moves aside before the run directory is created
    move_aside: Path | None = None


@dataclass
class ReusePlan:
    """The tasks to run (with their identities), the details reused, and the report for summary.json."""

    to_run: list[tuple[TaskSpec, str]] = field(default_factory=list)
    #: (source label, detail) per reused task
    reused: list[tuple[str, TaskDetail]] = field(default_factory=list)
    report: dict[str, Any] = field(default_factory=dict)


def runs_dir(spec: RunRequestSpec) -> Path:
    """The directory holding every run of this benchmark/harness/model selection."""
    return request_dir(spec.results_dir, spec.benchmark.id, spec.harness.id, spec.model.id, "x").parent


def reuse_run_source(spec: RunRequestSpec) -> tuple[str, Path] | None:
    """``reuse_run_id``'s details dir; checked before anything is created, so a typo leaves no empty run behind."""
    if not spec.reuse_run_id:
        return None
    src = request_dir(spec.results_dir, spec.benchmark.id, spec.harness.id, spec.model.id, spec.reuse_run_id)
    if not src.is_dir():
        raise ConfigError(f"Invalid `reuse_run_id` {spec.reuse_run_id!r}: no run directory at {str(src)!r}.",
                          field="reuse_run_id")
    return (spec.reuse_run_id, src / "details")


def pick_run(spec: RunRequestSpec, run_id: str, fields: dict[str, Any],
             reuse_source: tuple[str, Path] | None) -> RunChoice:
    """Never write over an earlier run. ``reuse=True`` without a run_id continues the most recent run of
    this selection if it was made with the same params, else starts a new run id that copies its matching
    tasks. An existing run id is continued only with ``reuse=True`` and the same params; otherwise refused,
    or moved aside with ``overwrite=True``."""
    base = runs_dir(spec)
    if spec.reuse and not spec.run_id and base.is_dir():
        runs = sorted((p for p in base.iterdir()  # runs moved aside by `overwrite` are not candidates
                       if (p / "run_info.json").exists() and ".overwritten-" not in p.name),
                      key=lambda p: p.stat().st_mtime)
        if runs and not run_changes(runs[-1], fields):
            return RunChoice(runs[-1].name, reuse_source)
        if runs and reuse_source is None:
            return RunChoice(run_id, (runs[-1].name, runs[-1] / "details"))
        return RunChoice(run_id, reuse_source)
    path = base / safe_name(run_id)
    if not path.is_dir() or not any(path.iterdir()):
        return RunChoice(run_id, reuse_source)
    if not spec.reuse:
        why = (f"Run directory {str(path)!r} already exists. Pass `reuse=True` (`--reuse`) to continue that run "
               "with the same params")
    else:
        changes = run_changes(path, fields)
        if not changes:
            return RunChoice(run_id, reuse_source)
        why = (f"Run {run_id!r} at {str(path)!r} was made with other params, so continuing it would mix two "
               f"runs: {'; '.join(changes)}. Nothing was written. Pass the same params to continue it")
    if spec.overwrite:
        return RunChoice(run_id, reuse_source, move_aside=path)
    raise ConfigError(f"{why}, a different `run_id` (with `reuse_run_id={run_id!r}` to copy its matching "
                      "tasks), or `overwrite=True` (`--overwrite`) to move it aside and start over.",
                      field="run_id")


def plan_reuse(tasks: list[TaskSpec], identity: str, sources: list[tuple[str, Path]]) -> ReusePlan:
    """Each task's detail from the first source whose detail has its identity and only normal attempts; the
    others are to run (and, when there were sources, why, capped per reason)."""
    plan = ReusePlan()
    rerun: dict[str, list[str]] = {"identity_mismatch": [], "not_normal": [], "missing": []}
    for task in tasks:
        ident = task_identity(identity, task)
        hit = None
        why = "missing"
        for label, details_dir in sources:
            d = read_detail_file(details_dir / f"{safe_name(task.task_id)}.json")
            if d is None:
                continue
            if d.task_id != task.task_id or d.identity != ident:
                why = "identity_mismatch"
                continue
            if any(a.status not in ("completed", "skipped") or not stored_policy(a.error_kind).valid
                   for a in d.attempts.values()):
                why = "not_normal"
                continue
            hit = (label, d)
            break
        if hit is None:
            if sources:
                lst = rerun[why]
                if len(lst) < _REUSE_LIST_CAP:
                    lst.append(task.task_id)
            plan.to_run.append((task, ident))
        else:
            plan.reused.append(hit)
    if sources:
        plan.report = {"sources": [s for s, _ in sources], "reused": len(plan.reused),
                       "rerun": {k: v for k, v in rerun.items() if v},
                       "rerun_count": len(tasks) - len(plan.reused)}
    return plan
