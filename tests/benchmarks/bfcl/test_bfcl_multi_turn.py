"""The multi-turn session over BFCL's real API classes: calls run live against the question's state, user turns
follow in order, held-out functions are offered at their turn with BFCL's message, and a turn with too many
steps force-quits the question (graded as force-terminated) and the model is asked nothing more; calls run guarded
(no unbounded computation, no leaked precision, any failure an error result), only the calls executed are
recorded, and a step that does not decode runs nothing and ends the turn, as in BFCL."""

from __future__ import annotations

import decimal
import json
import logging
from typing import Any

import pytest

from agentcompass._errors import EvalError
from agentcompass.benchmarks.bfcl.benchmark import BFCL, MULTI_TURN_CATEGORIES, load_category
from agentcompass.benchmarks.bfcl.multi_turn import (
    ADDITIONAL_FUNCTIONS_PROMPT,
    MAX_STEPS_PER_TURN,
    ApiState,
    MultiTurnSession,
    check_multi_turn,
    grade_multi_turn,
)
from agentcompass.interfaces import ComponentContext, EvalContext, HarnessResult
from agentcompass.tools import RECORD_KEY, ToolError

from ..bfcl_helpers import bfcl_data


def _entry(task_id: str) -> tuple[dict[str, Any], Any]:
    category = task_id.rsplit("_", 1)[0]
    return next((e, a) for e, a in load_category(bfcl_data(), category) if e["id"] == task_id)


def _assistant(calls: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    return {"role": "assistant", "content": "", "tool_calls": [
        {"id": f"c{i}", "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
        for i, (n, a) in enumerate(calls)]}


def _names(session: MultiTurnSession) -> set[str]:
    return {t["function"]["name"] for t in session.tools()}


async def test_held_out_functions_are_offered_at_their_turn_with_bfcls_message() -> None:
    entry, _ = _entry("multi_turn_miss_func_0")
    held = entry["missed_function"]
    (turn, docs), = held.items()
    session = MultiTurnSession(entry, entry["function"], held)
    hidden = {d["name"] for d in docs}
    assert hidden and not hidden & _names(session)
    assert session.initial_messages() == entry["question"][0]
    messages: list[dict[str, Any]] = []
    for n in range(1, int(turn) + 1):
        nxt = await session.next_user_message(messages)
        if n < int(turn):
            assert nxt == entry["question"][n][0]["content"]
    assert nxt == ADDITIONAL_FUNCTIONS_PROMPT
    assert hidden <= _names(session)
    while await session.next_user_message(messages) is not None:
        pass
    assert len(session.record()["turns"]) == len(entry["question"])


async def _step(session: MultiTurnSession, calls: list[tuple[str, Any]]) -> list[str]:
    """One assistant step through the session as the harness drives it: the results (ToolError as its text)."""
    message = _assistant([(n, a) for n, a in calls])
    for call, (_, a) in zip(message["tool_calls"], calls, strict=True):
        if isinstance(a, str):
            call["function"]["arguments"] = a
    await session.on_assistant(message)
    out = []
    for name, args in calls:
        try:
            out.append(await session.call(name, args if isinstance(args, dict) else {}))
        except ToolError as exc:
            out.append(f"ToolError: {exc}")
    return out


async def _one(session: MultiTurnSession, name: str, args: dict[str, Any]) -> str:
    return (await _step(session, [(name, args)]))[0]


async def test_calls_run_live_against_the_questions_state() -> None:
    entry, _ = _entry("multi_turn_base_0")
    session = MultiTurnSession(entry, entry["function"], {})
    assert await _one(session, "pwd", {}) == '{"current_working_directory": "/workspace"}'
    assert await _one(session, "mkdir", {"dir_name": "made_by_test"}) == "None"  # BFCL's str() of the result
    assert json.loads(await _one(session, "ls", {})) == {
        "current_directory_content": ["document", "archive", "made_by_test"]}
    assert "No such file or directory" in json.loads(await _one(session, "cd", {"folder": "nowhere"}))["error"]
    assert await _one(session, "cd", {"bad": 1}) == (
        "Error during execution: GorillaFileSystem.cd() got an unexpected keyword argument 'bad'")
    assert await _one(session, "not_a_method", {}) == "Error during execution: name 'not_a_method' is not defined"
    assert await _one(session, "exit", {}) == "Error during execution: Function call exit is not allowed."
    await session.aclose()


def _math_question() -> tuple[dict[str, Any], Any]:
    return next((e, a) for c in MULTI_TURN_CATEGORIES for e, a in load_category(bfcl_data(), c)
                if "MathAPI" in e["involved_classes"])


@pytest.mark.timeout(20)
async def test_a_huge_power_is_an_error_result_not_a_computation() -> None:
    entry, _ = _math_question()
    session = MultiTurnSession(entry, entry["function"], {})
    result = await _one(session, "power", {"base": 3, "exponent": 10**8})
    assert result.startswith("Error during execution:") and "bits" in result
    result = await _one(session, "round_number", {"number": 5, "decimal_places": -10**8})
    assert result.startswith("Error during execution: decimal_places")
    assert json.loads(await _one(session, "power", {"base": 3, "exponent": 4})) == {"result": 81}
    assert json.loads(await _one(session, "round_number", {"number": 1234, "decimal_places": -2})) == {
        "result": 1200}
    await session.aclose()


async def test_a_result_too_long_to_print_is_an_error_result_as_in_bfcl() -> None:
    entry, _ = _math_question()
    session = MultiTurnSession(entry, entry["function"], {})
    result = await _one(session, "power", {"base": 10, "exponent": 5000})
    assert result.startswith("Error during execution:") and "integer string conversion" in result
    assert (await _one(session, "square_root", {"number": 2, "precision": 10**6})).startswith(
        "Error during execution: precision")
    await session.aclose()


async def test_precision_set_by_a_call_does_not_leak() -> None:
    import mpmath
    entry, _ = _math_question()
    session = MultiTurnSession(entry, entry["function"], {})
    dps, prec = mpmath.mp.dps, decimal.getcontext().prec
    # the result is printed at the call's precision, as BFCL prints it
    assert await _one(session, "square_root", {"number": 2, "precision": 3}) == "{'result': Decimal('1.41')}"
    assert (await _one(session, "logarithm", {"value": 8, "base": 2, "precision": 3})).startswith(
        "{'result': mpf('3.0")
    # the same on the calling thread (grading runs there): nothing changes either
    ApiState({}, ["MathAPI"], False).execute("logarithm", (), {"value": 8, "base": 2, "precision": 2})
    ApiState({}, ["MathAPI"], False).execute("square_root", (), {"number": 2, "precision": 2})
    assert (mpmath.mp.dps, decimal.getcontext().prec) == (dps, prec)
    await session.aclose()


async def test_grading_past_its_deadline_is_a_timeout() -> None:
    entry, truth = _entry("multi_turn_base_0")
    with pytest.raises(TimeoutError):
        await grade_multi_turn(entry, [[] for _ in truth], truth, timeout_s=0)
    assert (await grade_multi_turn(entry, [[] for _ in truth], truth))["valid"] is False


async def test_a_call_past_its_deadline_ends_the_question() -> None:
    entry, _ = _entry("multi_turn_base_0")
    session = MultiTurnSession(entry, entry["function"], {})
    session.call_timeout_s = 0
    [result] = await _step(session, [("ls", {})])
    assert result.startswith("ToolError: the call took over 0s")
    assert session.finished() and session.record()["timed_out"] is True
    assert (await _one(session, "pwd", {})).startswith("ToolError:")  # nothing more runs in this question
    await session.aclose()


async def test_grading_past_its_deadline_is_an_eval_error() -> None:
    entry, truth = _entry("multi_turn_base_0")
    bench = BFCL({"task_ids": [entry["id"]], "categories": ["multi_turn_base"]},
                 ComponentContext(auto_install_dependencies=True))
    [task] = bench.load_tasks()
    result = HarnessResult(artifacts={RECORD_KEY: {"turns": [[] for _ in truth], "force_quit": False}})
    ctx = EvalContext(task, bench.prepare(task), result, {}, None, logging.getLogger("test"))
    assert (await bench.evaluate(ctx)).correct is False
    bench.grade_timeout_s = 0
    with pytest.raises(EvalError) as err:
        await bench.evaluate(ctx)
    assert err.value.extra["bfcl"]["error_type"] == "grading_timeout"


async def test_a_step_that_does_not_decode_runs_nothing_and_ends_the_turn() -> None:
    entry, _ = _entry("multi_turn_base_0")
    for bad in ('{"dir_name": "x"', "", "[1]", "null"):
        session = MultiTurnSession(entry, entry["function"], {})
        results = await _step(session, [("mkdir", {"dir_name": "temp"}), ("mkdir", bad)])
        assert all(r.startswith("ToolError:") for r in results), (bad, results)
        assert session.ends_turn()
        assert "temp" not in json.loads(await _one(session, "ls", {}))["current_directory_content"]
        assert not session.ends_turn()
        # kept as sent (BFCL keeps the raw step and its checker drops it) and not counted as a step
        assert session.record()["turns"][0][0] == [["mkdir", '{"dir_name": "temp"}'], ["mkdir", bad]]
        assert session.steps_in_turn == 1
        await session.aclose()


async def test_only_the_calls_executed_are_recorded() -> None:
    entry, _ = _entry("multi_turn_base_0")
    session = MultiTurnSession(entry, entry["function"], {})
    # the harness with parallel_tool_calls false: on_assistant sees three calls, only the first is executed
    await session.on_assistant(_assistant([("cd", {"folder": "document"}), ("mkdir", {"dir_name": "t"}),
                                           ("pwd", {})]))
    await session.call("cd", {"folder": "document"})
    assert session.record()["turns"] == [[[["cd", '{"folder": "document"}']]]]
    await session.aclose()


async def test_more_than_20_steps_in_a_turn_force_quit_the_question() -> None:
    entry, truth = _entry("multi_turn_base_0")
    session = MultiTurnSession(entry, entry["function"], {})
    for _ in range(MAX_STEPS_PER_TURN + 1):
        assert not session.finished()
        await _step(session, [("pwd", {})])
    record = session.record()
    assert record["force_quit"] and len(record["turns"][0]) == MAX_STEPS_PER_TURN + 1
    assert session.finished()  # the harness asks the model nothing more
    assert await session.next_user_message([]) is None
    verdict = check_multi_turn(entry, record["turns"], truth)
    assert verdict["error_type"] == "multi_turn:force_terminated"
    await session.aclose()
