"""An exception raised by the code running an attempt (not the agent, not the benchmark's verdict) is an
``engine_error``: kept apart from ``eval_error``, and a run that had one says so in its status and exit code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

import agentcompass
from agentcompass.records import TaskDetail

REPO = Path(__file__).resolve().parents[2]
# two tasks graded by tests (collect runs) and one graded by its answer (collect skips it)
SAMPLES = {"sample_ids": ["files/hello_world", "files/append_line", "answer/count_lines"]}


def test_an_attribute_error_in_collect_is_an_engine_error_and_fails_the_run(tmp_path: Path) -> None:
    out = agentcompass.run_evaluation("tests.engine.components:BrokenCollectBenchmark", "shell_agent", "scripted",
                                      benchmark_params=SAMPLES, results_dir=str(tmp_path), progress="none",
                                      max_retries=2)
    assert out.errors_by_kind == {"engine_error": 2}
    assert out.counts.engine_errors == 2 and out.counts.retries == 0  # a bug is not retried
    assert out.status == "failed"
    assert out.error is not None and "2 attempts ended with an engine error" in out.error
    assert "AttributeError" in out.error and "NoSuchFilterError" in out.error
    assert out.metrics["graded_tasks"] == 1  # the metrics are still written
    assert out.run_dir is not None
    summary = json.loads((out.run_dir / "summary.json").read_text())
    assert summary["status"] == "failed" and summary["errors_by_kind"] == {"engine_error": 2}
    assert summary["counts"]["engine_errors"] == 2
    info = json.loads((out.run_dir / "run_info.json").read_text())
    assert info["status"] == "failed" and info["counts"]["engine_errors"] == 2 and "engine error" in info["error"]
    (path,) = (out.run_dir / "details").glob("files_hello_world*.json")
    d = msgspec.json.decode(path.read_bytes(), type=TaskDetail)
    a = d.attempts["1"]
    assert a.error_kind == "engine_error" and a.correct is None and a.trajectory is not None


def test_an_attribute_error_in_evaluate_is_an_engine_error(tmp_path: Path) -> None:
    out = agentcompass.run_evaluation("tests.engine.components:BrokenEvaluateBenchmark", "shell_agent", "scripted",
                                      benchmark_params=SAMPLES, results_dir=str(tmp_path), progress="none")
    assert out.errors_by_kind == {"engine_error": 3} and out.status == "failed"


def test_the_cli_exits_non_zero_and_names_the_engine_errors(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "agentcompass.cli", "run", "tests.engine.components:BrokenCollectBenchmark",
         "shell_agent", "scripted", "--benchmark-params", json.dumps(SAMPLES), "--results-dir", str(tmp_path),
         "--progress", "plain"],
        cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO), COLUMNS="200"), capture_output=True, text=True,
        timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "engine_error" in proc.stdout and "2 attempts ended with an engine error" in proc.stdout
    assert "2 engine errors" in proc.stderr  # the progress display's final line


def test_a_harness_error_kind_no_error_kind_declares_is_an_engine_error(tmp_path: Path) -> None:
    """A typo of a kind fails the run loudly; it used to end each attempt quietly with the no-retry default."""
    out = agentcompass.run_evaluation("shell_tasks", "tests.engine.components:TypoKindHarness", "scripted",
                                      benchmark_params={"sample_ids": ["files/hello_world"]},
                                      results_dir=str(tmp_path), progress="none", max_retries=2)
    assert out.errors_by_kind == {"engine_error": 1} and out.status == "failed"
    assert out.run_dir is not None
    (path,) = (out.run_dir / "details").glob("files_hello_world*.json")
    a = msgspec.json.decode(path.read_bytes(), type=TaskDetail).attempts["1"]
    assert a.error_kind == "engine_error" and a.error is not None and "unknown error kind 'agnet_timeout'" in a.error


@pytest.mark.parametrize("fail_evaluate", [False, True], ids=["completed", "evaluate-raises"])
def test_the_engine_closes_the_benchmark_once_when_the_request_ends(tmp_path: Path, fail_evaluate: bool) -> None:
    # Benchmark.aclose: where a benchmark lets go of what it held for the run (BFCL's grading workers)
    record = tmp_path / "calls.txt"
    out = agentcompass.run_evaluation("tests.engine.components:ClosingBenchmark", "shell_agent", "scripted",
                                      benchmark_params={**SAMPLES, "record": str(record),
                                                        "fail_evaluate": fail_evaluate},
                                      results_dir=str(tmp_path / "runs"), progress="none")
    assert out.status == ("failed" if fail_evaluate else "completed")
    assert record.read_text().splitlines() == ["evaluate"] * 3 + ["aclose"]
