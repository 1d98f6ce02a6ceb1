"""Container lifecycle throughput: DockerProvider vs a raw aiodocker loop, in the same run.

One lifecycle = open (create + start) + one exec (``echo``) + close (force remove). Each concurrency level
runs the provider and the raw loop interleaved (A-B-B-A) on the tiny busybox image, so the ratio compares
like with like on the same daemon load.

    .venv/bin/python benchmarks_perf/docker_lifecycle.py [--per-level N] [--levels 1,8,16] [--results-dir D]

Prints a table, writes ``results/docker_lifecycle.json`` and ends with a ``RESULT`` line
(``c<level>_ours``, ``c<level>_raw`` in lifecycles/s, ``c<level>_ratio`` = ours / raw, ``containers_left``).
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiodocker
from _common import containers_with_label, result_line, write_json

from agentcompass.environments.docker import DockerProvider
from agentcompass.environments.docker_images import BUSYBOX_IMAGE, build_base_image
from agentcompass.environments.docker_sweep import sweep_orphans
from agentcompass.interfaces import ComponentContext, EnvOpenSpec


async def _provider_lifecycle(provider: DockerProvider, run_id: str, i: int) -> None:
    env = await provider.open(EnvOpenSpec(run_id=run_id, task_id=f"bench-{i}"))
    try:
        res = await env.exec(["echo", "hi"])
        assert res.exit_code == 0 and res.stdout == "hi\n", res
    finally:
        await env.close()


async def _raw_lifecycle(docker: aiodocker.Docker, image: str, run_id: str, i: int) -> None:
    config: dict[str, Any] = {"Image": image, "Entrypoint": ["tail", "-f", "/dev/null"], "Labels": {
        "agentcompass.run_id": run_id, "agentcompass.task_id": f"raw-{i}"}, "HostConfig": {"Init": True}}
    container = await docker.containers.create(config)
    try:
        await container.start()
        ex = await container.exec(["echo", "hi"])
        out = b""
        async with ex.start(detach=False) as stream:
            while (msg := await stream.read_out()) is not None:
                out += msg.data
        assert (await ex.inspect())["ExitCode"] == 0 and out == b"hi\n"
    finally:
        await container.delete(force=True, v=True)


async def _timed(job: Callable[[int], Awaitable[None]], total: int, concurrency: int) -> float:
    """Seconds to run ``total`` jobs with at most ``concurrency`` in flight."""
    gate = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with gate:
            await job(i)

    started = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(total)))
    return time.perf_counter() - started


async def _compare(ours: Callable[[int], Awaitable[None]], raw: Callable[[int], Awaitable[None]],
                   total: int, concurrency: int) -> tuple[float, float]:
    """(ours, raw) lifecycles per second, measured in A-B-B-A halves so daemon drift hits both alike."""
    half = max(1, total // 2)
    t_ours = await _timed(ours, half, concurrency)
    t_raw = await _timed(raw, half, concurrency)
    t_raw += await _timed(raw, half, concurrency)
    t_ours += await _timed(ours, half, concurrency)
    return 2 * half / t_ours, 2 * half / t_raw


async def main(levels: list[int], per_level: int) -> dict[str, Any]:
    image = await build_base_image(BUSYBOX_IMAGE, method="busybox")
    run_id = f"bench-{uuid.uuid4().hex[:8]}"
    provider = DockerProvider({"image": image}, ComponentContext(run_id=run_id))
    rows: list[dict[str, Any]] = []
    try:
        async with aiodocker.Docker() as docker:
            # warm both paths (image cache, client connections)
            await _provider_lifecycle(provider, run_id, -1)
            await _raw_lifecycle(docker, image, run_id, -1)
            for level in levels:
                total = max(per_level, 2 * level)
                ours, raw = await _compare(lambda i: _provider_lifecycle(provider, run_id, i),
                                           lambda i: _raw_lifecycle(docker, image, run_id, i), total, level)
                row = {"concurrency": level, "lifecycles": total, "provider_per_s": round(ours, 2),
                       "raw_per_s": round(raw, 2), "ratio": round(ours / raw, 2)}
                rows.append(row)
                print(f"concurrency {level:>3}: provider {row['provider_per_s']:6.2f}/s  raw aiodocker "
                      f"{row['raw_per_s']:6.2f}/s  ratio {row['ratio']:5.2f}  ({total} lifecycles each)",
                      flush=True)
    finally:
        await provider.aclose()
        await sweep_orphans(run_id=run_id, only_dead=False)
    return {"image": image, "unit": "open+exec+close per second", "rows": rows, "run_id": run_id}


def cli() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", default="1,8,16", help="comma-separated concurrency levels")
    parser.add_argument("--per-level", type=int, default=16, help="lifecycles per level (at least 2x level)")
    parser.add_argument("--results-dir", type=Path, default=None, help="where the JSON report goes")
    args = parser.parse_args()
    levels = [int(x) for x in args.levels.split(",") if x.strip()]
    report = asyncio.run(main(levels, args.per_level))
    report["containers_left"] = len(containers_with_label("agentcompass.run_id", report["run_id"]))
    out = write_json("docker_lifecycle", report, args.results_dir)
    values: dict[str, Any] = {}
    for r in report["rows"]:
        c = r["concurrency"]
        values |= {f"c{c}_ours": r["provider_per_s"], f"c{c}_raw": r["raw_per_s"], f"c{c}_ratio": r["ratio"]}
    print(result_line("docker_lifecycle", {**values, "containers_left": report["containers_left"], "json": out}))
    return 0


if __name__ == "__main__":
    raise SystemExit(cli())
