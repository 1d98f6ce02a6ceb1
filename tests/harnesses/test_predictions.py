"""The predictions harness and ``agentcompass evaluate``: the file's formats, hostile files refused naming the
file and entry, the pairing with benchmarks that grade patches, and a patch submitted without any environment."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

import agentcompass
from agentcompass._errors import ConfigError
from agentcompass.cli import EXIT_BAD_INPUT, main
from agentcompass.harnesses.predictions import Predictions, load_predictions
from agentcompass.interfaces import ComponentContext, PreparedTask, RunContext
from agentcompass.models.factory import NoModelClient

ROWS = [{"instance_id": "a__b-1", "model_patch": "diff --git a/x b/x\n", "model_name_or_path": "m"},
        {"instance_id": "a__b-2", "model_patch": None, "model_name_or_path": "m", "extra": {"ignored": [1]}}]


@pytest.mark.parametrize("shape", ["list", "object", "jsonl", "jsonl-named-json"])
def test_the_three_shapes_of_a_predictions_file_read_the_same(tmp_path: Path, shape: str) -> None:
    if shape == "list":
        path, text = tmp_path / "p.json", json.dumps(ROWS)
    elif shape == "object":
        path, text = tmp_path / "preds.json", json.dumps({r["instance_id"]: r for r in ROWS}, indent=2)
    else:
        path = tmp_path / ("p.jsonl" if shape == "jsonl" else "p.json")
        text = "\n".join(json.dumps(r) for r in ROWS) + "\n\n"
    path.write_text(text)
    preds = load_predictions(path)
    assert list(preds) == ["a__b-1", "a__b-2"]
    assert preds["a__b-1"].model_patch == "diff --git a/x b/x\n" and preds["a__b-2"].model_patch is None


@pytest.mark.parametrize(("text", "says"), [
    ("", "not a predictions file"),
    ("[]", "holds no predictions"),
    ('[{"model_patch": "x"}]', "instance_id"),
    ('[{"instance_id": 7}]', "instance_id"),
    ('[{"instance_id": "a"}, {"instance_id": "a"}]', "predicted twice"),
    ('{"a": {"instance_id": "b"}}', "under 'a' has instance_id 'b'"),
    ('{"instance_id": "a"}\n{"instance_id": [}\n', "line 2"),
    ('[{"instance_id": "a", "x": ' + "[" * 100_000 + "]" * 100_000 + "}]", ""),
    ("[" * 100_000, ""),
])
def test_a_malformed_or_hostile_file_is_refused_naming_the_file(tmp_path: Path, text: str, says: str) -> None:
    path = tmp_path / "p.json"
    path.write_text(text)
    try:
        preds = load_predictions(path)
    except ConfigError as exc:
        assert exc.field == "harness_params.file" and str(path) in str(exc) and says in str(exc)
    else:  # a deep value under a key the file format ignores is skipped, never a crash
        assert says == "" and list(preds) == ["a"]


def test_a_file_over_the_cap_is_refused_before_it_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from agentcompass.harnesses import predictions

    monkeypatch.setattr(predictions, "MAX_PREDICTIONS_BYTES", 100)
    path = tmp_path / "p.json"
    path.write_text(json.dumps(ROWS))
    with pytest.raises(ConfigError, match="over the 100 bytes"):
        load_predictions(path)


async def test_each_task_submits_its_patch_and_one_without_a_prediction_submits_nothing(
        tmp_path: Path, run_ctx: RunContext, log: logging.Logger) -> None:
    path = tmp_path / "p.json"
    path.write_text(json.dumps(ROWS))
    harness = Predictions({"file": str(path)}, ComponentContext())
    model = NoModelClient("m")  # never called
    got = await harness.run(PreparedTask(task_id="a__b-1", prompt="p"), None, model, run_ctx, log)
    assert got.patch == ROWS[0]["model_patch"] and got.trajectory.stop_reason == "prediction"
    none = await harness.run(PreparedTask(task_id="zz", prompt="p"), None, model, run_ctx, log)
    assert none.patch == "" and none.trajectory.stop_reason == "no_prediction"
    assert harness.resolved_settings() == {"predictions": 2, "model_name_or_path": ["m"]}


def test_a_benchmark_that_grades_no_patch_is_refused_before_any_task_runs(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    path.write_text(json.dumps(ROWS))
    with pytest.raises(ConfigError, match="does not grade a submitted patch.*SWE-bench") as info:
        agentcompass.run_evaluation("shell_tasks", "predictions", "m", harness_params={"file": str(path)},
                                    progress="none", results_dir=str(tmp_path / "r"))
    assert info.value.field == "harness"
    assert not (tmp_path / "r").exists() or not list((tmp_path / "r").rglob("details"))


def test_evaluate_refuses_an_instance_the_dataset_does_not_have_with_exit_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "p.json"
    path.write_text(json.dumps([{"instance_id": "nobody__nothing-1", "model_patch": "", "model_name_or_path": "m"}]))
    rc = main(["evaluate", "swebench_local", "--predictions", str(path), "--progress", "none",
               "--results-dir", str(tmp_path / "r"), "--data-dir", str(tmp_path / "d")])
    assert rc == EXIT_BAD_INPUT
    assert "nobody__nothing-1" in capsys.readouterr().err


def test_evaluate_refuses_a_malformed_file_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "p.json"
    path.write_text('[{"instance_id": 1}]')
    assert main(["evaluate", "swebench_local", "--predictions", str(path)]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert str(path) in err and "instance_id" in err


def test_evaluate_help_names_the_predictions_file_and_no_harness_or_model_flag(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["evaluate", "--help"])
    out = capsys.readouterr().out
    assert "--predictions FILE" in out and "--task-concurrency" in out
    assert "--harness-params" not in out and "--model-base-url" not in out
