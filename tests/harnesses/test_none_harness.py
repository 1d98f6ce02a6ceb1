"""The none harness does nothing: no model call, no environment, stop reason ``none``."""

from __future__ import annotations

import logging

import pytest

from agentcompass._errors import ConfigError
from agentcompass.harnesses.none import NoneHarness
from agentcompass.interfaces import ComponentContext, PreparedTask, RunContext


async def test_returns_an_empty_result_without_calling_the_model(serve_script, run_ctx: RunContext,
                                                                 log: logging.Logger) -> None:
    client, server = await serve_script(["<submit>x</submit>"])
    result = await NoneHarness({}, ComponentContext()).run(
        PreparedTask(task_id="t1", prompt="p"), None, client, run_ctx, log)

    assert result.final_answer is None
    assert result.trajectory.stop_reason == "none"
    assert result.trajectory.steps == []
    assert result.usage.calls == 0
    assert server.requests_served == 0


def test_is_not_graded_and_needs_no_environment() -> None:
    assert NoneHarness.evaluates is False
    assert NoneHarness.needs_environment is False


def test_rejects_any_param() -> None:
    with pytest.raises(ConfigError, match="'step_limit'"):
        NoneHarness({"step_limit": 1}, ComponentContext())
