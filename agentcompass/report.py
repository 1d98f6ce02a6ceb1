"""``agentcompass report``: a static report of one run as HTML (self-contained), Markdown or JSON.

Reports stream: task rows and trajectories are written while the detail files are read one at a time, so a
run of any size is reported in flat memory. The HTML has no external resources (inline CSS, SVG and a few
lines of JS to filter the task table); every text from the run is escaped.
"""

from __future__ import annotations

import html
import json
import re
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, Literal

import msgspec

from ._errors import ConfigError
from .records import AttemptRecord, Step, TaskDetail
from .rundata import RunData, TaskRow, iter_details, iter_task_rows, load_run

Format = Literal["html", "md", "json"]
FORMATS: tuple[Format, ...] = ("html", "md", "json")
DEFAULT_MAX_CHARS = 20_000
_ROW_COLUMNS = ("task", "category", "outcome", "status", "score", "tries", "steps", "tokens", "time (s)",
                "error kind", "flags")


# ----------------------------------------------------------------------------- formatting helpers

# C0 controls but tab and newline, DEL and C1 (0x9b is a one-byte CSI): a task id or error text from a run
# must never move a terminal's cursor, retitle its window or hide what follows.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def escape_controls(text: str) -> str:
    """``text`` with every control character shown as ``\\xNN`` (tab and newline kept)."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def fmt(value: Any) -> str:
    """A metric value for humans: floats to 4 places, intervals as ``[lo, hi]``."""
    if isinstance(value, bool) or value is None:
        return "" if value is None else str(value).lower()
    if isinstance(value, float):
        return f"{value:.4f}"
    if isinstance(value, list | tuple) and len(value) == 2 and all(isinstance(v, int | float) for v in value):
        return f"[{value[0]:.4f}, {value[1]:.4f}]"
    return str(value)


def clip(text: str, limit: int) -> str:
    """``text`` with its middle cut out when longer than ``limit`` characters."""
    if limit <= 0 or len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n… [{len(text) - 2 * half} characters omitted] …\n{text[-half:]}"


def primary_rate(metrics: dict[str, Any]) -> tuple[str, float | None, list[float] | None]:
    """(name, value, 95% interval) of the headline metric: ``primary``, else ``pass@k``, else pass_rate."""
    name = metrics.get("primary_metric")
    if not isinstance(name, str) or name not in metrics:
        name = next((k for k in metrics if k.startswith("pass@") and not k.endswith("_ci")), "pass_rate")
    value = metrics.get(name)
    ci = metrics.get(f"{name}_ci")
    return name, float(value) if isinstance(value, int | float) else None, ci if isinstance(ci, list) else None


def metric_rows(metrics: dict[str, Any]) -> list[tuple[str, str]]:
    """(name, shown value) of each metric; a ``<m>_ci`` is folded into ``<m>``'s value."""
    out: list[tuple[str, str]] = []
    for key, value in metrics.items():
        if key.endswith("_ci") and key[:-3] in metrics:
            continue
        shown = fmt(value)
        ci = metrics.get(f"{key}_ci")
        if isinstance(ci, list) and len(ci) == 2:
            shown += f" (95% CI {ci[0]:.3f} to {ci[1]:.3f})"
        out.append((key, shown))
    return out


def _row_cells(r: TaskRow) -> list[str]:
    return [r.task_id, r.category or "", r.outcome, r.status, fmt(r.score), str(r.tries), str(r.steps),
            str(r.tokens), f"{r.time_s:.2f}" if r.time_s is not None else "", r.error_kind or "", ", ".join(r.flags)]


def _when(ts: Any) -> str:
    if not isinstance(ts, int | float):
        return ""
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ts))


def _overview(run: RunData) -> list[tuple[str, str]]:
    counts = run.get("counts") or {}
    usage = (run.summary or {}).get("usage") or run.get("usage") or {}
    rows = [("status", run.status), ("run id", run.run_id), ("benchmark", str(run.get("benchmark"))),
            ("dimension", str(run.get("dimension") or "")),
            ("harness", str(run.get("harness"))), ("model", str(run.get("model"))),
            ("environment", str(run.get("environment"))), ("started", _when(run.get("started_at"))),
            ("duration", f"{run.get('duration_s'):.1f} s" if isinstance(run.get("duration_s"), int | float) else ""),
            ("tasks done / total", f"{counts.get('done', 0)} / {counts.get('total', 0)}"),
            ("correct / errors / skipped / reused", f"{counts.get('correct', 0)} / {counts.get('errors', 0)} / "
                                                     f"{counts.get('skipped', 0)} / {counts.get('reused', 0)}"),
            ("tokens (prompt / completion)", f"{usage.get('prompt_tokens', 0)} / {usage.get('completion_tokens', 0)}"),
            ("model calls / retries", f"{usage.get('calls', 0)} / {usage.get('retries', 0)}")]
    if usage.get("cost"):
        rows.append(("cost", f"{usage['cost']:.4f}"))
    bench_settings = ((run.params or {}).get("component_settings") or {}).get("benchmark") or {}
    if bench_settings.get("grading_version"):  # the SWE-bench family: which official release graded it
        rows.append(("graded as swebench", str(bench_settings["grading_version"])))
    if run.get("error"):
        rows.append(("error", str(run.get("error"))))
    return rows


# ----------------------------------------------------------------------------- markdown


def _md(text: Any) -> str:
    return escape_controls(str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " "))


def _md_table(out: IO[str], header: list[str], rows: list[list[str]]) -> None:
    out.write("| " + " | ".join(_md(h) for h in header) + " |\n|" + "---|" * len(header) + "\n")
    for r in rows:
        out.write("| " + " | ".join(_md(c) for c in r) + " |\n")


def write_markdown(run: RunData, out: IO[str]) -> None:
    """The report as GitHub-flavoured Markdown (no trajectories)."""
    out.write(f"# {_md(run.title)}\n\n")
    _md_table(out, ["", ""], [[k, v] for k, v in _overview(run)])
    out.write("\n## Metrics\n\n")
    _md_table(out, ["metric", "value"], [[k, v] for k, v in metric_rows(run.metrics)])
    cats = run.by_category
    if cats:
        out.write("\n## By category\n\n")
        rows = []
        for cat, m in cats.items():
            name, value, ci = primary_rate(m)
            bar = "█" * round((value or 0) * 20)
            rows.append([cat, str(m.get("tasks", "")), fmt(value), fmt(ci) if ci else "", bar])
        _md_table(out, ["category", "tasks", name, "95% CI", ""], rows)
    _write_md_counts(out, "Errors by kind", (run.summary or {}).get("errors_by_kind") or {})
    _write_md_counts(out, "Analysis flags (attempts)", (run.summary or {}).get("analysis") or {})
    out.write("\n## Tasks\n\n| " + " | ".join(_ROW_COLUMNS) + " |\n|" + "---|" * len(_ROW_COLUMNS) + "\n")
    for r in iter_task_rows(run.path):
        out.write("| " + " | ".join(_md(c) for c in _row_cells(r)) + " |\n")


def _write_md_counts(out: IO[str], title: str, counts: dict[str, Any]) -> None:
    if counts:
        out.write(f"\n## {title}\n\n")
        _md_table(out, ["", "count"], [[k, str(v)] for k, v in sorted(counts.items())])


# ----------------------------------------------------------------------------- json


def write_json(run: RunData, out: IO[str]) -> None:
    """``{"run", "summary", "params", "tasks": [TaskRow...]}``, the task list streamed."""
    enc = msgspec.json.Encoder()
    out.write('{"run": ' + enc.encode(run.run_info).decode())
    out.write(', "summary": ' + enc.encode(run.summary).decode())
    out.write(', "params": ' + enc.encode(run.params).decode())
    out.write(', "tasks": [')
    for i, row in enumerate(iter_task_rows(run.path)):
        out.write((",\n" if i else "\n") + enc.encode(row).decode())
    out.write("\n]}\n")


# ----------------------------------------------------------------------------- html

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0 auto;max-width:1200px;padding:16px;
color:#1d2330;background:#fff}
h1{font-size:20px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #dde;padding-bottom:4px}
h3{font-size:15px;margin:0}table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #dde;padding:3px 8px;
text-align:left;vertical-align:top}th{background:#f3f5f9}table.kv td:first-child{color:#556;white-space:nowrap}
pre{background:#f6f8fa;border:1px solid #e3e6ea;padding:6px 8px;white-space:pre-wrap;word-break:break-word;
margin:4px 0;max-height:480px;overflow:auto;font:12px/1.4 ui-monospace,Menlo,Consolas,monospace}
.pass{color:#17663a}.fail{color:#a3261d}.error{color:#9a5b00}.skipped{color:#667}
tr.pass td:nth-child(3){background:#e7f6ec}tr.fail td:nth-child(3){background:#fbe9e7}
tr.error td:nth-child(3){background:#fff4dc}.flag{background:#fde7c8;border-radius:3px;padding:0 4px;margin-right:3px;
font-size:12px}section.task{border:1px solid #dde;border-radius:6px;padding:8px 12px;margin:12px 0}
.step{border-left:3px solid #c9d3e3;margin:8px 0;padding-left:8px}.step .hdr{color:#556;font-size:12px}
.label{font-size:12px;color:#556;margin-top:4px}pre.action{background:#eef4ff}pre.obs{background:#f8f8f8}
.add{color:#17663a}.del{color:#a3261d}.hunk{color:#6a43b5}summary{cursor:pointer}
#filter{margin:6px 0}#filter input{width:280px}.muted{color:#778}
"""

_JS = """
(function(){var q=document.getElementById('q'),o=document.getElementById('o'),
rows=document.querySelectorAll('#tasks tbody tr');function f(){var t=q.value.toLowerCase(),w=o.value;
for(var i=0;i<rows.length;i++){var r=rows[i],ok=(!t||r.textContent.toLowerCase().indexOf(t)>=0)&&(!w||r.className==w);
r.style.display=ok?'':'none';}}q.addEventListener('input',f);o.addEventListener('change',f);})();
"""


def _e(value: Any) -> str:
    return html.escape(escape_controls(str(value)), quote=True)


def _pre(text: str, limit: int, cls: str = "") -> str:
    c = f' class="{cls}"' if cls else ""
    return f"<pre{c}>{_e(clip(text, limit))}</pre>"


def _kv_table(rows: list[tuple[str, str]]) -> str:
    return '<table class="kv">' + "".join(f"<tr><td>{_e(k)}</td><td>{_e(v)}</td></tr>" for k, v in rows) + "</table>"


def category_chart(by_category: dict[str, dict[str, Any]]) -> str:
    """An inline SVG bar chart of each category's headline rate with its 95% interval."""
    if not by_category:
        return ""
    width, label_w, bar_h, gap = 760, 180, 18, 8
    plot_w = width - label_w - 130
    height = len(by_category) * (bar_h + gap) + gap
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
             f'aria-label="rate by category">']
    for i, (cat, m) in enumerate(by_category.items()):
        name, value, ci = primary_rate(m)
        y = gap + i * (bar_h + gap)
        v = max(0.0, min(1.0, value or 0.0))
        parts.append(f'<text x="{label_w - 6}" y="{y + bar_h - 4}" text-anchor="end" font-size="12">{_e(cat)}</text>')
        parts.append(f'<rect x="{label_w}" y="{y}" width="{plot_w}" height="{bar_h}" fill="#eef1f6"/>')
        parts.append(f'<rect x="{label_w}" y="{y}" width="{v * plot_w:.1f}" height="{bar_h}" fill="#4a7bd0">'
                     f'<title>{_e(cat)}: {_e(name)} {fmt(value)}</title></rect>')
        if ci:
            x0, x1 = label_w + ci[0] * plot_w, label_w + ci[1] * plot_w
            mid = y + bar_h / 2
            parts.append(f'<path d="M{x0:.1f} {mid - 5:.1f}V{mid + 5:.1f}M{x0:.1f} {mid:.1f}H{x1:.1f}'
                         f'M{x1:.1f} {mid - 5:.1f}V{mid + 5:.1f}" stroke="#1d2330" stroke-width="1.2" fill="none"/>')
        label = f"{fmt(value)} (n={m.get('tasks', '?')})"
        parts.append(f'<text x="{label_w + plot_w + 8}" y="{y + bar_h - 4}" font-size="12">{_e(label)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def diff_html(patch: str, limit: int) -> str:
    """A unified diff in a ``<pre>`` with added/removed/hunk lines coloured."""
    lines = []
    for line in clip(patch, limit).split("\n"):
        cls = ("hunk" if line.startswith("@@") else "add" if line.startswith("+") and not line.startswith("+++")
               else "del" if line.startswith("-") and not line.startswith("---") else "")
        lines.append(f'<span class="{cls}">{_e(line)}</span>' if cls else _e(line))
    return "<pre>" + "\n".join(lines) + "</pre>"


def _step_html(step: Step, t0: float | None, limit: int) -> str:
    hdr = [f"step {step.index}"]
    if step.started_at is not None and t0 is not None:
        hdr.append(f"t+{step.started_at - t0:.1f}s")
    if step.model_latency_s is not None:
        hdr.append(f"model {step.model_latency_s:.2f}s")
    if step.exec_latency_s is not None:
        hdr.append(f"exec {step.exec_latency_s:.2f}s")
    if step.prompt_tokens or step.completion_tokens:
        hdr.append(f"tokens {step.prompt_tokens}→{step.completion_tokens}")
    if step.finish_reason:
        hdr.append(f"finish {step.finish_reason}")
    if step.exit_code is not None:
        hdr.append(f"exit {step.exit_code}")
    parts = [f'<div class="step"><div class="hdr">{_e(" · ".join(hdr))}</div>']
    if step.reasoning:
        parts.append(f"<details><summary class=\"label\">reasoning</summary>{_pre(step.reasoning, limit)}</details>")
    if step.content:
        parts.append(f'<div class="label">assistant</div>{_pre(step.content, limit)}')
    for tc in step.tool_calls:
        parts.append(f'<div class="label">tool call {_e(tc.name)}</div>{_pre(tc.arguments, limit)}')
    if step.action:
        parts.append(f'<div class="label">action</div>{_pre(step.action, limit, "action")}')
    if step.observation:
        parts.append(f'<div class="label">observation</div>{_pre(step.observation, limit, "obs")}')
    parts.append("</div>")
    return "".join(parts)


def _extra_html(extra: dict[str, Any], limit: int) -> str:
    scalars: list[tuple[str, str]] = []
    blocks: list[str] = []
    for key, value in extra.items():
        if key == "model_patch":
            continue
        if isinstance(value, str) and ("\n" in value or len(value) > 120):
            blocks.append(f'<div class="label">{_e(key)}</div>{_pre(value, limit)}')
        elif isinstance(value, dict | list):
            blocks.append(f'<div class="label">{_e(key)}</div>'
                          f'{_pre(json.dumps(value, indent=1, ensure_ascii=False, default=str), limit)}')
        else:
            scalars.append((key, fmt(value)))
    return (_kv_table(scalars) if scalars else "") + "".join(blocks)


def attempt_html(name: str, a: AttemptRecord, limit: int) -> str:
    """One attempt: verdict, error, tries, analysis, final answer, patch, verifier output, trajectory."""
    cls = "pass" if a.correct else "fail" if a.correct is False else "skipped" if a.status == "skipped" else "error"
    verdict = "correct" if a.correct else "wrong" if a.correct is False else a.status
    usage = a.meta.get("usage") or {}
    info = [("status", a.status), ("score", fmt(a.score)), ("tries", str(len(a.tries))),
            ("duration", f"{a.meta.get('duration_s', 0):.2f} s" if isinstance(a.meta.get("duration_s"), int | float)
             else ""),
            ("tokens (prompt / completion)", f"{usage.get('prompt_tokens', 0)} / {usage.get('completion_tokens', 0)}")]
    if a.trajectory is not None and a.trajectory.stop_reason:
        info.append(("stop reason", a.trajectory.stop_reason))
    if a.error_kind or a.error:
        info.append(("error", f"{a.error_kind or ''}: {a.error or ''}"))
    parts = [f'<details class="attempt"><summary>attempt {_e(name)}: <b class="{cls}">{_e(verdict)}</b></summary>',
             _kv_table(info)]
    if len(a.tries) > 1:
        parts.append(_kv_table([(f"try {t.try_no}", f"{t.status} {t.error_kind or ''} {t.error or ''}".strip())
                                for t in a.tries]))
    if a.analysis:
        parts.append('<div class="label">analysis</div>'
                     + _pre(json.dumps(a.analysis, indent=1, ensure_ascii=False, default=str), limit))
    if a.final_answer:
        parts.append(f'<div class="label">final answer</div>{_pre(a.final_answer, limit)}')
    patch = a.extra.get("model_patch") or a.artifacts.get("patch")
    if isinstance(patch, str) and patch.strip():
        parts.append(f'<div class="label">patch</div>{diff_html(patch, limit)}')
    if a.extra:
        parts.append(f'<div class="label">verifier</div>{_extra_html(a.extra, limit)}')
    traj = a.trajectory
    if traj is not None and traj.steps:
        t0 = traj.started_at if traj.started_at is not None else traj.steps[0].started_at
        parts.append(f'<div class="label">trajectory ({len(traj.steps)} steps)</div>')
        parts.extend(_step_html(s, t0, limit) for s in traj.steps)
    parts.append("</details>")
    return "".join(parts)


def task_html(key: str, detail: TaskDetail, limit: int = DEFAULT_MAX_CHARS) -> str:
    """One task's section (its attempts with trajectories); ``key`` is the detail file key (anchor id)."""
    outcome = "pass" if detail.correct else "fail" if detail.correct is False else "error"
    head = (f'<section class="task" id="t-{_e(key)}"><h3><span class="{outcome}">{_e(outcome)}</span> '
            f"{_e(detail.task_id)}</h3>")
    meta = [f"category {detail.category}" if detail.category else "", f"k={detail.k}",
            f"solved at attempt {detail.solved_at}" if detail.solved_at else "",
            f"reused from {detail.reused_from}" if detail.reused_from else ""]
    body = [head, f'<div class="muted">{_e(" · ".join(m for m in meta if m))}</div>']
    for name in sorted(detail.attempts, key=lambda n: (len(n), n)):
        body.append(attempt_html(name, detail.attempts[name], limit))
    body.append("</section>")
    return "".join(body)


def write_html(run: RunData, out: IO[str], *, trajectories: bool = True, max_chars: int = DEFAULT_MAX_CHARS) -> None:
    """The self-contained HTML report."""
    out.write(f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{_e(run.title)}</title>'
              f'<meta name="viewport" content="width=device-width, initial-scale=1"><style>{_CSS}</style></head>'
              f"<body><h1>{_e(run.title)}</h1>")
    out.write(_kv_table(_overview(run)))
    out.write("<h2>Metrics</h2>" + _kv_table(metric_rows(run.metrics)))
    cats = run.by_category
    if cats:
        out.write("<h2>By category</h2>" + category_chart(cats))
        keys = [k for k in dict.fromkeys(k for m in cats.values() for k in m) if not k.endswith("_ci")]
        out.write("<table><thead><tr><th>category</th>" + "".join(f"<th>{_e(k)}</th>" for k in keys)
                  + "</tr></thead><tbody>")
        for cat, m in cats.items():
            cells = []
            for k in keys:
                ci = m.get(f"{k}_ci")
                cells.append(f"<td>{_e(fmt(m.get(k)))}" + (f' <span class="muted">{_e(fmt(ci))}</span>' if ci else "")
                             + "</td>")
            out.write(f"<tr><td>{_e(cat)}</td>{''.join(cells)}</tr>")
        out.write("</tbody></table>")
    summary = run.summary or {}
    for title, counts in (("Errors by kind", summary.get("errors_by_kind")),
                          ("Analysis flags (attempts)", summary.get("analysis"))):
        if counts:
            out.write(f"<h2>{_e(title)}</h2>" + _kv_table([(k, str(v)) for k, v in sorted(counts.items())]))
    if summary.get("reuse"):
        out.write("<h2>Reuse</h2>" + _pre(json.dumps(summary["reuse"], indent=1), max_chars))
    if run.params:
        shown = {k: run.params.get(k) for k in ("spec", "resolved", "component_settings", "versions")
                 if k in run.params}
        out.write("<h2>Parameters</h2><details><summary>params.json</summary>"
                  + _pre(json.dumps(shown, indent=1, default=str), max_chars) + "</details>")
    out.write('<h2>Tasks</h2><div id="filter"><input id="q" placeholder="filter (task, error, flag…)"> '
              '<select id="o"><option value="">all outcomes</option><option>pass</option><option>fail</option>'
              '<option>error</option><option>skipped</option></select></div>')
    out.write('<table id="tasks"><thead><tr>' + "".join(f"<th>{_e(c)}</th>" for c in _ROW_COLUMNS)
              + "</tr></thead><tbody>")
    for r in iter_task_rows(run.path):
        cells = _row_cells(r)
        task = f'<a href="#t-{_e(r.file)}">{_e(r.task_id)}</a>' if trajectories else _e(r.task_id)
        flags = "".join(f'<span class="flag">{_e(f)}</span>' for f in r.flags)
        tds = [task, *(_e(c) for c in cells[1:-1]), flags]
        title = f' title="{_e(r.error)}"' if r.error else ""
        out.write(f'<tr class="{_e(r.outcome)}"{title}>' + "".join(f"<td>{c}</td>" for c in tds) + "</tr>\n")
    out.write("</tbody></table>")
    if trajectories:
        out.write("<h2>Trajectories</h2>")
        for key, detail in iter_details(run.path):
            out.write(task_html(key, detail, max_chars) + "\n")
    out.write(f'<p class="muted">Generated by agentcompass report at {_e(_when(time.time()))}.</p>'
              f"<script>{_JS}</script></body></html>\n")


# ----------------------------------------------------------------------------- entry point


@contextmanager
def _open_out(out: str | Path | None) -> Iterator[IO[str]]:
    if out is None or str(out) == "-":
        yield sys.stdout
        return
    path = Path(out)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            yield f
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)


def write_report(run_dir: str | Path, report_format: str = "html", out: str | Path | None = None, *,
                 trajectories: bool = True, max_chars: int = DEFAULT_MAX_CHARS) -> Path | None:
    """Write the report of the run at ``run_dir`` to ``out`` (a path, or None/``-`` for stdout).

    Returns the path written, or None for stdout. ConfigError for an unknown format or a non-run directory."""
    if report_format not in FORMATS:
        raise ConfigError(f"Invalid report format {report_format!r}. Allowed: {', '.join(FORMATS)}.",
                          field="format")
    run = load_run(run_dir)
    with _open_out(out) as f:
        if report_format == "html":
            write_html(run, f, trajectories=trajectories, max_chars=max_chars)
        elif report_format == "md":
            write_markdown(run, f)
        else:
            write_json(run, f)
    return None if out is None or str(out) == "-" else Path(out)


__all__ = ["FORMATS", "attempt_html", "category_chart", "diff_html", "escape_controls", "fmt", "metric_rows",
           "primary_rate", "task_html", "write_html", "write_json", "write_markdown", "write_report"]
