"""AgentDojo's tools under hostile tool calls: arguments nested too deeply to parse, a tool call that runs away.
Each is the agent's mistake: the tool answers with an error, the try is graded."""

from __future__ import annotations

import asyncio
import functools
import importlib.util
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import agentcompass
from agentcompass.records import AttemptRecord

from ...run_details import details_by_task
from ..tool_probe import Probe

# AgentDojo itself is imported in the tests (its suites cost ~3 CPU-s, which every xdist worker paid at collection)
pytestmark = pytest.mark.skipif(importlib.util.find_spec("agentdojo") is None, reason="agentdojo is not installed")

VERSION = "v1.2.2"
DEEP_ARRAY = "[" * 5000
DEEP_OBJECT = '{"a":' * 5000 + "1" + "}" * 5000
SEND = {"recipient": "US122000000121212121212", "amount": 1, "subject": "x", "date": "2022-01-01"}


def _script(turns: list[Any]) -> dict[str, Any]:
    from agentdojo.task_suite.load_suites import get_suite

    prompt = get_suite(VERSION, "banking").get_user_task_by_id("user_task_0").PROMPT
    return {"bundled": False, "script": [{"match": prompt, "turns": turns}]}


def _observations(attempt: AttemptRecord) -> list[str]:
    return [s.observation or "" for s in (attempt.trajectory.steps if attempt.trajectory else [])]


@pytest.mark.parametrize("raw", [DEEP_ARRAY, DEEP_OBJECT], ids=["array", "object"])
def test_deeply_nested_arguments_are_an_error_the_agent_sees_and_the_try_is_graded(raw: str, tmp_path: Path) -> None:
    turns = [{"tool_calls": [{"name": "send_money", "arguments": raw}]}, "Done."]
    out = agentcompass.run_evaluation("agentdojo", "tool_agent", "scripted", "local", results_dir=str(tmp_path),
                                      benchmark_params={"suites": "banking", "user_tasks": "user_task_0"},
                                      model_params=_script(turns), progress="none")
    assert out.status == "completed", out.error
    a = details_by_task(out.run_dir)["banking/user_task_0"].attempts["1"]
    assert a.status == "completed" and a.error_kind is None, a.error
    assert "nested deeper than" in _observations(a)[0]
    assert a.extra["utility"] is False and a.extra["calls"] == 0  # graded: the bad call never reached the tools


@pytest.fixture
def probe(monkeypatch: pytest.MonkeyPatch) -> Iterator[Probe]:
    """AgentDojo's ``FunctionsRuntime.run_function`` made to run away on its first call (until released)."""
    from agentdojo.functions_runtime import FunctionsRuntime

    p = Probe()
    real = FunctionsRuntime.run_function

    @functools.wraps(real)
    def stuck(self: Any, *args: Any, **kwargs: Any) -> Any:
        p.calls += 1
        if p.calls == 1:  # the agent's first call; later calls (and the grader's replays) run as they are
            p.run_away()
        return real(self, *args, **kwargs)

    monkeypatch.setattr(FunctionsRuntime, "run_function", stuck)
    yield p
    p.release.set()


async def test_a_tool_call_past_its_deadline_is_the_agents_error_and_the_loop_keeps_turning(
        probe: Probe, tmp_path: Path) -> None:
    turns = [{"tool_calls": [{"name": "send_money", "arguments": SEND}]},
             {"tool_calls": [{"name": "get_balance", "arguments": {}}]}, "Done."]
    running = asyncio.create_task(probe.tick())
    try:
        result = await agentcompass.async_launch({"requests": [{
            "benchmark": {"id": "agentdojo", "params": {"suites": "banking", "user_tasks": "user_task_0",
                                                        "tool_timeout": 1.0}},
            "harness": "tool_agent", "model": {"id": "scripted", "params": _script(turns)},
            "results_dir": str(tmp_path)}], "progress": "none"})
    finally:
        running.cancel()
    out = result.outcomes[0]
    assert out.status == "completed", out.error
    a = details_by_task(out.run_dir)["banking/user_task_0"].attempts["1"]
    assert a.status == "completed" and a.error_kind is None, a.error
    assert probe.loop_turned.is_set()  # the engine kept running coroutines while the call ran
    observations = _observations(a)
    assert "did not finish within 1 s" in observations[0]
    assert "the environment is unavailable" in observations[1]  # its thread may still change the environment
    calls = a.artifacts["tool_session"]["calls"]
    assert [(c["function"], c.get("timed_out"), c.get("executed")) for c in calls] == [
        ("send_money", True, None), ("get_balance", None, False)]
    assert a.extra["utility"] is False and a.extra["calls"] == 0  # graded, neither call re-executed
