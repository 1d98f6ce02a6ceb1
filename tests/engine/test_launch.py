"""The public entry points end to end: launch, async_launch, run_evaluation, failure isolation."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

import agentcompass
from agentcompass import ConfigError, OrchestrationSpec, RunInsideLoopError, RunRequestSpec
from agentcompass.records import TaskDetail
from agentcompass.specs import ComponentSpec, ModelSpec

SAMPLE = ["files/hello_world", "text/reverse_lines", "answer/count_lines", "python/fizzbuzz"]


def _request(results: Path, *, benchmark: str = "shell_tasks", name: str | None = None,
             harness: str = "shell_agent", model: ModelSpec | None = None, **bench_params: object) -> RunRequestSpec:
    params = {"sample_ids": SAMPLE, **bench_params} if benchmark == "shell_tasks" else dict(bench_params)
    return RunRequestSpec(benchmark=ComponentSpec(benchmark, params), harness=ComponentSpec(harness),
                          model=model or ModelSpec("scripted"), name=name, results_dir=str(results))


def test_launch_isolates_a_request_with_an_unknown_benchmark(tmp_path: Path) -> None:
    spec = OrchestrationSpec(requests=[_request(tmp_path, name="a"),
                                       _request(tmp_path, benchmark="shel_tasks", name="b"),
                                       _request(tmp_path, name="c")], progress="none")
    result = agentcompass.launch(spec)
    assert [o.status for o in result.outcomes] == ["completed", "failed", "completed"]
    assert result.status == "partial"
    bad = result["b"]
    assert bad.error and "Unknown benchmark id 'shel_tasks'" in bad.error and "shell_tasks" in bad.error
    assert "Did you mean 'shell_tasks'" in bad.error
    assert bad.run_dir is None  # nothing half-written is reported
    for name in ("a", "c"):
        o = result[name]
        assert o.counts.done == len(SAMPLE)
        assert o.run_dir is not None and len(list((o.run_dir / "details").glob("*.json"))) == len(SAMPLE)


def test_launch_from_a_running_loop_points_to_async_launch(tmp_path: Path) -> None:
    import asyncio

    async def inner() -> None:
        agentcompass.launch(OrchestrationSpec(requests=[_request(tmp_path)], progress="none"))

    with pytest.raises(RunInsideLoopError, match="async_launch"):
        asyncio.run(inner())


async def test_async_launch_runs_inside_a_running_event_loop(tmp_path: Path) -> None:
    events: list[object] = []
    result = await agentcompass.async_launch(
        OrchestrationSpec(requests=[_request(tmp_path, name="x")], progress="none"), on_progress=events.append)
    o = result["x"]
    assert o.status == "completed" and o.counts.done == len(SAMPLE)
    assert 0 < o.metrics["pass@1"] <= 1
    kinds = {type(e).__name__ for e in events}
    assert {"RequestStarted", "AttemptStarted", "AttemptFinished", "TaskFinished", "RequestFinished"} <= kinds
    assert o.run_dir is not None
    lines = (o.run_dir / "progress.jsonl").read_text().splitlines()
    assert len(lines) == len(events)  # the same events reach the callback and the file
    assert json.loads(lines[-1])["event"] == "request_finished"


def test_a_harness_crashing_on_every_task_fails_only_its_own_request(tmp_path: Path) -> None:
    spec = OrchestrationSpec(requests=[
        _request(tmp_path, name="good"),
        _request(tmp_path, name="crash", harness="tests.engine.components:CrashingHarness"),
        RunRequestSpec(benchmark=ComponentSpec("tests.engine.components:FailingBenchmark"),
                       harness=ComponentSpec("shell_agent"), model=ModelSpec("scripted"), name="load",
                       results_dir=str(tmp_path)),
    ], progress="none", task_concurrency=3)
    result = agentcompass.launch(spec)
    good, crash, load = result["good"], result["crash"], result["load"]
    assert good.status == "completed" and good.metrics["pass@1"] > 0
    # nothing reached a result: the request failed (not "scored 0"), with its metrics and details still written
    assert crash.status == "failed" and crash.metrics["pass@1"] == 0
    assert crash.errors_by_kind == {"harness_crash": len(SAMPLE)}
    assert "every attempt failed (harness_crash x" in (crash.error or "") and "boom on" in (crash.error or "")
    assert crash.run_dir is not None
    detail = msgspec.json.decode((crash.run_dir / "details").glob("*.json").__next__().read_bytes(), type=TaskDetail)
    assert "boom on" in (detail.attempts["1"].error or "")
    assert load.status == "failed" and "dataset file is corrupt" in (load.error or "")
    assert load.run_dir is not None
    info = json.loads((load.run_dir / "run_info.json").read_text())
    assert info["status"] == "failed" and "corrupt" in info["error"]
    assert result.peak_concurrent_tasks <= 3


def test_run_evaluation_returns_metrics_paths_and_metadata(tmp_path: Path, scripted_url: str) -> None:
    out = agentcompass.run_evaluation("shell_tasks", "shell_agent", "scripted", model_base_url=scripted_url,
                                      benchmark_params={"sample_ids": SAMPLE, "k": 2}, results_dir=str(tmp_path),
                                      progress="none", run_name="demo")
    assert out.ok and out.run_id and out.run_id.startswith("demo-")
    assert out.metrics["tasks"] == len(SAMPLE) and "pass@2" in out.metrics and "avg@2" in out.metrics
    assert out.paths is not None and Path(out.paths.summary).is_file()
    assert out.duration_s is not None and out.duration_s > 0
    detail = json.loads(next(Path(out.paths.details_dir).glob("*.json")).read_text())
    assert detail["k"] == 2 and set(detail["attempts"]) == {"1", "2"}


def test_run_evaluation_raises_config_errors_instead_of_returning_them(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="Unknown harness id 'shell_agnt'.*Did you mean 'shell_agent'"):
        agentcompass.run_evaluation("shell_tasks", "shell_agnt", "scripted", results_dir=str(tmp_path),
                                    progress="none")
    assert not any(tmp_path.iterdir())


def test_wrap_api_key_with_the_in_process_model_runs_with_nothing_to_wrap(tmp_path: Path) -> None:
    # the gateway and envelopes are tested in tests/models/gateway/test_envelope.py and
    # tests/engine/test_gateway_engine.py
    out = agentcompass.run_evaluation("shell_tasks", "shell_agent", "scripted", wrap_api_key=True,
                                      benchmark_params={"sample_ids": SAMPLE[:2]}, results_dir=str(tmp_path),
                                      progress="none")
    assert out.ok and out.counts.errors == 0


def test_every_actor_message_survives_msgspec_encoding(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Strict mode round-trips each queued message through msgpack: the actors could cross a process boundary.
    monkeypatch.setenv("AGENTCOMPASS_STRICT_MESSAGES", "1")
    result = agentcompass.launch(OrchestrationSpec(requests=[_request(tmp_path, name="strict")], progress="none"))
    o = result["strict"]
    assert o.status == "completed" and o.counts.done == len(SAMPLE) and o.counts.errors == 0


def test_a_request_with_a_field_of_the_wrong_type_fails_alone_and_the_others_run(tmp_path: Path) -> None:
    good = {"benchmark": {"id": "shell_tasks", "params": {"sample_ids": SAMPLE}}, "harness": "shell_agent",
            "model": "scripted", "results_dir": str(tmp_path)}
    result = agentcompass.launch({"requests": [
        {**good, "name": "first"},
        {**good, "name": "typo", "task_concurrency": "lots"},
        {**good, "name": "unknown", "max_retriez": 2},
        {**good, "name": "last"},
    ], "progress": "none"})
    assert [o.status for o in result.outcomes] == ["completed", "failed", "failed", "completed"]
    assert result.status == "partial"
    typo, unknown = result["typo"], result["unknown"]
    assert "requests[1]" in (typo.error or "") and typo.error_field == "task_concurrency"
    assert "Expected `int`" in (typo.error or "")
    assert "max_retriez" in (unknown.error or "") and "spelling" in (unknown.error or "")
    assert typo.run_dir is None and unknown.run_dir is None  # nothing was written for them
    assert result["first"].metrics == result["last"].metrics and result["first"].metrics["pass@1"] > 0


def test_a_wrong_launch_wide_field_still_refuses_the_whole_launch() -> None:
    with pytest.raises(ConfigError, match="max_concurrent_tasks"):
        agentcompass.launch({"requests": [{"benchmark": "shell_tasks", "harness": "none", "model": "scripted"}],
                             "max_concurrent_tasks": "many", "progress": "none"})
