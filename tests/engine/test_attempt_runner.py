"""The attempt runner always reports: an exception in the engine's code for an attempt ends that attempt as an
``engine_error`` (counted, written), and the request ends instead of waiting for a report that never comes."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

import agentcompass
from agentcompass.records import TaskDetail

pytestmark = pytest.mark.timeout(120)  # a lost report would hang the request: the timeout fails the test

SAMPLES = {"sample_ids": ["files/hello_world", "answer/count_lines"]}


def test_a_runner_that_raises_is_recorded_as_an_engine_error_and_the_request_ends(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Strict messages round-trip every message through msgpack; the harness's result holds a value that cannot
    # be encoded, so sending the attempt's AttemptDone raises inside the runner.
    monkeypatch.setenv("AGENTCOMPASS_STRICT_MESSAGES", "1")
    out = agentcompass.run_evaluation("shell_tasks", "tests.engine.runner_components:UnsendableResultHarness",
                                      "scripted", benchmark_params=SAMPLES, results_dir=str(tmp_path),
                                      progress="none", max_retries=2)
    assert out.status == "failed"
    assert out.counts.done == out.counts.total == 2
    assert out.counts.engine_errors == 2 and out.errors_by_kind == {"engine_error": 2}
    assert out.counts.retries == 0  # the engine's bug is not retried
    assert out.error is not None and "engine_error" in out.error and "_Opaque" in out.error
    assert out.run_dir is not None
    summary = json.loads((out.run_dir / "summary.json").read_text())
    assert summary["counts"]["engine_errors"] == 2
    (path,) = (out.run_dir / "details").glob("files_hello_world*.json")
    attempt = msgspec.json.decode(path.read_bytes(), type=TaskDetail).attempts["1"]
    assert attempt.status == "run_error" and attempt.error_kind == "engine_error"
    assert attempt.error is not None and "_Opaque" in attempt.error
    assert [t.try_no for t in attempt.tries] == [1]  # the try the harness made is kept
