"""Scale-out on Ray: the same shell tasks through ``ray_docker`` on one node and on two, and what the Ray hop costs.

The two nodes share this machine: a Ray head on the host (the host's Docker daemon) and a Ray worker node inside a
second Docker daemon's network namespace (tests/standins/second_node.py, ray_cluster.py; needs root). Each node
has a custom resource (``node_a``, ``node_b``) and both ``docker``, so ``node_resource`` picks one node or both.

* ``one_node_tasks_per_s`` / ``two_nodes_tasks_per_s``: N tasks (shell_tasks, scripted model in-process) at
  ``--concurrency`` through ``ray_docker``, on the head only and on both nodes.
* ``hop_ms_per_attempt``: the same tasks one at a time on ``docker`` and on ``ray_docker`` (head only, the same
  daemon): the difference of the median attempt durations is what the Ray hop (and the placement) add.
  ``call_rtt_ms`` is the median round trip of one call to a node actor.
* ``coordinator_cpu_ms_per_attempt``: user+system CPU of this process (the coordinator: engine, Ray driver, relay)
  during the two-node run, per attempt.

    .venv/bin/python benchmarks_perf/scale_out.py [--tasks N] [--concurrency C] [--results-dir D]

Prints a table, writes ``results/scale_out.json`` and ends with a ``RESULT`` line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from _common import result_line, write_json

import agentcompass
from agentcompass.environments.docker.api import DEFAULT_BASE_IMAGE
from agentcompass.environments.ray.provider import RayDockerProvider
from agentcompass.interfaces import ComponentContext
from tests.standins.ray_cluster import RayCluster, auth_env
from tests.standins.second_node import claimed_node


def _cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _run(env: str, tasks: int, concurrency: int, results: Path, **env_params: Any) -> dict[str, Any]:
    run_id = f"scale-{env}-{uuid.uuid4().hex[:8]}"
    repeat = -(-tasks // 37)  # shell_tasks has 37 tasks: copies of the set for more
    cpu0, t0 = _cpu_s(), time.perf_counter()
    out = agentcompass.run_evaluation(
        "shell_tasks", "shell_agent", "scripted", env, benchmark_params={"limit": tasks, "repeat": repeat},
        environment_params=env_params, task_concurrency=concurrency, max_retries=2, run_id=run_id,
        results_dir=str(results / run_id), progress="none")
    wall, cpu = time.perf_counter() - t0, _cpu_s() - cpu0
    assert out.status == "completed" and out.counts.done == tasks, (out.status, out.error, out.counts)
    assert out.run_dir is not None
    # an attempt's own duration (open to close and verify), without the run's start (the cluster connection)
    durations = [a["meta"]["duration_s"] for p in (out.run_dir / "details").glob("*.json")
                 for a in json.loads(p.read_text())["attempts"].values()]
    return {"tasks": tasks, "wall_s": round(wall, 3), "tasks_per_s": round(tasks / wall, 3),
            "cpu_ms_per_attempt": round(cpu * 1000 / tasks, 2), "errors": out.counts.errors,
            "attempt_ms_median": round(statistics.median(durations) * 1000, 1)}


async def _call_rtt_ms(address: str, gateway_host: str, calls: int = 200) -> float:
    provider = RayDockerProvider({"address": address, "gateway_host": gateway_host, "node_resource": "node_a"},
                                 ComponentContext(run_id=f"rtt-{uuid.uuid4().hex[:6]}"))
    try:
        await provider.start()
        [handle] = [h for h in provider.handles() if h.alive]
        times = []
        for _ in range(calls):
            t0 = time.perf_counter()
            await handle.call("ping")
            times.append(time.perf_counter() - t0)
        return statistics.median(times) * 1000
    finally:
        await provider.aclose()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks", type=int, default=40)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--hop-tasks", type=int, default=6, help="tasks run one at a time for the hop overhead")
    ap.add_argument("--results-dir", type=Path, default=None)
    a = ap.parse_args()
    os.environ.update(auth_env())  # this process is the cluster's driver
    report: dict[str, Any] = {"tasks": a.tasks, "concurrency": a.concurrency}
    with tempfile.TemporaryDirectory(prefix="scale-out-") as tmp, claimed_node() as node:
        results = Path(tmp)
        node.load_images([DEFAULT_BASE_IMAGE])
        cluster = RayCluster(node, head_resources={"docker": 1, "node_a": 1},
                             worker_resources={"docker": 1, "node_b": 1})
        try:
            cluster.start_head().start_worker()
            common = {"address": cluster.address, "gateway_host": node.host_address,
                      "node_capacity": a.concurrency}
            report["call_rtt_ms"] = round(asyncio.run(_call_rtt_ms(cluster.address, node.host_address)), 3)
            report["one_node"] = _run("ray_docker", a.tasks, a.concurrency, results, node_resource="node_a",
                                      **common)
            report["two_nodes"] = _run("ray_docker", a.tasks, a.concurrency, results, node_resource="docker",
                                       **{**common, "node_capacity": max(1, a.concurrency // 2)})
            report["hop_docker"] = _run("docker", a.hop_tasks, 1, results)
            report["hop_ray"] = _run("ray_docker", a.hop_tasks, 1, results, node_resource="node_a", **common)
        finally:
            cluster.stop()
    hop_ms = report["hop_ray"]["attempt_ms_median"] - report["hop_docker"]["attempt_ms_median"]
    values = {
        "tasks": a.tasks, "concurrency": a.concurrency,
        "one_node_tasks_per_s": report["one_node"]["tasks_per_s"],
        "two_nodes_tasks_per_s": report["two_nodes"]["tasks_per_s"],
        "speedup": round(report["two_nodes"]["tasks_per_s"] / report["one_node"]["tasks_per_s"], 3),
        "hop_ms_per_attempt": round(hop_ms, 1), "call_rtt_ms": report["call_rtt_ms"],
        "coordinator_cpu_ms_per_attempt": report["two_nodes"]["cpu_ms_per_attempt"],
    }
    path = write_json("scale_out", {**report, "values": values}, a.results_dir)
    print(f"{'run':<12} {'tasks':>6} {'wall s':>8} {'tasks/s':>8} {'cpu ms/attempt':>15}")
    for key in ("one_node", "two_nodes", "hop_docker", "hop_ray"):
        r = report[key]
        print(f"{key:<12} {r['tasks']:>6} {r['wall_s']:>8} {r['tasks_per_s']:>8} {r['cpu_ms_per_attempt']:>15}")
    print(f"Ray call round trip (median): {values['call_rtt_ms']} ms; "
          f"hop per attempt: {values['hop_ms_per_attempt']} ms")
    print(result_line("scale_out", {**values, "json": str(path)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
