"""The scripted model's policy and in-process client: matching, turns, sources, usage, speed."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from agentcompass._errors import ConfigError
from agentcompass.interfaces import ModelResponse
from agentcompass.models.scripted.model import (
    BUNDLED_SCRIPTS_DIR,
    DEFAULT_FALLBACK,
    ScriptedClient,
    ScriptedPolicy,
    bundled_entries,
)

SCRIPT = [
    {"match": "alpha", "turns": ["a1", "a2", "a3"]},
    {"match": "beta", "turns": ["b1"]},
]


def conv(first: str, assistant_turns: int = 0, later_user: str = "ok") -> list[dict[str, str]]:
    msgs = [{"role": "system", "content": "you are an agent"}, {"role": "user", "content": first}]
    for i in range(assistant_turns):
        msgs += [{"role": "assistant", "content": f"said {i}"}, {"role": "user", "content": later_user}]
    return msgs


def test_reply_is_the_turn_indexed_by_the_number_of_assistant_messages() -> None:
    policy = ScriptedPolicy({"script": SCRIPT, "bundled": False})
    assert [policy.reply_text(conv("task alpha", n)) for n in range(3)] == ["a1", "a2", "a3"]


def test_last_turn_repeats_after_the_script_runs_out() -> None:
    policy = ScriptedPolicy({"script": SCRIPT, "bundled": False})
    assert policy.reply_text(conv("alpha", 3)) == "a3"
    assert policy.reply_text(conv("alpha", 10)) == "a3"


def test_only_the_first_user_message_selects_the_entry() -> None:
    policy = ScriptedPolicy({"script": SCRIPT, "bundled": False})
    # later user messages mention alpha, but the task (first user message) is about beta
    assert policy.reply_text(conv("do beta", 2, later_user="alpha alpha")) == "b1"


def test_first_matching_entry_wins_in_script_order() -> None:
    policy = ScriptedPolicy({"script": [{"match": "x", "turns": ["first"]},
                                        {"match": "xy", "turns": ["second"]}], "bundled": False})
    assert policy.reply_text(conv("xy")) == "first"


def test_no_match_answers_the_default_fallback_and_a_custom_one() -> None:
    assert ScriptedPolicy({"bundled": False}).reply_text(conv("nothing")) == DEFAULT_FALLBACK
    assert "<submit></submit>" in DEFAULT_FALLBACK
    assert ScriptedPolicy({"bundled": False, "fallback": "nope"}).reply_text(conv("nothing")) == "nope"


def test_echo_replies_with_the_last_user_message() -> None:
    policy = ScriptedPolicy({"echo": True, "script": SCRIPT})
    assert policy.reply_text(conv("alpha", 2, later_user="say this back")) == "say this back"


def test_inline_script_wins_over_script_file_which_wins_over_bundled(tmp_path: Path) -> None:
    f = tmp_path / "s.json"
    f.write_text(json.dumps([{"match": "shared", "turns": ["from file"]},
                             {"match": "agentcompass scripted example", "turns": ["file beats bundled"]}]))
    policy = ScriptedPolicy({"script": [{"match": "shared", "turns": ["inline"]}], "script_file": str(f)})
    assert policy.reply_text(conv("the shared task")) == "inline"
    assert policy.reply_text(conv("agentcompass scripted example")) == "file beats bundled"


def test_bundled_scripts_are_used_by_default_and_can_be_turned_off() -> None:
    assert (BUNDLED_SCRIPTS_DIR / "example.json").is_file()
    assert any(e.match == "agentcompass scripted example" for e in bundled_entries())
    msgs = conv("please run the agentcompass scripted example")
    assert ScriptedPolicy().reply_text(msgs) != DEFAULT_FALLBACK
    assert ScriptedPolicy({"bundled": False}).reply_text(msgs) == DEFAULT_FALLBACK


def test_several_script_files_are_read_in_order(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text(json.dumps([{"match": "t", "turns": ["from a"]}]))
    (tmp_path / "b.json").write_text(json.dumps([{"match": "t", "turns": ["from b"]},
                                                 {"match": "only b", "turns": ["b!"]}]))
    policy = ScriptedPolicy({"script_file": [str(tmp_path / "a.json"), str(tmp_path / "b.json")],
                             "bundled": False})
    assert policy.reply_text(conv("t")) == "from a"
    assert policy.reply_text(conv("only b")) == "b!"


def test_an_edited_script_file_is_read_again(tmp_path: Path) -> None:
    f = tmp_path / "s.json"
    f.write_text(json.dumps([{"match": "t", "turns": ["old"]}]))
    assert ScriptedPolicy({"script_file": str(f), "bundled": False}).reply_text(conv("t")) == "old"
    f.write_text(json.dumps([{"match": "t", "turns": ["newer reply"]}]))
    assert ScriptedPolicy({"script_file": str(f), "bundled": False}).reply_text(conv("t")) == "newer reply"


def test_content_parts_are_read_as_text() -> None:
    policy = ScriptedPolicy({"script": SCRIPT, "bundled": False})
    msgs = [{"role": "user", "content": [{"type": "text", "text": "part "}, {"type": "text", "text": "beta"}]}]
    assert policy.reply_text(msgs) == "b1"


@pytest.mark.parametrize(("params", "field"), [
    ({"script": {"match": "a"}}, "script"),
    ({"script": [{"match": "a"}]}, "script"),
    ({"script": [{"match": "a", "turns": []}]}, "script"),
    ({"script": [{"match": 3, "turns": ["x"]}]}, "script"),
    ({"script_file": "/nonexistent/agentcompass/script.json"}, "script_file"),
    ({"script_file": 5}, "script_file"),
    ({"echo": "yes"}, "echo"),
    ({"bundled": 1}, "bundled"),
    ({"fallback": None}, "fallback"),
    ({"latency_s": -1}, "latency_s"),
])
def test_bad_script_params_raise_config_error_naming_the_field(params: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError) as info:
        ScriptedPolicy(params)
    assert info.value.field == field


def test_a_bad_scripted_param_says_what_is_allowed() -> None:
    with pytest.raises(ConfigError, match=r"'script_file' of model scripted must be a string, or a list of them, "
                                          r"got 5") as info:
        ScriptedPolicy({"script_file": 5, "temperature": "anything"})  # the real models' params stay unread
    assert info.value.field == "script_file"
    with pytest.raises(ConfigError, match=r"'latency_s' .* >= 0 and <= 2592000, got nan"):
        ScriptedPolicy({"latency_s": float("nan")})


def test_a_script_file_that_is_not_valid_json_raises_config_error(tmp_path: Path) -> None:
    f = tmp_path / "bad.json"
    f.write_text("[{not json")
    with pytest.raises(ConfigError, match=r"bad\.json") as info:
        ScriptedPolicy({"script_file": str(f)})
    assert info.value.field == "script_file"


def test_usage_counts_chars_over_four_with_a_minimum_of_one() -> None:
    policy = ScriptedPolicy({"script": [{"match": "", "turns": ["12345678"]}], "bundled": False})
    r = policy.respond([{"role": "user", "content": "x" * 40}, {"role": "assistant", "content": "y" * 4}])
    assert (r.content, r.prompt_tokens, r.completion_tokens) == ("12345678", 11, 2)
    tiny = ScriptedPolicy({"script": [{"match": "", "turns": ["."]}], "bundled": False}).respond(
        [{"role": "user", "content": ""}])
    assert (tiny.prompt_tokens, tiny.completion_tokens) == (1, 1)


async def test_scripted_client_returns_a_model_response_with_usage_of_one_call() -> None:
    client = ScriptedClient({"script": SCRIPT, "bundled": False}, model_id="scripted-test")
    r = await client.complete(conv("alpha", 1), tools=[{"type": "function"}], temperature=0.3)
    await client.aclose()
    assert isinstance(r, ModelResponse)
    assert client.model_id == "scripted-test"
    assert (r.content, r.finish_reason, r.tool_calls, r.raw) == ("a2", "stop", [], None)
    assert r.usage.calls == 1
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens > 0


async def test_scripted_client_latency_param_delays_each_call() -> None:
    client = ScriptedClient({"latency_s": 0.05})
    start = time.perf_counter()
    r = await client.complete(conv("x"))
    assert time.perf_counter() - start >= 0.05
    assert r.latency_s >= 0.05


async def test_scripted_client_is_cheap_with_many_entries_and_long_prompts() -> None:
    script = [{"match": f"task-{i:04d}", "turns": [f"reply {i}", "done"]} for i in range(2000)]
    client = ScriptedClient({"script": script, "bundled": False})
    prompt = "lorem ipsum " * 500 + "task-1999"
    msgs = conv(prompt, 3)
    n = 20_000
    start = time.perf_counter()
    for _ in range(n):
        r = await client.complete(msgs)
    elapsed = time.perf_counter() - start
    assert r.content == "done"
    # a linear scan of 2000 entries over 6 kB per call would take far longer than this
    assert elapsed < 30, f"{n} calls took {elapsed:.2f}s"  # a linear scan would take minutes


TOOL_SCRIPT = [{"match": "tools please", "turns": [
    {"reasoning": "Look first.", "tool_calls": [{"name": "bash", "arguments": {"cmd": "ls"}},
                                                {"name": "read", "arguments": "{\"path\": \"a\"}"}]},
    {"content": "Done.", "reasoning": "All seen."}]}]


def test_a_turn_can_call_tools_and_carry_reasoning() -> None:
    policy = ScriptedPolicy({"script": TOOL_SCRIPT, "bundled": False})
    first = policy.respond(conv("tools please"))
    assert (first.content, first.reasoning, first.turn) == ("", "Look first.", 0)
    assert [(c.id, c.name, c.arguments) for c in first.tool_calls] == [
        ("call_0_0", "bash", '{"cmd":"ls"}'), ("call_0_1", "read", '{"path": "a"}')]
    # an assistant turn with tool calls and its tool results count as one turn
    msgs = [*conv("tools please"), {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_0_0", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_0_0", "content": "a b"}]
    second = policy.respond(msgs)
    assert (second.content, second.reasoning, second.tool_calls, second.turn) == ("Done.", "All seen.", (), 1)
    assert first.completion_tokens == (len("Look first.") + len("bash") + 12 + len("read") + 13) // 4


async def test_the_in_process_client_returns_tool_calls_like_the_http_clients() -> None:
    from agentcompass.records import ToolCall

    client = ScriptedClient({"script": TOOL_SCRIPT, "bundled": False})
    r = await client.complete(conv("tools please"))
    assert r.content is None and r.reasoning == "Look first." and r.finish_reason == "tool_calls"
    assert r.tool_calls == [ToolCall(id="call_0_0", name="bash", arguments='{"cmd":"ls"}'),
                            ToolCall(id="call_0_1", name="read", arguments='{"path": "a"}')]


@pytest.mark.parametrize("turn", [{"content": "x", "tool": []}, {"tool_calls": [{"arguments": {}}]},
                                  {"tool_calls": [{"name": "f", "arguments": 3}]}])
def test_a_malformed_turn_object_is_a_config_error(turn: dict[str, object]) -> None:
    with pytest.raises(ConfigError) as info:
        ScriptedPolicy({"script": [{"match": "m", "turns": [turn]}], "bundled": False})
    assert info.value.field == "script" and "tool_calls" in str(info.value)


@pytest.mark.parametrize(("typo", "meant"), [("script_fle", "script_file"), ("latency", "latency_s"),
                                             ("scripts", "script"), ("echos", "echo")])
def test_a_misspelt_scripted_param_is_refused_with_the_param_it_resembles(typo: str, meant: str) -> None:
    with pytest.raises(ConfigError, match=rf"`{typo}`: did you mean `{meant}`") as info:
        ScriptedPolicy({typo: "x"})
    assert info.value.field == typo


def test_params_meant_for_real_models_are_still_ignored() -> None:
    policy = ScriptedPolicy({"temperature": 0.2, "max_tokens": 5, "top_p": 1, "seed": 1, "stream": True,
                             "reasoning_effort": "low", "timeout": 3, "retries": 2})
    assert policy.entries  # the bundled scripts, as without those params


NARROWED = [
    {"match": "task one", "system": "reply in JSON", "turns": ["json"]},
    {"match": "task one", "tool": "Bash", "turns": ["bash tool"]},
    {"match": "task one", "turns": ["plain"]},
]


def _with(system: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": system}, {"role": "user", "content": "do task one"}]


def test_an_entry_narrowed_to_a_harness_answers_only_its_conversations() -> None:
    policy = ScriptedPolicy({"script": NARROWED, "bundled": False})
    assert policy.respond(_with("you are an agent")).content == "plain"
    assert policy.respond(_with("Always reply in JSON.")).content == "json"
    assert policy.respond(_with("you are an agent"), frozenset({"Bash", "Read"})).content == "bash tool"
    assert policy.respond(_with("you are an agent"), frozenset({"bash"})).content == "plain"  # names match exactly
    # the system text is what comes before the first user message: a later system message narrows nothing
    later = [*_with("agent"), {"role": "assistant", "content": "x"}, {"role": "system", "content": "reply in JSON"}]
    assert policy.respond(later).content == "plain"


async def test_the_client_and_the_server_narrow_by_the_tools_the_request_offers() -> None:
    from tests.fixtures_scripted import running_scripted_server

    client = ScriptedClient({"script": NARROWED, "bundled": False})
    tools = [{"type": "function", "function": {"name": "Bash", "parameters": {"type": "object"}}}]
    assert (await client.complete(_with("agent"), tools=tools)).content == "bash tool"
    async with running_scripted_server({"script": NARROWED, "bundled": False}) as server:
        import httpx

        async with httpx.AsyncClient() as http:
            body = {"model": "m", "max_tokens": 100, "messages": [{"role": "user", "content": "do task one"}],
                    "tools": [{"name": "Bash", "input_schema": {"type": "object"}}]}
            answer = (await http.post(f"{server.base_url}/messages", json=body, timeout=30,
                                      headers={"anthropic-version": "2023-06-01"})).json()
    assert answer["content"][0]["text"] == "bash tool"  # Anthropic's tool shape: {"name": ...}


def test_the_bundled_harness_scripts_come_before_the_generic_ones_and_user_scripts_before_both() -> None:
    entries = bundled_entries()
    narrowed = [i for i, e in enumerate(entries) if e.system is not None or e.tool is not None]
    assert narrowed and narrowed == list(range(len(narrowed)))  # all of them first
    hello = "Task: files/hello_world\n\nCreate a file named hello.txt"
    mini = [{"role": "system", "content": "Reply with one ```mswea_bash_command block."},
            {"role": "user", "content": hello}]
    policy = ScriptedPolicy({})
    assert "mswea_bash_command" in policy.respond(mini).content  # mini-swe-agent's own script
    assert "```bash" in policy.respond([{"role": "user", "content": hello}]).content  # shell_agent's
    mine = ScriptedPolicy({"script": [{"match": "Task: files/hello_world", "turns": ["mine"]}]})
    assert mine.respond(mini).content == "mine"  # a user's script wins over every bundled one
