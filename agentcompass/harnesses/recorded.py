"""The ``recorded`` harness: gives each attempt back as a finished run recorded it, so the benchmark grades it again
(``agentcompass rescore``, ``agentcompass.rescore``). No agent runs, no model is called, no agent environment
opens.

Each attempt of the run's ``details/`` comes back as the agent left it: its final answer, its submitted patch
(``artifacts.patch``, else the patch the grader saw, ``extra.model_patch``) and its trajectory (not its usage:
the regrading run calls no model; the re-scored summary keeps the run's usage); an attempt
that ended in an error the engine does not grade (``run_error``) ends in the same error again. The details are
untrusted files: read once, each at most ``MAX_DETAIL_BYTES``, and a detail that does not decode is an attempt
that cannot be replayed (``harness_crash``), never a crash of the run.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any, ClassVar

import msgspec

from .._errors import ConfigError
from ..common.error_kinds import ErrorKind
from ..interfaces import ComponentContext, Environment, HarnessResult, ModelClient, PreparedTask, RunContext
from ..records import AttemptRecord, TaskDetail, Trajectory
from .base import Harness

__all__ = ["MAX_DETAIL_BYTES", "Recorded", "replayed_result"]

#: the largest detail file read (the engine caps what it writes far below this)
MAX_DETAIL_BYTES = 64 << 20
_WHERE = "harness recorded"
_decode = msgspec.json.Decoder(TaskDetail).decode


class RecordedParams(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """``run_dir``: the finished run whose attempts are given back."""

    run_dir: str = ""


def replayed_result(record: AttemptRecord) -> HarnessResult:
    """What the agent of ``record`` produced, as a harness returns it: its answer, patch and trajectory, or
    the error that ended it before grading."""
    if record.status == "run_error":
        kind = ErrorKind.of(record.error_kind) if record.error_kind else ErrorKind.HARNESS_CRASH
        return HarnessResult(error=record.error or f"the recorded attempt ended in {kind}", error_kind=kind,
                             trajectory=record.trajectory or Trajectory())
    patch = record.artifacts.get("patch")
    if not isinstance(patch, str):
        graded = record.extra.get("model_patch")  # the SWE-bench family records the patch it graded
        patch = graded if isinstance(graded, str) else None
    graded = ErrorKind.of(record.error_kind) if record.error_kind and record.status == "completed" else None
    return HarnessResult(final_answer=record.final_answer, patch=patch, trajectory=record.trajectory or Trajectory(),
                         artifacts={k: v for k, v in record.artifacts.items() if k != "patch"},
                         error=record.error if graded else None, error_kind=graded)


class Recorded(Harness):
    """Gives back the attempts a finished run recorded (params: ``RecordedParams``); no agent, no model call."""

    name: ClassVar[str] = "recorded"
    needs_environment: ClassVar[bool] = False
    calls_model: ClassVar[bool] = False
    regrades: ClassVar[bool] = True
    Params: ClassVar[type[RecordedParams]] = RecordedParams
    params: RecordedParams

    def __init__(self, params: RecordedParams | dict[str, Any], ctx: ComponentContext) -> None:
        super().__init__(params, ctx)
        if not self.params.run_dir:
            raise ConfigError(f"{_WHERE}: `harness_params.run_dir` is required: the finished run to grade again.",
                              field="harness_params.run_dir")
        self.details_dir = Path(self.params.run_dir).expanduser() / "details"
        if not self.details_dir.is_dir():
            raise ConfigError(f"{_WHERE}: {str(self.details_dir)!r} is not a directory: `harness_params.run_dir` "
                              "must be a run directory.", field="harness_params.run_dir")
        self._by_task: dict[str, TaskDetail] | None = None
        self.unreadable: list[str] = []

    def _details(self) -> dict[str, TaskDetail]:
        if self._by_task is None:
            self._by_task = {}
            with os.scandir(self.details_dir) as entries:
                for entry in entries:
                    if not entry.name.endswith(".json") or not entry.is_file(follow_symlinks=False):
                        continue
                    try:
                        if entry.stat(follow_symlinks=False).st_size > MAX_DETAIL_BYTES:
                            raise ValueError("too large")
                        detail = _decode(Path(entry.path).read_bytes())
                    except (OSError, ValueError, msgspec.DecodeError, RecursionError):
                        self.unreadable.append(entry.name)
                        continue
                    self._by_task[detail.task_id] = detail
        return self._by_task

    async def run(self, task: PreparedTask, env: Environment | None, model: ModelClient, ctx: RunContext,
                  log: logging.Logger) -> HarnessResult:
        detail = self._details().get(task.task_id)
        record = detail.attempts.get(str(ctx.attempt)) if detail is not None else None
        if record is None:
            now = time.time()
            return HarnessResult(error=f"{_WHERE}: the run has no readable record of {task.task_id} attempt "
                                       f"{ctx.attempt}", error_kind=ErrorKind.HARNESS_CRASH,
                                 trajectory=Trajectory(started_at=now, finished_at=now, stop_reason="no_record"))
        return replayed_result(record)
