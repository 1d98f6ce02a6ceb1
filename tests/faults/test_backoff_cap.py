"""Every wait between tries is capped by ``max_backoff_s``: a 429 with ``Retry-After: 99999999`` or an HTTP date
in year 9999 cannot park an attempt for days, at the model client's level or at the task level."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

import agentcompass
from agentcompass.records import ModelRetrying, ProgressEvent, TryRetrying

from ..fixtures_scripted import running_scripted_server

pytestmark = pytest.mark.timeout(120)

HUGE = ["99999999", "Fri, 31 Dec 9999 23:59:59 GMT"]


def _request(url: str, results: Path, model_params: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"benchmark": {"id": "shell_tasks", "params": {"sample_ids": ["answer/count_lines"]}},
            "harness": "shell_agent", "results_dir": str(results), **extra,
            "model": {"id": "scripted", "base_url": url, "params": model_params}}


@pytest.mark.parametrize("retry_after", HUGE)
async def test_a_huge_retry_after_is_capped_at_both_levels(tmp_path: Path, retry_after: str) -> None:
    events: list[ProgressEvent] = []
    ra: float | str = float(retry_after) if retry_after[0].isdigit() else retry_after
    async with running_scripted_server(fail_status=429, fail_every=1, retry_after=ra) as srv:
        assert srv.base_url is not None
        req = _request(srv.base_url, tmp_path, max_retries=1, max_backoff_s=0.2,
                       model_params={"retries": 1, "retry_backoff": 0.01})
        result = await asyncio.wait_for(agentcompass.async_launch({"requests": [req], "progress": "none"},
                                                                  on_progress=events.append), 100)
    out = result.outcomes[0]
    assert out.errors_by_kind == {"model_rate_limit": 1} and out.counts.retries == 1
    model = [e.backoff_s for e in events if isinstance(e, ModelRetrying)]
    task = [e.backoff_s for e in events if isinstance(e, TryRetrying)]
    assert len(model) == 2 and len(task) == 1
    assert all(0 <= b <= 0.2 for b in model + task), (model, task)
    assert out.run_dir is not None
    recorded = [json.loads(line) for line in (out.run_dir / "progress.jsonl").read_text().splitlines()]
    assert [e["backoff_s"] <= 0.2 for e in recorded if e["event"] in ("try_retrying", "model_retrying")] == \
        [True] * 3


async def test_by_default_a_task_level_retry_waits_minutes_not_years(tmp_path: Path) -> None:
    retrying = asyncio.Event()
    events: list[ProgressEvent] = []

    def on_progress(ev: ProgressEvent) -> None:
        events.append(ev)
        if isinstance(ev, TryRetrying):
            retrying.set()

    async with running_scripted_server(fail_status=429, fail_every=1, retry_after=99999999) as srv:
        assert srv.base_url is not None
        req = _request(srv.base_url, tmp_path, max_retries=1, model_params={"retries": 0})
        run = asyncio.create_task(agentcompass.async_launch({"requests": [req], "progress": "none"},
                                                            on_progress=on_progress))
        await asyncio.wait_for(retrying.wait(), 60)
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(run, 60)
    (backoff,) = [e.backoff_s for e in events if isinstance(e, TryRetrying)]
    assert backoff <= 120  # the default max_backoff_s, not the server's 99999999


def test_max_backoff_s_refuses_nan_infinity_and_zero(tmp_path: Path) -> None:
    for bad in (float("nan"), float("inf"), 0):
        with pytest.raises(agentcompass.ConfigError, match="max_backoff_s"):
            agentcompass.run_evaluation("shell_tasks", "shell_agent", "scripted", max_backoff_s=bad,
                                        results_dir=str(tmp_path), progress="none")
