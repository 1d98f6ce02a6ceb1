"""enable_analysis end to end: a scripted agent that deletes a test, writes into the verifier's directory or
loops gets flagged in its details and in summary.json; the honest bundled solutions get no flag."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import agentcompass
from agentcompass import cli
from agentcompass._errors import ConfigError
from agentcompass.interfaces import ComponentContext, TaskSpec
from agentcompass.records import AttemptRecord
from agentcompass.rundata import iter_task_rows, read_task

from ..results_runs import HACKS


class Boom:
    """An analyzer with a bug: it must not cost the attempt."""

    name = "boom"

    def __init__(self, params: dict[str, Any], ctx: ComponentContext) -> None:
        pass

    def analyze(self, task: TaskSpec, attempt: AttemptRecord) -> dict[str, Any] | None:
        raise ValueError("analyzer bug")


def _summary(run_dir: Path | None) -> dict[str, Any]:
    assert run_dir is not None
    return json.loads((run_dir / "summary.json").read_text())


def test_hacks_and_loops_are_flagged_in_details_and_summary_and_honest_runs_are_not(tmp_path: Path) -> None:
    out = agentcompass.run_evaluation(
        "shell_tasks", "shell_agent", "scripted", model_params={"script": HACKS}, enable_analysis=True,
        results_dir=str(tmp_path), progress="none", task_concurrency=8)
    assert out.ok and out.counts.done == 37
    flagged = {r.task_id: r.flags for r in iter_task_rows(out.run_dir) if r.flags}  # type: ignore[arg-type]
    assert flagged == {"files/hello_world": ["repeated_tool_calls", "reward_hacking"],
                       "text/sort_unique": ["reward_hacking"]}
    hello = read_task(out.run_dir, "files/hello_world")  # type: ignore[arg-type]
    assert hello is not None
    analysis = hello.attempts["1"].analysis
    assert analysis["reward_hacking"]["reasons"] == ["deleted_test"]
    assert analysis["reward_hacking"]["evidence"][0]["step"] == 0
    assert analysis["repeated_tool_calls"]["max_consecutive"] == 3
    verify = read_task(out.run_dir, "text/sort_unique")  # type: ignore[arg-type]
    # it also wrote without ever looking at the task's names.txt
    assert verify is not None and verify.attempts["1"].analysis["reward_hacking"]["reasons"] == [
        "ignored_inputs", "verifier_path"]
    assert _summary(out.run_dir)["analysis"] == {"repeated_tool_calls": 1, "reward_hacking": 2}


def test_an_analyzer_that_raises_is_recorded_and_the_attempt_still_counts(tmp_path: Path) -> None:
    out = agentcompass.run_evaluation(
        "shell_tasks", "shell_agent", "scripted", benchmark_params={"sample_ids": ["files/hello_world",
                                                                                   "answer/count_lines"]},
        enable_analysis=[f"{__name__}:Boom", "empty_output"], results_dir=str(tmp_path), progress="none")
    assert out.ok and out.metrics["pass@1"] == 1.0 and out.counts.errors == 0
    detail = read_task(out.run_dir, "answer/count_lines")  # type: ignore[arg-type]
    assert detail is not None and detail.attempts["1"].analysis == {
        "analyzer_errors": {"boom": "ValueError: analyzer bug"}}
    assert _summary(out.run_dir)["analysis"] == {"analyzer_errors": 2}


def test_without_enable_analysis_nothing_is_analyzed(tmp_path: Path) -> None:
    out = agentcompass.run_evaluation(
        "shell_tasks", "shell_agent", "scripted", model_params={"script": HACKS},
        benchmark_params={"sample_ids": ["files/hello_world"]}, results_dir=str(tmp_path), progress="none")
    detail = read_task(out.run_dir, "files/hello_world")  # type: ignore[arg-type]
    assert detail is not None and detail.attempts["1"].analysis == {}
    assert "analysis" not in _summary(out.run_dir)


def test_an_unknown_analyzer_fails_the_request_before_any_task_runs(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="Unknown analyzer id 'reward_hack'") as err:
        agentcompass.run_evaluation("shell_tasks", "shell_agent", "scripted", enable_analysis=["reward_hack"],
                                    results_dir=str(tmp_path), progress="none")
    assert err.value.field == "enable_analysis[0]"
    assert not list(tmp_path.rglob("details/*.json"))


def test_the_cli_flag_takes_a_list_of_analyzer_ids(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = cli.main(["run", "shell_tasks", "shell_agent", "scripted", "--benchmark-params",
                   json.dumps({"sample_ids": ["files/hello_world"]}), "--model-params", json.dumps({"script": HACKS}),
                   "--enable-analysis", "repeated_tool_calls", "--results-dir", str(tmp_path), "--run-id", "r",
                   "--progress", "none"])
    assert rc == 0
    run_dir = tmp_path / "shell_tasks" / "shell_agent" / "scripted" / "r"
    assert _summary(run_dir)["analysis"] == {"repeated_tool_calls": 1}  # only the analyzer asked for
    params = json.loads((run_dir / "params.json").read_text())
    assert params["spec"]["enable_analysis"] == ["repeated_tool_calls"]
