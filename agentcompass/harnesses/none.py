"""The ``none`` harness: runs nothing. Used to list a benchmark's tasks without calling a model."""

from __future__ import annotations

import logging
import time
from typing import Any, ClassVar

import msgspec

from ..interfaces import ComponentContext, Environment, HarnessResult, ModelClient, PreparedTask, RunContext
from ..records import Trajectory
from .base import Harness


class NoneHarnessParams(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """``none`` takes no params."""


class NoneHarness(Harness):
    """Does nothing and returns an empty result (``stop_reason`` ``none``); the engine grades nothing."""

    name: ClassVar[str] = "none"
    evaluates: ClassVar[bool] = False
    needs_environment: ClassVar[bool] = False
    calls_model: ClassVar[bool] = False
    Params: ClassVar[type[NoneHarnessParams]] = NoneHarnessParams

    def __init__(self, params: NoneHarnessParams | dict[str, Any], ctx: ComponentContext) -> None:
        super().__init__(params, ctx)

    async def run(self, task: PreparedTask, env: Environment | None, model: ModelClient,
                  ctx: RunContext, log: logging.Logger) -> HarnessResult:
        now = time.time()
        return HarnessResult(trajectory=Trajectory(started_at=now, finished_at=now, stop_reason="none"))
