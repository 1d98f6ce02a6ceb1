"""A harness whose result the engine cannot report: it makes the engine's attempt runner raise."""

from __future__ import annotations

import logging
from typing import Any, ClassVar

from agentcompass.interfaces import (
    ComponentContext,
    Environment,
    Harness,
    HarnessResult,
    ModelClient,
    PreparedTask,
    RunContext,
)


class _Opaque:
    """A value msgspec cannot encode."""


class UnsendableResultHarness(Harness):
    """Answers every task with an artifact msgspec cannot encode; with strict messages the runner's
    ``AttemptDone`` then fails to go out (a failure of the engine's own code, not of the agent)."""

    evaluates: ClassVar[bool] = False
    needs_environment: ClassVar[bool] = False

    def __init__(self, params: dict[str, Any], ctx: ComponentContext) -> None:
        self.params = params

    async def run(self, task: PreparedTask, env: Environment | None, model: ModelClient, ctx: RunContext,
                  log: logging.Logger) -> HarnessResult:
        return HarnessResult(final_answer="done", artifacts={"handle": _Opaque()})
