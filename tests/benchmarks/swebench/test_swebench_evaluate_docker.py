"""``agentcompass evaluate`` grades a predictions file on the bundled ``swebench_local`` instances through docker,
as the SWE-bench harness grades ``--predictions_path``: the gold patches resolve every instance, empty ones none;
``rescore`` grades the gold run again from its record."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

import agentcompass
from agentcompass.benchmarks.swebench.local_instances import load_local_instances
from agentcompass.cli import EXIT_OK, main
from agentcompass.records import RunInfo, TaskDetail

from ...environments.conftest import containers_of
from .conftest import needs_host_py311

INSTANCES = load_local_instances()
pytestmark = pytest.mark.xdist_group("swebench-local-images")  # with test_swebench_local_docker.py: one image build


def _evaluate(tmp_path: Path, run_id: str, predictions: Path) -> tuple[int, Path]:
    rc = main(["evaluate", "swebench_local", "--predictions", str(predictions), "--progress", "none",
               "--env-params", '{"cache_level": "instance"}', "--task-concurrency", "4", "--run-id", run_id,
               "--results-dir", str(tmp_path / "results"), "--data-dir", str(tmp_path / "data")])
    [run_dir] = [p.parent for p in (tmp_path / "results").rglob("run_info.json") if p.parent.name == run_id]
    return rc, run_dir


@pytest.mark.slow
@pytest.mark.timeout(900)
@needs_host_py311
def test_gold_predictions_resolve_every_instance_and_empty_ones_none(base_image: str, docker_run_id: str,
                                                                     tmp_path: Path) -> None:
    gold = tmp_path / "preds.json"  # the official harness's shape: an object keyed by instance id
    gold.write_text(json.dumps({i["instance_id"]: {"instance_id": i["instance_id"], "model_patch": i["patch"],
                                                   "model_name_or_path": "gold"} for i in INSTANCES}))
    rc, run_dir = _evaluate(tmp_path, f"{docker_run_id}-gold", gold)
    assert rc == EXIT_OK
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["metrics"]["pass@1"] == 1.0 and summary["metrics"]["tasks"] == len(INSTANCES)
    info = msgspec.json.decode((run_dir / "run_info.json").read_bytes(), type=RunInfo)
    assert info.model == "gold" and info.harness == "predictions"
    for path in (run_dir / "details").glob("*.json"):
        attempt = msgspec.json.decode(path.read_bytes(), type=TaskDetail).attempts["1"]
        assert attempt.correct is True and attempt.extra["eval_raw_data"]["resolved"] is True
        assert attempt.extra["patch_source"] == "harness" and attempt.meta.get("usage", {}).get("calls", 0) == 0

    # graded again from the record (the recorded harness, the SWE-bench 4.1.0 grader): every instance still
    # resolves, each regraded with 4.1.0, and the re-scored summary is the run's, byte for byte
    again = agentcompass.rescore(run_dir, benchmark_params={"grading_version": "4.1.0"}, progress="none",
                                 rescore_id=f"{docker_run_id}-rescore")  # its containers carry the test's label
    assert again.ok and again.changed == [], again.error
    assert Path(again.summary or "").read_bytes() == (run_dir / "summary.json").read_bytes()
    for path in Path(again.regrade_run_dir or "").glob("details/*.json"):
        raw = msgspec.json.decode(path.read_bytes(), type=TaskDetail).attempts["1"].extra["eval_raw_data"]
        assert raw["grading_version"] == "4.1.0" and raw["resolved"] is True

    empty = tmp_path / "predictions.jsonl"
    empty.write_text("".join(json.dumps({"instance_id": i["instance_id"], "model_patch": "",
                                         "model_name_or_path": "empty"}) + "\n" for i in INSTANCES))
    rc, run_dir = _evaluate(tmp_path, f"{docker_run_id}-empty", empty)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert rc == EXIT_OK and summary["metrics"]["pass@1"] == 0.0 and summary["metrics"]["tasks"] == len(INSTANCES)
    assert containers_of(f"{docker_run_id}-gold") == [] and containers_of(f"{docker_run_id}-empty") == []
    assert containers_of(f"{docker_run_id}-rescore") == []
