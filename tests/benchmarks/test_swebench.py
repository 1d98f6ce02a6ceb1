"""The SWE-bench benchmark classes: params, task preparation, patch inspection (no docker here)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentcompass._errors import ConfigError
from agentcompass.benchmarks.swebench import SWEBenchJsonl, SWEBenchLocal, SWEBenchVerified, changed_files, is_test_path
from agentcompass.interfaces import ComponentContext
from tests.swebench.conftest import needs_host_py311


def _dataset(tmp_path: Path) -> Path:
    rows = [{"instance_id": f"octo__demo-{i}", "repo": "octo/demo", "base_commit": "b" * 40,
             "problem_statement": f"bug {i}", "patch": "diff --git a/demo.py b/demo.py\n",
             "test_patch": "diff --git a/tests/test_demo.py b/tests/test_demo.py\n",
             "FAIL_TO_PASS": ["tests/test_demo.py::test_a"], "PASS_TO_PASS": []} for i in range(3)]
    f = tmp_path / "instances.jsonl"
    f.write_text("\n".join(json.dumps(r) for r in rows))
    return f


def test_tasks_keep_the_gold_patch_and_tests_out_of_what_the_agent_sees(tmp_path: Path) -> None:
    bench = SWEBenchJsonl({"dataset_file": str(_dataset(tmp_path)), "sample_ids": ["octo__demo-2"]},
                          ComponentContext(environment="docker"))
    [task] = bench.load_tasks()
    assert task.task_id == "octo__demo-2" and task.category == "octo/demo"
    assert task.ground_truth["FAIL_TO_PASS"] == ["tests/test_demo.py::test_a"]
    prepared = bench.prepare(task.public())
    assert prepared.workdir == "/testbed" and prepared.prompt == "bug 2"
    assert prepared.image == "swebench/sweb.eval.x86_64.octo_1776_demo-2:latest"
    blob = json.dumps(__import__("msgspec").to_builtins(prepared))
    assert "diff --git" not in blob and "test_a" not in blob


def test_swebench_refuses_environments_without_images(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="use environment 'docker'") as err:
        SWEBenchJsonl({"dataset_file": str(_dataset(tmp_path))}, ComponentContext(environment="local"))
    assert err.value.field == "environment"


def test_avgk_sets_attempts_and_makes_avg_at_k_the_headline(tmp_path: Path) -> None:
    bench = SWEBenchJsonl({"dataset_file": str(_dataset(tmp_path)), "avgk": 3}, ComponentContext())
    assert bench.k == 3 and bench.new_accumulator().result()[0]["primary_metric"] == "avg@3"
    with pytest.raises(ConfigError, match="either k or avgk"):
        SWEBenchJsonl({"dataset_file": str(_dataset(tmp_path)), "avgk": 3, "k": 2}, ComponentContext())


def test_unknown_params_and_missing_dataset_file_are_named() -> None:
    with pytest.raises(ConfigError, match="dataset_file"):
        SWEBenchJsonl({}, ComponentContext())
    with pytest.raises(ConfigError, match="sample_idz"):
        SWEBenchVerified({"sample_idz": ["x"]}, ComponentContext())


@needs_host_py311
def test_local_instances_come_with_a_build_recipe(tmp_path: Path) -> None:
    bench = SWEBenchLocal({"limit": 1}, ComponentContext(environment="docker", data_dir=str(tmp_path)))
    [task] = bench.load_tasks()
    prepared = bench.prepare(task.public())
    assert prepared.image_recipe is not None and prepared.image and prepared.image.startswith("agentcompass/")
    assert (Path(prepared.image_recipe.context_dir) / prepared.image_recipe.dockerfile).is_file()
    assert str(tmp_path) in prepared.image_recipe.context_dir


def test_changed_files_and_test_path_detection() -> None:
    patch = ("diff --git a/src/pkg/core.py b/src/pkg/core.py\n--- a/src/pkg/core.py\n+++ b/src/pkg/core.py\n"
             "diff --git a/tests/test_core.py b/tests/test_core.py\n"
             "diff --git a/old.py b/old.py\ndeleted file mode 100644\n")
    assert changed_files(patch) == ["src/pkg/core.py", "tests/test_core.py", "old.py"]
    assert [is_test_path(p) for p in ("tests/test_core.py", "pkg/test_x.py", "pkg/x_test.py", "conftest.py",
                                      "src/pkg/core.py", "pkg/contest.py", "testing/util.py")] == \
        [True, True, True, True, False, False, True]
