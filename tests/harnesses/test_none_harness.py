"""The none harness does nothing: no model call, no environment, stop reason ``none``."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import agentcompass
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


@pytest.mark.parametrize("benchmark", ["shell_tasks", "humaneval", "qa_local", "tau2", "agentdojo"])
def test_a_run_with_nothing_graded_reports_no_rate_rather_than_zero(tmp_path: Path, benchmark: str) -> None:
    params: dict[str, Any] = {"limit": 2}
    if benchmark == "tau2":  # its customer is a model, even when nobody talks to it
        params["user_model"] = {"id": "scripted"}
    out = agentcompass.run_evaluation(benchmark=benchmark, benchmark_params=params, harness="none",
                                      model="scripted", environment="local", progress="none",
                                      results_dir=str(tmp_path))
    assert out.ok, out.error
    assert out.metrics.get("graded_tasks", 0) == 0
    rate_names = ("pass", "avg", "accuracy", "primary", "attack_success")
    rates = {k: v for k, v in out.metrics.items() if k.startswith(rate_names) and k != "primary_metric"}
    assert rates == {}, out.metrics  # nothing was graded: no pass@1 0.0
    assert out.pass_rate is None


def test_the_command_line_shows_no_pass_rate_for_a_run_with_nothing_graded(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "agentcompass.cli", "run", "shell_tasks", "none", "scripted",
                           "--env", "local", "--progress", "none", "--results-dir", str(tmp_path),
                           "--benchmark-params", '{"limit": 2}'],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "graded_tasks" in proc.stdout and "pass@1" not in proc.stdout and "0.0000" not in proc.stdout
