"""Reading a run's small files for the viewer, never outside the viewed path (no symlinks out of it).

Finding runs, task rows and secret masking come from ``agentcompass.rundata``; this adds the containment
checks a server needs on top.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import msgspec

SMALL_FILE_LIMIT = 16 << 20  # params/run_info/summary are small; refuse anything absurd


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


def read_json(root: Path, path: Path) -> dict[str, Any] | None:
    """A JSON object file inside ``root``, or None when missing, unsafe or not an object."""
    data = read_regular(root, path)
    if data is None:
        return None
    try:
        value = msgspec.json.decode(data)
    except msgspec.DecodeError:
        return None
    return value if isinstance(value, dict) else None


def pid_alive(pid: int | None) -> bool:
    """Whether a process with this id exists on this host."""
    if not pid or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
    return True


def run_overview(root: Path, key: str, path: Path) -> dict[str, Any]:
    """What the runs list shows for one run: identity, status (and whether it is live), counts, metrics."""
    info = read_json(root, path / "run_info.json") or {}
    summary = read_json(root, path / "summary.json") or {}
    doc = {**summary, **info} if info else summary
    status = doc.get("status", "unknown")
    live = info.get("status") == "running" and pid_alive(info.get("pid"))
    return {
        "key": key,
        "run_id": doc.get("run_id", path.name),
        "benchmark": doc.get("benchmark"), "harness": doc.get("harness"), "model": doc.get("model"),
        "environment": doc.get("environment"),
        "status": status,
        "live": live,
        "stale": status == "running" and not live,
        "started_at": info.get("started_at"),
        "duration_s": doc.get("duration_s"),
        "counts": doc.get("counts") or {},
        "metrics": summary.get("metrics") or info.get("metrics") or {},
        "usage": summary.get("usage") or info.get("usage") or {},
    }
