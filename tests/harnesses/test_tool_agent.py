"""The ``tool_agent`` harness over a benchmark's ``ToolSession``: tool calls executed by the session on the host,
results fed back, next user turns asked for, the session's record graded, the session closed on every path."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import agentcompass
from agentcompass.interfaces import Benchmark, EvalContext, EvalResult, PreparedTask, RunContext, TaskSpec
from agentcompass.tools import RECORD_KEY, ToolError, ToolSession

from ..run_details import details_by_task

HERE = "tests.harnesses.test_tool_agent"
CLOSED: list[str] = []


class Ledger(ToolSession):
    """A counter the model adds to with ``add``; two user turns (the second asks to add once more)."""

    def __init__(self, task_id: str) -> None:
        self.task_id = task_id
        self.total = 0
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.assistant_turns = 0
        self.user_turns = 1

    def tools(self) -> list[dict[str, Any]]:
        return [{"type": "function", "function": {
            "name": "add", "description": "add n to the counter",
            "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}}]

    def initial_messages(self) -> list[dict[str, Any]]:
        return [{"role": "system", "content": "You keep a counter."},
                {"role": "user", "content": f"ledger-task {self.task_id}: add 2 then 3"}]

    async def call(self, name: str, arguments: dict[str, Any]) -> str:
        self.calls.append((name, arguments))
        if name != "add":
            raise ToolError(f"no tool {name!r}")
        if not isinstance(arguments.get("n"), int):
            raise ToolError("n must be an integer")
        self.total += arguments["n"]
        return f"total={self.total}"

    async def on_assistant(self, message: dict[str, Any]) -> None:
        self.assistant_turns += 1

    async def next_user_message(self, messages: list[dict[str, Any]]) -> str | None:
        if self.user_turns >= 2:
            return None
        self.user_turns += 1
        return "now add 10"

    def record(self) -> dict[str, Any]:
        return {"total": self.total, "calls": [[n, a] for n, a in self.calls], "assistant_turns": self.assistant_turns}

    async def aclose(self) -> None:
        CLOSED.append(self.task_id)


class LedgerTasks(Benchmark):
    dimension = "tool_use"

    def load_tasks(self) -> list[TaskSpec]:
        return [TaskSpec(task_id="ledger-0", ground_truth=15), TaskSpec(task_id="ledger-1", ground_truth=15)]

    def prepare(self, task: TaskSpec) -> PreparedTask:
        return PreparedTask(task_id=task.task_id, prompt="(the tool session holds the conversation)")

    def tool_session(self, task: TaskSpec, ctx: RunContext) -> ToolSession | None:
        assert task.ground_truth is None  # the session never sees the answer
        return Ledger(task.task_id)

    async def evaluate(self, ctx: EvalContext) -> EvalResult:
        record = ctx.result.artifacts[RECORD_KEY]
        return EvalResult(correct=record["total"] == ctx.task.ground_truth, extra={"record": record})


def _call(name: str, args: Any) -> dict[str, Any]:
    return {"name": name, "arguments": args}


SCRIPT: dict[str, Any] = {"bundled": False, "script": [
    # right: two calls in one turn, an answer, then (second user turn) one more call and an answer
    {"match": "ledger-task ledger-0:", "turns": [
        {"tool_calls": [_call("add", {"n": 2}), _call("add", {"n": 3})]}, "done, 5",
        {"tool_calls": [_call("add", {"n": 10})]}, "done, 15"]},
    # wrong: a bad call (its error goes back as the tool result), an unknown tool, broken JSON, then gives up
    {"match": "ledger-task ledger-1:", "turns": [
        {"tool_calls": [_call("add", {"n": "two"})]}, {"tool_calls": [_call("sub", {"n": 1})]},
        {"tool_calls": [_call("add", "{not json")]}, "I give up", "still no"]},
]}


def test_tool_calls_run_in_the_session_and_its_record_is_graded(tmp_path: Path) -> None:
    CLOSED.clear()
    out = agentcompass.run_evaluation(f"{HERE}:LedgerTasks", "tool_agent", "scripted", "local", model_params=SCRIPT,
                                      results_dir=str(tmp_path), progress="none")
    assert out.status == "completed", out.error
    details = details_by_task(out.run_dir)
    good, bad = details["ledger-0"].attempts["1"], details["ledger-1"].attempts["1"]
    assert good.correct and good.extra["record"] == {
        "total": 15, "calls": [["add", {"n": 2}], ["add", {"n": 3}], ["add", {"n": 10}]], "assistant_turns": 4}
    assert not bad.correct and bad.extra["record"]["total"] == 0
    assert bad.extra["record"]["calls"] == [["add", {"n": "two"}], ["sub", {"n": 1}]]  # broken JSON never reached it
    steps = bad.trajectory.steps if bad.trajectory else []
    assert "Error: n must be an integer" in (steps[0].observation or "")
    assert "Error: no tool 'sub'" in (steps[1].observation or "")
    assert "not valid JSON" in (steps[2].observation or "")
    assert sorted(CLOSED) == ["ledger-0", "ledger-1"]  # every session closed


@pytest.mark.parametrize("benchmark", ["shell_tasks", "humaneval"])
def test_a_benchmark_without_tools_is_refused_before_any_task_naming_the_harness(tmp_path: Path,
                                                                                   benchmark: str) -> None:
    with pytest.raises(agentcompass.ConfigError, match=f"benchmark '{benchmark}' offers none") as info:
        agentcompass.run_evaluation(benchmark, "tool_agent", "scripted", "local", results_dir=str(tmp_path),
                                    progress="none")
    assert info.value.field == "harness"
    assert not list(tmp_path.rglob("details"))  # refused once, not once per task


@pytest.mark.parametrize("bad", [{"step_limit": 0}, {"tool_output_limit": 5}])
def test_bad_params_name_the_field(bad: dict[str, Any], tmp_path: Path) -> None:
    with pytest.raises(agentcompass.ConfigError) as err:
        agentcompass.run_evaluation(f"{HERE}:LedgerTasks", "tool_agent", "scripted", "local", harness_params=bad,
                                    results_dir=str(tmp_path), progress="none")
    assert next(iter(bad)) in str(err.value)


class TurnEndingLedger(Ledger):
    """A ledger whose session ends the user turn after any call with ``n`` 0 (``ends_turn``)."""

    def __init__(self, task_id: str) -> None:
        super().__init__(task_id)
        self._end = False

    async def on_assistant(self, message: dict[str, Any]) -> None:
        await super().on_assistant(message)
        self._end = any(json.loads(c["function"]["arguments"]).get("n") == 0 for c in message.get("tool_calls") or [])

    def ends_turn(self) -> bool:
        return self._end


class TurnEndingTasks(LedgerTasks):
    def load_tasks(self) -> list[TaskSpec]:
        return [TaskSpec(task_id="ledger-0", ground_truth=10)]

    def tool_session(self, task: TaskSpec, ctx: RunContext) -> ToolSession | None:
        return TurnEndingLedger(task.task_id)


def test_a_session_can_end_the_user_turn_after_a_step(tmp_path: Path) -> None:
    # the step with n=0 ends the first user turn: the next model reply answers the second ("now add 10")
    script = {"bundled": False, "script": [{"match": "ledger-task ledger-0:", "turns": [
        {"tool_calls": [_call("add", {"n": 0})]}, {"tool_calls": [_call("add", {"n": 10})]}, "done, 10"]}]}
    out = agentcompass.run_evaluation(f"{HERE}:TurnEndingTasks", "tool_agent", "scripted", "local",
                                      model_params=script, results_dir=str(tmp_path), progress="none")
    assert out.status == "completed", out.error
    attempt = details_by_task(out.run_dir)["ledger-0"].attempts["1"]
    assert attempt.correct and attempt.trajectory is not None
    assert attempt.trajectory.stop_reason == "answered" and len(attempt.trajectory.steps) == 3
    # without the hook the model would go on in the first turn and be asked "now add 10" once more: 4 steps
class Echo(ToolSession):
    """``echo`` returns ``n`` x's; the session states its own limits (the task id says which)."""

    def __init__(self, task_id: str, max_tool_output: int | None, max_tool_rounds: int | None) -> None:
        self.task_id = task_id
        self.max_tool_output = max_tool_output
        self.max_tool_rounds = max_tool_rounds
        self.executed: list[int] = []

    def tools(self) -> list[dict[str, Any]]:
        return [{"type": "function", "function": {
            "name": "echo", "description": "n x's",
            "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}}]

    def initial_messages(self) -> list[dict[str, Any]]:
        return [{"role": "user", "content": f"echo-task {self.task_id}:"}]

    async def call(self, name: str, arguments: dict[str, Any]) -> str:
        self.executed.append(int(arguments.get("n", 0)))
        return "x" * int(arguments.get("n", 0))

    def record(self) -> dict[str, Any]:
        return {"executed": list(self.executed)}


#: task id -> (the session's max_tool_output, its max_tool_rounds)
ECHO_LIMITS: dict[str, tuple[int | None, int | None]] = {
    "long-output": (50_000, None), "no-hint": (None, None), "two-rounds": (None, 2), "many-calls": (None, None)}


class EchoTasks(Benchmark):
    dimension = "tool_use"

    def load_tasks(self) -> list[TaskSpec]:
        return [TaskSpec(task_id=t) for t in ECHO_LIMITS]

    def prepare(self, task: TaskSpec) -> PreparedTask:
        return PreparedTask(task_id=task.task_id, prompt="(the tool session holds the conversation)")

    def tool_session(self, task: TaskSpec, ctx: RunContext) -> ToolSession | None:
        return Echo(task.task_id, *ECHO_LIMITS[task.task_id])

    async def evaluate(self, ctx: EvalContext) -> EvalResult:
        return EvalResult(correct=True, extra={"record": ctx.result.artifacts[RECORD_KEY]})


ECHO_SCRIPT: dict[str, Any] = {"bundled": False, "script": [
    {"match": "echo-task long-output:", "turns": [{"tool_calls": [_call("echo", {"n": 30_000})]}, "done"]},
    {"match": "echo-task no-hint:", "turns": [{"tool_calls": [_call("echo", {"n": 30_000})]}, "done"]},
    {"match": "echo-task two-rounds:", "turns": [{"tool_calls": [_call("echo", {"n": 1})]},
                                                 {"tool_calls": [_call("echo", {"n": 2})]},
                                                 {"tool_calls": [_call("echo", {"n": 3})]}, "done"]},
    {"match": "echo-task many-calls:", "turns": [
        {"tool_calls": [_call("echo", {"n": 1}), _call("echo", {"n": 2}), _call("echo", {"n": 3}),
                        _call("echo", '{"n": 4, "pad": "' + "p" * (300 * 1024) + '"}')]}, "done"]},
]}


def _echo_run(tmp_path: Path, harness_params: dict[str, Any] | None = None) -> dict[str, Any]:
    out = agentcompass.run_evaluation(f"{HERE}:EchoTasks", "tool_agent", "scripted", "local",
                                      model_params=ECHO_SCRIPT, harness_params=harness_params or {},
                                      results_dir=str(tmp_path), progress="none")
    assert out.status == "completed", out.error
    return {t: d.attempts["1"] for t, d in details_by_task(out.run_dir).items()}


def _observation(attempt: Any, step: int) -> str:
    return (attempt.trajectory.steps[step].observation or "") if attempt.trajectory else ""


def test_the_sessions_limits_apply_by_default(tmp_path: Path) -> None:
    runs = _echo_run(tmp_path / "default", {"max_calls_per_turn": 2})
    assert _observation(runs["long-output"], 0) == "[echo] " + "x" * 30_000  # the session's 50,000: not cut
    assert len(_observation(runs["no-hint"], 0)) < 21_000  # no hint: the harness's 20,000
    rounds = runs["two-rounds"]
    assert rounds.extra["record"] == {"executed": [1, 2]}  # the third turn's call is past the session's 2 rounds
    assert rounds.trajectory is not None and len(rounds.trajectory.steps) == 3
    assert rounds.trajectory.stop_reason == "tool_round_limit"
    many = runs["many-calls"]
    assert many.extra["record"] == {"executed": [1, 2]}
    assert _observation(many, 0).count("too many tool calls in one turn") == 2
    # an explicit tool_output_limit overrides the session's; a smaller step_limit ends the episode first
    runs = _echo_run(tmp_path / "user", {"tool_output_limit": 1000, "step_limit": 1})
    assert len(_observation(runs["long-output"], 0)) < 1100
    assert runs["two-rounds"].extra["record"] == {"executed": [1]}


def test_oversized_arguments_are_answered_with_an_error(tmp_path: Path) -> None:
    many = _echo_run(tmp_path)["many-calls"]
    assert many.extra["record"] == {"executed": [1, 2, 3]}  # the 300 kB call never reached the session
    assert "at most 262144 are accepted" in _observation(many, 0)
