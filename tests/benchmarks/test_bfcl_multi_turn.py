"""The multi-turn session over BFCL's real API classes: calls run live against the question's state, user turns
follow in order, held-out functions are offered at their turn with BFCL's message, and a turn with too many
steps force-quits the question (graded as force-terminated)."""

from __future__ import annotations

import json
from typing import Any

from agentcompass.benchmarks.bfcl import load_category
from agentcompass.benchmarks.bfcl_multi_turn import (
    ADDITIONAL_FUNCTIONS_PROMPT,
    MAX_STEPS_PER_TURN,
    MultiTurnSession,
    check_multi_turn,
)

from .bfcl_helpers import bfcl_data


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


async def test_calls_run_live_against_the_questions_state() -> None:
    entry, _ = _entry("multi_turn_base_0")
    session = MultiTurnSession(entry, entry["function"], {})
    assert await session.call("pwd", {}) == '{"current_working_directory": "/workspace"}'
    assert await session.call("mkdir", {"dir_name": "made_by_test"}) == "None"  # BFCL's str() of the result
    assert json.loads(await session.call("ls", {})) == {
        "current_directory_content": ["document", "archive", "made_by_test"]}
    assert "No such file or directory" in json.loads(await session.call("cd", {"folder": "nowhere"}))["error"]
    assert await session.call("cd", {"bad": 1}) == (
        "Error during execution: GorillaFileSystem.cd() got an unexpected keyword argument 'bad'")
    assert await session.call("not_a_method", {}) == "Error during execution: name 'not_a_method' is not defined"


async def test_more_than_20_steps_in_a_turn_force_quit_the_question() -> None:
    entry, truth = _entry("multi_turn_base_0")
    session = MultiTurnSession(entry, entry["function"], {})
    for _ in range(MAX_STEPS_PER_TURN + 1):
        await session.on_assistant(_assistant([("pwd", {})]))
    record = session.record()
    assert record["force_quit"] and len(record["turns"][0]) == MAX_STEPS_PER_TURN + 1
    assert await session.next_user_message([]) is None
    await session.on_assistant(_assistant([("pwd", {})]))  # after the quit nothing more is recorded or run
    assert len(session.record()["turns"][0]) == MAX_STEPS_PER_TURN + 1
    verdict = check_multi_turn(entry, record["turns"], truth)
    assert verdict["error_type"] == "multi_turn:force_terminated"
