"""The scripted server's Responses wire for Codex: freeform (``custom``) tool calls out and their outputs back in,
and Codex's context message before the task read as part of the first user turn."""

from __future__ import annotations

import pytest

from agentcompass.models.scripted import wire
from agentcompass.models.scripted.model import ScriptedPolicy

PATCH = "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch\n"
BODY = {"model": "m", "stream": True, "tools": [
    {"type": "function", "name": "exec_command", "parameters": {"type": "object"}},
    {"type": "custom", "name": "apply_patch", "format": {"type": "grammar", "syntax": "lark", "definition": "x"}}],
    "input": [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "be good"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<environment_context/>"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Write a.txt please"}]}]}
SCRIPT = [{"match": "Write a.txt", "turns": [
    {"tool_calls": [{"name": "apply_patch", "arguments": PATCH}, {"name": "exec_command", "arguments": {"cmd": "ls"}}]},
    "done"]}]


def test_the_task_after_a_context_message_is_matched_and_a_custom_tool_call_carries_its_raw_input() -> None:
    policy = ScriptedPolicy({"script": SCRIPT, "bundled": False})
    messages = wire.request_messages("openai-responses", BODY)
    assert [m["role"] for m in messages] == ["developer", "user"]
    assert messages[1]["content"] == "<environment_context/>\n\nWrite a.txt please"
    reply = policy.respond(messages)
    out = wire.responses_json(reply, "m", "resp_x", 0, BODY)["output"]
    assert [(o["type"], o["name"]) for o in out] == [("custom_tool_call", "apply_patch"),
                                                    ("function_call", "exec_command")]
    assert out[0]["input"] == PATCH and out[0]["call_id"] == "call_0_0" and "arguments" not in out[0]
    events = list(wire.responses_events(reply, "m", "resp_x", 0, BODY))
    deltas = "".join(e["delta"] for k, e in events if k == "response.custom_tool_call_input.delta")
    assert deltas == PATCH
    (done,) = [e for k, e in events if k == "response.custom_tool_call_input.done"]
    assert done["input"] == PATCH and done["item_id"] == out[0]["id"]

    # the next request carries both calls and their outputs: one assistant turn, answered; the script goes on
    follow = {**BODY, "input": [*BODY["input"], *out,
                                {"type": "custom_tool_call_output", "call_id": "call_0_0", "output": "Success."},
                                {"type": "function_call_output", "call_id": "call_0_1", "output": "a.txt"}]}
    messages = wire.request_messages("openai-responses", follow)
    assert [m["role"] for m in messages] == ["developer", "user", "assistant", "tool", "tool"]
    assert messages[2]["tool_calls"][0]["function"] == {"name": "apply_patch", "arguments": PATCH}
    assert policy.respond(messages).content == "done"


def test_an_unanswered_custom_tool_call_is_refused_like_the_real_api() -> None:
    body = {**BODY, "input": [*BODY["input"], {"type": "custom_tool_call", "call_id": "c1", "name": "apply_patch",
                                               "input": PATCH}]}
    with pytest.raises(wire.WireError, match="c1"):
        wire.request_messages("openai-responses", body)
