"""``swebench_multilingual`` with ``local: true`` end to end on Docker with the scripted model: the bundled Go
instance's image builds from its recipe (Debian's Go toolchain, no module downloads), the gold patch resolves it
through the Go eval script and the gotest parser, and no patch resolves nothing."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import msgspec
import pytest

import agentcompass
from agentcompass.benchmarks.swebench.multilingual_local import load_local_instances
from agentcompass.records import TaskDetail

from ...environments.conftest import containers_of

INSTANCES = load_local_instances()


def _apply_turn(patch: str) -> str:
    b64 = base64.b64encode(patch.encode()).decode()
    return f"```bash\ncd /testbed && echo {b64} | base64 -d | git apply -v\n```"


def _run(tmp_path: Path, run_id: str, make_turns: Any, name: str) -> tuple[Any, list[TaskDetail]]:
    script = [{"match": inst["problem_statement"][:200], "turns": make_turns(inst)} for inst in INSTANCES]
    out = agentcompass.run_evaluation(
        "swebench_multilingual", "shell_agent", "scripted", "docker", benchmark_params={"local": True},
        model_params={"script": script, "bundled": False},
        environment_params={"cache_level": "instance"},  # the image stays for the second run (and later ones)
        task_concurrency=2, run_id=f"{run_id}-{name}", results_dir=str(tmp_path), data_dir=str(tmp_path / "data"),
        progress="none")
    assert out.run_dir is not None
    details = [msgspec.json.decode(p.read_bytes(), type=TaskDetail) for p in (out.run_dir / "details").glob("*.json")]
    return out, details


def test_the_bundled_go_instance_is_a_real_format_instance() -> None:
    [inst] = [i for i in INSTANCES if i["language"] == "Go"]
    assert inst["log_parser"] == "gotest" and inst["test_cmd"][0].startswith("go test -v ")
    assert inst["FAIL_TO_PASS"] and inst["PASS_TO_PASS"]
    assert not set(inst["FAIL_TO_PASS"]) & set(inst["PASS_TO_PASS"])


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_gold_patch_resolves_the_go_instance_and_empty_patch_does_not(base_image: str, docker_run_id: str,
                                                                      tmp_path: Path) -> None:
    gold, details = _run(tmp_path, docker_run_id, lambda i: [_apply_turn(i["patch"]), "<submit>done</submit>"],
                         "gold")
    assert gold.status == "completed" and gold.counts.errors == 0, gold.errors_by_kind
    assert gold.metrics["pass@1"] == 1.0 and len(details) == len(INSTANCES)
    for d in details:
        raw = d.attempts["1"].extra["eval_raw_data"]
        inst = next(i for i in INSTANCES if i["instance_id"] == d.task_id)
        assert raw["resolved"] is True and raw["parser"] == "gotest" and raw["error"] is None
        assert raw["tests_status"]["FAIL_TO_PASS"]["success"] == inst["FAIL_TO_PASS"]
        assert raw["tests_status"]["PASS_TO_PASS"]["success"] == inst["PASS_TO_PASS"]
        assert "--- PASS: " + inst["FAIL_TO_PASS"][0] in raw["test_output"]

    # the tests of the test patch alone fail on the base tree: the agent fixed nothing
    tests_only, details = _run(tmp_path, docker_run_id,
                               lambda i: [_apply_turn(i["test_patch"]), "<submit>done</submit>"], "tests-only")
    assert tests_only.status == "completed" and tests_only.metrics["pass@1"] == 0.0
    for d in details:
        raw = d.attempts["1"].extra["eval_raw_data"]
        assert raw["resolved"] is False and raw["tests_status"]["FAIL_TO_PASS"]["failure"]
        assert raw["tests_status"]["PASS_TO_PASS"]["failure"] == []

    empty, details = _run(tmp_path, docker_run_id, lambda i: ["<submit></submit>"], "empty")
    assert empty.status == "completed" and empty.metrics["pass@1"] == 0.0
    assert all(d.attempts["1"].correct is False for d in details) and len(details) == len(INSTANCES)
    for name in ("gold", "tests-only", "empty"):
        assert containers_of(f"{docker_run_id}-{name}") == []
