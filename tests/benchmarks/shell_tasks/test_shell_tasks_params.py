"""shell_tasks loading: selection params, repeat for load tests, k, and readable errors for bad params."""

from __future__ import annotations

import pytest

from agentcompass._errors import ConfigError
from agentcompass.benchmarks.shell_tasks.benchmark import ShellTasks, all_tasks
from agentcompass.interfaces import ComponentContext
from agentcompass.registry import Registries


def bench(**params: object) -> ShellTasks:
    return ShellTasks(dict(params), ComponentContext())


def test_default_loads_every_task_with_its_ground_truth() -> None:
    tasks = bench().load_tasks()
    assert [t.task_id for t in tasks] == [t.id for t in all_tasks()]
    for t in tasks:
        assert t.category == t.task_id.split("/")[0]
        truth = t.ground_truth
        assert truth["checks"] or truth["expected_answer"] is not None


def test_prepare_names_the_task_and_the_workspace_and_hides_the_ground_truth() -> None:
    b = bench(sample_ids=["text/sort_unique"])
    [task] = b.load_tasks()
    prepared = b.prepare(task.public())
    assert prepared.task_id == "text/sort_unique"
    assert prepared.prompt.startswith("Task: text/sort_unique\n")
    assert "workspace is the current directory" in prepared.prompt
    assert prepared.files == {"names.txt": "carol\nalice\nbob\nalice\ndave\ncarol\nbob\nerin\n"}
    assert "checks" not in str(prepared) and "'lines'" not in str(prepared)


def test_sample_ids_pick_exactly_those_tasks() -> None:
    ids = ["python/fib", "files/hello_world"]
    assert sorted(t.task_id for t in bench(sample_ids=ids).load_tasks()) == sorted(ids)


def test_categories_filter_the_set() -> None:
    tasks = bench(categories=["python", "answer"]).load_tasks()
    assert tasks and {t.category for t in tasks} == {"python", "answer"}
    assert len(tasks) == sum(1 for t in all_tasks() if t.category in ("python", "answer"))


def test_limit_cuts_the_list() -> None:
    assert len(bench(limit=5).load_tasks()) == 5


def test_repeat_copies_the_set_with_suffixed_ids_and_the_same_prompts() -> None:
    b = bench(sample_ids=["files/hello_world", "answer/fib_30"], repeat=3)
    tasks = b.load_tasks()
    assert [t.task_id for t in tasks] == [
        "files/hello_world", "answer/fib_30", "files/hello_world#2", "answer/fib_30#2",
        "files/hello_world#3", "answer/fib_30#3"]
    first, copy = b.prepare(tasks[0].public()), b.prepare(tasks[4].public())
    assert copy.task_id == "files/hello_world#3"
    assert copy.prompt == first.prompt


def test_repeat_and_limit_make_a_thousand_distinct_tasks() -> None:
    tasks = bench(repeat=30, limit=1000).load_tasks()
    assert len(tasks) == 1000
    assert len({t.task_id for t in tasks}) == 1000


def test_k_is_an_attribute_for_the_engine() -> None:
    assert bench().k == 1
    assert bench(k=4).k == 4
    assert ShellTasks({}, ComponentContext(k=3)).k == 3


@pytest.mark.parametrize(("params", "needle"), [
    ({"samples": ["files/hello_world"]}, "'samples'"),
    ({"k": 0}, "'k'"),
    ({"k": "2"}, "'k'"),
    ({"repeat": 0}, "'repeat'"),
    ({"limit": -1}, "'limit'"),
    ({"eval_timeout": 0}, "'eval_timeout'"),
    ({"categories": ["files", 3]}, "'categories'"),
    ({"categories": ["network"]}, "files, text, python, answer"),
    ({"sample_ids": ["files/nope"]}, "files/hello_world"),
    ({"sample_ids": "files/nope"}, "'files/nope'"),
])
def test_bad_params_raise_config_error_with_the_allowed_values(params: dict[str, object],
                                                               needle: str) -> None:
    with pytest.raises(ConfigError) as exc:
        bench(**params)
    assert needle in str(exc.value)
    assert exc.value.field and exc.value.field.startswith("benchmark.params.")


def test_unknown_param_error_lists_the_allowed_keys() -> None:
    with pytest.raises(ConfigError) as exc:
        bench(sample=["x"])
    for key in ("sample_ids", "categories", "limit", "k", "repeat", "eval_timeout"):
        assert key in str(exc.value)


def test_builtin_registry_names_resolve_to_these_components() -> None:
    regs = Registries(use_entry_points=False)
    assert regs["benchmark"].resolve("shell_tasks") is ShellTasks
    for name in ("none", "openai_chat", "shell_agent"):
        cls = regs["harness"].resolve(name)
        assert isinstance(cls.needs_environment, bool) and isinstance(cls.evaluates, bool)
