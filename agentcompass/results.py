"""What launch/run_evaluation return: per-request outcomes with metrics, paths and execution metadata."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import msgspec

from .records import RequestCounts, RunPaths, RunStatus

LaunchStatus = Literal["completed", "partial", "failed", "timed_out", "cancelled"]


class RequestOutcome(msgspec.Struct, omit_defaults=True):
    """The outcome of one request: status, metrics, where its files are, and why it failed if it did."""

    name: str
    status: RunStatus
    benchmark: str
    harness: str
    model: str
    environment: str
    run_id: str | None = None
    metrics: dict[str, Any] = {}
    by_category: dict[str, dict[str, Any]] = {}
    errors_by_kind: dict[str, int] = {}
    counts: RequestCounts = msgspec.field(default_factory=RequestCounts)
    paths: RunPaths | None = None
    reuse: dict[str, Any] = {}
    error: str | None = None
    error_type: str | None = None
    error_field: str | None = None
    started_at: float | None = None
    finished_at: float | None = None
    duration_s: float | None = None

    @property
    def ok(self) -> bool:
        return self.status == "completed"

    @property
    def run_dir(self) -> Path | None:
        return Path(self.paths.run_dir) if self.paths else None

    @property
    def pass_rate(self) -> float | None:
        value = self.metrics.get("pass_rate")
        return float(value) if value is not None else None


#: ``run_evaluation`` returns the outcome of its one request.
EvaluationResult = RequestOutcome


class LaunchResult(msgspec.Struct, omit_defaults=True):
    """The outcomes of every request of a launch, in the order given."""

    status: LaunchStatus
    outcomes: list[RequestOutcome]
    duration_s: float = 0.0
    peak_concurrent_tasks: int = 0

    def __getitem__(self, name: str) -> RequestOutcome:
        for o in self.outcomes:
            if o.name == name:
                return o
        raise KeyError(f"no request named {name!r}; requests: {[o.name for o in self.outcomes]}")
