"""Registries: built-ins, import paths, recipe dirs, readable errors, one set per engine."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

import agentcompass
from agentcompass import ConfigError
from agentcompass.interfaces import Environment, Harness, HarnessResult, ModelClient, PreparedTask, RunContext
from agentcompass.registry import Registries


def test_unknown_id_lists_known_ids_and_the_closest_match() -> None:
    regs = Registries()
    with pytest.raises(ConfigError) as info:
        regs["harness"].resolve("shel_agent")
    assert "Did you mean 'shell_agent'" in str(info.value) and "openai_chat" in str(info.value)


def test_import_path_ids_resolve_and_bad_ones_explain() -> None:
    regs = Registries()
    assert regs["environment"].resolve("agentcompass.environments.local.provider:LocalProvider").name == "local"
    shell_tasks = regs["benchmark"].resolve("agentcompass.benchmarks.shell_tasks.benchmark.ShellTasks")
    assert shell_tasks.__name__ == "ShellTasks"
    with pytest.raises(ConfigError, match="Cannot load benchmark 'agentcompass.benchmarks.shell_tasks.benchmark:Nope'.*"
                                          "has no attribute 'Nope'"):
        regs["benchmark"].resolve("agentcompass.benchmarks.shell_tasks.benchmark:Nope")


@pytest.mark.parametrize("name", ["shell_tasks.v2", "shell_tasks:V2", "nowhere.mod:Thing", "shell_tasks."])
def test_dotted_id_whose_module_does_not_exist_still_lists_known_ids(name: str) -> None:
    with pytest.raises(ConfigError) as info:
        Registries()["benchmark"].resolve(name, field="benchmark")
    msg = str(info.value)
    assert msg.startswith(f"Unknown benchmark id {name!r} in field `benchmark`.")
    assert "importing it as an import path failed" in msg and "swebench_lite" in msg
    if name.startswith("shell_tasks"):
        assert "Did you mean 'shell_tasks'?" in msg
    assert info.value.field == "benchmark"


def test_broken_module_behind_an_import_path_reports_its_own_error(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "ac_broken_bench.py").write_text("import ac_missing_dependency\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError) as info:
        Registries()["benchmark"].resolve("ac_broken_bench:Bench")
    msg = str(info.value)
    assert msg.startswith("Cannot load benchmark 'ac_broken_bench:Bench'") and "ac_missing_dependency" in msg
    assert "Known benchmarks" not in msg


@pytest.mark.parametrize(("name", "what"), [("os:path", "a module"), ("json:dumps", "a function"),
                                            ("json.dumps", "a function"), ("os:sep", "a str"),
                                            ("agentcompass.benchmarks.shell_tasks.benchmark", "a module")])
def test_import_path_to_something_that_is_not_a_class_is_refused_at_resolve(name: str, what: str) -> None:
    with pytest.raises(ConfigError) as info:
        Registries()["benchmark"].resolve(name, field="benchmark")
    assert f"(field `benchmark`): {name} is {what}, not a class." in str(info.value)
    assert info.value.field == "benchmark"


def test_registered_target_that_is_not_a_class_is_refused_naming_the_target() -> None:
    regs = Registries(use_entry_points=False)
    regs["harness"].register("by_path", "json:dumps")
    regs["harness"].register("by_object", len)
    with pytest.raises(ConfigError, match=r"'by_path' \(registered as json:dumps\).*is a function, not a class"):
        regs["harness"].resolve("by_path")
    with pytest.raises(ConfigError, match=r"harness 'by_object' .*is a function, not a class"):
        regs["harness"].resolve("by_object")
    class Mine(Harness):
        async def run(self, task: PreparedTask, env: Environment | None, model: ModelClient, ctx: RunContext,
                      log: logging.Logger) -> HarnessResult:
            return HarnessResult()
    regs["harness"].register("cls", Mine)
    assert regs["harness"].resolve("cls") is Mine


def test_registries_are_per_engine_not_global() -> None:
    a, b = Registries(), Registries()
    a["benchmark"].register("mine", "agentcompass.benchmarks.shell_tasks.benchmark:ShellTasks")
    assert "mine" in a["benchmark"] and "mine" not in b["benchmark"]


def test_recipe_dir_registers_a_component_usable_by_name(tmp_path: Path) -> None:
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    (recipes / "quick.py").write_text(
        "def register(registries):\n"
        "    registries['benchmark'].register('quick_shell',\n"
        "                                     'agentcompass.benchmarks.shell_tasks.benchmark:ShellTasks')\n")
    out = agentcompass.run_evaluation("quick_shell", "shell_agent", "scripted", recipe_dirs=[str(recipes)],
                                      benchmark_params={"categories": ["answer"]}, results_dir=str(tmp_path / "r"),
                                      progress="none")
    assert out.ok and out.counts.done > 0
    assert out.run_dir is not None and out.run_dir.parts[-4] == "quick_shell"


def test_recipe_dir_that_is_missing_or_broken_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="recipe_dirs"):
        Registries([str(tmp_path / "missing")])
    (tmp_path / "bad.py").write_text("raise RuntimeError('nope')\n")
    with pytest.raises(ConfigError, match="bad.py.*failed to import"):
        Registries([str(tmp_path)])


@pytest.mark.parametrize(("kind", "plural"), [("harness", "harnesses"), ("benchmark", "benchmarks"),
                                              ("environment", "environments"), ("analyzer", "analyzers")])
def test_an_unknown_id_lists_the_known_ones_under_the_kinds_plural(kind: str, plural: str) -> None:
    with pytest.raises(ConfigError) as info:
        Registries()[kind].resolve("no_such_component")  # type: ignore[index]
    assert f" Known {plural}: " in str(info.value) and "harnesss" not in str(info.value)
