"""Reading a run's small files for the viewer, never outside the viewed path (no symlinks out of it).

Finding runs, task rows and secret masking come from ``agentcompass.rundata``; this adds the containment
checks a server needs on top.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from ..rundata import MAX_RUN_FILE_BYTES, decode_json_object, run_liveness

SMALL_FILE_LIMIT = MAX_RUN_FILE_BYTES  # params/run_info/summary are small; refuse anything absurd


def is_inside(root: Path, path: Path) -> bool:
    """True when ``path`` (symlinks resolved) lies within ``root`` (already resolved)."""
    try:
        return path.resolve().is_relative_to(root)
    except (OSError, RuntimeError):
        return False


def read_regular(root: Path, path: Path, limit: int = SMALL_FILE_LIMIT) -> bytes | None:
    """The bytes of a regular file (not a symlink) inside ``root``, or None."""
    try:
        st = path.lstat()
    except OSError:
        return None
    if not os.path.isfile(path) or path.is_symlink() or st.st_size > limit or not is_inside(root, path):
        return None
    try:
        with open(path, "rb") as f:
            return f.read(limit)
    except OSError:
        return None


def read_json_checked(root: Path, path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """(object, None) for a JSON object file inside ``root``; (None, None) when it is missing; (None, reason)
    when it is there but unsafe (a link, outside ``root``) or unreadable (too large, nested too deeply, ...)."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, f"{path.name} cannot be read ({exc.strerror or exc})"
    if path.is_symlink() or not os.path.isfile(path) or not is_inside(root, path):
        return None, f"{path.name} is not a regular file inside the viewed path"
    if st.st_size > SMALL_FILE_LIMIT:
        return None, f"{path.name} is larger than {SMALL_FILE_LIMIT >> 20} MiB"
    data = read_regular(root, path)
    if data is None:
        return None, f"{path.name} cannot be read"
    try:
        return decode_json_object(data, path.name), None
    except ValueError as exc:
        return None, str(exc)


def read_json(root: Path, path: Path) -> dict[str, Any] | None:
    """A JSON object file inside ``root``, or None when missing, unsafe or unreadable."""
    return read_json_checked(root, path)[0]


def run_overview(root: Path, key: str, path: Path) -> dict[str, Any]:
    """What the runs list shows for one run: identity, status (and whether it is live), counts, metrics.

    A marker file that is there but cannot be read is named with the reason in ``unreadable``; with neither
    readable the status is ``unreadable``."""
    raw_info, info_problem = read_json_checked(root, path / "run_info.json")
    raw_summary, summary_problem = read_json_checked(root, path / "summary.json")
    info, summary = raw_info or {}, raw_summary or {}
    unreadable = "; ".join(filter(None, (info_problem, summary_problem))) or None
    doc = {**summary, **info} if info else summary
    status = _text(doc.get("status")) or "unknown"
    if unreadable and raw_info is None and raw_summary is None:
        status = "unreadable"
    live, stale = run_liveness(status, info)
    # every field typed as the page (and the list's sort) expects: a run file is written by anyone
    return {
        "key": key,
        "run_id": _text(doc.get("run_id")) or path.name,
        "benchmark": _text(doc.get("benchmark")), "harness": _text(doc.get("harness")),
        "model": _text(doc.get("model")), "environment": _text(doc.get("environment")),
        "status": status,
        "live": live,
        "stale": stale,
        "started_at": _number(info.get("started_at")),
        "duration_s": _number(doc.get("duration_s")),
        "counts": _mapping(doc.get("counts")),
        "metrics": _mapping(summary.get("metrics")) or _mapping(info.get("metrics")),
        "usage": _mapping(summary.get("usage")) or _mapping(info.get("usage")),
        "unreadable": unreadable,
    }


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _number(value: Any) -> float | None:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    try:
        x = float(value)
    except OverflowError:  # an int of hundreds of digits
        return None
    return x if math.isfinite(x) else None


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
