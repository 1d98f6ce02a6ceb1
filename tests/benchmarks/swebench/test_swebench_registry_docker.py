"""A SWE-bench instance whose image is only in a registry (a real one on 127.0.0.1, under the official name):
the engine pulls it through the docker provider before the first task, the gold patch resolves it, and the
attempt's record says the image was pulled and how many bytes came."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

import agentcompass
from agentcompass.benchmarks.swebench.benchmark import SWEBenchLocal
from agentcompass.benchmarks.swebench.local_instances import load_local_instances
from agentcompass.environments.docker.provider import DockerProvider
from agentcompass.interfaces import ComponentContext
from agentcompass.records import ImagePull, ImageRemoved, TaskDetail

from ...environments.conftest import containers_of
from ...environments.registry import (
    build_random_image,
    image_present,
    push_as,
    remove_image,
    running_registry,
    swebench_name,
)
from .conftest import needs_host_py311


def _apply_turn(patch: str) -> str:
    b64 = base64.b64encode(patch.encode()).decode()
    return f"```bash\ncd /testbed && echo {b64} | base64 -d | git apply -v\n```"


async def _local_image(instance_id: str, data_dir: Path, run_id: str) -> str:
    """The swebench_local image of ``instance_id`` (built from its recipe, or the cached build)."""
    bench = SWEBenchLocal({"sample_ids": [instance_id]}, ComponentContext(run_id=run_id, data_dir=str(data_dir),
                                                                          environment="docker"))
    image, recipe = bench.image_for(bench._by_id[instance_id])
    provider = DockerProvider({}, ComponentContext(run_id=run_id))
    try:
        return await provider.ensure_image(image, recipe)
    finally:
        await provider.aclose()


@pytest.mark.slow
@pytest.mark.timeout(900)
@needs_host_py311
def test_an_instance_whose_image_is_only_in_a_registry_is_pulled_and_resolved(
        base_image: str, docker_run_id: str, tmp_path: Path) -> None:
    inst = load_local_instances()[0]
    iid = inst["instance_id"]
    local = asyncio.run(_local_image(iid, tmp_path / "data", docker_run_id))
    dataset = tmp_path / "instances.jsonl"
    dataset.write_text(json.dumps(inst) + "\n")
    with running_registry() as reg:
        ref = swebench_name(reg.host, iid)
        # the swebench_local image plus a 2 MB layer of its own, so the pull has bytes to fetch
        push_as(build_random_image(local, layers_mb=(2,)), ref)
        assert not image_present(ref)
        try:
            script = [{"match": inst["problem_statement"][:200],
                       "turns": [_apply_turn(inst["patch"]), "<submit>done</submit>"]}]
            events: list[Any] = []

            def run(run_id: str, **env_params: Any) -> Any:
                return agentcompass.run_evaluation(
                    "swebench_jsonl", "shell_agent", "scripted", "docker",
                    benchmark_params={"dataset_file": str(dataset), "image_namespace": f"{reg.host}/swebench"},
                    environment_params={"pull_inactivity_timeout": 60, **env_params},
                    model_params={"script": script, "bundled": False}, run_id=run_id,
                    results_dir=str(tmp_path / "results"), data_dir=str(tmp_path / "data"), progress="none",
                    on_progress=events.append)

            out = run(docker_run_id)  # default cache_level "env": the pulled instance image goes after its task
            assert out.status == "completed" and out.metrics["pass@1"] == 1.0, (out.error, out.errors_by_kind)
            assert not image_present(ref)
            assert out.run_dir is not None
            detail = msgspec.json.decode(next((out.run_dir / "details").glob("*.json")).read_bytes(),
                                         type=TaskDetail)
            attempt = detail.attempts["1"]
            assert attempt.extra["eval_raw_data"]["resolved"] is True
            agent_env = next(e for e in attempt.meta["environments"] if e["role"] == "agent")
            assert agent_env["image"]["source"] == "pulled" and agent_env["image"]["image"] == ref
            assert agent_env["image"]["bytes_pulled"] >= 2 << 20
            pulls = [e for e in events if isinstance(e, ImagePull) and e.image == ref]
            assert any(e.status == "pulling" and e.bytes_done > 0 for e in pulls), pulls
            assert pulls[-1].status == "done"
            assert any(isinstance(e, ImageRemoved) and e.image == ref for e in events)
            images = json.loads((out.run_dir / "summary.json").read_text())["images"]
            assert images["pulled"] == 1 and images["removed"] == 1 and images["bytes_pulled"] >= 2 << 20, images

            # cache_level "instance" (the official harness's meaning: cache instance images) keeps it
            out = run(f"{docker_run_id}-keep", cache_level="instance")
            assert out.status == "completed" and out.metrics["pass@1"] == 1.0, (out.error, out.errors_by_kind)
            assert image_present(ref)
        finally:
            remove_image(ref)
    assert containers_of(docker_run_id) == []
