"""A finished run's task details, read strictly for tests: a detail that does not decode fails the test."""

from __future__ import annotations

from pathlib import Path

import msgspec

from agentcompass.records import TaskDetail


def details_by_task(run_dir: str | Path) -> dict[str, TaskDetail]:
    """Every detail in ``run_dir/details``, by task id."""
    out = {}
    for path in (Path(run_dir) / "details").glob("*.json"):
        d = msgspec.json.decode(path.read_bytes(), type=TaskDetail)
        out[d.task_id] = d
    return out
