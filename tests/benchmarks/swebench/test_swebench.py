"""The SWE-bench benchmark classes: params, task preparation, patch inspection (no docker here)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentcompass._errors import ConfigError
from agentcompass.benchmarks.swebench.benchmark import (
    SWEBenchJsonl,
    SWEBenchLocal,
    SWEBenchVerified,
    changed_files,
    instance_image,
    is_test_path,
)
from agentcompass.interfaces import ComponentContext
from tests.benchmarks.swebench.conftest import needs_host_py311


def _dataset(tmp_path: Path, **extra: object) -> Path:
    rows = [{**extra, "instance_id": f"octo__demo-{i}", "repo": "octo/demo", "base_commit": "b" * 40,
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


# A row as newer SWE-bench releases ship it (swebench 5.x): its own image, eval script, parser and eval type.
EVAL_SCRIPT = """#!/bin/bash
set -uxo pipefail
source /opt/miniconda3/bin/activate
conda activate testbed
cd /testbed
git checkout bbbb tests/test_demo.py
git apply -v - <<'EOF_114329324912'
diff --git a/tests/test_demo.py b/tests/test_demo.py
EOF_114329324912
: '>>>>> Start Test Output'
pytest -rA tests/test_demo.py
: '>>>>> End Test Output'
git checkout bbbb tests/test_demo.py
"""


def test_a_row_with_its_own_image_and_eval_script_is_prepared_and_graded_with_them(tmp_path: Path) -> None:
    from agentcompass.benchmarks.swebench.test_specs import make_eval_script

    data = _dataset(tmp_path, image="ghcr.io/octo/sweb.eval.demo:v2", eval_script=EVAL_SCRIPT,
                    log_parser="pytest", eval_type="pass_and_fail")
    bench = SWEBenchJsonl({"dataset_file": str(data), "sample_ids": ["octo__demo-1"]},
                          ComponentContext(environment="docker"))
    [task] = bench.load_tasks()
    assert bench.prepare(task.public()).image == "ghcr.io/octo/sweb.eval.demo:v2"
    assert task.ground_truth["eval_script"] == EVAL_SCRIPT and task.ground_truth["log_parser"] == "pytest"
    assert task.ground_truth["eval_type"] == "pass_and_fail"
    script = make_eval_script({**bench._instance(task.task_id), **task.ground_truth})  # what evaluate() runs
    lines = script.splitlines()
    assert lines[:3] == ["#!/bin/bash", "set -uxo pipefail", "exec 2>&1"]
    guard = next(i for i, line in enumerate(lines) if "apply --check" in line)  # the test patch must apply first
    source = lines.index("source /opt/miniconda3/bin/activate")
    assert guard < source and lines[source + 1] == "conda activate testbed"
    assert "pytest -rA tests/test_demo.py\nac_test_rc=$?\n: '>>>>> End Test Output'\n" in script


def test_swe_smith_style_image_names_are_used_and_checked(tmp_path: Path) -> None:
    data = _dataset(tmp_path, image_name="jyangballin/swesmith.x86_64.octo_1776_demo.abc123",
                    test_cmd="pytest --disable-warnings -rA")
    bench = SWEBenchJsonl({"dataset_file": str(data)}, ComponentContext(environment="docker"))
    task = bench.load_tasks()[0]
    assert bench.prepare(task.public()).image == "jyangballin/swesmith.x86_64.octo_1776_demo.abc123"
    assert task.ground_truth["test_cmd"] == "pytest --disable-warnings -rA"
    assert instance_image({"image": "a:1", "image_name": "b:2"}) == "a:1"
    assert instance_image({"image": "", "image_name": None}) is None
    with pytest.raises(ConfigError) as err:
        SWEBenchJsonl({"dataset_file": str(_dataset(tmp_path, image_name="not an image"))}, ComponentContext())
    assert err.value.field == "image_name"


def test_a_row_whose_eval_script_prints_no_markers_is_refused_before_the_run(tmp_path: Path) -> None:
    data = _dataset(tmp_path, eval_script="#!/bin/bash\npytest -rA\n")
    with pytest.raises(ConfigError, match="markers") as err:
        SWEBenchJsonl({"dataset_file": str(data)}, ComponentContext(environment="docker"))
    assert err.value.field == "eval_script"


def test_hub_rows_bring_their_own_image_and_eval_script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.standins.hf_hub import HubStandIn, swebench_parquet

    row = {"instance_id": "octo__demo-1", "repo": "octo/demo", "base_commit": "b" * 40, "problem_statement": "bug",
           "patch": "diff --git a/demo.py b/demo.py\n", "test_patch": "diff --git a/tests/t.py b/tests/t.py\n",
           "FAIL_TO_PASS": '["tests/t.py::test_a"]', "PASS_TO_PASS": "[]", "version": "1.0",
           "image": "swebench/sweb.eval.x86_64.octo_1776_demo-1:v5", "eval_script": EVAL_SCRIPT,
           "log_parser": "pytest", "eval_type": "pass_and_fail"}
    with HubStandIn() as hub:
        hub.add_dataset("SWE-bench/SWE-bench_Verified",
                        {"data/test-00000-of-00001.parquet": swebench_parquet([row])})
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        bench = SWEBenchVerified({}, ComponentContext(environment="docker", data_dir=str(tmp_path)))
    [task] = bench.load_tasks()
    assert bench.prepare(task.public()).image == "swebench/sweb.eval.x86_64.octo_1776_demo-1:v5"
    assert task.ground_truth["eval_script"] == EVAL_SCRIPT and task.ground_truth["eval_type"] == "pass_and_fail"


def test_a_row_with_an_unknown_eval_type_is_refused_before_the_run(tmp_path: Path) -> None:
    data = _dataset(tmp_path, eval_type="fail-only")
    with pytest.raises(ConfigError, match="fail_only") as err:
        SWEBenchJsonl({"dataset_file": str(data)}, ComponentContext(environment="docker"))
    assert err.value.field == "eval_type"
