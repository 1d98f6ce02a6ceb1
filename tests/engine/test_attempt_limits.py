"""Per-attempt limits on model use (harness_params.token_limit / message_limit), in-process and through the gateway."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

import agentcompass
from agentcompass import ConfigError
from agentcompass.engine.attempt_limits import AttemptBudget, AttemptLimits, LimitReached
from agentcompass.records import TaskDetail, Usage
from tests.fixtures_scripted import running_scripted_server

TASK = "files/rename_logs"  # the bundled script solves it in 3 model calls
HTTP_HARNESS = "tests.engine.gateway_components:GatewayCallHarness"


def _detail(run_dir: Path) -> TaskDetail:
    [path] = (run_dir / "details").glob("*.json")
    return msgspec.json.decode(path.read_bytes(), type=TaskDetail)


def _run(tmp_path: Path, **harness_params: Any) -> Any:
    return agentcompass.run_evaluation(
        benchmark="shell_tasks", benchmark_params={"sample_ids": [TASK]}, harness="shell_agent",
        harness_params=harness_params, model="scripted", environment="local", progress="none",
        results_dir=str(tmp_path))


def test_a_token_limit_of_one_ends_the_attempt_as_token_limit_keeping_its_partial_trajectory(tmp_path: Path) -> None:
    out = _run(tmp_path, token_limit=1)
    assert out.ok, out.error
    attempt = _detail(out.run_dir).attempts["1"]
    assert attempt.error_kind == "token_limit"
    assert attempt.status == "completed" and attempt.correct is not None  # graded, as an agent timeout is
    traj = attempt.trajectory
    assert traj is not None and traj.stop_reason == "token_limit"
    assert len(traj.steps) == 1 and traj.steps[0].action  # the one call it was allowed, and its command
    assert attempt.meta["limits"]["messages"] == 1 and attempt.meta["limits"]["tokens"] > 1
    params = json.loads((out.run_dir / "params.json").read_text())
    assert params["resolved"]["limits"] == {"tokens": 1, "messages": None}
    assert "token_limit" not in params["resolved"]["harness_params"]  # the engine's key, not the harness's


def test_a_message_limit_allows_exactly_that_many_model_calls(tmp_path: Path) -> None:
    unlimited = _run(tmp_path / "free")
    assert _detail(unlimited.run_dir).attempts["1"].error_kind is None
    assert len(_detail(unlimited.run_dir).attempts["1"].trajectory.steps) == 3  # type: ignore[union-attr]
    out = _run(tmp_path / "limited", message_limit=2)
    attempt = _detail(out.run_dir).attempts["1"]
    assert attempt.error_kind == "message_limit" and attempt.meta["limits"]["messages"] == 2
    assert attempt.trajectory is not None and len(attempt.trajectory.steps) == 2
    assert attempt.trajectory.stop_reason == "message_limit"


@pytest.mark.parametrize("value", [0, -1, 1.5, "10", True, 10**13])
def test_a_limit_that_is_not_a_whole_number_in_range_is_refused_naming_the_field(tmp_path: Path, value: Any) -> None:
    with pytest.raises(ConfigError, match=r"harness_params\.token_limit.*whole number") as info:
        _run(tmp_path, token_limit=value)
    assert info.value.field == "harness_params.token_limit"
    assert not list(tmp_path.rglob("details"))  # refused before anything ran


async def test_an_agent_calling_through_the_gateway_gets_no_call_past_its_message_limit(tmp_path: Path) -> None:
    script = [{"match": "capital of France", "turns": ["Paris."]}]
    async with running_scripted_server({"script": script}) as server:
        result = await agentcompass.async_launch({"requests": [{
            "benchmark": {"id": "shell_tasks", "params": {"sample_ids": [TASK]}},
            "harness": {"id": HTTP_HARNESS, "params": {"calls": 6, "message_limit": 2}},
            "model": {"id": "scripted", "base_url": server.base_url, "api_key": "sk-test"},
            "wrap_api_key": True, "results_dir": str(tmp_path)}], "progress": "none"})
        answered = len(server.recent_requests)
    out = result.outcomes[0]
    assert out.status == "completed", out.error
    attempt = _detail(out.run_dir).attempts["1"]
    assert attempt.error_kind == "message_limit", (attempt.status, attempt.error)
    assert answered == 2  # the third call never reached the model
    assert attempt.meta["limits"]["messages"] == 2 and attempt.meta["gateway"]["calls"] == 2


async def test_a_budget_refuses_the_call_after_the_one_that_crossed_the_limit_and_says_so() -> None:
    budget = AttemptBudget(AttemptLimits(tokens=100))
    budget.check()
    budget.charge(Usage(prompt_tokens=60, completion_tokens=30))  # 90: still under
    budget.check()
    budget.charge(Usage(total_tokens=40))  # 130: crossed by this call, which completed
    with pytest.raises(LimitReached, match="token limit reached: 130 tokens used, harness_params.token_limit=100"):
        budget.check()
    assert budget.reached is not None and budget.reached.kind == "token_limit"
    await budget.stopped()  # told the watchdog
