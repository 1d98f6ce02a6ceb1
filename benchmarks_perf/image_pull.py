"""Image pull throughput: the docker provider's pull (``docker_pull``) vs the ``docker pull`` CLI, same image,
same local registry (Debian's ``docker-registry`` on 127.0.0.1).

The image is the busybox base plus ``--layers`` layers of random bytes (``--size-mb`` in all, incompressible);
it is pushed once, then each rep pulls it with the provider and with the CLI (A-B-B-A order), removing it
locally before every pull, so both fetch the same bytes from the same registry.

    .venv/bin/python benchmarks_perf/image_pull.py [--size-mb 150] [--layers 3] [--reps 2] [--results-dir D]

Prints one line per pull, writes ``results/image_pull.json`` and ends with a ``RESULT`` line (``ours_mb_s``,
``cli_mb_s``, ``ratio`` = ours / CLI throughput, target >= 0.9; ``bytes``; ``images_left``).
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from _common import result_line, write_json

from agentcompass.environments.docker.images import BUSYBOX_IMAGE, build_base_image
from agentcompass.environments.docker.provider import DockerProvider
from agentcompass.interfaces import ComponentContext
from tests.environments.registry import (
    REGISTRY_BIN,
    build_random_image,
    image_present,
    push_as,
    remove_image,
    start_registry,
    swebench_name,
)


async def _ours(ref: str, run_id: str) -> tuple[float, int]:
    """(seconds, bytes) of one provider pull of ``ref``."""
    provider = DockerProvider({}, ComponentContext(run_id=run_id))
    try:
        started = time.perf_counter()
        await provider.ensure_image(ref)
        seconds = time.perf_counter() - started
        stats = provider.pull_stats(ref)
        assert stats is not None and stats.source == "pulled", stats
        return seconds, stats.bytes_pulled
    finally:
        await provider.aclose()


def _cli(ref: str) -> float:
    started = time.perf_counter()
    subprocess.run(["docker", "pull", "-q", ref], check=True, capture_output=True, timeout=3600)
    return time.perf_counter() - started


def main(size_mb: int, layers: int, reps: int) -> dict[str, Any]:
    if not Path(REGISTRY_BIN).exists():
        raise SystemExit(f"{REGISTRY_BIN} is missing: apt-get install docker-registry")
    base = asyncio.run(build_base_image(BUSYBOX_IMAGE, method="busybox"))
    run_id = f"bench-{uuid.uuid4().hex[:8]}"
    pulls: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="agentcompass-bench-registry-") as tmp:
        reg = start_registry(Path(tmp))
        ref = swebench_name(reg.host, f"bench__pull-{uuid.uuid4().hex[:6]}")
        try:
            sizes = tuple(max(1, size_mb // layers) for _ in range(layers))
            push_as(build_random_image(base, layers_mb=sizes), ref)
            nbytes = 0
            order = ["ours", "cli", "cli", "ours"] * ((reps + 1) // 2)
            for i, who in enumerate(order[:2 * reps]):
                remove_image(ref)
                if who == "ours":
                    seconds, nbytes = asyncio.run(_ours(ref, run_id))
                else:
                    seconds = _cli(ref)
                assert image_present(ref)
                pulls.append({"who": who, "seconds": round(seconds, 3)})
                print(f"pull {i + 1}: {who:4} {seconds:6.2f}s", flush=True)
        finally:
            remove_image(ref)
            reg.stop()
        images_left = int(image_present(ref))
    ours_s = sum(p["seconds"] for p in pulls if p["who"] == "ours")
    cli_s = sum(p["seconds"] for p in pulls if p["who"] == "cli")
    n = len(pulls) // 2
    return {"image": ref, "bytes": nbytes, "reps": n, "pulls": pulls,
            "ours_mb_s": round(nbytes * n / ours_s / 1e6, 2), "cli_mb_s": round(nbytes * n / cli_s / 1e6, 2),
            "ratio": round(cli_s / ours_s, 3), "images_left": images_left}


def cli() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=150, help="random bytes in the image's own layers")
    parser.add_argument("--layers", type=int, default=3, help="how many layers they are split into")
    parser.add_argument("--reps", type=int, default=2, help="pulls by each side")
    parser.add_argument("--results-dir", type=Path, default=None, help="where the JSON report goes")
    args = parser.parse_args()
    report = main(args.size_mb, args.layers, args.reps)
    out = write_json("image_pull", report, args.results_dir)
    print(f"provider {report['ours_mb_s']} MB/s, docker pull {report['cli_mb_s']} MB/s, ratio {report['ratio']} "
          "(target >= 0.9)")
    print(result_line("image_pull", {k: report[k] for k in ("ours_mb_s", "cli_mb_s", "ratio", "bytes", "reps",
                                                           "images_left")} | {"json": out}))
    return 0


if __name__ == "__main__":
    raise SystemExit(cli())
