"""Reading run directories for reports, comparisons and the viewer.

- ``find_runs(root)`` / ``list_runs(root)``: the run directories under a results dir (or ``root`` itself).
- ``load_run(path)``: a run's ``run_info.json``, ``summary.json`` and ``params.json`` (plain dicts, so files
  written by older or newer versions still load).
- ``iter_task_rows(path)``: one ``TaskRow`` per detail file, streamed: each file is decoded through a light
  view that skips trajectories, so memory stays flat on runs of any size.
- ``iter_details(path)`` / ``read_task(path, task_id)``: full ``TaskDetail`` records, one at a time.
- ``run_liveness(status, run_info)``: whether a run that says ``running`` is live or stale (its process gone).

Nothing here writes; unreadable files are skipped (``iter_task_rows`` reports them through ``on_error``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec

from ._errors import ConfigError
from .analyzers import flag_names
from .engine.run_dir import read_detail_file, safe_name
from .records import TaskDetail

RUN_MARKERS = ("run_info.json", "summary.json")
#: results/<benchmark>/<harness>/<model>/<run_id> is 4 levels; leave room for nesting.
MAX_DEPTH = 8
ERROR_PREVIEW = 300
OUTCOMES = ("pass", "fail", "error", "skipped")


# ----------------------------------------------------------------------------- runs


def is_run_dir(path: str | Path) -> bool:
    """Whether ``path`` holds a run (a ``run_info.json`` or ``summary.json``)."""
    p = Path(path)
    return any((p / m).is_file() for m in RUN_MARKERS)


def pid_alive(pid: int | None) -> bool:
    """Whether a process with this id exists on this host."""
    if not pid or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):  # OverflowError: no pid is that large (a hand-edited file)
        return False
    except (PermissionError, OSError):
        return True
    return True


def run_liveness(status: str | None, run_info: dict[str, Any]) -> tuple[bool, bool]:
    """``(live, stale)`` of a run shown with ``status``: live while its ``run_info.json`` says ``running`` and
    the process that writes it (``pid``) exists on this host; stale when it says ``running`` but that process
    is gone (the run was killed before it could record an end). The viewer and ``agentcompass show`` both
    decide with this."""
    pid = run_info.get("pid")
    live = run_info.get("status") == "running" and isinstance(pid, int) and pid_alive(pid)
    return live, status == "running" and not live


def find_runs(root: str | Path) -> dict[str, Path]:
    """Run directories under ``root`` by key: the path relative to ``root`` in POSIX form (``"."`` when
    ``root`` is a run). Symlinked directories are not followed; a run's own subdirectories are not searched."""
    base = Path(root)
    runs: dict[str, Path] = {}
    for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
        here = Path(dirpath)
        rel = here.relative_to(base)
        if any(m in filenames for m in RUN_MARKERS):
            runs[rel.as_posix()] = here
            dirnames[:] = []
            continue
        if len(rel.parts) >= MAX_DEPTH:
            dirnames[:] = []
            continue
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
    return runs


#: the largest run_info.json / summary.json / params.json read: the engine writes a few KB.
MAX_RUN_FILE_BYTES = 16 << 20
#: the deepest nesting read from a run's small files: the engine's own nest a handful of levels; a file nested
#: deeper is hostile or broken, and deep values would overflow the recursive code that walks them later.
MAX_JSON_DEPTH = 64


def _too_deep(value: Any, limit: int) -> bool:
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, dict | list):
            if depth > limit:
                return True
            stack.extend((c, depth + 1) for c in (v.values() if isinstance(v, dict) else v))
    return False


def decode_json_object(data: bytes, name: str) -> dict[str, Any]:
    """``data`` as a JSON object nested at most ``MAX_JSON_DEPTH`` levels, else ``ValueError`` with a reason
    naming ``name`` (the file)."""
    if len(data) > MAX_RUN_FILE_BYTES:
        raise ValueError(f"{name} is larger than {MAX_RUN_FILE_BYTES >> 20} MiB")
    try:
        value = msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        raise ValueError(f"{name} is not valid JSON ({exc})") from None
    except RecursionError:
        raise ValueError(f"{name} is nested too deeply (more than {MAX_JSON_DEPTH} levels)") from None
    if not isinstance(value, dict):
        raise ValueError(f"{name} is not a JSON object")
    if _too_deep(value, MAX_JSON_DEPTH):
        raise ValueError(f"{name} is nested too deeply (more than {MAX_JSON_DEPTH} levels)")
    return value


def read_json_checked(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """(object, None) for a readable JSON object file; (None, None) when it is missing; (None, reason) when it
    is there but unreadable (too large, nested too deeply, not JSON, not an object)."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_RUN_FILE_BYTES + 1)
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, f"{path.name} cannot be read ({exc.strerror or exc})"
    try:
        return decode_json_object(data, path.name), None
    except ValueError as exc:
        return None, str(exc)


def read_json(path: Path) -> dict[str, Any] | None:
    """A JSON object file, or None when missing or unreadable (see ``read_json_checked`` for the reason)."""
    return read_json_checked(path)[0]


_SECRET_KEYS = ("api_key", "apikey", "authorization", "token", "secret", "password", "access_token")
_SECRET_SUFFIXES = ("_api_key", "_secret", "_password", "_token")


def _is_secret_key(key: Any) -> bool:
    k = str(key).lower().replace("-", "_")
    return k in _SECRET_KEYS or k.endswith(_SECRET_SUFFIXES)


def mask_secrets(value: Any) -> Any:
    """A copy of ``value`` with every secret-looking key's value replaced by ``***`` (the run directory is
    redacted when written; this is defence in depth for what reports and the viewer show)."""
    if isinstance(value, dict):
        return {k: "***" if v and _is_secret_key(k) else mask_secrets(v) for k, v in value.items()}
    if isinstance(value, list):
        return [mask_secrets(v) for v in value]
    return value


class RunData(msgspec.Struct):
    """One run directory's small files. ``summary`` is None until the run ends (or when it was killed)."""

    path: str
    run_info: dict[str, Any]
    summary: dict[str, Any] | None = None
    params: dict[str, Any] | None = None
    #: why a marker file that is there could not be read (e.g. ``summary.json is nested too deeply ...``).
    unreadable: str | None = None

    def _doc(self) -> dict[str, Any]:
        return {**(self.summary or {}), **{k: v for k, v in self.run_info.items() if v is not None}}

    @property
    def run_id(self) -> str:
        return str(self._doc().get("run_id") or Path(self.path).name)

    @property
    def status(self) -> str:
        return str(self._doc().get("status") or "unknown")

    def get(self, key: str, default: Any = None) -> Any:
        """A field of run_info, else of the summary."""
        return self._doc().get(key, default)

    @property
    def title(self) -> str:
        d = self._doc()
        return f"{d.get('benchmark')} / {d.get('harness')} / {d.get('model')} ({self.run_id})"

    @property
    def metrics(self) -> dict[str, Any]:
        return dict((self.summary or {}).get("metrics") or self.run_info.get("metrics") or {})

    @property
    def by_category(self) -> dict[str, dict[str, Any]]:
        return dict((self.summary or {}).get("by_category") or {})

    @property
    def dimension(self) -> str | None:
        """What the run's benchmark measures (``coding``, ``tool_use``...), when recorded."""
        value = (self.summary or {}).get("dimension")
        return value if isinstance(value, str) and value else None

    @property
    def k(self) -> int:
        resolved = (self.params or {}).get("resolved") or {}
        return int(resolved.get("k") or 1)

    @property
    def details_dir(self) -> Path:
        return Path(self.path) / "details"


def load_run(path: str | Path) -> RunData:
    """The run at ``path``; ConfigError (field ``run_dir``) when it is not a run directory."""
    p = Path(path)
    info, info_problem = read_json_checked(p / "run_info.json")
    summary, summary_problem = read_json_checked(p / "summary.json")
    unreadable = "; ".join(filter(None, (info_problem, summary_problem))) or None
    if info is None and summary is None:
        why = f": {unreadable}" if unreadable else ""
        raise ConfigError(f"{str(path)!r} is not a run directory (no readable run_info.json or summary.json"
                          f"{why}). Pass a directory like results/<benchmark>/<harness>/<model>/<run_id>.",
                          field="run_dir")
    params = read_json(p / "params.json")
    return RunData(path=str(p), run_info=info or {}, summary=summary,
                   params=mask_secrets(params) if params is not None else None, unreadable=unreadable)


class RunEntry(msgspec.Struct, omit_defaults=True):
    """One line of a runs list."""

    key: str
    path: str
    run_id: str
    status: str
    benchmark: str | None = None
    harness: str | None = None
    model: str | None = None
    environment: str | None = None
    started_at: float | None = None
    finished_at: float | None = None
    duration_s: float | None = None
    counts: dict[str, Any] = {}
    metrics: dict[str, Any] = {}
    usage: dict[str, Any] = {}
    #: why a marker file could not be read; ``status`` is ``unreadable`` when neither could.
    unreadable: str | None = None


def list_runs(root: str | Path) -> list[RunEntry]:
    """The runs under ``root``, newest first; a run whose files cannot be read is listed as ``unreadable``
    with the reason."""
    out: list[RunEntry] = []
    for key, path in find_runs(root).items():
        try:
            run = load_run(path)
        except ConfigError as exc:  # no marker file is readable
            out.append(RunEntry(key=key, path=str(path), run_id=path.name, status="unreadable",
                                unreadable=str(exc)))
            continue
        out.append(RunEntry(
            key=key, path=str(path), run_id=run.run_id, status=run.status, benchmark=run.get("benchmark"),
            harness=run.get("harness"), model=run.get("model"), environment=run.get("environment"),
            started_at=run.get("started_at"), finished_at=run.get("finished_at"),
            duration_s=run.get("duration_s"), counts=dict(run.get("counts") or {}), metrics=run.metrics,
            usage=dict((run.summary or {}).get("usage") or run.run_info.get("usage") or {}),
            unreadable=run.unreadable))
    out.sort(key=lambda r: r.started_at or 0.0, reverse=True)
    return out


# ----------------------------------------------------------------------------- task rows


# Light views of records.TaskDetail: msgspec skips every field not named here (trajectory text included).
class _Usage(msgspec.Struct):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cost: float = 0.0


class _Meta(msgspec.Struct):
    usage: _Usage | None = None
    duration_s: float | None = None


class _Skip(msgspec.Struct):
    pass


class _Trajectory(msgspec.Struct):
    steps: list[_Skip] = []


class _Attempt(msgspec.Struct):
    status: str
    correct: bool | None = None
    score: float | None = None
    error: str | None = None
    error_kind: str | None = None
    meta: _Meta = msgspec.field(default_factory=_Meta)
    analysis: dict[str, Any] = {}
    trajectory: _Trajectory | None = None
    tries: list[_Skip] = []


class _Detail(msgspec.Struct):
    task_id: str
    k: int
    attempts: dict[str, _Attempt]
    category: str | None = None
    correct: bool | None = None
    score: float | None = None
    attempts_tried: int = 0
    solved_at: int | None = None
    reused_from: str | None = None


_light = msgspec.json.Decoder(_Detail)
_full = msgspec.json.Decoder(TaskDetail)


class TaskRow(msgspec.Struct):
    """One line of a task table (no trajectories)."""

    task_id: str
    file: str  # the detail file's name without ``.json`` (``read_task`` accepts it)
    category: str | None
    status: str  # the attempts' status, several joined by "+" when they differ
    outcome: str  # pass | fail | error (no graded attempt) | skipped
    correct: bool | None
    score: float | None
    k: int
    attempts_tried: int
    solved_at: int | None
    tries: int
    steps: int
    tokens: int
    prompt_tokens: int
    completion_tokens: int
    cost: float
    time_s: float | None
    error_kind: str | None
    error: str | None
    flags: list[str]
    reused: bool
    reused_from: str | None = None


def _attempt_order(name: str) -> tuple[int, str]:
    return len(name), name


def _row(d: _Detail, file: str) -> TaskRow:
    attempts = [d.attempts[n] for n in sorted(d.attempts, key=_attempt_order)]
    statuses = sorted({a.status for a in attempts})
    if attempts and all(a.status == "skipped" for a in attempts):
        outcome = "skipped"
    elif d.correct is None:
        outcome = "error"
    else:
        outcome = "pass" if d.correct else "fail"
    durations = [a.meta.duration_s for a in attempts if a.meta.duration_s is not None]
    usages = [a.meta.usage for a in attempts if a.meta.usage is not None]
    flags: set[str] = set()
    for a in attempts:
        flags.update(flag_names(a.analysis))
    failed = next((a for a in attempts if a.error_kind or a.error), None)
    error = failed.error if failed else None
    return TaskRow(
        task_id=d.task_id, file=file, category=d.category, status="+".join(statuses) or "none", outcome=outcome,
        correct=d.correct, score=d.score, k=d.k, attempts_tried=d.attempts_tried, solved_at=d.solved_at,
        tries=sum(len(a.tries) for a in attempts),
        steps=sum(len(a.trajectory.steps) for a in attempts if a.trajectory is not None),
        tokens=sum(u.total_tokens for u in usages), prompt_tokens=sum(u.prompt_tokens for u in usages),
        completion_tokens=sum(u.completion_tokens for u in usages), cost=round(sum(u.cost for u in usages), 9),
        time_s=round(sum(durations), 3) if durations else None,
        error_kind=failed.error_kind if failed else None,
        error=error[:ERROR_PREVIEW] if error else None,
        flags=sorted(flags), reused=d.reused_from is not None, reused_from=d.reused_from)


def _detail_files(run_path: str | Path) -> Iterator[os.DirEntry[str]]:
    details = Path(run_path) / "details"
    if not details.is_dir():
        return
    for entry in sorted(os.scandir(details), key=lambda e: e.name):
        if entry.name.endswith(".json") and not entry.name.startswith(".") and entry.is_file(follow_symlinks=False):
            yield entry


def read_row(path: str | Path) -> TaskRow | None:
    """The row of one detail file, or None when it is missing or not a detail."""
    p = Path(path)
    try:
        return _row(_light.decode(p.read_bytes()), p.name.removesuffix(".json"))
    except (OSError, msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None


def iter_task_rows(run_path: str | Path, *, on_error: Callable[[str], None] | None = None) -> Iterator[TaskRow]:
    """One row per committed detail file, in file-name order, one file in memory at a time."""
    for entry in _detail_files(run_path):
        row = read_row(entry.path)
        if row is None:
            if on_error is not None:
                on_error(entry.name)
            continue
        yield row


def iter_details(run_path: str | Path) -> Iterator[tuple[str, TaskDetail]]:
    """(file key, full TaskDetail) of each committed detail, one at a time."""
    for entry in _detail_files(run_path):
        try:
            yield entry.name.removesuffix(".json"), _full.decode(Path(entry.path).read_bytes())
        except (OSError, msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            continue


def read_task(run_path: str | Path, key: str) -> TaskDetail | None:
    """A task's full detail by task id or by detail file key (``TaskRow.file``); None when not found."""
    details = Path(run_path) / "details"
    for name in (safe_name(key), key):
        if "/" in name or name.startswith("."):
            continue
        try:
            d = read_detail_file(details / f"{name}.json")
        except RecursionError:  # a hostile detail file: not a task
            d = None
        if d is not None:
            return d
    return None


def task_outcomes(run_path: str | Path) -> dict[str, str]:
    """task id -> outcome (with the error kind for errors, e.g. ``error:env_lost``) of every task."""
    out: dict[str, str] = {}
    for row in iter_task_rows(run_path):
        out[row.task_id] = f"error:{row.error_kind}" if row.outcome == "error" and row.error_kind else row.outcome
    return out


__all__ = ["MAX_JSON_DEPTH", "OUTCOMES", "RUN_MARKERS", "RunData", "RunEntry", "TaskRow", "decode_json_object",
           "find_runs", "is_run_dir", "iter_details", "iter_task_rows", "list_runs", "load_run", "mask_secrets",
           "read_json", "read_json_checked", "read_row", "read_task", "task_outcomes"]
