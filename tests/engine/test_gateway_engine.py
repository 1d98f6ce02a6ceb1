"""The gateway inside whole runs: wrap_api_key envelopes, usage and cost in details, adaptive limits in progress."""

from __future__ import annotations

import io
import itertools
import subprocess
from pathlib import Path
from typing import Any

import msgspec
import pytest

import agentcompass
from agentcompass.engine.progress import PlainDisplay
from agentcompass.records import ModelLimitChanged, ProgressEvent, RunInfo, Summary, TaskDetail
from tests.conftest import start_server_process
from tests.fixtures_scripted import running_scripted_server

REAL_KEY = "sk-real-secret-key-4242"
SCRIPT = [{"match": "capital of France", "turns": ["Paris."]}]
HARNESS = "tests.engine.gateway_components:GatewayCallHarness"
SAMPLE = ["files/hello_world", "text/reverse_lines", "answer/count_lines"]


def _details(run_dir: Path) -> list[TaskDetail]:
    return [msgspec.json.decode(p.read_bytes(), type=TaskDetail) for p in sorted((run_dir / "details").glob("*.json"))]


def _all_text(run_dir: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in run_dir.rglob("*") if p.is_file())


async def _launch(request: dict[str, Any], events: list[ProgressEvent] | None = None) -> Any:
    result = await agentcompass.async_launch({"requests": [request], "progress": "none"},
                                             on_progress=events.append if events is not None else None)
    return result.outcomes[0]


async def test_wrap_api_key_gives_a_local_agent_an_envelope_and_its_calls_land_in_the_attempts_usage(
        tmp_path: Path) -> None:
    price = {"input": 2.0, "output": 8.0}
    async with running_scripted_server({"script": SCRIPT}, require_api_key=REAL_KEY) as server:
        out = await _launch({
            "benchmark": {"id": "shell_tasks", "params": {"sample_ids": SAMPLE}},
            "harness": {"id": HARNESS, "params": {"calls": 2}},
            "model": {"id": "scripted", "base_url": server.base_url, "api_key": REAL_KEY,
                      "params": {"price_per_million": price, "max_concurrency": 3}},
            "wrap_api_key": True, "results_dir": str(tmp_path)})
        bodies = list(server.recent_requests)
    assert out.ok, out.error
    details = _details(out.run_dir)
    assert len(details) == len(SAMPLE)
    for d in details:
        a = d.attempts["1"]
        assert a.final_answer is not None and a.final_answer.count('STATUS 200 "Paris."') == 2, a.final_answer
        env = a.artifacts["env"]
        assert "OPENAI_API_KEY=acw1." in env and "AGENTCOMPASS_MODEL_API_KEY=acw1." in env
        assert "ANTHROPIC_BASE_URL=http://127.0.0.1:" in env
        assert REAL_KEY not in env and server.base_url not in env  # neither the key nor the real endpoint
        usage, gateway = a.meta["usage"], a.meta["gateway"]
        assert usage["calls"] == gateway["calls"] == 2 and gateway.get("failed", 0) == 0
        assert usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0
        want = (usage["prompt_tokens"] * 2.0 + usage["completion_tokens"] * 8.0) / 1e6
        assert abs(usage["cost"] - want) < 1e-9
        assert a.tries[0].usage is not None and a.tries[0].usage.calls == 2
    summary = msgspec.json.decode((out.run_dir / "summary.json").read_bytes(), type=Summary)
    info = msgspec.json.decode((out.run_dir / "run_info.json").read_bytes(), type=RunInfo)
    assert summary.usage.calls == 2 * len(SAMPLE) and info.usage == summary.usage
    assert abs(summary.usage.cost - sum(d.attempts["1"].meta["usage"]["cost"] for d in details)) < 1e-9
    # the engine's params never reach the model, and the real key reaches no file of the run
    assert all("price_per_million" not in b and "max_concurrency" not in b for b in bodies)
    assert all(b["model"] == "scripted" for b in bodies)
    assert REAL_KEY not in _all_text(out.run_dir)


async def test_a_trusted_local_run_without_wrap_api_key_does_not_use_the_gateway(tmp_path: Path) -> None:
    async with running_scripted_server({"script": SCRIPT}) as server:
        out = await _launch({
            "benchmark": {"id": "shell_tasks", "params": {"sample_ids": SAMPLE[:1]}},
            "harness": {"id": HARNESS}, "model": {"id": "scripted", "base_url": server.base_url},
            "results_dir": str(tmp_path)})
    assert out.ok
    a = _details(out.run_dir)[0].attempts["1"]
    assert "OPENAI_BASE_URL" not in a.artifacts["env"] and "gateway" not in a.meta
    assert "KeyError" in (a.final_answer or "")  # the agent found no endpoint


async def test_in_process_model_calls_are_priced_and_limited_without_engine_params_upstream(tmp_path: Path) -> None:
    events: list[ProgressEvent] = []
    async with running_scripted_server() as server:
        out = await _launch({
            "benchmark": {"id": "shell_tasks", "params": {"sample_ids": SAMPLE}}, "harness": "shell_agent",
            "model": {"id": "scripted", "base_url": server.base_url,
                      "params": {"price_per_million": {"input": 1.0, "output": 1.0, "cached_input": 0.5},
                                 "max_concurrency": 2, "temperature": 0}},
            "task_concurrency": 3, "results_dir": str(tmp_path)}, events)
        bodies = list(server.recent_requests)
    assert out.ok and out.counts.errors == 0
    assert bodies and all("price_per_million" not in b and "max_concurrency" not in b for b in bodies)
    assert all(b["temperature"] == 0 for b in bodies)
    for d in _details(out.run_dir):
        u = d.attempts["1"].meta["usage"]
        assert u["cost"] == round((u["prompt_tokens"] + u["completion_tokens"]) / 1e6, 9)
    limits = [e for e in events if isinstance(e, ModelLimitChanged)]
    assert limits and limits[0].reason == "start" and limits[0].limit == 2  # min(4, max_concurrency)
    assert all(e.limit <= 2 for e in limits)
    assert '"event":"model_limit_changed"' in (out.run_dir / "progress.jsonl").read_text()


def test_the_plain_display_shows_the_model_limit() -> None:
    stream = io.StringIO()
    display = PlainDisplay(stream)
    display.update(ModelLimitChanged(ts=0, request="r", endpoint="m@http://x/v1", limit=17, reason="increase"))
    display._print(display.stats["r"])
    assert "model limit 17" in stream.getvalue()


def test_the_rich_display_has_a_limit_column() -> None:
    from rich.console import Console

    from agentcompass.engine.progress import RichDisplay

    display = RichDisplay()
    display.update(ModelLimitChanged(ts=0, request="r", endpoint="m@http://x/v1", limit=23, reason="rate_limited"))
    console = Console(file=io.StringIO(), width=200)
    console.print(display._render())
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert "limit" in text and "23" in text


@pytest.mark.slow
def test_200_concurrent_tasks_against_an_endpoint_serving_20_settle_near_20(tmp_path: Path) -> None:
    # Whether 200 tasks ever have more than 20 calls in flight depends on how fast the machine issues them (a
    # loaded one may never), so 5% of requests also get a seeded 429: the limiter is always pushed back.
    proc, url = start_server_process("--max-concurrent", "20", "--retry-after", "0.1", "--latency", "0.2",
                                     "--fault", "429=0.05", "--fault-seed", "7")
    limits: list[ModelLimitChanged] = []
    try:
        out = agentcompass.run_evaluation(
            "shell_tasks", "shell_agent", "scripted", model_base_url=url,
            model_params={"retries": 30, "retry_backoff": 0.05, "retry_max_wait": 1.0},
            benchmark_params={"repeat": 10, "limit": 200}, task_concurrency=200, results_dir=str(tmp_path),
            progress="none", on_progress=lambda e: limits.append(e) if isinstance(e, ModelLimitChanged) else None)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
    assert out.status == "completed" and out.counts.done == 200
    assert out.counts.errors == 0, out.errors_by_kind
    assert limits and any(e.reason == "rate_limited" for e in limits)  # the endpoint did push back
    # What the limiter decided: every 429 lowered the limit. Where it ends depends on how fast a loaded
    # machine issues calls (the convergence itself: test_adaptive.py::test_settles_near_the_endpoints_capacity).
    for before, after in itertools.pairwise(limits):
        if after.reason == "rate_limited":
            assert after.limit < before.limit, [(e.limit, e.reason) for e in limits]
    assert all(1 <= e.limit <= 200 for e in limits)
