"""Adaptive model concurrency: 200 concurrent tasks against an endpoint that serves 20 calls at a time.

Runs ``shell_tasks`` x ``shell_agent`` on the local environment at ``task_concurrency`` 200 against a scripted
server started with ``--max-concurrent`` (it answers 429 + Retry-After beyond that), and follows the limit of
the endpoint's ``AdaptiveLimiter`` through the run's ``ModelLimitChanged`` progress events.

    PYTHONPATH=. .venv/bin/python benchmarks_perf/adaptive_concurrency.py [--tasks 200] [--server-limit 20]

Prints the limit's trajectory, writes ``adaptive_concurrency.json`` next to this file, and ends with a
``RESULT`` line (final limit, its mean over the last half of the run, 429s, duration).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import agentcompass
from agentcompass.models.scripted.server import spawn_server_process, stop_process
from agentcompass.records import ModelLimitChanged, ModelRetrying, ProgressEvent

HERE = Path(__file__).resolve().parent


def run(tasks: int, server_limit: int, latency: float, retry_after: float) -> dict[str, Any]:
    proc, url = spawn_server_process("--max-concurrent", str(server_limit), "--latency", str(latency),
                                     "--retry-after", str(retry_after))
    limits: list[tuple[float, int, str]] = []
    retries = 0
    t0 = time.time()

    def on_progress(ev: ProgressEvent) -> None:
        nonlocal retries
        if isinstance(ev, ModelLimitChanged):
            limits.append((round(ev.ts - t0, 3), ev.limit, ev.reason))
        elif isinstance(ev, ModelRetrying):
            retries += 1

    try:
        with tempfile.TemporaryDirectory() as tmp:
            out = agentcompass.run_evaluation(
                "shell_tasks", "shell_agent", "scripted", model_base_url=url,
                model_params={"retries": 30, "retry_backoff": 0.05, "retry_max_wait": 1.0},
                benchmark_params={"repeat": -(-tasks // 20), "limit": tasks}, task_concurrency=tasks,
                results_dir=tmp, progress="none", on_progress=on_progress)
    finally:
        stop_process(proc)
    duration = time.time() - t0
    second_half = [n for ts, n, _ in limits if ts >= duration / 2] or [limits[-1][1]]
    return {"benchmark": "adaptive_concurrency", "tasks": tasks, "server_limit": server_limit,
            "latency_s": latency, "status": out.status, "done": out.counts.done, "errors": out.counts.errors,
            "final_limit": limits[-1][1] if limits else None, "mean_limit_second_half": statistics.mean(second_half),
            "cuts": sum(1 for *_, why in limits if why == "rate_limited"), "model_retries": retries,
            "duration_s": round(duration, 2), "trajectory": limits, "at": time.strftime("%Y-%m-%dT%H:%M:%S")}


def cli() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=200, help="tasks, all concurrent (default 200)")
    parser.add_argument("--server-limit", type=int, default=20, help="the server's concurrent calls (default 20)")
    parser.add_argument("--latency", type=float, default=0.2, help="seconds per model call (default 0.2)")
    parser.add_argument("--retry-after", type=float, default=0.1, help="Retry-After of the server's 429s")
    args = parser.parse_args()
    report = run(args.tasks, args.server_limit, args.latency, args.retry_after)
    for ts, n, why in report["trajectory"]:
        print(f"{ts:8.2f}s  limit {n:4d}  {why}")
    out = HERE / "adaptive_concurrency.json"
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"RESULT adaptive_concurrency tasks={report['tasks']} server_limit={report['server_limit']} "
          f"status={report['status']} errors={report['errors']} final_limit={report['final_limit']} "
          f"mean_limit_second_half={report['mean_limit_second_half']:.1f} cuts={report['cuts']} "
          f"model_retries={report['model_retries']} duration_s={report['duration_s']} json={out}")
    return 0 if report["status"] == "completed" and report["errors"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(cli())
