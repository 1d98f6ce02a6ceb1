"""ray_docker on one machine: a local Ray cluster (one for the module; the providers join it as the connection's
counted users) over the host's daemon. The two-node
runs, with node loss, are in test_ray_docker_two_nodes.py."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import agentcompass
from agentcompass._errors import ConfigError
from agentcompass.environments.ray.provider import RayDockerProvider
from agentcompass.interfaces import ComponentContext

from ...run_details import details_by_task
from ..conftest import containers_of, networks_of

#: a local cluster's start and its node actor's (a Python worker importing Ray and the package, then sweeping the
#: daemon) took over the default 120 s once on a loaded machine, while every other worker's docker tests began at
#: once: a hang guard, not a speed expectation
JOIN = {"connect_timeout": 600.0}
SAMPLE = ["files/hello_world", "text/uppercase", "python/fizzbuzz", "text/reverse_lines"]


@pytest.fixture(scope="module")
def local_cluster() -> Iterator[str]:
    """One local Ray cluster for this module's tests (each start costs ~11 CPU-s, and on a loaded machine the
    starts were where a node actor failed to come up): the providers' own ``connect`` joins it as a counted user
    of this process's connection, and the last ``disconnect`` (this fixture's) stops it."""
    from agentcompass.environments.ray import cluster as ray_cluster

    # in this (the session's main) thread: Ray's driver outlives the thread that connected it only if that thread
    # lives on (connected in an event loop's executor thread, the cluster's node list hung once that loop closed)
    address = ray_cluster._connect(None, 2, threading.Event())
    try:
        yield address
    finally:
        ray_cluster._disconnect()


@pytest.mark.parametrize(("params", "field"), [
    ({"docker_host": "tcp://10.0.0.1:2375"}, "environment.params.docker_host"),
    ({"node_capacity": 0}, "node_capacity"),
    ({"heartbeat_interval": -1}, "heartbeat_interval"),
    ({"queue_timeout": 0}, "queue_timeout"),
    ({"pids": 10, "pids_limit": 10}, "environment.params.pids"),
    ({"address": "ray://10.0.0.1:10001"}, "environment.params.address"),
])
def test_bad_params_are_refused_naming_the_field(params: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError) as info:
        RayDockerProvider(params, ComponentContext())
    assert field in (info.value.field or "") + str(info.value)


def test_node_capacity_comes_from_the_params_else_from_the_node_s_cpus_and_memory() -> None:
    gib = float(1 << 30)
    by_node = RayDockerProvider({"node_capacity": {"10.0.0.7": 5}, "envs_per_cpu": 3, "memory": "1g"},
                                ComponentContext())
    assert by_node._capacity("10.0.0.7", 2, 64 * gib) == 5  # named: the params win
    assert by_node._capacity("10.0.0.8", 2, 64 * gib) == 6  # 3 per CPU
    assert by_node._capacity("10.0.0.8", 8, 4 * gib) == 4  # 24 by CPU, but 4 GiB hold four 1 GiB containers
    assert RayDockerProvider({"node_capacity": 9}, ComponentContext())._capacity("x", 64, 0) == 9
    assert RayDockerProvider({}, ComponentContext())._capacity("x", 0.5, 0) == 1


async def test_a_full_cluster_queues_opens_in_reserve_beyond_open_timeout_and_gives_every_slot_back() -> None:
    """``reserve`` waits for room (bounded by ``queue_timeout``, not ``open_timeout``); the slot it takes is
    ``open``'s, or goes back on ``unreserve`` and when the open fails."""
    from agentcompass._errors import EnvironmentError_
    from agentcompass.environments.ray.placement import NodeSlots
    from agentcompass.environments.ray.provider import NodeLost
    from agentcompass.interfaces import EnvOpenSpec

    provider = RayDockerProvider({"open_timeout": 0.1, "queue_timeout": 30}, ComponentContext())
    node = NodeSlots("n1", capacity=1)
    await provider.placement.add(node)
    first, second = EnvOpenSpec(run_id="r", task_id="a"), EnvOpenSpec(run_id="r", task_id="b")
    await provider.reserve(first)
    assert node.active == 1
    queued = asyncio.ensure_future(provider.reserve(second))
    await asyncio.sleep(0.3)  # three times open_timeout: still queued, not failed
    assert not queued.done()
    await provider.unreserve(first)  # the engine did not get to open it
    async with asyncio.timeout(30):
        await queued
    assert node.active == 1 and provider.placement.pinned("b") == "n1"
    with pytest.raises(NodeLost, match="has no actor"):  # no actor in this test: the open fails, its slot goes
        await provider.open(second)
    await provider.unreserve(second)  # what the engine does after a failed open: nothing left to give back
    assert node.active == 0
    # without a reservation an open waits for room at most open_timeout; a reservation at most queue_timeout
    await provider.reserve(first)
    with pytest.raises(EnvironmentError_, match=r"within 0.1s \(ray_docker's open_timeout\)"):
        await provider.open(EnvOpenSpec(run_id="r", task_id="c"))
    short = RayDockerProvider({"queue_timeout": 0.1}, ComponentContext())
    await short.placement.add(NodeSlots("n1", capacity=0))
    with pytest.raises(EnvironmentError_, match="ray_docker's queue_timeout"):
        await short.reserve(second)


@pytest.mark.slow
def test_shell_tasks_on_a_local_ray_cluster_grade_as_on_docker_and_name_the_node(
        local_cluster: str, base_image: str, docker_run_id: str, tmp_path: Path, scripted_url: str) -> None:
    common = dict(model_base_url=scripted_url, benchmark_params={"sample_ids": SAMPLE, "k": 2},
                  task_concurrency=4, progress="none")
    out = agentcompass.run_evaluation(
        "shell_tasks", "shell_agent", "scripted", "ray_docker",
        environment_params={"network_policy": "model", "local_cpus": 2, **JOIN}, run_id=docker_run_id,
        results_dir=str(tmp_path / "ray"), **common)  # type: ignore[arg-type]
    assert out.status == "completed" and out.counts.errors == 0, (out.error, out.errors_by_kind)
    ref = agentcompass.run_evaluation(
        "shell_tasks", "shell_agent", "scripted", "docker", environment_params={"network_policy": "model"},
        run_id=docker_run_id + "-ref", results_dir=str(tmp_path / "docker"), **common)  # type: ignore[arg-type]
    assert out.metrics == ref.metrics
    assert out.run_dir is not None
    details = details_by_task(out.run_dir)
    assert sorted(details) == sorted(SAMPLE)
    nodes = {e["node"] for d in details.values() for a in d.attempts.values() for e in a.meta["environments"]}
    assert len(nodes) == 1  # one node: the local cluster's
    summary = json.loads((out.run_dir / "summary.json").read_text())
    [node] = nodes
    assert summary["nodes"][node]["attempts"] == 2 * len(SAMPLE)
    assert containers_of(docker_run_id) == [] and networks_of(docker_run_id) == []


@pytest.mark.slow
def test_a_sandbox_on_a_node_calls_the_model_through_the_relayed_gateway(
        local_cluster: str, base_image: str, docker_run_id: str, tmp_path: Path, scripted_url: str) -> None:
    out = agentcompass.run_evaluation(
        "shell_tasks", "tests.engine.gateway_components:GatewayCallHarness", "scripted", "ray_docker",
        model_base_url=scripted_url, harness_params={"prompt": "Task: files/hello_world\n"},
        benchmark_params={"sample_ids": ["files/hello_world"]},
        environment_params={"network_policy": "model", "local_cpus": 2, **JOIN}, run_id=docker_run_id,
        results_dir=str(tmp_path), progress="none")
    assert out.ok, out.error
    assert out.run_dir is not None
    a = details_by_task(out.run_dir)["files/hello_world"].attempts["1"]
    assert (a.final_answer or "").startswith("STATUS 200 "), a.final_answer
    assert "127.0.0.1" not in a.artifacts["env"]  # the sandbox got the forwarder's alias, not the host's loopback
    assert a.meta["gateway"]["calls"] == 1
    assert containers_of(docker_run_id) == [] and networks_of(docker_run_id) == []


async def test_a_node_declared_lost_fails_its_calls_at_once_and_its_late_answer_is_dropped(local_cluster: str,
                                                                                          tmp_path: Path) -> None:
    import ray

    from agentcompass.environments.ray import cluster as ray_cluster
    from agentcompass.environments.ray.placement import NodeSlots
    from agentcompass.environments.ray.provider import NodeHandle, NodeLost

    class SlowNode:  # a node actor that answers after a while (defined here: Ray ships it by value)
        async def slow(self, seconds: float) -> tuple[str, str]:
            await asyncio.sleep(seconds)
            return "ok", "late"

        async def gated(self, path: str) -> tuple[str, str]:  # answers once the test creates ``path``
            import os

            for _ in range(1200):  # bounded: 60 s
                if os.path.exists(path):
                    break
                await asyncio.sleep(0.05)
            return "ok", "late"

    await ray_cluster.connect(None, local_cpus=1, timeout_s=JOIN["connect_timeout"])
    try:
        remote = ray.remote(SlowNode).options(num_cpus=0, max_restarts=0)  # type: ignore[attr-defined]
        handle = NodeHandle("n1", "id1", remote.remote(), NodeSlots("n1", capacity=1), facts=None)  # type: ignore[arg-type]
        assert await handle.call("slow", 0) == "late"
        gate = tmp_path / "answer"
        call = asyncio.ensure_future(handle.call("gated", str(gate)))
        await asyncio.sleep(0)  # the call is sent and waits for the answer, which cannot come before the gate opens
        handle.mark_lost("declared lost by the test")
        with pytest.raises(NodeLost, match="declared lost by the test") as info:
            await asyncio.wait_for(call, 30)  # hang guard: the node has not answered
        assert info.value.kind == "env_lost" and handle.late_answers == 0
        gate.touch()  # now the node answers
        for _ in range(600):  # the answer still comes (within 30 s), and is dropped
            if handle.late_answers:
                break
            await asyncio.sleep(0.05)
        assert handle.late_answers == 1
        with pytest.raises(NodeLost):
            await handle.call("slow", 0)  # nothing is sent to a lost node

        # a node whose actor dies mid-call: the Ray error declares it lost
        killed = NodeHandle("n2", "id2", remote.remote(), NodeSlots("n2", capacity=1), facts=None)  # type: ignore[arg-type]
        assert await killed.call("slow", 0) == "late"
        call = asyncio.ensure_future(killed.call("slow", 30))
        await asyncio.sleep(0.3)
        await asyncio.to_thread(ray.kill, killed.actor, no_restart=True)
        with pytest.raises(NodeLost):
            await asyncio.wait_for(call, 20)
        assert not killed.alive and killed.lost_reason
    finally:
        await ray_cluster.disconnect()


async def test_a_cancelled_command_on_a_node_is_killed_in_its_container(local_cluster: str, base_image: str,
                                                                         docker_run_id: str) -> None:
    from agentcompass.interfaces import EnvOpenSpec

    provider = RayDockerProvider({"local_cpus": 1, "image": base_image, "prestart": 0, **JOIN},
                                 ComponentContext(run_id=docker_run_id))
    try:
        await provider.start()
        env = await provider.open(EnvOpenSpec(run_id=docker_run_id, task_id="cancel"))
        assert env.node == provider.handles()[0].name
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(env.exec("sleep 300 && echo never > /tmp/never", timeout=600), 2)
        for _ in range(100):  # ray.cancel reaches the node actor, which kills the command's process group
            ps = await env.exec("ps -eo args", timeout=30)
            if "sleep 300" not in ps.stdout:
                break
            await asyncio.sleep(0.1)
        assert "sleep 300" not in ps.stdout, ps.stdout
        assert (await env.exec("echo still usable", timeout=30)).stdout == "still usable\n"
        await env.close()
        await env.close()  # idempotent
        assert provider.placement.alive()[0].active == 0
    finally:
        await provider.aclose()
    assert containers_of(docker_run_id) == [] and networks_of(docker_run_id) == []
