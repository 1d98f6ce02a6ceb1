"""The ``none`` harness: runs nothing. Used to list a benchmark's tasks without calling a model."""

from __future__ import annotations

import logging
import time
from typing import Any, ClassVar

from ..interfaces import ComponentContext, Environment, HarnessResult, ModelClient, PreparedTask, RunContext
from ..records import Trajectory
from . import check_param_keys
from .base import Harness


class NoneHarness(Harness):
    """Does nothing and returns an empty result (``stop_reason`` ``none``); the engine grades nothing."""

    evaluates: ClassVar[bool] = False
    needs_environment: ClassVar[bool] = False

    def __init__(self, params: dict[str, Any], ctx: ComponentContext) -> None:
        check_param_keys(params, (), "harness none")

    async def run(self, task: PreparedTask, env: Environment | None, model: ModelClient,
                  ctx: RunContext, log: logging.Logger) -> HarnessResult:
        now = time.time()
        return HarnessResult(trajectory=Trajectory(started_at=now, finished_at=now, stop_reason="none"))
