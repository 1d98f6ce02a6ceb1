"""Whole runs against a model server that misbehaves: rate limits, server errors, hangs."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import msgspec
import pytest

import agentcompass
from agentcompass.records import ModelRetrying, ProgressEvent, TaskDetail
from agentcompass.results import RequestOutcome

from ..fixtures_scripted import running_scripted_server

BENCH = {"repeat": 3, "limit": 100}


async def _run(url: str, results: Path, model_params: dict[str, Any], events: list[ProgressEvent],
               **bench: Any) -> RequestOutcome:
    result = await agentcompass.async_launch(
        {"requests": [{"benchmark": {"id": "shell_tasks", "params": bench or BENCH}, "harness": "shell_agent",
                       "model": {"id": "scripted", "base_url": url, "params": model_params},
                       "task_concurrency": 32, "results_dir": str(results)}],
         "progress": "none"}, on_progress=events.append)
    return result.outcomes[0]


@pytest.mark.slow
async def test_429s_and_500s_are_absorbed_and_metrics_match_a_clean_run(tmp_path: Path) -> None:
    clean_events: list[ProgressEvent] = []
    async with running_scripted_server() as srv:
        assert srv.base_url is not None
        clean = await _run(srv.base_url, tmp_path / "clean", {}, clean_events)
    events: list[ProgressEvent] = []
    async with running_scripted_server(faults={"429": 0.30, "500": 0.05}, fault_seed=11, retry_after=0.05) as srv:
        assert srv.base_url is not None
        faulty = await _run(srv.base_url, tmp_path / "faulty",
                            {"retries": 12, "retry_backoff": 0.02, "retry_max_wait": 0.5}, events)
        injected = dict(srv.faults_injected)
    assert clean.ok and faulty.ok
    assert faulty.counts.done == 100 and faulty.counts.errors == 0 and faulty.metrics["graded_tasks"] == 100
    assert faulty.metrics == clean.metrics
    assert injected.get("429", 0) > 50 and injected.get("500", 0) > 5
    # Retries are visible live (progress) and afterwards (details).
    live = [e for e in events if isinstance(e, ModelRetrying)]
    assert len(live) == injected["429"] + injected["500"]
    assert {e.error_kind for e in live} == {"model_rate_limit", "model_server_error"} and all(e.task_id for e in live)
    assert faulty.run_dir is not None
    in_details = 0
    for p in (faulty.run_dir / "details").glob("*.json"):
        d = msgspec.json.decode(p.read_bytes(), type=TaskDetail)
        in_details += d.attempts["1"].meta["usage"].get("retries", 0)
    assert in_details == len(live)
    assert not any(isinstance(e, ModelRetrying) for e in clean_events)


async def test_a_hung_model_call_is_bounded_by_its_timeout(tmp_path: Path) -> None:
    events: list[ProgressEvent] = []
    async with running_scripted_server(faults={"hang": 1.0}) as srv:
        assert srv.base_url is not None
        t0 = time.monotonic()
        out = await _run(srv.base_url, tmp_path, {"timeout": 1, "retries": 1, "retry_backoff": 0.01}, events,
                         sample_ids=["files/hello_world", "answer/count_lines"])
        elapsed = time.monotonic() - t0
    assert elapsed < 120  # hang guard: the server never answers
    assert out.status == "failed" and out.errors_by_kind == {"model_connection_error": 2}
    assert "timed out" in (out.error or "")
    assert sum(isinstance(e, ModelRetrying) for e in events) == 2
