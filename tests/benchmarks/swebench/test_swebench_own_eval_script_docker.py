"""A ``swebench_jsonl`` row that brings its own image and eval script (as newer SWE-bench releases ship them) is
graded with that script on Docker: the gold patch resolves it, a patch that changes nothing the tests use
does not (the script runs and the FAIL_TO_PASS tests fail)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

import agentcompass
from agentcompass.benchmarks.swebench.benchmark import SWEBenchLocal
from agentcompass.benchmarks.swebench.local_instances import load_local_instances
from agentcompass.benchmarks.swebench.test_specs import END_TEST_OUTPUT, START_TEST_OUTPUT, TEST_EXIT_CODE, patch_files
from agentcompass.interfaces import ComponentContext
from agentcompass.records import TaskDetail

from ...environments.conftest import containers_of
from .conftest import needs_host_py311

INSTANCE = load_local_instances()[0]
NO_FIX = ("diff --git a/NOTES.txt b/NOTES.txt\nnew file mode 100644\n--- /dev/null\n+++ b/NOTES.txt\n"
          "@@ -0,0 +1 @@\n+hi\n")


def official_style_eval_script(inst: dict[str, Any]) -> str:
    """The eval script of ``inst`` in the shape swebench 4.1.0 generates and 5.x datasets carry."""
    files = [f.old_path for f in patch_files(inst["test_patch"]) if f.old_path]
    reset = f"git checkout {inst['base_commit']} {' '.join(files)}"
    return "\n".join([
        "#!/bin/bash", "set -uxo pipefail", "cd /testbed", "git config --global --add safe.directory /testbed",
        reset, f"git apply -v - <<'EOF_114329324912'\n{inst['test_patch']}\nEOF_114329324912",
        f": '{START_TEST_OUTPUT}'", f"pytest -rA -p no:cacheprovider {' '.join(files)}", f": '{END_TEST_OUTPUT}'",
        reset]) + "\n"


def _run(tmp_path: Path, run_id: str, bench: str, params: dict[str, Any], patch: str | None) -> tuple[Any, TaskDetail]:
    if patch is None:
        turns = ["<submit></submit>"]
    else:
        b64 = base64.b64encode(patch.encode()).decode()
        turns = [f"```bash\ncd /testbed && echo {b64} | base64 -d | git apply -v\n```", "<submit>done</submit>"]
    script = [{"match": INSTANCE["problem_statement"][:200], "turns": turns}]
    out = agentcompass.run_evaluation(
        bench, "shell_agent", "scripted", "docker", model_params={"script": script, "bundled": False},
        benchmark_params=params, environment_params={"cache_level": "instance"}, run_id=run_id,
        results_dir=str(tmp_path), data_dir=str(tmp_path / "data"), progress="none")
    assert out.run_dir is not None and out.status == "completed", out.errors_by_kind
    [detail] = [msgspec.json.decode(p.read_bytes(), type=TaskDetail) for p in (out.run_dir / "details").glob("*.json")]
    return out, detail


@pytest.mark.slow
@pytest.mark.timeout(900)
@needs_host_py311
def test_a_row_with_its_own_eval_script_and_image_is_graded_with_them(base_image: str, docker_run_id: str,
                                                                      tmp_path: Path) -> None:
    iid = INSTANCE["instance_id"]
    # the instance's image is built here by swebench_local (kept: cache_level instance); the row then names it
    _run(tmp_path, f"{docker_run_id}-build", "swebench_local", {"sample_ids": [iid]}, None)
    local = SWEBenchLocal({"sample_ids": [iid]},
                          ComponentContext(environment="docker", data_dir=str(tmp_path / "data")))
    image, _ = local.image_for(INSTANCE)
    # test_cmd "false" would fail every test if the generated script ran instead of the row's own
    row = {**INSTANCE, "image": image, "eval_script": official_style_eval_script(INSTANCE), "test_cmd": "false"}
    dataset = tmp_path / "rows.jsonl"
    dataset.write_text(json.dumps(row) + "\n")
    params = {"dataset_file": str(dataset)}

    gold, detail = _run(tmp_path, f"{docker_run_id}-gold", "swebench_jsonl", params, INSTANCE["patch"])
    raw = detail.attempts["1"].extra["eval_raw_data"]
    assert gold.metrics["pass@1"] == 1.0 and raw["resolved"] is True, raw
    assert f"+ : '{START_TEST_OUTPUT}'" in raw["test_output"]  # traced by the row's set -x
    assert f"{TEST_EXIT_CODE}: 0" in raw["test_output"] and raw["test_exit_code"] == 0

    no_fix, detail = _run(tmp_path, f"{docker_run_id}-nofix", "swebench_jsonl", params, NO_FIX)
    raw = detail.attempts["1"].extra["eval_raw_data"]
    assert no_fix.metrics["pass@1"] == 0.0 and raw["resolved"] is False and raw["patch_applied"] is True
    assert raw["tests_status"]["FAIL_TO_PASS"]["failure"] == INSTANCE["FAIL_TO_PASS"]
    assert f"{TEST_EXIT_CODE}: 1" in raw["test_output"]
    for suffix in ("build", "gold", "nofix"):
        assert containers_of(f"{docker_run_id}-{suffix}") == []
