"""``agentcompass compare RUN_A RUN_B ...``: metrics side by side, per category, and the tasks whose outcome
differs between the runs (pass / fail / error:<kind> / skipped / missing)."""

from __future__ import annotations

import string
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

import msgspec

from ._errors import ConfigError
from .report import escape_controls, fmt, primary_rate
from .rundata import RunData, load_run, task_outcomes

MISSING = "missing"


class RunColumn(msgspec.Struct):
    """One compared run."""

    label: str
    path: str
    run_id: str
    benchmark: str | None
    harness: str | None
    model: str | None
    status: str


class TaskDiff(msgspec.Struct):
    """A task whose outcome is not the same in every run (one outcome per run, in run order)."""

    task_id: str
    outcomes: list[str]


class DimensionGroup(msgspec.Struct):
    """The runs whose benchmark measures one dimension: their labels, and the mean of their headline rates."""

    runs: list[str]
    mean: float | None
    rates: list[float | None]


class Comparison(msgspec.Struct):
    """What ``compare`` prints: ``metrics[name]`` and ``by_category[cat]`` hold one value per run;
    ``by_dimension`` groups the runs by what their benchmarks measure."""

    runs: list[RunColumn]
    metrics: dict[str, list[Any]]
    by_category: dict[str, list[Any]]
    by_category_metric: str
    differing: list[TaskDiff]
    tasks_compared: int
    same: int
    transitions: dict[str, int] = {}  # two runs: "pass -> fail": count
    by_dimension: dict[str, DimensionGroup] = {}


def _by_dimension(cols: list[RunColumn], runs: list[RunData]) -> dict[str, DimensionGroup]:
    groups: dict[str, DimensionGroup] = {}
    for col, run in zip(cols, runs, strict=True):
        if run.dimension is None:
            continue
        group = groups.setdefault(run.dimension, DimensionGroup(runs=[], mean=None, rates=[]))
        group.runs.append(col.label)
        group.rates.append(primary_rate(run.metrics)[1])
    for group in groups.values():
        known = [r for r in group.rates if r is not None]
        group.mean = sum(known) / len(known) if known else None
    return dict(sorted(groups.items()))


def _label(i: int) -> str:
    letters = string.ascii_uppercase
    return letters[i] if i < len(letters) else f"R{i + 1}"


def compare_runs(paths: Sequence[str | Path]) -> Comparison:
    """Compare the runs at ``paths`` (two or more). Reads each run's task rows once (no trajectories)."""
    if len(paths) < 2:
        raise ConfigError("compare needs at least two run directories.", field="runs")
    runs: list[RunData] = [load_run(p) for p in paths]
    cols = [RunColumn(label=_label(i), path=r.path, run_id=r.run_id, benchmark=r.get("benchmark"),
                      harness=r.get("harness"), model=r.get("model"), status=r.status) for i, r in enumerate(runs)]
    names: dict[str, None] = {}
    for r in runs:
        names.update(dict.fromkeys(r.metrics))
    metrics = {n: [r.metrics.get(n) for r in runs] for n in names}
    cats: dict[str, None] = {}
    for r in runs:
        cats.update(dict.fromkeys(r.by_category))
    by_category: dict[str, list[Any]] = {}
    cat_metric = ""
    for c in cats:
        values: list[Any] = []
        for r in runs:
            m = r.by_category.get(c)
            if m is None:
                values.append(None)
                continue
            name, value, ci = primary_rate(m)
            cat_metric = cat_metric or name
            values.append({"value": value, "ci": ci, "tasks": m.get("tasks")})
        by_category[c] = values
    outcomes = [task_outcomes(r.path) for r in runs]
    ids: dict[str, None] = {}
    for o in outcomes:
        ids.update(dict.fromkeys(o))
    differing: list[TaskDiff] = []
    transitions: dict[str, int] = {}
    same = 0
    for tid in sorted(ids):
        row = [o.get(tid, MISSING) for o in outcomes]
        if len(set(row)) == 1:
            same += 1
            continue
        differing.append(TaskDiff(task_id=tid, outcomes=row))
        if len(row) == 2:
            key = f"{row[0]} -> {row[1]}"
            transitions[key] = transitions.get(key, 0) + 1
    return Comparison(runs=cols, metrics=metrics, by_category=by_category, by_category_metric=cat_metric,
                      differing=differing, tasks_compared=len(ids), same=same,
                      transitions=dict(sorted(transitions.items(), key=lambda kv: -kv[1])),
                      by_dimension=_by_dimension(cols, runs))


def _table(out: IO[str], header: list[str], rows: list[list[str]]) -> None:
    header = [escape_controls(str(h)) for h in header]
    rows = [[escape_controls(str(c)) for c in r] for r in rows]
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=False)]
    line = "  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))
    out.write(line.rstrip() + "\n" + "  ".join("-" * w for w in widths) + "\n")
    for r in rows:
        out.write("  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() + "\n")


def _delta(values: list[Any]) -> str:
    a, b = values[0], values[-1]
    if isinstance(a, int | float) and isinstance(b, int | float) and not isinstance(a, bool):
        d = b - a
        return f"{d:+.4f}" if isinstance(d, float) else f"{d:+d}"
    return ""


def write_text(cmp: Comparison, out: IO[str], *, max_tasks: int = 200) -> None:
    """The comparison as plain-text tables."""
    _table(out, ["run", "benchmark", "harness", "model", "run id", "status"],
           [[c.label, c.benchmark or "", c.harness or "", c.model or "", c.run_id, c.status] for c in cmp.runs])
    labels = [c.label for c in cmp.runs]
    two = len(cmp.runs) == 2
    out.write("\nmetrics\n")
    rows = []
    for name, values in cmp.metrics.items():
        if name.endswith("_ci") and name[:-3] in cmp.metrics:
            continue
        cis = cmp.metrics.get(f"{name}_ci")
        shown = [fmt(v) + (f" {fmt(cis[i])}" if cis and cis[i] else "") for i, v in enumerate(values)]
        rows.append([name, *shown, *([_delta(values)] if two else [])])
    _table(out, ["metric", *labels, *(["B-A"] if two else [])], rows)
    if cmp.by_category:
        out.write(f"\nby category ({escape_controls(cmp.by_category_metric)})\n")
        rows = []
        for cat, vals in cmp.by_category.items():
            cells = ["" if v is None else f"{fmt(v['value'])} (n={v['tasks']})" for v in vals]
            nums = [None if v is None else v["value"] for v in vals]
            rows.append([cat, *cells, *([_delta(nums)] if two else [])])
        _table(out, ["category", *labels, *(["B-A"] if two else [])], rows)
    if cmp.by_dimension:
        out.write("\nby dimension (mean of each run's headline rate)\n")
        _table(out, ["dimension", "runs", "mean", "rates"],
               [[dim, ", ".join(g.runs), fmt(g.mean), ", ".join(fmt(r) for r in g.rates)]
                for dim, g in cmp.by_dimension.items()])
    out.write(f"\ntasks: {cmp.tasks_compared} compared, {cmp.same} with the same outcome, "
              f"{len(cmp.differing)} differ\n")
    for key, n in cmp.transitions.items():
        out.write(f"  {escape_controls(key)}: {n}\n")
    if cmp.differing:
        out.write("\n")
        listed = cmp.differing[:max_tasks]
        _table(out, ["task", *labels], [[d.task_id, *d.outcomes] for d in listed])
        if len(cmp.differing) > len(listed):
            out.write(f"... {len(cmp.differing) - len(listed)} more (--format json lists all)\n")


def write_json(cmp: Comparison, out: IO[str]) -> None:
    """The comparison as one JSON object."""
    out.write(msgspec.json.format(msgspec.json.encode(cmp), indent=1).decode() + "\n")


__all__ = ["Comparison", "DimensionGroup", "RunColumn", "TaskDiff", "compare_runs", "write_json", "write_text"]
