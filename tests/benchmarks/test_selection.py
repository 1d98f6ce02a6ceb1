"""Task selection and attempts, one way in every benchmark: ``sample_ids`` picks the same tasks (old names
``task_ids`` / ``user_tasks`` too), an unknown id is one error naming the param, and ``k`` comes from the params,
else the request, else 1."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, ClassVar

import pytest

import agentcompass
from agentcompass import ConfigError
from agentcompass.benchmarks.base import Benchmark
from agentcompass.benchmarks.selection import SELECTION_ALIASES
from agentcompass.interfaces import ComponentContext, EvalContext, EvalResult, PreparedTask, TaskSpec
from agentcompass.params import params_type, selection_params
from agentcompass.registry import Registries

from .bfcl_helpers import bfcl_data

#: every built-in benchmark that loads offline: (its params besides the selection, its context).
OFFLINE: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "shell_tasks": ({}, {}),
    "humaneval": ({}, {}),
    "qa_local": ({"judge_model": {"id": "scripted"}}, {}),
    "swebench_local": ({}, {}),
    "task_dir_local": ({}, {}),
    "tau2": ({"user_model": {"id": "scripted"}}, {}),
    "agentdojo": ({"suites": "banking"}, {}),
    "bfcl": ({"categories": ["simple_python", "multiple"]}, {"auto_install_dependencies": True}),
}
#: the old name each benchmark still takes for ``sample_ids``.
ALIASES = {"tau2": "task_ids", "bfcl": "task_ids", "agentdojo": "user_tasks"}


def _cls(name: str) -> type[Benchmark]:
    cls: type[Benchmark] = Registries(use_entry_points=False)["benchmark"].resolve(name)
    return cls


def _make(name: str, params: dict[str, Any] | None = None, **ctx: Any) -> Benchmark:
    if name == "bfcl":
        bfcl_data()  # the package's data (installed into the cache once; no connection when it is there)
    extra, context = OFFLINE[name]
    return _cls(name)({**extra, **(params or {})}, ComponentContext(**{**context, **ctx}))


def _ids(bench: Benchmark) -> list[str]:
    return [t.task_id for t in bench.load_tasks()]  # type: ignore[union-attr]  # agentdojo's is a generator


def _refused(name: str, params: dict[str, Any]) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        _make(name, params)
    return info.value


@pytest.mark.parametrize("name", sorted(OFFLINE))
def test_sample_ids_and_k_mean_the_same_in_every_benchmark(name: str) -> None:
    every = _ids(_make(name))
    assert len(every) >= 3
    # picked in the dataset's order, whatever order they are given in; one id alone as a string
    assert _ids(_make(name, {"sample_ids": [every[2], every[0]]})) == [every[0], every[2]]
    assert _ids(_make(name, {"sample_ids": every[1]})) == [every[1]]
    # an unknown id: the one error, naming the param, the unknown ids, a guess and a few valid ids
    typo = every[0] + "x"
    err = _refused(name, {"sample_ids": ["no/such-task", typo]})
    assert err.field == "benchmark.params.sample_ids"
    assert re.match(rf"Unknown task ids 'no/such-task', {re.escape(repr(typo))} in parameter 'sample_ids' of "
                    rf"benchmark {name}[ .]", str(err)), str(err)
    assert f"Did you mean {every[0]!r} for {typo!r}?" in str(err)
    assert f"Valid ids: {every[0]!r}, {every[1]!r}" in str(err)
    err = _refused(name, {"sample_ids": []})
    assert err.field == "benchmark.params.sample_ids" and "must not be empty" in str(err)
    # attempts: the param, else the request's k, else 1
    assert _make(name, {"k": 2}).k == 2
    assert _make(name, k=3).k == 3
    assert _make(name, {"k": 2}, k=3).k == 2
    assert _make(name).k == 1


@pytest.mark.parametrize("name", sorted(ALIASES))
def test_an_old_name_selects_like_sample_ids_and_is_named_in_its_errors(name: str) -> None:
    alias = ALIASES[name]
    every = _ids(_make(name))
    assert _ids(_make(name, {alias: [every[2], every[1]]})) == _ids(_make(name, {"sample_ids": [every[1], every[2]]}))
    err = _refused(name, {alias: ["no/such-task"]})
    assert err.field == f"benchmark.params.{alias}"
    assert str(err).startswith(f"Unknown task id 'no/such-task' in parameter {alias!r} of benchmark {name}")
    err = _refused(name, {alias: [every[0]], "sample_ids": [every[0]]})
    assert err.field == f"benchmark.params.{alias}"
    assert f"'sample_ids' and {alias!r}" in str(err) and "give one" in str(err)


def test_every_built_in_benchmark_takes_sample_ids_and_leaves_it_out_of_the_reuse_identity() -> None:
    registry = Registries(use_entry_points=False)["benchmark"]
    for name in registry.names():
        cls = registry.resolve(name)
        struct = params_type(cls)
        assert struct is not None, name
        declared = set(struct.__struct_fields__)
        assert "sample_ids" in declared, name
        for param in ("sample_ids", *SELECTION_ALIASES):
            assert param not in declared or param in selection_params(cls), (name, param)


def test_attempts_are_resolved_in_one_place() -> None:
    root = Path(agentcompass.__file__).parent
    places = [f"{p.relative_to(root)}" for p in sorted(root.rglob("*.py"))
              for line in p.read_text().splitlines() if "ctx.k or" in line]
    assert places == ["benchmarks/selection.py"]


class Plain(Benchmark):
    """A benchmark that keeps the base constructor: ``k`` and ``sample_ids`` come from it."""

    name: ClassVar[str] = "plain"
    TASKS: ClassVar[list[TaskSpec]] = [TaskSpec(task_id=f"t{i}", input={}) for i in range(4)]

    def load_tasks(self) -> list[TaskSpec]:
        return self.select(self.TASKS)

    def prepare(self, task: TaskSpec) -> PreparedTask:
        return PreparedTask(task_id=task.task_id, prompt="")

    async def evaluate(self, ctx: EvalContext) -> EvalResult:
        return EvalResult(correct=True)


class Twice(Plain):
    """A benchmark that declares its own default ``k``."""

    k = 2


def test_the_base_constructor_resolves_k_and_the_selection_for_any_benchmark() -> None:
    assert Plain({"k": 4}, ComponentContext(k=2)).k == 4
    assert Plain({}, ComponentContext(k=2)).k == 2
    assert Plain({}, ComponentContext()).k == 1
    # a class's own k stands unless the params or the request give one
    assert Twice({}, ComponentContext()).k == 2
    assert Twice({}, ComponentContext(k=3)).k == 3
    assert Twice({"k": 1}, ComponentContext()).k == 1
    assert Plain({"avgk": 5}, ComponentContext()).k == 5
    assert [t.task_id for t in Plain({"task_ids": ["t3", "t1"]}, ComponentContext()).load_tasks()] == ["t1", "t3"]
    with pytest.raises(ConfigError, match="Parameter 'k' of benchmark plain must be an integer >= 1") as info:
        Plain({"k": 0}, ComponentContext())
    assert info.value.field == "benchmark.params.k"
    with pytest.raises(ConfigError, match="either k or avgk") as info:
        Plain({"k": 2, "avgk": 2}, ComponentContext())
    with pytest.raises(ConfigError, match="must be a task id or a list of them") as info:
        Plain({"sample_ids": 5}, ComponentContext())
    assert info.value.field == "benchmark.params.sample_ids"
    with pytest.raises(ConfigError, match="Unknown task id 't9' in parameter 'user_tasks' of benchmark plain"):
        Plain({"user_tasks": "t9"}, ComponentContext()).load_tasks()
