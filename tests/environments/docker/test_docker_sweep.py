"""The orphan sweep: resources of a dead owner go, those of live owners, other hosts and kept ones stay."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import Any

import aiodocker
import pytest

from agentcompass.environments.docker.api import LABEL_HOST, LABEL_PID, LABEL_RUN_ID, host_id
from agentcompass.environments.docker.provider import DockerProvider
from agentcompass.environments.docker.sweep import sweep_orphans
from agentcompass.interfaces import ComponentContext, EnvOpenSpec

from ..conftest import containers_of, networks_of

pytestmark = pytest.mark.timeout(120)

REPO = Path(__file__).resolve().parents[3]

_OWNER = """
import asyncio, sys
from agentcompass.environments.docker.provider import DockerProvider
from agentcompass.interfaces import ComponentContext, EnvOpenSpec, NetworkPolicy

async def main(run_id, image):
    provider = DockerProvider({"image": image}, ComponentContext(run_id=run_id))
    server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
    await provider.ensure_model_route("127.0.0.1", server.sockets[0].getsockname()[1])  # a forwarder
    env = await provider.open(EnvOpenSpec(run_id=run_id, task_id="orphan", network=NetworkPolicy(mode="model")))
    info = await provider.docker.containers.container(env.id).show()
    [network] = info["NetworkSettings"]["Networks"]
    print(env.id, network, flush=True)
    await asyncio.sleep(3600)

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


async def _orphan_owner(run_id: str, image: str) -> tuple[str, str]:
    """Start a process that opens a model-mode container (its network, a forwarder attached to it), then
    SIGKILL it; (container id, network)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _OWNER, run_id, image, stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 60)
        container_id, network = line.decode().split()
    finally:
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
    return container_id, network


async def test_sweep_removes_what_a_killed_process_left_and_keeps_live_owners(
        base_image: str, docker_run_id: str) -> None:
    _, network = await _orphan_owner(docker_run_id, base_image)
    # (no check that the orphans are still there: a run starting in another test worker sweeps dead owners
    # host-wide and may remove them at any moment from here on; what this sweep leaves is what counts)

    live = DockerProvider({"image": base_image}, ComponentContext(run_id=docker_run_id))
    try:
        mine = await live.open(EnvOpenSpec(run_id=docker_run_id, task_id="alive"))
        report = await sweep_orphans(run_id=docker_run_id)
        assert report.errors == []
        # the container and the forwarder, and their network; a docker provider starting in another test worker
        # sweeps dead owners host-wide too and may have removed some of them first: this sweep removes the rest
        assert len(report.containers) <= 2 and set(report.networks) <= {network}, report
        assert all("-orphan-" in n or n.startswith("agentcompass-fwd-") for n in report.containers), report
        assert report.skipped_alive == 1
        assert containers_of(docker_run_id) == [mine.id]
        assert networks_of(docker_run_id) == []
        assert (await mine.exec("echo alive")).stdout == "alive\n"
    finally:
        await live.aclose()


async def test_sweep_leaves_other_hosts_and_kept_containers_unless_told_otherwise(
        base_image: str, docker_run_id: str) -> None:
    async with aiodocker.Docker() as docker:
        for extra in ({LABEL_HOST: "some-other-host", LABEL_PID: "1"},
                      {LABEL_HOST: "x", LABEL_PID: "999999999", "agentcompass.keep": "1"}):
            await docker.containers.create({"Image": base_image, "Entrypoint": ["true"],
                                            "Labels": {LABEL_RUN_ID: docker_run_id, **extra}})
    report = await sweep_orphans(run_id=docker_run_id)
    assert report.containers == []
    assert (report.skipped_foreign, report.skipped_kept) == (1, 1)
    assert len(containers_of(docker_run_id)) == 2

    report = await sweep_orphans(run_id=docker_run_id, only_dead=False)
    assert len(report.containers) == 2
    assert containers_of(docker_run_id) == []


async def test_sweep_without_run_id_only_touches_dead_owners(base_image: str, docker_run_id: str) -> None:
    await _orphan_owner(docker_run_id, base_image)
    live = DockerProvider({"image": base_image}, ComponentContext(run_id=docker_run_id))
    try:
        mine = await live.open(EnvOpenSpec(run_id=docker_run_id, task_id="alive"))
        report = await sweep_orphans()
        assert report.errors == [] and report.skipped_alive >= 1
        # the orphan is removed by this sweep, or was by a run starting in another test worker (host-wide too)
        assert containers_of(docker_run_id) == [mine.id]
        assert networks_of(docker_run_id) == []
        assert (await mine.exec("echo alive")).stdout == "alive\n"
    finally:
        await live.aclose()


async def test_two_sweeps_racing_for_the_same_orphans_both_end_clean(base_image: str, docker_run_id: str) -> None:
    """A second sweeper (another process starting up) asks to remove a container the first is removing: the
    daemon answers 409 "removal already in progress", which is waited out, not reported as an error."""
    _, network = await _orphan_owner(docker_run_id, base_image)
    reports = await asyncio.gather(*(sweep_orphans(run_id=docker_run_id) for _ in range(3)))
    assert [r.errors for r in reports] == [[], [], []]
    assert containers_of(docker_run_id) == []
    assert networks_of(docker_run_id) == []
    assert {n for r in reports for n in r.networks} <= {network}


async def _dead_owners_network_with(docker: aiodocker.Docker, run_id: str, image: str, *,
                                   container_dead_too: bool) -> tuple[str, Any]:
    """A network of a dead owner with a running container attached: the dead owner's too, or one of an owner
    the sweep cannot judge (no host label: foreign, left alone)."""
    dead = {LABEL_RUN_ID: run_id, LABEL_HOST: host_id(), LABEL_PID: "999999999"}
    name = f"agentcompass-test-{run_id[-12:]}"
    # a docker provider starting in another test worker sweeps dead owners host-wide: it may remove the network
    # before the container is attached to it (a loaded CI run: 404 "network ... not found"); then set it up again
    for _ in range(10):
        await docker.networks.create({"Name": name, "Labels": dead})
        stranger = None
        try:
            stranger = await docker.containers.create({
                "Image": image, "Entrypoint": ["sleep", "600"],
                "Labels": dead if container_dead_too else {LABEL_RUN_ID: run_id},
                "HostConfig": {"NetworkMode": name}})
            await stranger.start()
        except aiodocker.DockerError as exc:
            if stranger is not None:
                await stranger.delete(force=True)
            if exc.status != 404:
                raise
            continue
        return name, stranger
    raise AssertionError(f"network {name} was removed by another sweep ten times before a container joined it")


async def _removed_by_us_or_it(container: Any) -> None:
    """The other sweeper's removal: the daemon answers 409 ("already in progress") or 404 when the sweep's own
    removal of the same container got there first (a loaded CI run saw the 409)."""
    try:
        await container.delete(force=True)
    except aiodocker.exceptions.DockerError as exc:
        if exc.status not in (404, 409):
            raise


async def test_a_network_whose_last_container_is_being_removed_elsewhere_is_removed_once_it_leaves(
        base_image: str, docker_run_id: str) -> None:
    """Another sweeper (here: the test) removing the dead owner's container while this one removes it and the
    network: "has active endpoints" for a moment is waited out, not reported as an error."""
    async with aiodocker.Docker() as docker:
        name, stranger = await _dead_owners_network_with(docker, docker_run_id, base_image, container_dead_too=True)
        try:
            report, _ = await asyncio.gather(sweep_orphans(run_id=docker_run_id), _removed_by_us_or_it(stranger))
        finally:
            if await _exists(stranger):
                await stranger.delete(force=True)
        # the container: either removed it; the network: this sweep, or one a run starting in another test worker
        # made (host-wide) got there first
        assert report.errors == [] and report.networks in ([name], []), report
        assert networks_of(docker_run_id) == []


async def test_a_network_a_staying_container_keeps_is_reported_at_once(base_image: str, docker_run_id: str) -> None:
    async with aiodocker.Docker() as docker:
        name, stranger = await _dead_owners_network_with(docker, docker_run_id, base_image, container_dead_too=False)
        try:
            report = await asyncio.wait_for(sweep_orphans(run_id=docker_run_id), 20)
            assert report.networks == [] and len(report.errors) == 1, report
            assert name in report.errors[0] and stranger.id[:12] in report.errors[0], report
        finally:
            await stranger.delete(force=True)
            await sweep_orphans(run_id=docker_run_id)
        assert networks_of(docker_run_id) == []


async def _exists(container: Any) -> bool:
    try:
        await container.show()
    except aiodocker.DockerError as exc:
        if exc.status == 404:
            return False
        raise
    return True
