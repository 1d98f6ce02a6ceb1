"""Hostile tool calls in BFCL: deeply nested arguments are the model's mistake (graded incorrect with the reason in
single-turn; an error result the model sees in multi-turn, dropped in grading), never an eval_error or a
harness_crash; a multi-turn call that runs away is cut at the engine's deadline by killing its worker process,
answered with an error, while the event loop goes on."""

from __future__ import annotations

import json
import logging
import os
import signal
from pathlib import Path
from typing import Any

import pytest

import agentcompass
from agentcompass.benchmarks.bfcl.benchmark import BFCL, load_category
from agentcompass.benchmarks.bfcl.multi_turn import MultiTurnSession, check_multi_turn
from agentcompass.interfaces import ComponentContext, EvalContext, HarnessResult
from agentcompass.tools import RECORD_KEY, ToolError
from tests.loop_ticks import loop_ticks

from ...run_details import details_by_task
from ..bfcl_helpers import bfcl_data

pytestmark = pytest.mark.timeout(240)

DEEP = '{"dir_name": ' + "[" * 5000 + "]" * 5000 + "}"


def _entry(task_id: str) -> tuple[dict[str, Any], Any]:
    category = task_id.rsplit("_", 1)[0]
    return next((e, a) for e, a in load_category(bfcl_data(), category) if e["id"] == task_id)


def _bench(task_id: str, **params: Any) -> BFCL:
    return BFCL({"task_ids": [task_id], "categories": [task_id.rsplit("_", 1)[0]], **params},
                ComponentContext(auto_install_dependencies=True))


async def _evaluate(bench: BFCL, record: dict[str, Any]) -> Any:
    [task] = bench.load_tasks()
    ctx = EvalContext(task, bench.prepare(task), HarnessResult(artifacts={RECORD_KEY: record}), {}, None,
                      logging.getLogger("test"))
    return await bench.evaluate(ctx)


@pytest.mark.parametrize("depth", [70, 5000])
async def test_single_turn_deeply_nested_arguments_are_graded_incorrect_saying_why(depth: int) -> None:
    bench = _bench("simple_python_0")
    name = bench.load_tasks()[0].input["entry"]["function"][0]["name"]
    deep = '{"base": ' + "[" * depth + "]" * depth + "}"
    result = await _evaluate(bench, {"answer": {"content": "", "tool_calls": [[name, deep]]}})
    assert result.correct is False
    verdict = result.extra["bfcl"]
    assert verdict["error_type"] == "ast_decoder:decoder_failed"
    assert "nested deeper than 64 levels" in verdict["error"][0]


def _assistant(calls: list[tuple[str, str]]) -> dict[str, Any]:
    return {"role": "assistant", "content": "", "tool_calls": [
        {"id": f"c{i}", "type": "function", "function": {"name": n, "arguments": a}} for i, (n, a) in enumerate(calls)]}


async def test_multi_turn_deeply_nested_arguments_are_an_error_the_model_sees() -> None:
    entry, truth = _entry("multi_turn_base_0")
    session = MultiTurnSession(entry, entry["function"], {})
    try:
        await session.on_assistant(_assistant([("mkdir", '{"dir_name": "temp"}'), ("mkdir", DEEP)]))
        results = []
        for name in ("mkdir", "mkdir"):
            with pytest.raises(ToolError) as err:
                await session.call(name, {})
            results.append(str(err.value))
        assert all("nested deeper than 64 levels" in r for r in results), results
        assert session.ends_turn()
        # nothing of the step ran
        await session.on_assistant(_assistant([("ls", "{}")]))
        assert "temp" not in json.loads(await session.call("ls", {}))["current_directory_content"]
        # grading drops the step, as BFCL drops a step that does not decode
        verdict = check_multi_turn(entry, [session.record()["turns"][0]] + [[] for _ in truth[1:]], truth)
        assert verdict["valid"] is False and verdict["error_type"].startswith("multi_turn:")
    finally:
        await session.aclose()


def test_multi_turn_deeply_nested_arguments_end_to_end_are_no_harness_crash(tmp_path: Path) -> None:
    entry, truth = _entry("multi_turn_base_0")
    first = next(m["content"] for m in entry["question"][0] if m["role"] == "user")
    turns = [{"tool_calls": [{"name": "mkdir", "arguments": DEEP}]}] + ["done"] * (2 * len(truth))
    out = agentcompass.run_evaluation(
        "bfcl", "tool_agent", "scripted", "local", benchmark_params={"task_ids": [entry["id"]]},
        model_params={"script": [{"match": first, "turns": turns}], "bundled": False}, results_dir=str(tmp_path),
        progress="none", auto_install_dependencies=True)
    assert out.status == "completed", out.error
    attempt = details_by_task(out.run_dir)[entry["id"]].attempts["1"]
    assert attempt.status == "completed", (attempt.status, attempt.error_kind, attempt.error)
    assert attempt.trajectory is not None
    assert "nested" in (attempt.trajectory.steps[0].observation or "")  # said by the harness or the session
    assert attempt.correct is False


async def test_a_multi_turn_call_that_runs_away_is_killed_at_the_deadline_and_answered() -> None:
    entry, _ = _entry("multi_turn_base_0")
    # a deadline a healthy call meets on a loaded machine too (the worker is a process of its own)
    session = MultiTurnSession(entry, entry["function"], {}, call_timeout_s=8.0)
    try:
        await session.on_assistant(_assistant([("pwd", "{}")]))
        assert "workspace" in await session.call("pwd", {})
        worker = session.worker
        assert worker.pid is not None
        # the worker stops answering, as a call computing without end does: only the engine's deadline ends it
        os.kill(worker.pid, signal.SIGSTOP)
        await session.on_assistant(_assistant([("ls", "{}")]))
        async with loop_ticks() as ticks:
            with pytest.raises(ToolError, match="took over 8s; the question ends here"):
                await session.call("ls", {})
        assert ticks.count > 0  # the loop ran other work while the call was waited for
        assert session.finished() and session.record()["timed_out"] is True
        await session.aclose()
        assert worker.returncode == -signal.SIGKILL  # killed, not left running
    finally:
        await session.aclose()


def test_the_call_deadline_is_a_recorded_param(tmp_path: Path) -> None:
    bench = _bench("multi_turn_base_0", call_timeout_s=2.5)
    [task] = bench.load_tasks()
    session = bench.tool_session(task, None)  # type: ignore[arg-type]  # bfcl's session does not read the context
    assert isinstance(session, MultiTurnSession) and session.call_timeout_s == 2.5
    with pytest.raises(agentcompass.ConfigError, match="call_timeout_s"):
        _bench("multi_turn_base_0", call_timeout_s=0)


@pytest.mark.timeout(120)
async def test_a_single_turn_answer_that_makes_the_checker_run_away_is_cut_and_graded_incorrect() -> None:
    # a JavaScript array written so the converter's regex backtracks exponentially (BFCL's own pattern; hours)
    bench = _bench("simple_javascript_2")
    bench.grade_timeout_s = 3
    args = {"status": "[[]" + ",[]" * 40 + "x", "filepath": "'a.log'", "encoding": "'utf-8'",
            "processFunction": "f"}  # checked in this order: the status first
    result = await _evaluate(bench, {"answer": {"content": "", "tool_calls": [
        ["extractLastTransactionId", json.dumps(args)]]}})
    assert result.correct is False
    assert result.extra["bfcl"]["error_type"] == "ast_checker:timeout"
