"""A hanging endpoint shows in progress as model calls waiting (how many, the oldest's wait), not only as running
tasks; the report clears once the calls are answered."""

from __future__ import annotations

import io
from pathlib import Path

import agentcompass
from agentcompass.engine.model_access import MODEL_WAIT_REPORT_S, wait_report_after
from agentcompass.engine.progress import PlainDisplay, RequestStats
from agentcompass.models.scripted.server import stop_process
from agentcompass.records import ModelCallsWaiting, ProgressEvent, RequestStarted
from tests.conftest import start_server_process


def test_calls_an_endpoint_answers_slowly_are_reported_waiting_then_cleared(tmp_path: Path) -> None:
    # each answer takes 6 s; with the model's timeout at 8 s a call shows after a quarter of it (2 s), looked at
    # every second: a report is due from 2 s to 6 s into each call
    proc, url = start_server_process("--latency", "6")
    events: list[ProgressEvent] = []
    try:
        out = agentcompass.run_evaluation(
            "shell_tasks", "shell_agent", "scripted", model_base_url=url, model_params={"timeout": 8},
            benchmark_params={"sample_ids": ["files/hello_world"]}, results_dir=str(tmp_path), progress="none",
            on_progress=events.append)
    finally:
        stop_process(proc)
    assert out.status == "completed" and out.counts.errors == 0, out.errors_by_kind
    waiting = [e for e in events if isinstance(e, ModelCallsWaiting)]
    reports = [e for e in waiting if e.calls]
    assert reports, [type(e).__name__ for e in events]
    assert all(e.calls == 1 and e.oldest_s >= 2.0 and e.endpoint.endswith(url.rstrip("/")) for e in reports), reports
    assert waiting[-1].calls == 0  # cleared before the request ended (or between its calls)
    assert all(e.request == out.name and e.run_id == out.run_id for e in waiting)


def test_the_progress_line_says_how_many_calls_wait_and_for_how_long() -> None:
    stats = RequestStats("r")
    stats.apply(RequestStarted(ts=0.0, request="r", run_id="x", run_dir="/d", total_tasks=3))
    stats.apply(ModelCallsWaiting(ts=0.0, request="r", run_id="x", endpoint="m@http://h/v1", calls=8, oldest_s=250.4))
    assert "8 model calls waiting, oldest 4m10s," in stats.line()
    stats.apply(ModelCallsWaiting(ts=0.0, request="r", run_id="x", endpoint="m@http://h/v1", calls=0, oldest_s=0.0))
    assert "waiting" not in stats.line()
    out = io.StringIO()
    display = PlainDisplay(out)
    display.update(ModelCallsWaiting(ts=0.0, request="r", run_id="x", endpoint="e", calls=1, oldest_s=45.0))
    assert display.stats["r"].waiting_text() == "1 model call waiting, oldest 45s"


def test_a_call_shows_after_30_s_or_a_quarter_of_its_timeout() -> None:
    assert wait_report_after({}) == MODEL_WAIT_REPORT_S == 30.0
    assert wait_report_after({"timeout": 8}) == 2.0
    assert wait_report_after({"timeout": 3600}) == 30.0
    assert wait_report_after({"timeout": "soon"}) == wait_report_after({"timeout": True}) == 30.0
