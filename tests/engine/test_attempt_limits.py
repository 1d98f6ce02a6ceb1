"""Per-attempt limits (harness_params.token_limit / message_limit / cost_limit / working_limit), in-process and
through the gateway."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

import agentcompass
from agentcompass import ConfigError
from agentcompass.engine.attempt_limits import AttemptBudget, AttemptLimits, LimitReached
from agentcompass.engine.resolve import resolve
from agentcompass.records import TaskDetail, Usage
from agentcompass.registry import Registries
from agentcompass.specs import ComponentSpec, ModelSpec, RunRequestSpec
from tests.fixtures_scripted import running_scripted_server

TASK = "files/rename_logs"  # the bundled script solves it in 3 model calls
HTTP_HARNESS = "tests.engine.gateway_components:GatewayCallHarness"


def _detail(run_dir: Path | None) -> TaskDetail:
    assert run_dir is not None
    [path] = (run_dir / "details").glob("*.json")
    return msgspec.json.decode(path.read_bytes(), type=TaskDetail)


def _run(tmp_path: Path, model_params: dict[str, Any] | None = None, **harness_params: Any) -> Any:
    return agentcompass.run_evaluation(
        benchmark="shell_tasks", benchmark_params={"sample_ids": [TASK]}, harness="shell_agent",
        harness_params=harness_params, model="scripted", model_params=model_params, environment="local",
        progress="none", results_dir=str(tmp_path))


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
    assert params["resolved"]["limits"] == {"tokens": 1, "messages": None, "cost": None, "working_s": None}
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


def test_an_attempt_whose_limits_are_not_reached_ends_when_its_agent_does(tmp_path: Path) -> None:
    # the watchdog waited for the harness AND the limit (asyncio.wait's default: all completed), so an attempt
    # with a limit it never reached ended only at its stall or agent timeout (900 s by default)
    out = _run(tmp_path, message_limit=10, token_limit=10**9)
    attempt = _detail(out.run_dir).attempts["1"]
    assert attempt.error_kind is None and attempt.correct is True
    assert attempt.trajectory is not None and len(attempt.trajectory.steps) == 3
    assert attempt.meta["limits"]["messages"] == 3
    assert attempt.meta["agent_s"] < 300  # a hang guard: the three calls and commands take well under a second


@pytest.mark.parametrize("value", [0, -1, 1.5, "10", True, 10**13])
def test_a_limit_that_is_not_a_whole_number_in_range_is_refused_naming_the_field(tmp_path: Path, value: Any) -> None:
    with pytest.raises(ConfigError, match=r"harness_params\.token_limit.*whole number") as info:
        _run(tmp_path, token_limit=value)
    assert info.value.field == "harness_params.token_limit"
    assert not list(tmp_path.rglob("details"))  # refused before anything ran


async def _through_gateway(tmp_path: Path, server_params: dict[str, Any], **limits: Any) -> tuple[Any, int]:
    """An agent process making six model calls through the gateway under ``limits``: (outcome, calls answered)."""
    async with running_scripted_server(server_params) as server:
        result = await agentcompass.async_launch({"requests": [{
            "benchmark": {"id": "shell_tasks", "params": {"sample_ids": [TASK]}},
            "harness": {"id": HTTP_HARNESS, "params": {"calls": 6, **limits}},
            "model": {"id": "scripted", "base_url": server.base_url, "api_key": "sk-test"},
            "wrap_api_key": True, "results_dir": str(tmp_path)}], "progress": "none"})
        return result.outcomes[0], len(server.recent_requests)


async def test_an_agent_calling_through_the_gateway_gets_no_call_past_its_message_limit(tmp_path: Path) -> None:
    script = [{"match": "capital of France", "turns": ["Paris."]}]
    out, answered = await _through_gateway(tmp_path, {"script": script}, message_limit=2)
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


SEED = 3
PRICES = {"input": 1000.0, "output": 1000.0}  # per million tokens: a call of the bundled script costs ~$0.1


def test_a_cost_limit_ends_the_attempt_at_the_first_call_that_spends_it(tmp_path: Path) -> None:
    out = _run(tmp_path, {"price_per_million": PRICES}, cost_limit=1e-6)
    assert out.ok, out.error
    attempt = _detail(out.run_dir).attempts["1"]
    assert attempt.error_kind == "cost_limit" and attempt.status == "completed"
    assert attempt.trajectory is not None and attempt.trajectory.stop_reason == "cost_limit"
    assert len(attempt.trajectory.steps) == 1  # the call that crossed it completed, none after it
    assert attempt.meta["limits"]["messages"] == 1 and attempt.meta["limits"]["cost"] > 1e-6
    assert "harness_params.cost_limit=1e-06" in (attempt.error or "")


def test_a_cost_limit_without_prices_is_refused_naming_both_fields(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"cost_limit.*model_params\.price_per_million") as info:
        _run(tmp_path, cost_limit=1.0)
    assert info.value.field == "harness_params.cost_limit"
    assert not list(tmp_path.rglob("details"))


@pytest.mark.parametrize(("key", "value"), [("cost_limit", 0), ("cost_limit", -1), ("working_limit", 0),
                                            ("working_limit", "5"), ("working_limit", True),
                                            ("working_limit", 10**9), ("cost_limit", float("nan"))])
def test_a_cost_or_working_limit_out_of_range_is_refused_naming_it(tmp_path: Path, key: str, value: Any) -> None:
    with pytest.raises(ConfigError, match=rf"harness_params\.{key}.*above 0") as info:
        _run(tmp_path, {"price_per_million": PRICES}, **{key: value})
    assert info.value.field == f"harness_params.{key}"


def test_a_working_limit_ends_an_agent_whose_model_calls_take_longer(tmp_path: Path) -> None:
    # each call takes 0.8 s of the model's time (working time); the agent needs three: a 1 s limit ends it
    # during its second call, whatever the machine's load
    out = _run(tmp_path, {"latency_s": 0.8}, working_limit=1)
    assert out.ok, out.error
    attempt = _detail(out.run_dir).attempts["1"]
    assert attempt.error_kind == "working_limit", (attempt.status, attempt.error)
    assert attempt.status == "completed" and attempt.correct is False  # graded: the task is not done
    assert attempt.trajectory is not None and attempt.trajectory.stop_reason == "working_limit"
    assert len(attempt.trajectory.steps) <= 1  # the second call was cut short
    limits = attempt.meta["limits"]
    assert limits["working_s"] >= 1.0 and limits["model_wait_s"] == 0.0  # nothing shared: no waiting


async def test_time_waiting_for_the_model_is_not_working_time(tmp_path: Path) -> None:
    # the endpoint answers 429 with Retry-After: 4 to a seeded half of the calls: the retries' pauses add up to
    # more than the working limit, which they do not count (the agent's own work takes well under it, on a loaded
    # machine too: three local commands and three in-process calls)
    async with running_scripted_server(faults={"429": 0.5}, fault_seed=SEED, retry_after=4.0) as server:
        result = await agentcompass.async_launch({"requests": [{
            "benchmark": {"id": "shell_tasks", "params": {"sample_ids": [TASK]}},
            "harness": {"id": "shell_agent", "params": {"working_limit": 7.5}},
            "model": {"id": "scripted", "base_url": server.base_url, "params": {"retries": 8}},
            "results_dir": str(tmp_path)}], "progress": "none"})
    out = result.outcomes[0]
    assert out.status == "completed" and out.run_dir is not None, out.error
    attempt = _detail(out.run_dir).attempts["1"]
    assert attempt.error_kind is None, (attempt.error_kind, attempt.error)
    retries = sum(t.usage.retries for t in attempt.tries if t.usage is not None)
    limits = attempt.meta["limits"]
    assert retries >= 2 and limits["model_wait_s"] >= retries * 4.0 > 7.5 > limits["working_s"]


def test_a_cost_limit_mini_swe_agent_declares_too_is_enforced_by_both() -> None:
    # mini-swe-agent has a cost_limit of its own (its default 3.0 would otherwise stop an attempt the user gave
    # $10): the key stays in its params and the engine enforces the same number
    spec = RunRequestSpec(benchmark=ComponentSpec("shell_tasks"),
                          harness=ComponentSpec("mini_swe_agent", {"cost_limit": 10, "token_limit": 500}),
                          model=ModelSpec("scripted", params={"price_per_million": PRICES}))
    resolved = resolve(spec, Registries())
    assert resolved.limits.cost == 10.0 and resolved.harness_params["cost_limit"] == 10
    assert resolved.limits.tokens == 500 and "token_limit" not in resolved.harness_params  # the engine's alone
    shell = resolve(msgspec.structs.replace(spec, harness=ComponentSpec("shell_agent", {"cost_limit": 10})),
                    Registries())
    assert shell.limits.cost == 10.0 and "cost_limit" not in shell.harness_params


async def test_an_agent_process_is_stopped_at_its_working_limit_through_the_gateway(tmp_path: Path) -> None:
    server = {"script": [{"match": "", "turns": ["Paris."]}], "latency_s": 0.8}
    out, answered = await _through_gateway(tmp_path, server, working_limit=1)
    assert out.status == "completed" and out.run_dir is not None, out.error
    attempt = _detail(out.run_dir).attempts["1"]
    assert attempt.error_kind == "working_limit", (attempt.status, attempt.error)
    assert answered <= 2  # six calls of 0.8 s each: the second ends past the limit, no third is made
