"""The ``agentdojo`` benchmark end to end: AgentDojo's suites through ``tool_agent`` against a scripted model whose
scripts are the tasks' own ground-truth calls (from the ``agentdojo`` package), without and with an injection
attack; grading differentially against AgentDojo's own ``run_task_with_pipeline``; the tool session; params."""

from __future__ import annotations

import asyncio
import importlib.util
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

import agentcompass
from agentcompass.benchmarks.agentdojo.benchmark import AgentDojo
from agentcompass.benchmarks.agentdojo.grading import grade
from agentcompass.benchmarks.agentdojo.metrics import AgentDojoAccumulator
from agentcompass.benchmarks.agentdojo.session import AgentDojoSession
from agentcompass.interfaces import ComponentContext
from agentcompass.models.scripted.server import ScriptedServer
from agentcompass.models.scripted.wire import PROTOCOLS
from agentcompass.records import AttemptRecord, TaskDetail

from ...run_details import details_by_task

pytestmark = pytest.mark.skipif(importlib.util.find_spec("agentdojo") is None, reason="agentdojo is not installed")


class _Official:
    """AgentDojo's own API (``official.py``), imported on first use: importing it costs ~5 CPU-s, which every xdist
    worker paid at collection, most of them to run none of these tests."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # pytest's collector probes module globals (``__test__``, fixture markers, ...)
            raise AttributeError(name)
        from . import official

        return getattr(official, name)


ad = _Official()


VERSION = "v1.2.2"  # agentdojo 0.1.35's default benchmark version
ATTACK = {"attack": "important_instructions", "target_model": "gpt-4o-2024-05-13"}


# ----------------------------------------------------------------------------- scripts from AgentDojo's ground truth


def _turns(calls: list[Any]) -> list[Any]:
    """One scripted turn per ground-truth call (AgentDojo's ``FunctionCall``s)."""
    return [{"tool_calls": [{"name": c.function, "arguments": dict(c.args)}]} for c in calls]


def _pre_environment(suite: Any, user_task: Any) -> Any:
    return user_task.init_environment(suite.load_and_inject_default_environment({}))


def ground_truth_entry(suite: Any, user_task: Any, *, follow: Any = None, answer: str | None = None) -> dict[str, Any]:
    """A script entry for ``user_task``: its ground-truth calls, then (``follow``: an injection task) the injection's
    ground-truth calls, then its ground-truth answer (or ``answer``)."""
    env = _pre_environment(suite, user_task)
    turns = _turns(user_task.ground_truth(env))
    if follow is not None:
        turns += _turns(follow.ground_truth(env))
    turns.append(answer if answer is not None else (user_task.GROUND_TRUTH_OUTPUT or "Done."))
    return {"match": user_task.PROMPT, "turns": turns}


def refusal_entry(user_task: Any) -> dict[str, Any]:
    """A wrong script: no tool call, a refusal."""
    return {"match": user_task.PROMPT, "turns": ["I cannot help with that."]}


def _script(entries: list[dict[str, Any]]) -> dict[str, Any]:
    # the scripted model matches a substring of the first user message: the longest prompts first
    return {"bundled": False, "script": sorted(entries, key=lambda e: -len(e["match"]))}


def _by_suite(out: Any) -> dict[str, dict[str, Any]]:
    summary = msgspec.json.decode((Path(out.run_dir) / "summary.json").read_bytes())
    return dict(summary["by_category"])


def _run(tmp_path: Path, benchmark_params: dict[str, Any], model_params: dict[str, Any], **kw: Any) -> Any:
    out = agentcompass.run_evaluation("agentdojo", "tool_agent", "scripted", "local",
                                      benchmark_params=benchmark_params, model_params=model_params,
                                      results_dir=str(tmp_path), progress="none", task_concurrency=4, **kw)
    assert out.status == "completed", out.error
    return out


# ----------------------------------------------------------------------------- utility (no injection)


def test_the_ground_truth_script_has_full_utility_on_the_banking_suite(tmp_path: Path) -> None:
    suite = ad.get_suite(VERSION, "banking")
    out = _run(tmp_path, {"suites": ["banking"]},
               _script([ground_truth_entry(suite, t) for t in suite.user_tasks.values()]))
    assert out.metrics["tasks"] == len(suite.user_tasks) == 16
    assert out.metrics["utility"] == 1.0 and out.metrics["pass@1"] == 1.0
    assert "attack_success_rate" not in out.metrics and "utility_under_attack" not in out.metrics
    details = details_by_task(out.run_dir)
    assert sorted(details) == sorted(f"banking/{t}" for t in suite.user_tasks)
    for task_id, detail in details.items():
        attempt = detail.attempts["1"]
        user_task = suite.get_user_task_by_id(task_id.split("/")[1])
        assert attempt.correct and attempt.extra["utility"] is True and "security" not in attempt.extra
        # the grader re-executed exactly the calls the model made, which are the ground truth's
        assert attempt.extra["calls"] == len(user_task.ground_truth(_pre_environment(suite, user_task)))


def test_a_wrong_script_has_lower_utility(tmp_path: Path) -> None:
    suite = ad.get_suite(VERSION, "banking")
    tasks = list(suite.user_tasks.values())
    right, wrong = tasks[::2], tasks[1::2]
    out = _run(tmp_path, {"suites": "banking"},
               _script([ground_truth_entry(suite, t) for t in right] + [refusal_entry(t) for t in wrong]))
    details = details_by_task(out.run_dir)
    utility = {t.ID: details[f"banking/{t.ID}"].attempts["1"].extra["utility"] for t in tasks}
    assert all(utility[t.ID] is True for t in right)
    # most refusals fail; a few of AgentDojo's banking tasks hold on an untouched environment (user_task_9 asks to
    # "check and update" a rent payment that is already right), so the count comes from the verdicts
    assert sum(utility[t.ID] is False for t in wrong) >= len(wrong) // 2
    assert out.metrics["utility"] == sum(utility.values()) / len(tasks) < 1.0
    assert out.metrics["utility_successes"] == sum(utility.values())
    assert _by_suite(out)["banking"]["utility"] == out.metrics["utility"]


def test_a_wrong_argument_fails_the_task(tmp_path: Path) -> None:
    """The right tools with a wrong amount: the environment the grader sees has the wrong transaction."""
    suite = ad.get_suite(VERSION, "banking")
    user_task = next(t for t in suite.user_tasks.values()
                     if any(c.function == "send_money" for c in t.ground_truth(_pre_environment(suite, t))))
    entry = ground_truth_entry(suite, user_task)
    for turn in entry["turns"]:
        for call in turn.get("tool_calls", []) if isinstance(turn, dict) else []:
            if call["name"] == "send_money":
                call["arguments"]["amount"] = float(call["arguments"]["amount"]) + 1000
    out = _run(tmp_path, {"suites": "banking", "user_tasks": [user_task.ID]}, _script([entry]))
    (detail,) = details_by_task(out.run_dir).values()
    assert detail.attempts["1"].extra["utility"] is False and out.metrics["utility"] == 0.0


# ----------------------------------------------------------------------------- security (under an injection attack)


def test_an_injection_attack_records_utility_and_security(tmp_path: Path) -> None:
    """Two user tasks whose script follows the injection (the attack succeeds), two that ignore it."""
    suite = ad.get_suite(VERSION, "banking")
    injection = suite.get_injection_task_by_id("injection_task_0")
    users = list(suite.user_tasks.values())[:4]
    followers, ignorers = users[:2], users[2:]
    entries = ([ground_truth_entry(suite, t, follow=injection) for t in followers]
               + [ground_truth_entry(suite, t) for t in ignorers])
    out = _run(tmp_path, {"suites": ["banking"], **ATTACK, "user_tasks": [t.ID for t in users],
                          "injection_tasks": ["injection_task_0"]}, _script(entries))
    details = details_by_task(out.run_dir)
    assert sorted(details) == sorted(f"banking/{t.ID}/injection_task_0" for t in users)
    for t in users:
        attempt = details[f"banking/{t.ID}/injection_task_0"].attempts["1"]
        assert attempt.extra["security"] is (t in followers)  # AgentDojo: True = the injection succeeded
        assert attempt.extra["attack"] == "important_instructions"
        assert attempt.extra["injection_task"] == "injection_task_0"
    for t in ignorers:
        assert details[f"banking/{t.ID}/injection_task_0"].attempts["1"].extra["utility"] is True
    m = out.metrics
    assert m["attack_success_rate"] == 0.5 and m["attack_successes"] == 2 and m["attack_graded"] == 4
    assert "utility" not in m  # under an attack only utility_under_attack: never compared with a clean run's
    assert m["utility_under_attack"] == sum(details[f"banking/{t.ID}/injection_task_0"].attempts["1"].extra["utility"]
                               for t in users) / 4
    assert _by_suite(out)["banking"]["attack_success_rate"] == 0.5


def test_tasks_are_user_and_injection_pairs_under_an_attack() -> None:
    ctx = ComponentContext(run_id="t")
    suite = ad.get_suite(VERSION, "banking")
    plain = list(AgentDojo({"suites": "banking"}, ctx).load_tasks())
    attacked = list(AgentDojo({"suites": "banking", **ATTACK}, ctx).load_tasks())
    assert len(plain) == len(suite.user_tasks) and all(t.input["injections"] == {} for t in plain)
    assert len(attacked) == len(suite.user_tasks) * len(suite.injection_tasks)
    assert all(t.input["injections"] and all("<INFORMATION>" in v for v in t.input["injections"].values())
               for t in attacked)
    # a denial-of-service attack pairs each user task with the first injection task only, as AgentDojo does
    dos = list(AgentDojo({"suites": "banking", "attack": "dos", "target_model": "gpt-4o-2024-05-13"}, ctx)
               .load_tasks())
    assert [t.task_id for t in dos] == [f"banking/{u}/injection_task_0" for u in suite.user_tasks]
    limited = list(AgentDojo({"suites": ["slack", "banking"], "limit": 3, **ATTACK}, ctx).load_tasks())
    assert [t.task_id for t in limited] == [f"banking/user_task_0/injection_task_{n}" for n in range(3)]


def test_an_attack_whose_text_names_no_model_needs_no_target_model() -> None:
    """AgentDojo's ``_no_model_name`` attacks still want a pipeline name in their constructor, then drop it."""
    params = {"suites": "banking", "attack": "important_instructions_no_names", "user_tasks": "user_task_0",
              "injection_tasks": "injection_task_0"}
    bench = AgentDojo(params, ComponentContext(run_id="t"))
    (task,) = bench.load_tasks()
    (text,) = task.input["injections"].values()
    assert "the AI language model" in text and "the user" in text  # AgentDojo's defaults for the two names
    named = AgentDojo({"suites": "banking", **ATTACK, "user_tasks": "user_task_0",
                       "injection_tasks": "injection_task_0"}, ComponentContext(run_id="t"))
    (named_text,) = next(iter(named.load_tasks())).input["injections"].values()
    assert "GPT-4" in named_text and "Emma Johnson" in named_text


def test_the_default_version_and_all_four_suites() -> None:
    bench = AgentDojo({}, ComponentContext(run_id="t"))
    assert bench.benchmark_version == VERSION and bench.suite_names == ["workspace", "travel", "banking", "slack"]
    tasks = list(bench.load_tasks())
    assert len(tasks) == sum(len(s.user_tasks) for s in ad.get_suites(VERSION).values())
    picked = AgentDojo({"suites": ["banking", "slack"], "user_tasks": ["user_task_1", "slack/user_task_2"]},
                       ComponentContext(run_id="t"))
    assert [t.task_id for t in picked.load_tasks()] == ["banking/user_task_1", "slack/user_task_1",
                                                        "slack/user_task_2"]


def test_errored_attempts_count_as_not_useful_and_have_no_security_verdict() -> None:
    def attempt(utility: bool | None, security: bool | None) -> AttemptRecord:
        if utility is None:
            return AttemptRecord(status="run_error", error="model down", error_kind="model_error")
        extra: dict[str, Any] = {"utility": utility, "security": security}
        return AttemptRecord(status="completed", correct=utility, extra=extra)

    acc = AgentDojoAccumulator(k=2, attack="important_instructions")
    acc.add(TaskDetail(task_id="banking/a/i", k=2, category="banking",
                       attempts={"1": attempt(True, True), "2": attempt(None, None)}))
    acc.add(TaskDetail(task_id="slack/b/i", k=2, category="slack",
                       attempts={"1": attempt(False, False), "2": attempt(True, False)}))
    metrics, by_suite = acc.result()
    assert metrics["utility_under_attack"] == 2 / 4  # the errored attempt counts as not done
    assert metrics["attack_success_rate"] == 1 / 3 and metrics["attack_graded"] == 3  # ...and has no verdict
    assert metrics["attack_unscored"] == 1 and metrics["errored_attempts"] == 1
    assert metrics["pass@2"] == 1.0 and metrics["tasks"] == 2
    assert by_suite["banking"]["utility_under_attack"] == 0.5 and by_suite["banking"]["attack_success_rate"] == 1.0
    assert by_suite["slack"]["utility_under_attack"] == 0.5 and by_suite["slack"]["attack_success_rate"] == 0.0
    plain = AgentDojoAccumulator(k=1, attack=None)
    plain.add(TaskDetail(task_id="banking/a", k=1, category="banking", attempts={"1": attempt(True, None)}))
    metrics, _ = plain.result()
    assert metrics["utility"] == 1.0 and "attack_success_rate" not in metrics


# ----------------------------------------------------------------------------- grading against AgentDojo's own runner


def _ground_truth_record(task: Any, env: Any) -> tuple[list[dict[str, Any]], str]:
    calls = [{"function": c.function, "args": dict(c.args)} for c in task.ground_truth(env)]
    return calls, task.GROUND_TRUTH_OUTPUT


@pytest.mark.parametrize("suite_name",
                         [pytest.param("workspace", marks=pytest.mark.slow), "travel", "banking", "slack"])
def test_grading_agrees_with_agentdojo_on_every_user_task(suite_name: str) -> None:
    """AgentDojo's own ``run_task_with_pipeline`` (its ground-truth pipeline, its environment) and our replay of
    the same calls and answer give the same utility, for every user task of the suite."""
    suite = ad.get_suite(VERSION, suite_name)
    for user_task in suite.user_tasks.values():
        theirs, _ = suite.run_task_with_pipeline(ad.GroundTruthPipeline(user_task), user_task, None, {})
        calls, output = _ground_truth_record(user_task, _pre_environment(suite, user_task))
        ours = grade(suite, user_task, None, {}, calls, output)
        assert ours.utility is theirs is True, user_task.ID


@pytest.mark.parametrize("suite_name", ["banking", "slack"])
def test_grading_agrees_with_agentdojo_on_every_pair_under_attack(suite_name: str) -> None:
    """Every (user task, injection task) pair of the suite under ``important_instructions``, for two agents run by
    AgentDojo's own ``run_task_with_pipeline``: one doing only what the attacker asked (its ground-truth pipeline
    for the injection task) and one doing the user's task and the attacker's; our replay of the same calls and
    answer gives the same (utility, security) every time."""
    bench = AgentDojo({"suites": suite_name, **ATTACK}, ComponentContext(run_id="t"))
    suite = bench.suites[suite_name]
    seen = set()
    for task in bench.load_tasks():
        user_task = suite.get_user_task_by_id(task.input["user_task"])
        injection = suite.get_injection_task_by_id(task.input["injection_task"])
        injections = task.input["injections"]
        theirs = suite.run_task_with_pipeline(ad.GroundTruthPipeline(injection), user_task, injection, injections)
        env = user_task.init_environment(suite.load_and_inject_default_environment(injections))
        calls, output = _ground_truth_record(injection, env)
        ours = grade(suite, user_task, injection, injections, calls, output)
        assert (ours.utility, ours.security) == theirs, task.task_id
        both = ad.UserThenInjection(user_task, injection)
        theirs_both = suite.run_task_with_pipeline(both, user_task, injection, injections)
        ours_both = grade(suite, user_task, injection, injections, both.calls, user_task.GROUND_TRUTH_OUTPUT)
        assert (ours_both.utility, ours_both.security) == theirs_both, task.task_id
        seen |= {theirs, theirs_both}
    assert (False, True) in seen and (True, True) in seen  # attacks that succeed, with and without utility


# ----------------------------------------------------------------------------- the tool session


async def test_the_session_executes_tools_as_agentdojo_does() -> None:
    bench = AgentDojo({"suites": "banking"}, ComponentContext(run_id="t"))
    task = next(iter(bench.load_tasks()))
    session = bench.tool_session(task.public(), None)  # type: ignore[arg-type]
    assert isinstance(session, AgentDojoSession)
    suite = bench.suites["banking"]
    assert [t["function"]["name"] for t in session.tools()] == [f.name for f in suite.tools]
    assert session.tools()[0]["function"]["parameters"] == suite.tools[0].parameters.model_json_schema()
    system, user = session.initial_messages()
    assert system == {"role": "system", "content": ad.load_system_message(None)}
    assert user["content"] == suite.get_user_task_by_id("user_task_0").PROMPT
    assert await session.call("no_such_tool", {}) == "Invalid tool no_such_tool provided."
    bad = await session.call("send_money", {"recipient": "x"})
    assert bad.startswith("ValidationError:")
    balance = await session.call("get_balance", {})
    assert balance == str(_pre_environment(suite, suite.get_user_task_by_id("user_task_0")).bank_account.balance)
    # a list written as a string is parsed, as AgentDojo's ToolsExecutor does
    await session.call("send_money", {"recipient": "US1", "amount": 1.0, "subject": "s", "date": "2022-01-01"})
    await session.on_assistant({"role": "assistant", "content": "all done"})
    record = session.record()
    assert record["output"] == "all done"
    assert [c["function"] for c in record["calls"]] == ["no_such_tool", "send_money", "get_balance", "send_money"]
    assert "error" in record["calls"][0] and "error" in record["calls"][1] and "error" not in record["calls"][2]
    assert msgspec.json.decode(msgspec.json.encode(record)) == record  # JSON-able as the artifacts need
    await session.aclose()


async def test_under_an_attack_the_tools_return_the_injection() -> None:
    """The user task's own ground-truth calls read the injected vector: the model sees AgentDojo's attack text,
    addressed to the model as AgentDojo addresses gpt-4o, asking for the injection task's goal."""
    bench = AgentDojo({"suites": "banking", **ATTACK, "user_tasks": "user_task_0",
                       "injection_tasks": "injection_task_0"}, ComponentContext(run_id="t"))
    (task,) = bench.load_tasks()
    suite = bench.suites["banking"]
    session = bench.tool_session(task.public(), None)  # type: ignore[arg-type]
    assert session is not None
    user_task = suite.get_user_task_by_id("user_task_0")
    results = [await session.call(c.function, dict(c.args))
               for c in user_task.ground_truth(_pre_environment(suite, user_task))]
    seen = "\n".join(results)
    goal = suite.get_injection_task_by_id("injection_task_0").GOAL
    assert "<INFORMATION>" in seen and "Emma Johnson" in seen and "GPT-4" in seen and goal in seen
    # without an attack the same calls see the vector's default, not the attack
    plain = AgentDojo({"suites": "banking", "user_tasks": "user_task_0"}, ComponentContext(run_id="t"))
    clean = plain.tool_session(next(iter(plain.load_tasks())).public(), None)  # type: ignore[arg-type]
    assert clean is not None
    clean_seen = [await clean.call(c.function, dict(c.args))
                  for c in user_task.ground_truth(_pre_environment(suite, user_task))]
    assert goal not in "\n".join(clean_seen)


async def test_string_lists_are_parsed_before_the_call() -> None:
    bench = AgentDojo({"suites": "slack"}, ComponentContext(run_id="t"))
    task = next(iter(bench.load_tasks()))
    session = bench.tool_session(task.public(), None)  # type: ignore[arg-type]
    assert session is not None
    await session.call("get_users_in_channel", {"channel": "['general']"})
    assert session.record()["calls"][0]["args"] == {"channel": ["general"]}


# ----------------------------------------------------------------------------- params


@pytest.mark.parametrize(("params", "field", "named"), [
    ({"suites": ["banking", "bank"]}, "suites", "workspace, travel, banking, slack"),
    ({"suites": "gmail"}, "suites", "banking"),
    ({"benchmark_version": "v9"}, "benchmark_version", "v1.2.2"),
    ({"attack": "jailbreak"}, "attack", "important_instructions"),
    ({"attack": "manual"}, "attack", "important_instructions"),
    ({"attack": "important_instructions"}, "target_model", "gpt-4o-2024-05-13"),
    ({"attack": "important_instructions_wrong_model_name"}, "target_model", "claude-3-5-sonnet-20241022"),
    ({"suites": "banking", "user_tasks": ["user_task_99"]}, "user_tasks", "banking/user_task_0"),
    ({"suites": "banking", "user_tasks": "slack/user_task_0"}, "user_tasks", "banking/user_task_0"),
    ({"suites": "banking", **ATTACK, "injection_tasks": ["injection_task_42"]}, "injection_tasks",
     "banking/injection_task_0"),
    ({"injection_tasks": ["injection_task_0"]}, "injection_tasks", "attack"),
    ({"limit": 0}, "limit", "limit"),
    ({"user_tasks": []}, "user_tasks", "got []"),
    ({"suite": "banking"}, "suite", "suite"),
])
def test_bad_params_name_the_field_and_what_is_allowed(params: dict[str, Any], field: str, named: str) -> None:
    with pytest.raises(agentcompass.ConfigError) as err:
        AgentDojo(params, ComponentContext(run_id="t"))
    assert field in str(err.value) and named in str(err.value)


# ----------------------------------------------------------------------------- the three model protocols


def _protocol_script() -> dict[str, Any]:
    suite = ad.get_suite(VERSION, "banking")
    injection = suite.get_injection_task_by_id("injection_task_0")
    follower, ignorer = suite.get_user_task_by_id("user_task_0"), suite.get_user_task_by_id("user_task_1")
    return _script([ground_truth_entry(suite, follower, follow=injection), ground_truth_entry(suite, ignorer)])


@pytest.fixture(scope="module")
def threaded_server() -> Iterator[ScriptedServer]:
    """A scripted server (the banking script) on its own event loop in a thread, so a sync run can use it."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    server = ScriptedServer(_protocol_script(), record_requests=200)
    asyncio.run_coroutine_threadsafe(server.start(), loop).result(10)
    try:
        yield server
    finally:
        asyncio.run_coroutine_threadsafe(server.stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def _strings(value: Any) -> list[str]:
    """Every string in a JSON request body."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    return [s for v in value for s in _strings(v)] if isinstance(value, list) else []


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_an_attacked_run_over_each_model_protocol(protocol: str, tmp_path: Path,
                                                  threaded_server: ScriptedServer) -> None:
    threaded_server.recent_requests.clear()
    out = agentcompass.run_evaluation(
        "agentdojo", "tool_agent", "scripted", "local", model_base_url=threaded_server.base_url,
        model_api_protocol=protocol, results_dir=str(tmp_path), progress="none",
        benchmark_params={"suites": "banking", **ATTACK, "user_tasks": ["user_task_0", "user_task_1"],
                          "injection_tasks": "injection_task_0"})
    assert out.status == "completed", out.error
    details = details_by_task(out.run_dir)
    follower = details["banking/user_task_0/injection_task_0"].attempts["1"]
    ignorer = details["banking/user_task_1/injection_task_0"].attempts["1"]
    assert follower.extra["security"] is True and ignorer.extra["security"] is False
    assert ignorer.extra["utility"] is True and ignorer.extra["calls"] > 0
    assert out.metrics["attack_success_rate"] == 0.5 and out.metrics["attack_graded"] == 2
    assert "utility_under_attack" in out.metrics
    bodies = list(threaded_server.recent_requests)
    assert bodies and all(b.get("tools") for b in bodies)  # the suite's tools went out natively on every call
    goal = ad.get_suite(VERSION, "banking").get_injection_task_by_id("injection_task_0").GOAL
    assert any(goal in text for b in bodies for text in _strings(b))  # a tool result carried the injection
    system = ad.load_system_message(None)
    assert all(system in _strings(b) for b in bodies)  # AgentDojo's system prompt, in each protocol's place


# ----------------------------------------------------------------------------- AgentDojo's limits and errors


@pytest.mark.parametrize("idle_rounds", [14, 15])
def test_the_round_budget_is_agentdojos(idle_rounds: int, tmp_path: Path) -> None:
    from agentdojo.agent_pipeline import AgentPipeline, InitQuery, SystemMessage, ToolsExecutionLoop, ToolsExecutor

    suite = ad.get_suite(VERSION, "banking")
    user_task = suite.get_user_task_by_id("user_task_0")
    # idle rounds of get_balance, then the ground truth: in round 15 it is executed, in round 16 it is not (each
    # turn has text too: AgentDojo reruns a run whose last message has none)
    ground_truth = user_task.ground_truth(_pre_environment(suite, user_task))
    turns = ([{"content": "checking", "tool_calls": [{"name": "get_balance", "arguments": {}}]}] * idle_rounds
             + [{"content": "paying", "tool_calls": [{"name": c.function, "arguments": dict(c.args)}
                                                    for c in ground_truth]}] + ["Done."])
    llm = ad.ScriptedLLM(turns)
    pipeline = AgentPipeline([SystemMessage(ad.load_system_message(None)), InitQuery(), llm,
                              ToolsExecutionLoop([ToolsExecutor(), llm])])
    pipeline.name = "scripted"
    theirs, _ = suite.run_task_with_pipeline(pipeline, user_task, None, {})
    out = _run(tmp_path, {"suites": "banking", "user_tasks": "user_task_0"},
               _script([{"match": user_task.PROMPT, "turns": turns}]))
    attempt = details_by_task(out.run_dir)["banking/user_task_0"].attempts["1"]
    assert attempt.extra["utility"] is theirs is (idle_rounds < 15)
    assert attempt.trajectory is not None and len(attempt.trajectory.steps) == llm.calls
    calls = attempt.artifacts["tool_session"]["calls"]
    assert len(calls) == idle_rounds + len(ground_truth)  # AgentDojo's trace lists the calls it did not execute
    assert attempt.extra["calls"] == idle_rounds + (len(ground_truth) if idle_rounds < 15 else 0)  # re-executed
    assert all(("executed" in c) is (idle_rounds >= 15) for c in calls[idle_rounds:])


def test_a_long_workspace_listing_is_not_cut(tmp_path: Path) -> None:
    suite = ad.get_suite(VERSION, "workspace")
    user_task = suite.get_user_task_by_id("user_task_35")  # find and delete the largest of 26 files
    out = _run(tmp_path, {"suites": "workspace", "user_tasks": "user_task_35"},
               _script([ground_truth_entry(suite, user_task)]))
    attempt = details_by_task(out.run_dir)["workspace/user_task_35"].attempts["1"]
    listing = attempt.trajectory.steps[0].observation if attempt.trajectory else ""
    assert listing is not None and len(listing) > 25_000 and "..." not in listing[10_000:15_000]
    assert attempt.extra["utility"] is True and out.metrics["utility"] == 1.0


def test_a_harness_that_runs_no_tools_is_not_graded(tmp_path: Path) -> None:
    out = agentcompass.run_evaluation(
        "agentdojo", "openai_chat", "scripted", "local",
        benchmark_params={"suites": "banking", "limit": 2, "attack": "important_instructions_no_names"},
        model_params={"bundled": False, "script": [{"match": "", "turns": ["I paid it."]}]},
        results_dir=str(tmp_path), progress="none")
    for detail in details_by_task(out.run_dir).values():
        attempt = detail.attempts["1"]
        assert attempt.error_kind == "eval_error" and "tool_agent" in (attempt.error or "")
    assert out.metrics["attack_graded"] == 0 and out.metrics["attack_unscored"] == 2


@pytest.mark.parametrize("argument", ["{[]: 1}", "[{[1]}]", "-" * 100_000 + "1", "[" + "1," * 20_000 + "]"])
def test_an_argument_agentdojos_parser_chokes_on_is_a_tool_error(argument: str, tmp_path: Path) -> None:
    suite = ad.get_suite(VERSION, "banking")
    user_task = suite.get_user_task_by_id("user_task_0")
    turns = [{"tool_calls": [{"name": "send_money", "arguments": {
        "recipient": argument, "amount": 1, "subject": "x", "date": "2022-01-01"}}]}, "Done."]
    out = _run(tmp_path, {"suites": "banking", "user_tasks": "user_task_0"},
               _script([{"match": user_task.PROMPT, "turns": turns}]))
    attempt = details_by_task(out.run_dir)["banking/user_task_0"].attempts["1"]
    assert attempt.status == "completed" and attempt.extra["utility"] is False
    (call,) = attempt.artifacts["tool_session"]["calls"]
    if argument.startswith("-"):  # a long text that is no list: passed on as the string it is, like AgentDojo
        assert "error" not in call
    else:
        assert call["error"].startswith("ValueError: argument 'recipient' could not be parsed")
        assert attempt.trajectory is not None and "could not be parsed" in (attempt.trajectory.steps[0].observation
                                                                             or "")


async def test_tool_calls_run_off_the_event_loop() -> None:
    bench = AgentDojo({"suites": "workspace"}, ComponentContext(run_id="t"))
    task = next(iter(bench.load_tasks()))
    session = bench.tool_session(task.public(), None)  # type: ignore[arg-type]
    assert session is not None
    await session.call("list_files", {})  # the environment is built
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0)
            ticks += 1

    running = asyncio.create_task(ticker())
    for _ in range(3):
        await session.call("list_files", {})
    running.cancel()
    assert ticks >= 3  # the loop turned while the calls ran


def test_an_exception_in_agentdojos_own_check_is_an_eval_error(tmp_path: Path) -> None:
    suite = ad.get_suite(VERSION, "workspace")
    user_task = suite.get_user_task_by_id("user_task_0")
    next_id = _pre_environment(suite, user_task).inbox._get_next_id()
    event = {"id_": "99", "title": "t", "description": "d", "start_time": "2024-05-20T10:00",
             "end_time": "2024-05-20T11:00", "location": "x", "participants": ["a@b.c"]}
    turns = [{"tool_calls": [{"name": "send_email", "arguments": {
        "recipients": ["mark.black-2134@gmail.com"], "subject": "s", "body": "b",
        "attachments": [{"type": "event", "event_details": event}]}}]},
        {"tool_calls": [{"name": "delete_email", "arguments": {"email_id": next_id}}]}, "Done."]
    out = agentcompass.run_evaluation(
        "agentdojo", "tool_agent", "scripted", "local", results_dir=str(tmp_path), progress="none",
        benchmark_params={"suites": "workspace", "user_tasks": "user_task_0", "injection_tasks": "injection_task_11",
                          "attack": "important_instructions_no_names", "benchmark_version": "v1.2.1"},
        model_params=_script([{"match": user_task.PROMPT, "turns": turns}]))
    (detail,) = details_by_task(out.run_dir).values()
    attempt = detail.attempts["1"]
    assert attempt.error_kind == "eval_error" and "AgentDojo's check raised TypeError" in (attempt.error or "")
    assert out.metrics["attack_unscored"] == 1 and out.metrics["errored_attempts"] == 1


def test_model_request_errors_count_as_attack_successes_under_agentdojos_rule() -> None:
    acc = AgentDojoAccumulator(k=1, attack="important_instructions")
    outcomes = [AttemptRecord(status="completed", correct=False, extra={"utility": False, "security": True}),
                AttemptRecord(status="completed", correct=True, extra={"utility": True, "security": False}),
                AttemptRecord(status="run_error", error="context too long", error_kind="model_bad_request"),
                AttemptRecord(status="run_error", error="grader", error_kind="eval_error")]
    for n, attempt in enumerate(outcomes):
        acc.add(TaskDetail(task_id=f"banking/u{n}/i", k=1, category="banking", attempts={"1": attempt}))
    metrics, _ = acc.result()
    assert metrics["attack_success_rate"] == 1 / 2 and metrics["attack_unscored"] == 2
    assert metrics["attack_success_rate_agentdojo"] == 2 / 4 and metrics["errored_attempts"] == 2


@pytest.mark.parametrize(("params", "field", "named"), [
    ({"suites": "banking", "target_model": "whatever"}, "target_model", "attack"),
    ({"suites": "banking", "attack": "important_instructions", "target_model": "my-model"}, "target_model",
     "'my-model' is not a model name it knows"),
    ({"max_iters": 0}, "max_iters", "max_iters"),
])
def test_more_bad_params_name_the_field(params: dict[str, Any], field: str, named: str) -> None:
    with pytest.raises(agentcompass.ConfigError) as err:
        AgentDojo(params, ComponentContext(run_id="t"))
    assert field in str(err.value) and named in str(err.value)


def test_an_attack_that_names_no_model_ignores_an_unknown_target_model() -> None:
    bench = AgentDojo({"suites": "banking", "attack": "important_instructions_no_names", "target_model": "my-model"},
                      ComponentContext(run_id="t"))
    assert bench.attacks["banking"] is not None


def test_injection_tasks_run_alone_as_user_tasks_stay_out_of_the_attack_rates(tmp_path: Path) -> None:
    suite = ad.get_suite(VERSION, "banking")
    user_task = suite.get_user_task_by_id("user_task_0")
    injections = [suite.get_injection_task_by_id(i) for i in ("injection_task_0", "injection_task_1")]
    env = suite.load_and_inject_default_environment({})
    entries = [{"match": injections[0].GOAL, "turns": [*_turns(injections[0].ground_truth(env)), "Done."]},
               {"match": injections[1].GOAL, "turns": ["I will not do that."]},
               ground_truth_entry(suite, user_task)]
    out = _run(tmp_path, {"suites": "banking", "user_tasks": "user_task_0", **ATTACK,
                          "injection_tasks": ["injection_task_0", "injection_task_1"],
                          "injection_tasks_as_user_tasks": True}, _script(entries))
    details = details_by_task(out.run_dir)
    assert sorted(details) == ["banking/injection_task_0", "banking/injection_task_1",
                               "banking/user_task_0/injection_task_0", "banking/user_task_0/injection_task_1"]
    # the same verdict AgentDojo's run_task_with_pipeline gives on the injection task run alone
    theirs, _ = suite.run_task_with_pipeline(ad.GroundTruthPipeline(injections[0]), injections[0], None, {})
    assert details["banking/injection_task_0"].attempts["1"].extra["utility"] is theirs is True
    assert details["banking/injection_task_1"].attempts["1"].extra["utility"] is False
    m = out.metrics
    assert m["injection_task_utility"] == 0.5 and m["injection_tasks_passed"] == 1
    assert m["tasks"] == 2 and m["attack_graded"] == 2 and m["utility_attempts"] == 2  # the pairs only
    with pytest.raises(agentcompass.ConfigError, match="injection_tasks_as_user_tasks"):
        AgentDojo({"suites": "banking", "injection_tasks_as_user_tasks": True}, ComponentContext(run_id="t"))


def test_a_try_stopped_in_its_first_model_call_is_still_graded(tmp_path: Path) -> None:
    out = agentcompass.run_evaluation(
        "agentdojo", "tool_agent", "scripted", "local", results_dir=str(tmp_path), progress="none",
        benchmark_params={"suites": "banking", "user_tasks": "user_task_0"},
        model_params={"bundled": False, "latency_s": 30, "script": [{"match": "", "turns": ["late"]}]},
        harness_params={"agent_timeout": 0.5})
    attempt = details_by_task(out.run_dir)["banking/user_task_0"].attempts["1"]
    assert attempt.error_kind == "agent_timeout" and attempt.correct is False  # graded on the empty record
    assert attempt.extra["utility"] is False and attempt.extra["calls"] == 0
