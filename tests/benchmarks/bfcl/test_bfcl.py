"""The ``bfcl`` benchmark end to end: a scripted model answering a sample of every category through ``tool_agent``
(native tool calls) scores 100% with the reference answers and, with wrong ones, exactly what bfcl-eval's own
checker gives the same answers; the functions reach the model as tools on all three protocols; bad params are
refused naming the field."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import agentcompass
from agentcompass.benchmarks.bfcl.benchmark import BFCL, CATEGORIES, is_multi_turn
from agentcompass.interfaces import ComponentContext, TaskSpec
from agentcompass.records import TaskDetail
from tests.fixtures_scripted import running_scripted_server

from ...run_details import details_by_task
from ..bfcl_helpers import (
    bfcl_data,
    multi_turn_reference,
    official_multi_turn,
    official_single_turn,
    reference_calls,
)
from ..bfcl_mutations import mutate_multi_turn, mutate_single_turn, record_of

pytestmark = pytest.mark.timeout(240)

REFUSAL = "None of the given functions can do this."


def _first_user(task: TaskSpec) -> str:
    return next(m["content"] for m in task.input["entry"]["question"][0] if m["role"] == "user")


def _call(name: str, args: Any) -> dict[str, Any]:
    return {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}


def _reference_turns(task: TaskSpec) -> list[Any] | None:
    """The scripted turns that give the reference answer (None: no reference can be built for this task)."""
    entry, category = task.input["entry"], task.category or ""
    if is_multi_turn(category):
        turns: list[Any] = []
        for calls in multi_turn_reference(entry, task.ground_truth):
            turns += [{"tool_calls": [_call(n, a) for n, a in calls]}, "done"] if calls else [REFUSAL]
        return turns
    if "irrelevance" in category:
        return [REFUSAL]
    if "relevance" in category:
        name = entry["function"][0]["name"].replace(".", "_") if entry["function"] else "some_function"
        return [{"tool_calls": [_call(name, {})]}]
    calls = reference_calls(entry, task.ground_truth, category)
    if calls is None:
        return None
    answer = [{n: json.dumps(a)} for n, a in calls]
    if not official_single_turn(entry["function"], answer, task.ground_truth, category):
        return None  # a dataset quirk our builder cannot satisfy (e.g. a required parameter without a value)
    return [{"tool_calls": [_call(n, a) for n, a in calls]}]


def _sample(per_category: int, seed: int) -> list[TaskSpec]:
    """A sample of every category through the benchmark's own ``sample`` param, cut to tasks whose first user
    message no other chosen task's contains (the scripted model matches on it)."""
    bfcl_data()
    bench = BFCL({"sample": per_category, "seed": seed}, ComponentContext(auto_install_dependencies=True))
    chosen: list[TaskSpec] = []
    for task in bench.load_tasks():
        text = _first_user(task)
        if len(text) < 12 or any(text in _first_user(o) or _first_user(o) in text for o in chosen):
            continue
        chosen.append(task)
    assert {t.category for t in chosen} == set(CATEGORIES)
    return chosen


def _run(tasks: list[TaskSpec], script: list[dict[str, Any]], tmp_path: Path, **kw: Any) -> dict[str, TaskDetail]:
    out = agentcompass.run_evaluation(
        "bfcl", "tool_agent", "scripted", "local", benchmark_params={"task_ids": [t.task_id for t in tasks]},
        model_params={"script": script, "bundled": False}, results_dir=str(tmp_path), progress="none",
        auto_install_dependencies=True, **kw)
    assert out.status == "completed", out.error
    details = details_by_task(out.run_dir)
    assert set(details) == {t.task_id for t in tasks}
    return details


def test_reference_answers_score_100_percent_in_every_category(tmp_path: Path) -> None:
    tasks = []
    script = []
    for task in _sample(per_category=4, seed=7):
        turns = _reference_turns(task)
        if turns is not None:
            tasks.append(task)
            script.append({"match": _first_user(task), "turns": turns})
    assert {t.category for t in tasks} == set(CATEGORIES)
    details = _run(tasks, script, tmp_path)
    wrong = {i: d.attempts["1"].extra.get("bfcl") for i, d in details.items() if not d.attempts["1"].correct}
    assert not wrong
    for d in details.values():
        assert d.attempts["1"].extra["bfcl"]["valid"] is True


def _answer_of(turns: list[Any]) -> Any:
    """The single-turn answer a scripted turn gives, as BFCL's FC handler hands it to its checker."""
    first = turns[0]
    if isinstance(first, str):
        return first
    return [{c["name"]: c["arguments"]} for c in first["tool_calls"]]


def test_wrong_answers_score_as_bfcl_evals_checker_scores_them(tmp_path: Path) -> None:
    rng = random.Random(11)
    tasks, script, expected = [], [], {}
    for task in _sample(per_category=4, seed=3):
        turns = _reference_turns(task)
        if turns is None:
            continue
        entry, category = task.input["entry"], task.category or ""
        if is_multi_turn(category):
            turns = mutate_multi_turn(turns, rng)
            record = record_of(turns, len(task.ground_truth))
            expected[task.task_id] = official_multi_turn(entry, record, task.ground_truth)
        else:
            turns = mutate_single_turn(turns, entry, rng)
            expected[task.task_id] = official_single_turn(entry["function"], _answer_of(turns), task.ground_truth,
                                                          category)
        tasks.append(task)
        script.append({"match": _first_user(task), "turns": turns})
    details = _run(tasks, script, tmp_path)
    got = {i: d.attempts["1"].correct for i, d in details.items()}
    assert got == expected
    assert 0 < sum(got.values()) < len(got)  # the mutations made some answers wrong, not all


def _native_tools(body: dict[str, Any], protocol: str) -> list[tuple[str, dict[str, Any]]]:
    """(name, parameters schema) of the tools in a request body, in the protocol's own shape."""
    tools = body.get("tools") or []
    if protocol == "openai-chat":
        return [(t["function"]["name"], t["function"]["parameters"]) for t in tools if t.get("type") == "function"]
    if protocol == "openai-responses":
        return [(t["name"], t["parameters"]) for t in tools if t.get("type") == "function"]
    return [(t["name"], t["input_schema"]) for t in tools]


def _schema_types(schema: Any) -> list[str]:
    if isinstance(schema, dict):
        own = [schema["type"]] if isinstance(schema.get("type"), str) else []
        return own + [t for k, v in schema.items() if k != "type" for t in _schema_types(v)]
    if isinstance(schema, list):
        return [t for v in schema for t in _schema_types(v)]
    return []


@pytest.mark.parametrize("protocol", ["openai-chat", "openai-responses", "anthropic-messages"])
async def test_native_tool_calls_on_each_protocol(protocol: str, tmp_path: Path) -> None:
    bfcl_data()
    bench = BFCL({"categories": ["simple_python", "parallel", "multi_turn_base"], "limit": 1},
                 ComponentContext(auto_install_dependencies=True))
    tasks = bench.load_tasks()
    script = [{"match": _first_user(t), "turns": _reference_turns(t)} for t in tasks]
    async with running_scripted_server({"script": script, "bundled": False}) as server:
        result = await agentcompass.async_launch({"requests": [{
            "benchmark": {"id": "bfcl", "params": {"task_ids": [t.task_id for t in tasks]}},
            "harness": {"id": "tool_agent"},
            "model": {"id": "scripted", "base_url": server.base_url, "api_key": "k", "api_protocol": protocol},
            "environment": {"id": "local"}, "results_dir": str(tmp_path), "auto_install_dependencies": True}],
            "progress": "none"})
        bodies = list(server.recent_requests)
    out = result.outcomes[0]
    assert out.ok, out.error
    details = details_by_task(out.run_dir)
    assert all(d.attempts["1"].correct for d in details.values()), {
        i: d.attempts["1"].extra for i, d in details.items()}
    # the functions went out as the protocol's native tools, with BFCL's types converted to JSON Schema
    sent = {name: schema for b in bodies for name, schema in _native_tools(b, protocol)}
    offered = {f["name"].replace(".", "_") for t in tasks for f in t.input["entry"]["function"]}
    assert offered <= set(sent), offered - set(sent)
    types = {v for schema in sent.values() for v in _schema_types(schema)}
    assert types and types <= {"object", "string", "integer", "number", "boolean", "array"}, types
    # the multi-turn question went through all its user turns
    mt = details["multi_turn_base_0"].attempts["1"]
    assert mt.trajectory is not None and mt.trajectory.stop_reason == "answered"


def _multi_turn_task(task_id: str) -> TaskSpec:
    bench = BFCL({"task_ids": [task_id], "categories": [task_id.rsplit("_", 1)[0]]},
                 ComponentContext(auto_install_dependencies=True))
    [task] = bench.load_tasks()
    return task


def test_calls_the_harness_did_not_execute_are_not_graded(tmp_path: Path) -> None:
    # the reference answer sends cd, mkdir and mv in one step; with parallel_tool_calls off only cd runs
    task = _multi_turn_task("multi_turn_base_0")
    turns = _reference_turns(task)
    assert turns is not None and len(turns[0]["tool_calls"]) > 1
    details = _run([task], [{"match": _first_user(task), "turns": turns}], tmp_path,
                   harness_params={"parallel_tool_calls": False})
    attempt = details[task.task_id].attempts["1"]
    assert attempt.correct is False
    assert attempt.extra["bfcl"]["error_type"] == "multi_turn:instance_state_mismatch"
    # the same script with every call executed is right
    details = _run([task], [{"match": _first_user(task), "turns": turns}], tmp_path / "parallel")
    assert details[task.task_id].attempts["1"].correct is True


def test_after_the_force_quit_the_model_is_not_asked_again(tmp_path: Path) -> None:
    task = _multi_turn_task("multi_turn_base_0")
    turns = [{"tool_calls": [_call("pwd", {})]}] * 40
    details = _run([task], [{"match": _first_user(task), "turns": turns}], tmp_path,
                   harness_params={"step_limit": 40})
    attempt = details[task.task_id].attempts["1"]
    assert attempt.trajectory is not None
    assert len(attempt.trajectory.steps) == 21 and attempt.trajectory.stop_reason == "session_finished"
    assert attempt.extra["bfcl"]["error_type"] == "multi_turn:force_terminated"


def test_a_step_that_does_not_decode_ends_the_turn_live_and_in_grading(tmp_path: Path) -> None:
    task = _multi_turn_task("multi_turn_base_0")
    turns = _reference_turns(task)
    assert turns is not None
    broken = [{"tool_calls": [_call("mkdir", {"dir_name": "temp"}), _call("pwd", "")]}]
    details = _run([task], [{"match": _first_user(task), "turns": broken + turns}], tmp_path)
    attempt = details[task.task_id].attempts["1"]
    assert attempt.trajectory is not None
    assert "nothing of it was executed" in (attempt.trajectory.steps[0].observation or "")
    # the reference's first step came as the answer to the second user turn: graded on what ran
    assert attempt.extra["bfcl"]["valid"] is False
    assert attempt.status == "completed"


def test_the_summary_has_bfcls_leaderboard_groups(tmp_path: Path) -> None:
    tasks = _sample(per_category=1, seed=5)
    script = [{"match": _first_user(t), "turns": [REFUSAL]} for t in tasks]  # never calls a function
    out = agentcompass.run_evaluation(
        "bfcl", "tool_agent", "scripted", "local", benchmark_params={"task_ids": [t.task_id for t in tasks]},
        model_params={"script": script, "bundled": False}, results_dir=str(tmp_path), progress="none",
        auto_install_dependencies=True)
    assert out.status == "completed", out.error
    metrics = out.metrics
    assert metrics["bfcl_non_live"] == 0.0 and metrics["bfcl_live"] == 0.0 and metrics["bfcl_multi_turn"] == 0.0
    assert metrics["bfcl_irrelevance"] == 1.0 and metrics["bfcl_relevance"] == 0.0
    assert metrics["bfcl_overall"] == pytest.approx(0.1)
    assert metrics["bfcl_overall_without_agentic"] == pytest.approx(10 / 60)


@pytest.mark.parametrize(("params", "field"), [
    ({"categories": ["simple"]}, "categories"),
    ({"categories": ["memory_kv"]}, "categories"),
    ({"task_ids": ["simple_python_100000"]}, "task_ids"),
    ({"limit": 2, "sample": 2}, "sample"),
    ({"limit": 0}, "limit"),
    ({"task_ids": []}, "task_ids"),
    ({"categories": []}, "categories"),
])
def test_bad_params_are_refused_naming_the_field(params: dict[str, Any], field: str, tmp_path: Path) -> None:
    bfcl_data()
    with pytest.raises(agentcompass.ConfigError) as err:
        agentcompass.run_evaluation("bfcl", "tool_agent", "scripted", "local", benchmark_params=params,
                                    results_dir=str(tmp_path), progress="none", auto_install_dependencies=True)
    assert field in str(err.value)
    if field == "categories" and params["categories"]:
        assert "simple_python" in str(err.value) and "multi_turn_base" in str(err.value)
    if params.get(field) == []:
        assert "must not be empty" in str(err.value)


def test_a_repeated_category_is_run_once() -> None:
    bfcl_data()
    bench = BFCL({"categories": ["simple_python", "simple_python"], "limit": 2},
                 ComponentContext(auto_install_dependencies=True))
    assert [t.task_id for t in bench.load_tasks()] == ["simple_python_0", "simple_python_1"]


def test_sample_is_per_category_and_repeatable() -> None:
    bfcl_data()
    ctx = ComponentContext(auto_install_dependencies=True)
    one = [t.task_id for t in BFCL({"categories": ["simple_python", "live_simple"], "sample": 5, "seed": 1},
                                    ctx).load_tasks()]
    again = [t.task_id for t in BFCL({"categories": ["simple_python", "live_simple"], "sample": 5, "seed": 1},
                                      ctx).load_tasks()]
    other = [t.task_id for t in BFCL({"categories": ["simple_python", "live_simple"], "sample": 5, "seed": 2},
                                      ctx).load_tasks()]
    assert one == again != other
    assert sum(i.startswith("simple_python_") for i in one) == 5 and sum(i.startswith("live_simple_") for i in one) == 5
    full = BFCL({}, ctx).load_tasks()
    assert len(full) == 4441  # 3,641 single-turn + 800 multi-turn questions of bfcl-eval 2026.3.23


def test_without_bfcl_eval_the_error_names_the_install_command(tmp_path: Path) -> None:
    # a fresh interpreter whose cache directory is empty (this one already has the package on sys.path)
    code = ("import agentcompass\n"
            "try:\n"
            "    agentcompass.run_evaluation('bfcl', 'tool_agent', 'scripted', 'local', progress='none',\n"
            f"                                results_dir={str(tmp_path / 'runs')!r})\n"
            "except agentcompass.ConfigError as exc:\n"
            "    print('ERROR', exc)\n")
    env = {**os.environ, "AGENTCOMPASS_BFCL_DIR": str(tmp_path / "empty")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env,
                          cwd=str(tmp_path))
    assert "ERROR" in done.stdout, done.stdout + done.stderr
    assert "pip install" in done.stdout and "--no-deps" in done.stdout and "bfcl-eval==2026.3.23" in done.stdout
    assert not (tmp_path / "empty").exists()  # nothing was installed without auto_install_dependencies
