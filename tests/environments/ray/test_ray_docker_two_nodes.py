"""ray_docker over two nodes on one machine: a Ray head on the host (the host's Docker daemon) and a Ray worker
node inside a second Docker daemon's network namespace (tests/standins/second_node.py, ray_cluster.py).

One run of 20 shell_tasks with k=2 under the ``model`` network policy; the worker node's raylet is SIGKILLed
mid-run. The run completes on the head node with the lost attempts retried, each task committed once, and the
metrics equal a single-daemon ``docker`` run. When the worker node comes back, the sweep of its new node actor
leaves no labelled container or network on either daemon."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

import agentcompass
from agentcompass.environments.docker.api import DEFAULT_BASE_IMAGE
from agentcompass.environments.ray.provider import NodeHandle, RayDockerProvider, RayEnvironment
from agentcompass.interfaces import ComponentContext
from agentcompass.records import AttemptFinished, EnvOpened, ProgressEvent, TaskDetail
from tests.standins.ray_cluster import RayCluster, auth_env
from tests.standins.second_node import SecondNode

from ..conftest import containers_of, networks_of

TASKS = 20
K = 2


@pytest.fixture
def ray_cluster(second_docker_node: SecondNode, base_image: str,
                monkeypatch: pytest.MonkeyPatch) -> Iterator[RayCluster]:
    second_docker_node.load_images([base_image, DEFAULT_BASE_IMAGE])
    for key, value in auth_env().items():  # this process is the cluster's driver (the coordinator)
        monkeypatch.setenv(key, value)
    cluster = RayCluster(second_docker_node)
    try:
        yield cluster.start_head().start_worker()
    finally:
        cluster.stop()


class _Killer:
    """Kills the worker node's raylet once two attempts finished on that node, at the moment another one opens its
    environment there: that attempt has all its steps and its grading on the node still ahead, so it is lost
    whatever the machine's speed (killing when the second finished found the ones in flight there past their
    environment on a loaded CI run, and none was lost)."""

    def __init__(self, cluster: RayCluster) -> None:
        self.cluster = cluster
        self.node = cluster.node.address
        self.task_node: dict[str, str] = {}
        self.finished_on_node = 0
        self.killed_pid: int | None = None
        self.in_flight_at_kill = 0
        self._open: dict[str, int] = {}
        self._lock = threading.Lock()

    def __call__(self, event: ProgressEvent) -> None:
        with self._lock:
            if isinstance(event, EnvOpened) and event.node is not None and event.role == "agent":
                self.task_node[event.task_id] = event.node
                self._open[event.node] = self._open.get(event.node, 0) + 1
                if event.node == self.node and self.finished_on_node >= 2 and self.killed_pid is None:
                    self.in_flight_at_kill = self._open[self.node]
                    self.killed_pid = self.cluster.kill_worker_raylet()
            elif isinstance(event, AttemptFinished) and self.task_node.get(event.task_id) == self.node:
                self._open[self.node] -= 1
                self.finished_on_node += 1


def _node_labelled(node: SecondNode, run_id: str) -> list[str]:
    label = f"label=agentcompass.run_id={run_id}"
    return node.docker("ps", "-aq", "--filter", label).split() + node.docker("network", "ls", "-q", "--filter",
                                                                           label).split()


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_two_nodes_share_the_run_and_a_lost_node_s_attempts_are_retried_on_the_other(
        ray_cluster: RayCluster, docker_run_id: str, tmp_path: Path, scripted_url: str) -> None:
    # a sandbox on each node reaches the model only through the coordinator's gateway (relayed on the host end)
    node2, head = ray_cluster.node.address, ray_cluster.node.host_address
    env_params = {"network_policy": "model", "address": ray_cluster.address, "gateway_host": head}
    calls = agentcompass.run_evaluation(
        "shell_tasks", "tests.engine.gateway_components:GatewayCallHarness", "scripted", "ray_docker",
        model_base_url=scripted_url, harness_params={"prompt": "Task: files/hello_world\n"},
        benchmark_params={"sample_ids": ["files/hello_world", "text/uppercase"], "k": 2}, task_concurrency=4,
        environment_params={**env_params, "node_capacity": 2}, run_id=docker_run_id + "-gw",
        results_dir=str(tmp_path / "gw"), progress="none")
    assert calls.ok and calls.run_dir is not None, calls.error
    gw = [msgspec.json.decode(p.read_bytes(), type=TaskDetail) for p in (calls.run_dir / "details").glob("*.json")]
    answers = [(a.meta["environments"][0]["node"], a.final_answer or "") for d in gw for a in d.attempts.values()]
    # four attempts at once on two nodes of two slots: the first task's node fills, the second task goes to the other
    # (with two at once the second task started after the first had left its node, and went to the same one)
    for d in gw:  # a task's attempts share a node
        assert len({a.meta["environments"][0]["node"] for a in d.attempts.values()}) == 1
    assert {node for node, _ in answers} == {head, node2}
    assert all(answer.startswith("STATUS 200 ") for _, answer in answers), answers

    killer = _Killer(ray_cluster)
    common = dict(model_base_url=scripted_url, benchmark_params={"limit": TASKS, "k": K}, task_concurrency=6,
                  max_retries=3, progress="none")
    out = agentcompass.run_evaluation(
        "shell_tasks", "shell_agent", "scripted", "ray_docker",
        environment_params={**env_params, "node_capacity": 4, "heartbeat_interval": 1, "node_timeout": 5},
        run_id=docker_run_id, results_dir=str(tmp_path / "ray"), on_progress=killer,
        **common)  # type: ignore[arg-type]
    assert killer.killed_pid is not None, "no environment opened on the worker node after two attempts finished there"
    assert killer.in_flight_at_kill >= 1
    assert out.status == "completed" and out.counts.errors == 0, (out.error, out.errors_by_kind)
    assert out.run_dir is not None

    # every task committed exactly once, every attempt's tries numbered once
    files = sorted((out.run_dir / "details").glob("*.json"))
    details = [msgspec.json.decode(p.read_bytes(), type=TaskDetail) for p in files]
    assert len(details) == TASKS == len({d.task_id for d in details})
    for d in details:
        assert sorted(d.attempts) == [str(i) for i in range(1, K + 1)]
        for a in d.attempts.values():
            assert [t.try_no for t in a.tries] == list(range(1, len(a.tries) + 1))

    events = [json.loads(line) for line in (out.run_dir / "progress.jsonl").read_text().splitlines() if line]
    committed = [e["task_id"] for e in events if e["event"] == "task_finished"]
    assert sorted(committed) == sorted(d.task_id for d in details)  # one commit per task, none twice

    # both nodes ran attempts; the lost ones were retried (env_lost) and finished on the head
    ran = {e["node"] for d in details for a in d.attempts.values() for e in a.meta["environments"]}
    assert ran == {head, node2}
    lost = [a for d in details for a in d.attempts.values() if any(t.error_kind == "env_lost" for t in a.tries)]
    assert lost, "no attempt was lost with the node"
    assert all(a.meta["environments"][-1]["node"] == head for a in lost)
    summary = json.loads((out.run_dir / "summary.json").read_text())
    assert set(summary["nodes"]) == {head, node2}
    assert sum(n["attempts"] for n in summary["nodes"].values()) == TASKS * K

    # the same tasks on one daemon grade the same
    ref = agentcompass.run_evaluation(
        "shell_tasks", "shell_agent", "scripted", "docker", environment_params={"network_policy": "model"},
        run_id=docker_run_id + "-ref", results_dir=str(tmp_path / "docker"), **common)  # type: ignore[arg-type]
    assert out.metrics == ref.metrics

    # the node comes back: the sweep of its new node actor removes what the lost one left
    assert ray_cluster.wait_worker_gone() == []
    ray_cluster.start_worker()

    async def sweep() -> list[str]:
        provider = RayDockerProvider({"address": ray_cluster.address, "gateway_host": head},
                                     ComponentContext(run_id="sweep"))
        try:
            await provider.start()
            return sorted(h.name for h in provider.handles() if h.alive)
        finally:
            await provider.aclose()

    assert asyncio.run(sweep()) == sorted([head, node2])
    assert containers_of(docker_run_id) == [] and networks_of(docker_run_id) == []
    assert _node_labelled(ray_cluster.node, docker_run_id) == []


async def _one_env_per_node(provider: RayDockerProvider, run_id: str, head: str,
                            node2: str) -> tuple[RayEnvironment, RayEnvironment]:
    """Tasks ``a`` and ``b`` opened: one lands on each node (the emptier one); (on the head, on node 2)."""
    from agentcompass.interfaces import EnvOpenSpec

    envs = [await provider.open(EnvOpenSpec(run_id=run_id, task_id=t)) for t in ("a", "b")]
    assert {e.node for e in envs} == {head, node2}
    [on_head] = [e for e in envs if e.node == head]
    [on2] = [e for e in envs if e.node == node2]
    return on_head, on2


async def _taken_in_again(provider: RayDockerProvider, node: str) -> NodeHandle:
    """The live handle of ``node`` once the provider's rescan has taken it in again (within 60 s)."""
    for _ in range(600):
        back = [h for h in provider.handles() if h.alive and h.name == node]
        if back:
            return back[0]
        await asyncio.sleep(0.1)
    raise AssertionError(f"node {node} came back but was not taken in")


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_node_that_comes_back_during_a_run_is_swept_and_takes_work_again(
        ray_cluster: RayCluster, docker_run_id: str) -> None:
    from agentcompass._errors import EnvironmentError_
    from agentcompass.interfaces import EnvOpenSpec

    node2, head = ray_cluster.node.address, ray_cluster.node.host_address

    async def scenario() -> None:
        provider = RayDockerProvider(
            {"address": ray_cluster.address, "gateway_host": head, "heartbeat_interval": 0.5, "node_timeout": 3,
             "rescan_interval": 1, "node_capacity": 2, "prestart": 0}, ComponentContext(run_id=docker_run_id))
        try:
            await provider.start()
            on_head, on2 = await _one_env_per_node(provider, docker_run_id, head, node2)
            await asyncio.to_thread(ray_cluster.kill_worker_raylet)
            lost: EnvironmentError_ | None = None
            for _ in range(120):  # its actor may answer a little longer; the loss is seen within node_timeout
                try:
                    await on2.exec("true", timeout=30)
                except EnvironmentError_ as exc:
                    lost = exc
                    break
                await asyncio.sleep(0.5)
            assert lost is not None and lost.kind == "env_lost", lost
            assert (await on_head.exec("echo alive", timeout=30)).stdout == "alive\n"  # the run goes on
            assert _node_labelled(ray_cluster.node, docker_run_id)  # the lost node's container is still there
            await on2.close()  # nothing to call on a lost node: its slot is freed
            assert await asyncio.to_thread(ray_cluster.wait_worker_gone) == []
            await asyncio.to_thread(ray_cluster.start_worker)
            back = await _taken_in_again(provider, node2)  # the next rescan places an actor on it
            assert back.facts.swept >= 1  # its new actor swept what the lost one left
            assert _node_labelled(ray_cluster.node, docker_run_id) == []
            again = await provider.open(EnvOpenSpec(run_id=docker_run_id, task_id="c"))
            assert again.node == node2  # the emptier node
            assert (await again.exec("echo back", timeout=30)).stdout == "back\n"
            await again.close()
            await on_head.close()
        finally:
            await provider.aclose()

    asyncio.run(scenario())
    assert containers_of(docker_run_id) == [] and networks_of(docker_run_id) == []
    assert _node_labelled(ray_cluster.node, docker_run_id) == []


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_node_whose_daemon_dies_is_lost_and_taken_in_again_when_the_daemon_is_back(
        ray_cluster: RayCluster, docker_run_id: str) -> None:
    from agentcompass._errors import EnvironmentError_
    from agentcompass.interfaces import EnvOpenSpec

    node2, head = ray_cluster.node.address, ray_cluster.node.host_address

    async def scenario() -> None:
        provider = RayDockerProvider(
            {"address": ray_cluster.address, "gateway_host": head, "heartbeat_interval": 0.5, "node_timeout": 5,
             "rescan_interval": 1, "node_capacity": 2, "prestart": 0, "daemon_timeout": 5},
            ComponentContext(run_id=docker_run_id))
        try:
            await provider.start()
            on_head, on2 = await _one_env_per_node(provider, docker_run_id, head, node2)
            await asyncio.to_thread(ray_cluster.node.kill_daemon)
            with pytest.raises(EnvironmentError_):
                await on2.exec("true", timeout=30)
            for _ in range(300):  # the heartbeat asks the daemon: the node is lost
                if not any(n.alive for n in provider.placement.nodes if n.name == node2):
                    break
                await asyncio.sleep(0.1)
            assert [n.name for n in provider.placement.alive()] == [head]
            await on2.close()
            moved = await provider.open(EnvOpenSpec(run_id=docker_run_id, task_id="b"))  # b's node is gone
            assert moved.node == head
            await moved.close()
            await asyncio.to_thread(ray_cluster.node.restart_daemon)
            back = await _taken_in_again(provider, node2)  # the next rescan finds the daemon answering again
            assert back.facts.swept >= 1  # what the lost actor left on that daemon is gone
            assert _node_labelled(ray_cluster.node, docker_run_id) == []
            await on_head.close()
        finally:
            await provider.aclose()

    asyncio.run(scenario())
    assert containers_of(docker_run_id) == [] and networks_of(docker_run_id) == []
    assert _node_labelled(ray_cluster.node, docker_run_id) == []


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_each_node_pulls_the_image_from_the_registry_itself(
        ray_cluster: RayCluster, docker_run_id: str, base_image: str, tmp_path: Path) -> None:
    import subprocess
    import uuid

    from agentcompass.interfaces import EnvOpenSpec
    from tests.environments.registry import start_registry

    node = ray_cluster.node
    node2, head = node.address, node.host_address
    registry = start_registry(tmp_path)
    ref = f"{registry.host}/agentcompass-test/ray-docker:{uuid.uuid4().hex[:8]}"
    relays: list[subprocess.Popen[bytes]] = []
    try:
        subprocess.run(["docker", "tag", base_image, ref], check=True, capture_output=True, timeout=60)
        subprocess.run(["docker", "push", ref], check=True, capture_output=True, timeout=300)
        relays = node.share_host_port(int(registry.host.rsplit(":", 1)[1]))  # the same ref on the node's loopback
        assert not node.has_image(ref)

        async def scenario() -> set[str]:
            provider = RayDockerProvider({"address": ray_cluster.address, "gateway_host": head, "image": ref,
                                          "node_capacity": 1, "prestart": 0},
                                         ComponentContext(run_id=docker_run_id))
            try:
                await provider.start()  # every node makes sure of the default image: the node pulls it
                envs = [await provider.open(EnvOpenSpec(run_id=docker_run_id, task_id=t)) for t in ("a", "b")]
                for env in envs:
                    assert (await env.exec("echo from $(hostname)", timeout=30)).exit_code == 0
                    await env.close()
                return {env.node for env in envs}
            finally:
                await provider.aclose()

        assert asyncio.run(scenario()) == {head, node2}
        assert node.has_image(ref)  # pulled by the node from the registry, not copied through the coordinator
    finally:
        subprocess.run(["docker", "rmi", ref], capture_output=True, timeout=60)
        subprocess.run(["docker", "-H", node.docker_host, "rmi", ref], capture_output=True, timeout=60)
        for relay in relays:
            node.stop_process(relay)
        registry.stop()
    assert containers_of(docker_run_id) == [] and networks_of(docker_run_id) == []
    assert _node_labelled(node, docker_run_id) == []
