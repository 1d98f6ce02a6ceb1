"""The declared component bases: a benchmark, a harness and a provider written with only their required methods
run end to end (every other hook is the base's default), and a component that is not one is refused clearly."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any, ClassVar

import pytest

import agentcompass
from agentcompass import ConfigError
from agentcompass.interfaces import (
    Benchmark,
    ComponentContext,
    Environment,
    EnvironmentProvider,
    EnvOpenSpec,
    EvalContext,
    EvalResult,
    ExecResult,
    Harness,
    HarnessResult,
    ModelClient,
    NetworkPolicy,
    PreparedTask,
    RunContext,
    TaskSpec,
)

from .run_details import details_by_task

HERE = "tests.test_component_bases"
#: the scripted model's answers: right for sum-0 and sum-1, wrong for sum-2
SCRIPT: dict[str, Any] = {"bundled": False, "fallback": "no idea", "script": [
    {"match": "sum-task sum-0:", "turns": ["2"]},
    {"match": "sum-task sum-1:", "turns": ["3"]},
    {"match": "sum-task sum-2:", "turns": ["5"]},
]}
#: what the minimal provider opened and closed, by environment id (module-level: the engine builds the provider)
OPENED: list[str] = []
CLOSED: list[str] = []


class SumTasks(Benchmark):
    """Three tasks ``i + 2``; only the required methods."""

    def load_tasks(self) -> list[TaskSpec]:
        return [TaskSpec(task_id=f"sum-{i}", input={"a": i, "b": 2}, ground_truth=str(i + 2)) for i in range(3)]

    def prepare(self, task: TaskSpec) -> PreparedTask:
        return PreparedTask(task_id=task.task_id,
                            prompt=f"sum-task {task.task_id}: what is {task.input['a']} + {task.input['b']}?")

    async def evaluate(self, ctx: EvalContext) -> EvalResult:
        # artifacts come from the base's collect: {} (the old Protocol's stub gave None)
        return EvalResult(correct=(ctx.result.final_answer or "").strip() == ctx.task.ground_truth,
                          extra={"artifacts": ctx.artifacts})


class TwiceSumTasks(SumTasks):
    """``SumTasks`` with two attempts per task."""

    k = 2


class MemoryEnvironment:
    """An environment that keeps files in a dict and answers ``exec`` with the command it ran."""

    def __init__(self, env_id: str) -> None:
        self.id = env_id
        self.workdir = "/memory"
        self.files: dict[str, bytes] = {}

    async def exec(self, cmd: str | Sequence[str], *, timeout: float | None = None, cwd: str | None = None,
                   env: dict[str, str] | None = None) -> ExecResult:
        text = cmd if isinstance(cmd, str) else " ".join(cmd)
        return ExecResult(exit_code=0, stdout=f"ran {text}", output_bytes=len(text) + 4)

    async def write_file(self, path: str, data: bytes | str) -> None:
        self.files[path] = data.encode() if isinstance(data, str) else data

    async def read_file(self, path: str) -> bytes:
        return self.files[path]

    async def put_archive(self, path: str, tar_bytes: bytes | IO[bytes]) -> None:
        raise NotImplementedError

    async def get_archive(self, path: str) -> bytes:
        raise NotImplementedError

    async def set_network_policy(self, policy: NetworkPolicy) -> None:
        pass

    async def close(self) -> None:
        if self.id not in CLOSED:
            CLOSED.append(self.id)


class MemoryProvider(EnvironmentProvider):
    """Opens ``MemoryEnvironment``s; only the required method."""

    async def open(self, spec: EnvOpenSpec) -> Environment:
        env_id = f"mem-{spec.task_id}-{spec.role}-{len(OPENED)}"
        OPENED.append(env_id)
        return MemoryEnvironment(env_id)


class AskOnce(Harness):
    """Runs one command, asks the model once, answers with its reply; only the required method."""

    async def run(self, task: PreparedTask, env: Environment | None, model: ModelClient, ctx: RunContext,
                  log: logging.Logger) -> HarnessResult:
        assert env is not None
        res = await env.exec("echo hi")
        reply = await model.complete([{"role": "user", "content": task.prompt}])
        return HarnessResult(final_answer=reply.content, artifacts={"exec": res.stdout, "k_seen": self.ctx.k})


def _run(tmp_path: Path, benchmark: str = f"{HERE}:SumTasks", **kw: Any) -> Any:
    return agentcompass.run_evaluation(benchmark, f"{HERE}:AskOnce", "scripted", environment=f"{HERE}:MemoryProvider",
                                       model_params=SCRIPT, results_dir=str(tmp_path), progress="none", **kw)


def test_components_with_only_their_required_methods_run_end_to_end(tmp_path: Path) -> None:
    OPENED.clear()
    CLOSED.clear()
    out = _run(tmp_path)
    assert out.status == "completed", out.error
    assert out.metrics["tasks"] == 3 and out.metrics["solved"] == 2  # graded: Harness.evaluates defaults to True
    assert out.metrics["pass@1"] == pytest.approx(2 / 3)  # the engine's default accumulator
    details = details_by_task(out.run_dir)
    assert {t: d.correct for t, d in details.items()} == {"sum-0": True, "sum-1": True, "sum-2": False}
    for task_id, d in details.items():
        a = d.attempts["1"]
        assert a.status == "completed" and a.error_kind is None
        assert a.extra["artifacts"] == {}  # Benchmark.collect's default
        (env,) = a.meta["environments"]
        assert env["provider"] == "MemoryProvider"  # the name defaults to the class name
        assert env["id"].startswith(f"mem-{task_id}-agent-")
    assert sorted(OPENED) == sorted(CLOSED) and len(OPENED) == 3  # every environment the engine opened, closed


def test_the_resolved_k_reaches_the_other_components_through_the_context(tmp_path: Path) -> None:
    out = _run(tmp_path, benchmark=f"{HERE}:TwiceSumTasks")
    assert out.status == "completed", out.error
    details = details_by_task(out.run_dir)
    assert all(len(d.attempts) == 2 for d in details.values())
    seen = {a.artifacts.get("k_seen") for d in details.values() for a in d.attempts.values()}
    assert seen == {2}


def test_a_network_mode_outside_the_providers_capabilities_is_refused_before_any_task(tmp_path: Path) -> None:
    OPENED.clear()
    with pytest.raises(ConfigError, match="cannot enforce network policy mode 'none'. Allowed: 'public'") as info:
        _run(tmp_path, environment_params={"network_policy": "none"})
    assert info.value.field == "environment_params.network_policy"
    assert OPENED == []


class NoEvaluate(Benchmark):
    """A benchmark that forgot ``evaluate``."""

    def load_tasks(self) -> list[TaskSpec]:
        return []

    def prepare(self, task: TaskSpec) -> PreparedTask:
        return PreparedTask(task_id=task.task_id, prompt="")


class DuckBenchmark:
    """What a benchmark was before the bases: the right methods, no base class."""

    version: ClassVar[str] = "1"

    def __init__(self, params: dict[str, Any], ctx: ComponentContext) -> None:
        pass

    def load_tasks(self) -> list[TaskSpec]:
        return []

    def prepare(self, task: TaskSpec) -> PreparedTask:
        return PreparedTask(task_id=task.task_id, prompt="")

    async def evaluate(self, ctx: EvalContext) -> EvalResult:
        return EvalResult(correct=True)


def test_instantiating_a_subclass_missing_a_required_method_names_it() -> None:
    # Python's own message (3.12 words it "without an implementation for abstract method 'evaluate'")
    with pytest.raises(TypeError, match=r"abstract class NoEvaluate .*abstract method '?evaluate"):
        NoEvaluate({}, ComponentContext())  # type: ignore[abstract]


def test_a_component_missing_a_required_method_is_refused_naming_the_method_and_the_field(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        _run(tmp_path, benchmark=f"{HERE}:NoEvaluate")
    assert info.value.field == "benchmark"
    assert "NoEvaluate does not implement `evaluate`, required by `agentcompass.interfaces.Benchmark`" \
        in str(info.value)
    assert not any(tmp_path.iterdir())  # refused before anything was written


def test_a_component_that_does_not_subclass_its_base_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        _run(tmp_path, benchmark=f"{HERE}:DuckBenchmark")
    assert info.value.field == "benchmark"
    assert "DuckBenchmark does not subclass `agentcompass.interfaces.Benchmark`" in str(info.value)
