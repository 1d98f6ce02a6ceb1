"""tau2's tools under hostile tool calls: arithmetic bombs for ``calculate``, a tool call that runs away, arguments
nested too deeply to parse. Each is the agent's mistake: the tool answers with an error, the try is graded."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import agentcompass
from agentcompass.benchmarks.tau2.domain import tau2
from agentcompass.records import AttemptRecord

from ...run_details import details_by_task
from ..tool_probe import Probe
from .test_tau2 import OLIVIA_USER, _olivia_agent, _run, _user

DEEP_ARRAY = "[" * 5000
DEEP_OBJECT = '{"a":' * 5000 + "1" + "}" * 5000


def _with_turn(turn: dict[str, Any]) -> dict[str, Any]:
    """Olivia's golden script with ``turn`` before its first call: the bad call, then the right conversation."""
    agent = _olivia_agent("Z7GOZK")
    turns = list(agent["turns"])
    return {**agent, "turns": [turns[0], turn, *turns[1:]]}


def _observations(attempt: AttemptRecord) -> list[str]:
    return [s.observation or "" for s in (attempt.trajectory.steps if attempt.trajectory else [])]


@pytest.mark.parametrize("raw", [DEEP_ARRAY, DEEP_OBJECT], ids=["array", "object"])
def test_deeply_nested_arguments_are_an_error_the_agent_sees_and_the_try_is_graded(raw: str, tmp_path: Path) -> None:
    turn = {"tool_calls": [{"name": "get_user_details", "arguments": raw}]}
    _, details = _run(tmp_path, "airline/19", _with_turn(turn), _user(OLIVIA_USER))
    a = details["airline/19"].attempts["1"]
    assert a.status == "completed" and a.error_kind is None, a.error
    assert "nested deeper than" in _observations(a)[0]
    # the bad call never reached the environment; the rest of the conversation is the golden one
    assert a.correct is True and a.score == 1.0
    assert a.artifacts["tool_session"]["rejected_tool_calls"][0]["name"] == "get_user_details"


@pytest.mark.parametrize("expression", ["9**(9**7*3)", "9**9**9**9", "(9**99999)*(9**99999)*(9**99999)"])
def test_calculate_refuses_an_arithmetic_bomb_by_size(expression: str, tmp_path: Path) -> None:
    turn = {"tool_calls": [{"name": "calculate", "arguments": {"expression": expression}}]}
    _, details = _run(tmp_path, "airline/19", _with_turn(turn), _user(OLIVIA_USER))
    a = details["airline/19"].attempts["1"]
    assert a.status == "completed" and a.error_kind is None, a.error
    assert "too large to compute" in _observations(a)[0]
    record = a.artifacts["tool_session"]
    assert record["tool_errors"] == 1  # a failed call, counted against tau2's max_errors as tau2 counts them
    # the refused call is not in the graded conversation (tau2's grader replays every call it sees)
    assert all(c["name"] != "calculate" for m in record["messages"] for c in m.get("tool_calls") or [])
    assert a.correct is True and a.score == 1.0


def test_calculate_still_answers_as_tau2_does(tmp_path: Path) -> None:
    turn = {"tool_calls": [{"name": "calculate", "arguments": {"expression": "(2**10 + 0.5) * 3 / 7"}},
                           {"name": "calculate", "arguments": {"expression": "1/0"}}]}
    _, details = _run(tmp_path, "airline/19", _with_turn(turn), _user(OLIVIA_USER))
    a = details["airline/19"].attempts["1"]
    assert _observations(a)[0] == "[calculate] 439.07\n[calculate] Error: division by zero"
    assert a.correct is True and a.score == 1.0


@pytest.fixture
def probe(monkeypatch: pytest.MonkeyPatch) -> Iterator[Probe]:
    """tau2's ``get_reservation_details`` made to run away (until the test releases it)."""
    tau2()
    from tau2.domains.airline.tools import AirlineTools

    p = Probe()
    real = AirlineTools.get_reservation_details

    @functools.wraps(real)  # tau2 finds its tools by the attributes its decorator set
    def stuck(self: Any, reservation_id: str) -> Any:
        p.calls += 1
        if p.calls == 1:  # the agent's call; a replay by the grader (the unfixed code's) is not probed
            p.run_away()
        return real(self, reservation_id)

    monkeypatch.setattr(AirlineTools, "get_reservation_details", stuck)
    yield p
    p.release.set()


async def test_a_tool_call_past_its_deadline_is_the_agents_error_and_the_loop_keeps_turning(
        probe: Probe, tmp_path: Path) -> None:
    agent = _olivia_agent("Z7GOZK")
    running = asyncio.create_task(probe.tick())
    try:
        result = await agentcompass.async_launch({"requests": [{
            "benchmark": {"id": "tau2", "params": {"task_ids": ["airline/19"], "user_model": _user(OLIVIA_USER),
                                                   "tool_timeout": 1.0}},
            "harness": "tool_agent", "model": {"id": "scripted", "params": {"bundled": False, "script": [agent]}},
            "results_dir": str(tmp_path)}], "progress": "none"})
    finally:
        running.cancel()
    out = result.outcomes[0]
    assert out.status == "completed", out.error
    a = details_by_task(out.run_dir)["airline/19"].attempts["1"]
    assert a.status == "completed" and a.error_kind is None, a.error
    # the engine kept running coroutines while the tool call ran (it ran off the event loop)
    assert probe.loop_turned.is_set()
    assert "did not finish within 1 s" in _observations(a)[1]
    record = a.artifacts["tool_session"]
    assert record["termination_reason"] == "agent_error" and record["tool_timeouts"] == 1
    assert a.correct is False and a.score == 0.0  # graded: tau2 scores a conversation that ended in error 0
