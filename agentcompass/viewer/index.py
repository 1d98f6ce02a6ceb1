"""The task index of one run: one small row per detail file, built by streaming details once, kept fresh.

Rows (``rundata.TaskRow``) hold only what the task table shows (no trajectories), so a 10,000-task run costs
a few MB. Paging, sorting and filtering happen here, on the server; the page asks for one screenful at a time.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

from .._errors import ConfigError
from ..rundata import OUTCOMES, TaskRow, read_row

# A directory modified this recently may still change within the same timestamp tick: rescan next time too.
_RACY_S = 2.0


SORT_KEYS = ("task_id", "category", "status", "outcome", "score", "tries", "steps", "tokens", "cost", "time_s",
             "error_kind", "flags")


def _sort_value(row: TaskRow, key: str) -> Any:
    value = getattr(row, key)
    if key == "flags":
        return ",".join(value)
    return value


class RunIndex:
    """Rows of one run's ``details/``, rebuilt incrementally when files appear, change or vanish."""

    def __init__(self, details_dir: Path) -> None:
        self.details_dir = details_dir
        self._lock = threading.Lock()
        self._files: dict[str, tuple[int, int]] = {}  # file name -> (mtime_ns, size) when read
        self._rows: dict[str, TaskRow] = {}  # file name -> row
        self._by_task: dict[str, str] = {}  # task id -> file name
        self._dir_mtime_ns: int | None = None
        self._scanned_at = 0.0
        self._sorted: dict[tuple[str, bool], list[TaskRow]] = {}
        self._facets: dict[str, Any] | None = None
        self.version = 0
        self._unreadable: set[str] = set()
        self.build_s: float | None = None  # the first full build
        self.last_scan_s = 0.0

    def refresh(self) -> bool:
        """Pick up new, changed and removed detail files. Cheap when nothing changed. True if rows changed."""
        with self._lock:
            return self._refresh()

    def _refresh(self) -> bool:
        try:
            st = os.stat(self.details_dir)
        except OSError:
            return False
        if (self.build_s is not None and st.st_mtime_ns == self._dir_mtime_ns
                and st.st_mtime < self._scanned_at - _RACY_S):
            return False
        t0 = time.perf_counter()
        scanned_at = time.time()
        seen: set[str] = set()
        changed = False
        with os.scandir(self.details_dir) as it:
            for entry in it:
                name = entry.name
                if not name.endswith(".json") or name.startswith(".") or not entry.is_file(follow_symlinks=False):
                    continue
                seen.add(name)
                est = entry.stat(follow_symlinks=False)
                stamp = (est.st_mtime_ns, est.st_size)
                if self._files.get(name) == stamp:
                    continue
                self._files[name] = stamp
                row = read_row(entry.path)
                self._drop(name)
                changed = True
                if row is None:
                    self._unreadable.add(name)
                    continue
                self._unreadable.discard(name)
                self._rows[name] = row
                self._by_task[row.task_id] = name
        for name in set(self._files) - seen:
            del self._files[name]
            self._unreadable.discard(name)
            self._drop(name)
            changed = True
        self._dir_mtime_ns = st.st_mtime_ns
        self._scanned_at = scanned_at
        self.last_scan_s = time.perf_counter() - t0
        if self.build_s is None:
            self.build_s = self.last_scan_s
        if changed:
            self.version += 1
            self._sorted.clear()
            self._facets = None
        return changed

    def _drop(self, name: str) -> None:
        old = self._rows.pop(name, None)
        if old is not None and self._by_task.get(old.task_id) == name:
            del self._by_task[old.task_id]

    def __len__(self) -> int:
        return len(self._rows)

    @property
    def unreadable(self) -> list[str]:
        """Detail files that did not decode as a task detail."""
        return sorted(self._unreadable)

    def rows(self) -> list[TaskRow]:
        """All rows, by task id."""
        with self._lock:
            return self._sorted_rows("task_id", False)

    def detail_file(self, task_id: str) -> Path | None:
        """The detail file of a task known to the index (the only way a task id maps to a path)."""
        name = self._by_task.get(task_id)
        return self.details_dir / name if name else None

    def row(self, task_id: str) -> TaskRow | None:
        name = self._by_task.get(task_id)
        return self._rows.get(name) if name else None

    def _sorted_rows(self, key: str, desc: bool) -> list[TaskRow]:
        cached = self._sorted.get((key, desc))
        if cached is not None:
            return cached
        rows = sorted(self._rows.values(), key=lambda r: r.task_id)
        if key != "task_id" or desc:
            present = [r for r in rows if _sort_value(r, key) is not None]
            missing = [r for r in rows if _sort_value(r, key) is None]
            present.sort(key=lambda r: _sort_value(r, key), reverse=desc)
            rows = present + missing  # empty values last, either direction
        self._sorted[(key, desc)] = rows
        return rows

    def facets(self) -> dict[str, Any]:
        """Counts per status, outcome, category, error kind and flag (for the filter menus)."""
        with self._lock:
            return self._facets_locked()

    def _facets_locked(self) -> dict[str, Any]:
        if self._facets is None:
            f: dict[str, dict[str, int]] = {"status": {}, "outcome": {}, "category": {}, "error_kind": {},
                                            "flag": {}}
            for r in self._rows.values():
                for name, value in (("status", r.status), ("outcome", r.outcome), ("category", r.category),
                                    ("error_kind", r.error_kind)):
                    if value is not None:
                        f[name][value] = f[name].get(value, 0) + 1
                for flag in r.flags:
                    f["flag"][flag] = f["flag"].get(flag, 0) + 1
            self._facets = {k: dict(sorted(v.items())) for k, v in f.items()}
        return self._facets

    def by_category(self) -> dict[str, dict[str, Any]]:
        """Tasks, graded, solved and pass rate per category (skipped tasks left out, as the metrics do)."""
        out: dict[str, dict[str, Any]] = {}
        with self._lock:
            rows = list(self._rows.values())
        for r in rows:
            if r.outcome == "skipped":
                continue
            c = out.setdefault(r.category or "(none)", {"tasks": 0, "graded_tasks": 0, "solved": 0})
            c["tasks"] += 1
            c["graded_tasks"] += r.outcome != "error"
            c["solved"] += r.outcome == "pass"
        for c in out.values():
            c["pass_rate"] = c["solved"] / c["tasks"] if c["tasks"] else 0.0
        return dict(sorted(out.items()))

    def query(self, *, offset: int = 0, limit: int = 100, sort: str = "task_id", desc: bool = False,
              q: str = "", status: str = "", outcome: str = "", category: str = "", flag: str = "",
              error_kind: str = "") -> dict[str, Any]:
        """One page of rows after filtering and sorting, with the total and match counts."""
        if sort not in SORT_KEYS:
            raise ConfigError(f"Invalid `sort` {sort!r}; allowed: {', '.join(SORT_KEYS)}.", field="sort")
        if outcome and outcome not in OUTCOMES:
            raise ConfigError(f"Invalid `outcome` {outcome!r}; allowed: {', '.join(OUTCOMES)}.", field="outcome")
        if offset < 0 or not 1 <= limit <= 1000:
            raise ConfigError("Invalid paging: `offset` must be >= 0 and `limit` between 1 and 1000.",
                              field="limit")
        with self._lock:
            rows = self._sorted_rows(sort, desc)
            needle = q.strip().lower()
            if needle or status or outcome or category or flag or error_kind:
                rows = [r for r in rows if _matches(r, needle, status, outcome, category, flag, error_kind)]
            return {"total": len(self._rows), "matched": len(rows), "offset": offset, "limit": limit,
                    "sort": sort, "desc": desc, "version": self.version, "rows": rows[offset:offset + limit]}


def _matches(r: TaskRow, needle: str, status: str, outcome: str, category: str, flag: str, error_kind: str) -> bool:
    if status and r.status != status:
        return False
    if outcome and r.outcome != outcome:
        return False
    if category and r.category != category:
        return False
    if error_kind and r.error_kind != error_kind:
        return False
    if flag and not (r.flags if flag == "*" else flag in r.flags):
        return False
    if needle:
        hay = " ".join(filter(None, (r.task_id, r.category, r.status, r.error_kind, r.error, *r.flags))).lower()
        return needle in hay
    return True
