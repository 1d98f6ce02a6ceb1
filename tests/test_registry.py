"""Registries: built-ins, import paths, recipe dirs, readable errors, one set per engine."""

from __future__ import annotations

from pathlib import Path

import pytest

import agentcompass
from agentcompass import ConfigError
from agentcompass.registry import Registries


def test_unknown_id_lists_known_ids_and_the_closest_match() -> None:
    regs = Registries()
    with pytest.raises(ConfigError) as info:
        regs["harness"].resolve("shel_agent")
    assert "Did you mean 'shell_agent'" in str(info.value) and "openai_chat" in str(info.value)


def test_import_path_ids_resolve_and_bad_ones_explain() -> None:
    regs = Registries()
    assert regs["environment"].resolve("agentcompass.environments.local:LocalProvider").name == "local"
    with pytest.raises(ConfigError, match="Cannot load benchmark 'nowhere.mod:Thing'"):
        regs["benchmark"].resolve("nowhere.mod:Thing")


def test_registries_are_per_engine_not_global() -> None:
    a, b = Registries(), Registries()
    a["benchmark"].register("mine", "agentcompass.benchmarks.shell_tasks:ShellTasks")
    assert "mine" in a["benchmark"] and "mine" not in b["benchmark"]


def test_recipe_dir_registers_a_component_usable_by_name(tmp_path: Path) -> None:
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    (recipes / "quick.py").write_text(
        "def register(registries):\n"
        "    registries['benchmark'].register('quick_shell', 'agentcompass.benchmarks.shell_tasks:ShellTasks')\n")
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
