"""Container lifecycle throughput: DockerProvider (containers started ahead off and on) vs a raw aiodocker loop.

One lifecycle = open (create + start, or take a container started ahead) + one exec (``echo``) + ``--work-s``
seconds of waiting (an agent's model calls; 0 by default) + close (force remove). Each concurrency level runs
the provider with ``prestart: 0`` ("cold"), the provider with the default ``prestart`` ("ahead") and the raw
loop interleaved (A-B-C-C-B-A) on the tiny busybox image, so the ratios compare like with like on the same daemon
load. The "ahead" time of a half includes waiting for the containers it started for later opens (it pays for
what it leaves ready), and its pool starts each half with what the previous one left.
The open latency (median, p90) is what an attempt's start waits for.

    .venv/bin/python benchmarks_perf/docker_lifecycle.py [--per-level N] [--levels 1,8] [--work-s S] [--results-dir D]

Prints a table, writes ``results/docker_lifecycle.json`` and ends with a ``RESULT`` line
(``c<level>_cold``, ``c<level>_ahead`` = ``c<level>_ours``, ``c<level>_raw`` in lifecycles/s,
``c<level>_ratio`` = ahead / raw, ``c<level>_open_ms_cold`` / ``_ahead`` the median open, ``containers_left``).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiodocker
from _common import containers_with_label, result_line, write_json

from agentcompass.environments.docker.images import BUSYBOX_IMAGE, build_base_image
from agentcompass.environments.docker.provider import DockerParams, DockerProvider
from agentcompass.environments.docker.sweep import sweep_orphans
from agentcompass.interfaces import ComponentContext, EnvOpenSpec


async def _provider_lifecycle(provider: DockerProvider, run_id: str, i: int, opens: list[float],
                              work_s: float = 0.0) -> None:
    t0 = time.perf_counter()
    env = await provider.open(EnvOpenSpec(run_id=run_id, task_id=f"bench-{i}"))
    opens.append(time.perf_counter() - t0)
    try:
        res = await env.exec(["echo", "hi"])
        assert res.exit_code == 0 and res.stdout == "hi\n", res
        await asyncio.sleep(work_s)  # an agent waiting on its model
    finally:
        await env.close()


async def _lifecycle_into(provider: DockerProvider, run_id: str, opens: list[float], work_s: float, i: int) -> None:
    await _provider_lifecycle(provider, run_id, i, opens, work_s)


async def _raw_lifecycle(docker: aiodocker.Docker, image: str, run_id: str, i: int, work_s: float = 0.0,
                         network: str | None = None) -> None:
    """create + start (init process) + one ``echo`` exec + force remove, straight on aiodocker; ``network``: the
    ``NetworkMode`` (None: the daemon's default bridge)."""
    host: dict[str, Any] = {"Init": True}
    if network is not None:
        host["NetworkMode"] = network
    config: dict[str, Any] = {"Image": image, "Entrypoint": ["tail", "-f", "/dev/null"], "Labels": {
        "agentcompass.run_id": run_id, "agentcompass.task_id": f"raw-{i}"}, "HostConfig": host}
    container = await docker.containers.create(config)
    try:
        await container.start()
        ex = await container.exec(["echo", "hi"])
        out = b""
        async with ex.start(detach=False) as stream:
            while (msg := await stream.read_out()) is not None:
                out += msg.data
        assert (await ex.inspect())["ExitCode"] == 0 and out == b"hi\n"
        await asyncio.sleep(work_s)
    finally:
        await container.delete(force=True, v=True)


async def _raw_job(docker: aiodocker.Docker, image: str, run_id: str, work_s: float, i: int) -> None:
    await _raw_lifecycle(docker, image, run_id, i, work_s)


async def _timed(job: Callable[[int], Awaitable[None]], total: int, concurrency: int) -> float:
    """Seconds to run ``total`` jobs with at most ``concurrency`` in flight."""
    gate = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with gate:
            await job(i)

    started = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(total)))
    return time.perf_counter() - started


async def _ahead_timed(provider: DockerProvider, job: Callable[[int], Awaitable[None]], total: int,
                       concurrency: int) -> float:
    """``_timed``, plus the wait for the containers the pool is still starting for later opens."""
    started = time.perf_counter()
    await _timed(job, total, concurrency)
    assert provider._prestart is not None
    await provider._prestart.settled(120)
    return time.perf_counter() - started


def _ms(values: list[float], q: float) -> float:
    return round(1000 * statistics.quantiles(values, n=10)[int(q * 10) - 1] if len(values) > 1 else 1000 * values[0],
                 1)


async def main(levels: list[int], per_level: int, work_s: float = 0.0) -> dict[str, Any]:
    image = await build_base_image(BUSYBOX_IMAGE, method="busybox")
    run_id = f"bench-{uuid.uuid4().hex[:8]}"
    cold = DockerProvider({"image": image, "prestart": 0}, ComponentContext(run_id=run_id))
    ahead = DockerProvider({"image": image}, ComponentContext(run_id=run_id))
    rows: list[dict[str, Any]] = []
    try:
        async with aiodocker.Docker() as docker:
            # warm every path (image cache, client connections)
            await _provider_lifecycle(cold, run_id, -1, [])
            await _provider_lifecycle(ahead, run_id, -2, [])
            await _raw_lifecycle(docker, image, run_id, -1)
            for level in levels:
                total = max(per_level, 2 * level)
                half = max(1, total // 2)
                opens_cold: list[float] = []
                opens_ahead: list[float] = []

                job_cold = functools.partial(_lifecycle_into, cold, run_id, opens_cold, work_s)
                job_ahead = functools.partial(_lifecycle_into, ahead, run_id, opens_ahead, work_s)
                job_raw = functools.partial(_raw_job, docker, image, run_id, work_s)

                # A-B-C-C-B-A halves, so daemon drift hits all three alike
                t_cold = await _timed(job_cold, half, level)
                t_ahead = await _ahead_timed(ahead, job_ahead, half, level)
                t_raw = await _timed(job_raw, half, level)
                t_raw += await _timed(job_raw, half, level)
                t_ahead += await _ahead_timed(ahead, job_ahead, half, level)
                t_cold += await _timed(job_cold, half, level)
                n = 2 * half
                row = {"concurrency": level, "lifecycles": n, "cold_per_s": round(n / t_cold, 2),
                       "ahead_per_s": round(n / t_ahead, 2), "raw_per_s": round(n / t_raw, 2),
                       "ratio": round(t_raw / t_ahead, 2), "ratio_cold": round(t_raw / t_cold, 2),
                       "open_ms_cold": _ms(opens_cold, 0.5), "open_ms_ahead": _ms(opens_ahead, 0.5),
                       "open_p90_ms_cold": _ms(opens_cold, 0.9), "open_p90_ms_ahead": _ms(opens_ahead, 0.9)}
                rows.append(row)
                print(f"concurrency {level:>3}: cold {row['cold_per_s']:6.2f}/s  ahead {row['ahead_per_s']:6.2f}/s  "
                      f"raw aiodocker {row['raw_per_s']:6.2f}/s  ratio ahead/raw {row['ratio']:5.2f} "
                      f"(cold/raw {row['ratio_cold']:5.2f})  open median cold {row['open_ms_cold']:7.1f} ms  "
                      f"ahead {row['open_ms_ahead']:7.1f} ms  ({n} lifecycles each)", flush=True)
    finally:
        await cold.aclose()
        await ahead.aclose()
        await sweep_orphans(run_id=run_id, only_dead=False)
    return {"image": image, "unit": "open+exec+close per second", "prestart": DockerParams().prestart,
            "work_s": work_s, "rows": rows, "run_id": run_id}


def cli() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", default="1,8,16", help="comma-separated concurrency levels")
    parser.add_argument("--per-level", type=int, default=16, help="lifecycles per level (at least 2x level)")
    parser.add_argument("--work-s", type=float, default=0.0,
                        help="seconds each lifecycle holds its container after the exec (an agent's model wait)")
    parser.add_argument("--results-dir", type=Path, default=None, help="where the JSON report goes")
    args = parser.parse_args()
    levels = [int(x) for x in args.levels.split(",") if x.strip()]
    report = asyncio.run(main(levels, args.per_level, args.work_s))
    report["containers_left"] = len(containers_with_label("agentcompass.run_id", report["run_id"]))
    out = write_json("docker_lifecycle", report, args.results_dir)
    values: dict[str, Any] = {}
    for r in report["rows"]:
        c = r["concurrency"]
        # ``ours`` is the provider as configured by default (containers started ahead)
        values |= {f"c{c}_ours": r["ahead_per_s"], f"c{c}_cold": r["cold_per_s"], f"c{c}_ahead": r["ahead_per_s"],
                   f"c{c}_raw": r["raw_per_s"],
                   f"c{c}_ratio": r["ratio"], f"c{c}_open_ms_cold": r["open_ms_cold"],
                   f"c{c}_open_ms_ahead": r["open_ms_ahead"]}
    print(result_line("docker_lifecycle", {**values, "containers_left": report["containers_left"], "json": out}))
    return 0


if __name__ == "__main__":
    raise SystemExit(cli())
