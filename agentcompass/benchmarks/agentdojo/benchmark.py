"""The ``agentdojo`` benchmark: AgentDojo's four tool-use suites (workspace, travel, banking, slack), for utility
and, under a prompt-injection attack, security, from the ``agentdojo`` package (extra ``agentdojo``).

Without an attack there is one task per user task (``<suite>/<user_task>``), graded for utility. With an attack
there is one task per (user task, injection task) pair (``<suite>/<user_task>/<injection_task>``; a
denial-of-service attack pairs each user task with the suite's first injection task only, as AgentDojo does): the
attack's texts fill the injection vectors the user task's ground truth reads, and the try is graded for utility
under attack and for security (AgentDojo's ``security`` is True when the injection succeeded).

Each try gets a ``ToolSession`` (``agentdojo_session``): AgentDojo's system prompt, the user task's prompt, the
suite's tools as function schemas (for the ``tool_agent`` harness's native tool calling) executed on a fresh copy
of the suite's environment. ``evaluate`` re-executes the recorded calls on a fresh copy and runs AgentDojo's own
utility and security checks (``agentdojo_grading``); the metrics are ``agentdojo_metrics``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Annotated, Any, ClassVar

import msgspec

from ..._errors import ConfigError, EvalError, did_you_mean
from ..._validate import Attempts, Count, Seconds
from ...dependencies import Requirement
from ...interfaces import ComponentContext, EvalContext, EvalResult, PreparedTask, RunContext, TaskSpec
from ...tool_calls import DEFAULT_TOOL_TIMEOUT_S
from ...tools import RECORD_KEY, ToolSession
from ..base import Benchmark
from ..selection import unknown_ids_error
from . import suites as pkg
from .grading import grade
from .metrics import AgentDojoAccumulator
from .session import MAX_ITERS, AgentDojoSession, initializer

_WHERE = "benchmark agentdojo"
#: a selection: one id or more (an empty list would select nothing; leaving the param out selects all)
Ids = Annotated[list[str], msgspec.Meta(min_length=1)]


class AgentDojoParams(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """``agentdojo`` params: ``suites`` (a list or one of workspace, travel, banking, slack; default all four),
    ``benchmark_version`` (default: the package's, ``v1.2.2`` in 0.1.35), ``attack`` (None: no injection; else one
    of AgentDojo's attacks, e.g. ``important_instructions``), ``target_model`` (the model name the attacks that
    address the model use, a key of ``agentdojo.models.MODEL_NAMES`` such as ``gpt-4o-2024-05-13``),
    ``sample_ids`` / ``injection_tasks`` (ids such as ``user_task_3`` or ``banking/user_task_3``; default all;
    ``user_tasks`` is ``sample_ids``' old name),
    ``limit`` (the first N tasks), ``k`` (attempts per task), ``max_iters`` (rounds of tool calls after the first
    model turn, AgentDojo's ``ToolsExecutionLoop`` default 15), ``injection_tasks_as_user_tasks`` (under an attack,
    also run each selected injection task alone as a user task, ``<suite>/<injection_task>``: its goal as the
    prompt, no injections, graded by its own check, as AgentDojo's benchmark does to tell whether the model can do
    the injected task at all; not with a DoS attack), ``tool_timeout`` (seconds one tool call may take, 60; past it
    the agent gets an error and the environment takes no more calls)."""

    suites: Ids | str | None = None
    benchmark_version: str | None = None
    attack: str | None = None
    target_model: str | None = None
    sample_ids: list[str] | str | None = None
    user_tasks: Ids | str | None = None  # sample_ids' old name
    injection_tasks: Ids | str | None = None
    limit: Count | None = None
    k: Attempts | None = None
    max_iters: Count = MAX_ITERS
    injection_tasks_as_user_tasks: bool = False
    tool_timeout: Seconds = DEFAULT_TOOL_TIMEOUT_S


def _as_list(value: list[str] | str | None) -> list[str] | None:
    return [value] if isinstance(value, str) else (list(value) if value is not None else None)


def _refuse(field: str, value: str, allowed: list[str] | tuple[str, ...], what: str) -> ConfigError:
    return ConfigError(f"Unknown {what} {value!r} in parameter '{field}' of {_WHERE}. Allowed: "
                       f"{', '.join(allowed)}.{did_you_mean(value, allowed)}", field=f"benchmark.params.{field}")


class AgentDojo(Benchmark):
    """AgentDojo (params: ``AgentDojoParams``; see the module doc)."""

    name: ClassVar[str] = "agentdojo"
    version: ClassVar[str] = "1"
    dimension: ClassVar[str] = "tool_use"
    Params: ClassVar[type[AgentDojoParams]] = AgentDojoParams
    params: AgentDojoParams
    #: the params that pick tasks (changing them never changes what a task is).
    selection_params: ClassVar[tuple[str, ...]] = ("suites", "sample_ids", "user_tasks", "injection_tasks", "limit")
    requirements: ClassVar[tuple[Requirement, ...]] = (Requirement("agentdojo>=0.1.35,<0.2", "agentdojo"),)

    def __init__(self, params: AgentDojoParams | dict[str, Any], ctx: ComponentContext) -> None:
        super().__init__(params, ctx)
        p = self.params
        self.limit = p.limit
        suites = _as_list(p.suites) or list(pkg.SUITES)
        for name in suites:
            if name not in pkg.SUITES:
                raise _refuse("suites", name, pkg.SUITES, "suite")
        self.suite_names = [s for s in pkg.SUITES if s in suites]
        self.benchmark_version = p.benchmark_version or pkg.default_benchmark_version()
        if self.benchmark_version not in pkg.benchmark_versions():
            raise _refuse("benchmark_version", self.benchmark_version, pkg.benchmark_versions(), "benchmark version")
        self.suites = {name: pkg.get_suite(self.benchmark_version, name) for name in self.suite_names}
        self.attack_name = p.attack
        self.target_model = p.target_model
        self.max_iters = p.max_iters
        self.tool_timeout = p.tool_timeout
        if p.target_model is not None and p.attack is None:
            raise ConfigError(f"Parameter 'target_model' of {_WHERE} names the model an attack addresses: set "
                              "'attack' too (e.g. important_instructions), or leave it out.",
                              field="benchmark.params.target_model")
        self.attacks: dict[str, Any] = {}
        if p.attack is not None:
            if p.attack not in pkg.attack_names():
                raise _refuse("attack", p.attack, pkg.attack_names(), "attack")
            for name, suite in self.suites.items():
                try:
                    self.attacks[name] = pkg.load_attack(p.attack, suite, p.target_model)
                except ValueError as exc:
                    given = (f"'target_model' {p.target_model!r} is not a model name it knows" if p.target_model
                             else "set parameter 'target_model'")
                    raise ConfigError(
                        f"Attack {p.attack!r} of {_WHERE} addresses the model by name: {given}; use one of "
                        f"{', '.join(pkg.model_names())} (or any name containing one), or pick an attack whose text "
                        f"names no model (e.g. important_instructions_no_names). AgentDojo says: {exc}",
                        field="benchmark.params.target_model") from None
        self.dos = any(getattr(a, "is_dos_attack", False) for a in self.attacks.values())
        self.user_task_ids = self._pick(self.selection_field, self.sample_ids, lambda s: s.user_tasks)
        if p.injection_tasks is not None and p.attack is None:
            raise ConfigError(f"Parameter 'injection_tasks' of {_WHERE} selects the injection paired with each user "
                              "task under an attack: set 'attack' too (e.g. important_instructions), or leave it out.",
                              field="benchmark.params.injection_tasks")
        if p.injection_tasks_as_user_tasks and p.attack is None:
            raise ConfigError(f"Parameter 'injection_tasks_as_user_tasks' of {_WHERE} runs the injection tasks of an "
                              "attack alone: set 'attack' too, or leave it out.",
                              field="benchmark.params.injection_tasks_as_user_tasks")
        self.injection_as_user = p.injection_tasks_as_user_tasks and not self.dos
        self.injection_task_ids = self._pick("injection_tasks", _as_list(p.injection_tasks),
                                             lambda s: s.injection_tasks)
        self.tools = {name: pkg.tool_schemas(suite) for name, suite in self.suites.items()}
        self.system_message = pkg.system_message()
        self.source = {"package": "agentdojo", "version": pkg.package_version(),
                       "benchmark_version": self.benchmark_version}

    def _pick(self, field: str, ids: list[str] | None, tasks_of: Any) -> dict[str, list[str]] | None:
        """Per suite, the task ids ``ids`` selects (``user_task_3`` in every selected suite that has it,
        ``banking/user_task_3`` in one); None: all. A ConfigError for an id no selected suite has."""
        if ids is None:
            return None
        out: dict[str, list[str]] = {name: [] for name in self.suites}
        unknown = []
        for raw in ids:
            suite_name, _, task_id = raw.rpartition("/")
            names = [suite_name] if suite_name else list(self.suites)
            hits = [n for n in names if n in self.suites and task_id in tasks_of(self.suites[n])]
            if not hits:
                unknown.append(raw)
            for n in hits:
                if task_id not in out[n]:
                    out[n].append(task_id)
        if unknown:
            known = [f"{n}/{t}" for n in self.suites for t in tasks_of(self.suites[n])]
            scope = f"suites {', '.join(self.suites)}, benchmark version {self.benchmark_version}"
            raise unknown_ids_error(unknown, known, field=field, where=_WHERE, scope=scope)
        return out

    def _selected(self, suite_name: str, picked: dict[str, list[str]] | None, available: dict[str, Any]) -> list[str]:
        if picked is None:
            return list(available)
        return [t for t in available if t in picked[suite_name]]

    def load_tasks(self) -> Iterator[TaskSpec]:
        """The tasks, suite by suite in AgentDojo's order, cut to ``limit`` (a generator: the engine runs it in a
        worker thread, and the attack's injections take a ground-truth run per user task to place)."""
        count = 0
        for name, suite in self.suites.items():
            injection_ids = self._selected(name, self.injection_task_ids, suite.injection_tasks)
            if self.dos:  # a denial of service does not depend on the injection task: AgentDojo runs the first
                injection_ids = list(suite.injection_tasks)[:1]
            for user_id in self._selected(name, self.user_task_ids, suite.user_tasks):
                user_task = suite.get_user_task_by_id(user_id)
                pairs: list[str | None] = list(injection_ids) if self.attack_name else [None]
                for injection_id in pairs:
                    if self.limit is not None and count >= self.limit:
                        return
                    count += 1
                    yield self._task(name, suite, user_task, injection_id)
            if self.injection_as_user:
                for injection_id in injection_ids:
                    if self.limit is not None and count >= self.limit:
                        return
                    count += 1
                    yield self._injection_as_user_task(name, suite.get_injection_task_by_id(injection_id))

    def _task(self, suite_name: str, suite: Any, user_task: Any, injection_id: str | None) -> TaskSpec:
        task_id = f"{suite_name}/{user_task.ID}"
        injections: dict[str, str] = {}
        if injection_id is not None:
            task_id += f"/{injection_id}"
            injection_task = suite.get_injection_task_by_id(injection_id)
            injections = dict(self.attacks[suite_name].attack(user_task, injection_task))
        identity = {"suite": suite_name, "user_task": user_task.ID, "injection_task": injection_id}
        return TaskSpec(task_id=task_id, category=suite_name,
                        input={**identity, "prompt": user_task.PROMPT, "injections": injections},
                        # the graders are AgentDojo's own checks of these tasks, looked up by id in evaluate
                        ground_truth={**identity, "benchmark_version": self.benchmark_version},
                        metadata={"difficulty": str(getattr(user_task.DIFFICULTY, "name", user_task.DIFFICULTY))})

    def _injection_as_user_task(self, suite_name: str, injection_task: Any) -> TaskSpec:
        identity = {"suite": suite_name, "user_task": None, "injection_task": injection_task.ID,
                    "as_user_task": True}
        return TaskSpec(task_id=f"{suite_name}/{injection_task.ID}", category=suite_name,
                        input={**identity, "prompt": injection_task.GOAL, "injections": {}},
                        ground_truth={**identity, "benchmark_version": self.benchmark_version},
                        metadata={"difficulty": str(getattr(injection_task.DIFFICULTY, "name",
                                                            injection_task.DIFFICULTY))})

    def _goal(self, suite: Any, task: dict[str, Any]) -> Any:
        """The task the try's prompt poses: the user task, or the injection task run alone as one."""
        if task.get("as_user_task"):
            return suite.get_injection_task_by_id(task["injection_task"])
        return suite.get_user_task_by_id(task["user_task"])

    def prepare(self, task: TaskSpec) -> PreparedTask:
        """The user task's prompt (the conversation itself is the tool session's)."""
        return PreparedTask(task_id=task.task_id, prompt=task.input["prompt"],
                            metadata={"suite": task.input["suite"], "user_task": task.input["user_task"],
                                      "injection_task": task.input.get("injection_task")})

    def tool_session(self, task: TaskSpec, ctx: RunContext) -> ToolSession | None:
        """The suite's tools over a fresh copy of its environment, with the task's injections."""
        suite_name = task.input["suite"]
        suite = self.suites[suite_name]
        goal = self._goal(suite, task.input)
        return AgentDojoSession(suite, self.tools[suite_name], self.system_message, task.input["prompt"],
                                initializer(goal), dict(task.input.get("injections") or {}),
                                max_iters=self.max_iters, tool_timeout_s=self.tool_timeout)

    async def evaluate(self, ctx: EvalContext) -> EvalResult:
        """AgentDojo's utility (and, under an attack, security) checks on the try's recorded calls and answer."""
        task = ctx.task.input
        suite = self.suites[task["suite"]]
        user_task = self._goal(suite, task)
        injection_id = task.get("injection_task")
        as_user_task = bool(task.get("as_user_task"))
        injection_task = suite.get_injection_task_by_id(injection_id) if injection_id and not as_user_task else None
        if RECORD_KEY not in ctx.result.artifacts:
            # without the session's record nothing says what the agent did to the tools under attack: grading it
            # would report the setup's security, not the agent's
            raise EvalError(f"agentdojo needs a tool-calling harness (tool_agent): this try left no tool session "
                            f"record ({ctx.result.error_kind or 'no error'}); the harness ran none of its tools")
        record = ctx.result.artifacts.get(RECORD_KEY) or {}
        calls = list(record.get("calls") or [])
        output = record.get("output")
        try:
            verdict = await asyncio.to_thread(grade, suite, user_task, injection_task,
                                              dict(task.get("injections") or {}), calls, output,
                                              dos=self.dos and injection_task is not None)
        except Exception as exc:  # AgentDojo's own check failing on what the agent left (e.g. an unhashable value)
            raise EvalError(f"AgentDojo's check raised {type(exc).__name__}: {exc}",
                            extra={"grader_exception": f"{type(exc).__name__}: {exc}"}) from None
        extra: dict[str, Any] = {"utility": verdict.utility, "suite": task["suite"], "user_task": task["user_task"],
                                 "calls": verdict.calls}
        if injection_task is not None:
            extra.update(security=verdict.security, injection_task=injection_id, attack=self.attack_name)
        if as_user_task:
            extra.update(injection_task=injection_id, as_user_task=True)
        return EvalResult(correct=verdict.utility, score=1.0 if verdict.utility else 0.0, extra=extra)

    def new_accumulator(self) -> AgentDojoAccumulator:
        """pass@k / avg@k on utility plus ``utility`` and, under an attack, ``utility_under_attack`` and
        ``attack_success_rate``, overall and per suite."""
        return AgentDojoAccumulator(self.k, self.attack_name)

    def resolved_settings(self) -> dict[str, Any]:
        """The benchmark version and package version the tasks and graders came from."""
        out: dict[str, Any] = {"benchmark_version": self.benchmark_version, "agentdojo": pkg.package_version(),
                               "suites": self.suite_names}
        if self.attack_name:
            out["attack"] = self.attack_name
        return out


__all__ = ["AgentDojo", "AgentDojoParams"]
