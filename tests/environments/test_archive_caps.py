"""The agent's workspace comes back to the engine streamed to disk under a per-file and a total cap.

The big-file runs start the engine in a subprocess and read its peak RSS (VmHWM) at the end, so what is
measured is the engine alone, whatever this pytest process did before.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

from agentcompass._errors import ConfigError
from agentcompass.environments.docker.provider import DockerProvider
from agentcompass.environments.local.provider import LocalProvider
from agentcompass.interfaces import ComponentContext, EnvOpenSpec

MIB = 1 << 20
RSS_LIMIT = 300 * MIB

_ENGINE = r"""
import json, sys
import agentcompass
args = json.loads(sys.argv[1])
out = agentcompass.run_evaluation("shell_tasks", "shell_agent", "scripted", args["environment"],
    benchmark_params={"sample_ids": ["files/hello_world"]}, environment_params=args["environment_params"],
    model_params={"script": [{"match": "Task: files/hello_world\n", "turns": [
        "```bash\nprintf 'Hello, World!\\n' > hello.txt && " + args["make_big"] + "\n```",
        "<submit></submit>"]}]},
    results_dir=args["results_dir"], run_id=args["run_id"], progress="none")
with open("/proc/self/status") as f:
    hwm_kib = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
print(json.dumps({"hwm": hwm_kib * 1024, "run_dir": str(out.run_dir), "status": out.status}))
"""


def run_engine(tmp_path: Path, environment: str, environment_params: dict[str, Any], make_big: str,
               run_id: str) -> tuple[int, dict[str, Any], Path]:
    """Run one hello_world attempt whose agent also makes a big file; (peak RSS, the attempt, run dir)."""
    args = {"environment": environment, "environment_params": environment_params, "make_big": make_big,
            "results_dir": str(tmp_path / "results"), "run_id": run_id}
    proc = subprocess.run([sys.executable, "-c", _ENGINE, json.dumps(args)], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["status"] == "completed"
    run_dir = Path(report["run_dir"])
    detail = json.loads(next((run_dir / "details").glob("files_hello*")).read_text())
    print(f"{environment}: engine peak RSS {report['hwm'] / MIB:.0f} MiB")  # shown with -s
    return report["hwm"], detail["attempts"]["1"], run_dir


def tree_bytes(path: Path) -> int:
    return sum(p.stat().st_blocks * 512 for p in path.rglob("*") if p.is_file())


def test_a_2g_sparse_file_in_a_local_workspace_is_listed_not_copied_and_the_engine_stays_small(
        tmp_path: Path) -> None:
    hwm, attempt, run_dir = run_engine(tmp_path, "local", {"base_dir": str(tmp_path)}, "truncate -s 2G big.bin",
                                       "sparse-local")
    assert hwm < RSS_LIMIT, f"engine peak RSS {hwm / MIB:.0f} MiB"
    assert attempt["correct"] is True  # hello.txt still reached the verifier
    assert {"name": "big.bin", "size": 2 << 30, "reason": "file_limit"} in attempt["extra"]["workspace_skipped"]
    assert tree_bytes(run_dir) < 20 * MIB


def test_an_800m_file_in_a_container_is_listed_not_copied_and_the_engine_stays_small(
        base_image: str, docker_run_id: str, tmp_path: Path) -> None:
    hwm, attempt, run_dir = run_engine(tmp_path, "docker", {"image": base_image},
                                       "truncate -s 800M big.bin", docker_run_id)
    assert hwm < RSS_LIMIT, f"engine peak RSS {hwm / MIB:.0f} MiB"
    assert attempt["correct"] is True
    assert {"name": "big.bin", "size": 800 * MIB, "reason": "file_limit"} in attempt["extra"]["workspace_skipped"]
    assert tree_bytes(run_dir) < 20 * MIB


# ----------------------------------------------------------------------------- caps, directly


async def test_the_total_cap_bounds_the_streamed_copy(tmp_path: Path) -> None:
    provider = LocalProvider({"base_dir": str(tmp_path), "archive_total_limit_bytes": 10 * MIB},
                             ComponentContext(run_id="caps"))
    env = await provider.open(EnvOpenSpec(run_id="caps", task_id="t"))
    try:
        res = await env.exec("for f in a b c; do head -c 4M /dev/urandom > $f.bin; done; echo small > s.txt")
        assert res.exit_code == 0, res.output
        with await env.get_archive_file(env.workdir) as archive:
            assert archive.size <= 10 * MIB
            archive.file.seek(0, os.SEEK_END)
            assert archive.file.tell() == archive.size
            archive.file.seek(0)
            with tarfile.open(fileobj=archive.file, mode="r|") as tf:
                kept = sorted(m.name for m in tf)
            skipped = [s.name for s in archive.skipped]
        assert kept == ["a.bin", "b.bin", "s.txt"] and skipped == ["c.bin"]  # what fits goes on after the cap
        assert archive.skipped[0].reason == "total_limit" and archive.skipped[0].size == 4 * MIB
        # the bytes API is capped the same way
        with tarfile.open(fileobj=__import__("io").BytesIO(await env.get_archive("."))) as tf:
            assert sorted(tf.getnames()) == ["a.bin", "b.bin", "s.txt"]
    finally:
        await provider.aclose()


async def test_read_file_refuses_a_file_over_the_per_file_cap(tmp_path: Path) -> None:
    provider = LocalProvider({"base_dir": str(tmp_path), "archive_file_limit_bytes": MIB},
                             ComponentContext(run_id="caps"))
    env = await provider.open(EnvOpenSpec(run_id="caps", task_id="t"))
    try:
        await env.exec("truncate -s 2G big.bin")
        with pytest.raises(OSError, match="archive_file_limit_bytes"):
            await env.read_file("big.bin")
    finally:
        await provider.aclose()


BAD_LIMITS = [0, -1, 1.5, math.nan, math.inf, True, "1g", None]


@pytest.mark.parametrize("key", ["archive_file_limit_bytes", "archive_total_limit_bytes"])
@pytest.mark.parametrize("value", BAD_LIMITS, ids=repr)
@pytest.mark.parametrize("provider", [LocalProvider, DockerProvider], ids=["local", "docker"])
def test_archive_limits_are_validated_naming_the_field(provider: Any, key: str, value: Any) -> None:
    with pytest.raises(ConfigError, match=key) as info:
        provider({key: value}, ComponentContext(run_id="caps"))
    assert info.value.field == f"environment.params.{key}"


_TREE = ("mkdir sub && head -c 2M /dev/zero > sub/big-link.bin && ln sub/big-link.bin sub/big.bin && "
         "echo hi > a.txt && ln a.txt b.txt && ln -s a.txt s.txt && "
         "for i in 1 2 3 4 5; do head -c 900K /dev/urandom > m$i.bin; done")


# the docker param reaches the daemon through getfixturevalue, which the docker mark (given by fixture name) cannot
# see: marked here, so `-m "not docker"` (CI's steps 2 and 3) leaves it out instead of waiting on the base image
@pytest.fixture(params=["local", pytest.param("docker", marks=pytest.mark.docker_images("base"))])
def capped_provider(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    limits = {"archive_file_limit_bytes": MIB, "archive_total_limit_bytes": 4 * MIB}
    if request.param == "local":
        return LocalProvider({"base_dir": str(tmp_path), **limits}, ComponentContext(run_id="caps")), "caps"
    run_id = request.getfixturevalue("docker_run_id")
    image = request.getfixturevalue("base_image")
    return DockerProvider({"image": image, **limits}, ComponentContext(run_id=run_id)), run_id


async def test_caps_skip_files_and_their_hard_links_keep_links_and_stop_at_the_total(
        capped_provider: Any, tmp_path: Path) -> None:
    from agentcompass.environments._tar import extract_tar

    provider, run_id = capped_provider
    try:
        env = await provider.open(EnvOpenSpec(run_id=run_id, task_id="t"))
        res = await env.exec(["sh", "-c", _TREE])
        assert res.exit_code == 0, res.output
        with await env.get_archive_file(env.workdir) as archive:
            assert archive.size <= 4 * MIB
            skipped = {(s.name, s.reason) for s in archive.skipped}
            assert skipped == {("sub/big-link.bin", "file_limit"), ("sub/big.bin", "file_limit"),
                               ("m5.bin", "total_limit")}
            assert archive.skipped_count == 3
            out = tmp_path / "out"
            out.mkdir()
            extract_tar(archive.rewind(), out)
        assert sorted(p.name for p in out.iterdir()) == ["a.txt", "b.txt", "m1.bin", "m2.bin", "m3.bin", "m4.bin",
                                                         "s.txt", "sub"]
        assert (out / "b.txt").read_text() == "hi\n" and os.readlink(out / "s.txt") == "a.txt"
        assert list((out / "sub").iterdir()) == []
        assert await env.read_file("s.txt") == b"hi\n"
        with pytest.raises(OSError, match="archive_file_limit_bytes"):
            await env.read_file("sub/big.bin")
        await env.close()
    finally:
        await provider.aclose()
