"""Remove containers and networks that a dead AgentCompass process left behind.

Everything the Docker provider creates is labelled ``agentcompass.run_id`` plus its owner
(``agentcompass.pid``, ``agentcompass.pid_start``, ``agentcompass.host``). An owner is dead when it ran on
this host and its pid is gone (or now belongs to a younger process). Resources of other hosts are never
judged; resources opened with ``keep`` are left to an explicit ``cleanup --run-id``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from typing import Any

import aiodocker
import msgspec
from aiodocker.networks import DockerNetwork

from ..._errors import EnvironmentError_
from .api import LABEL_KEEP, LABEL_RUN_ID, call, make_client, owner_alive, remove_container

log = logging.getLogger("agentcompass.environments.docker.sweep")

_PARALLEL_REMOVALS = 8
#: how long a network's removal waits for containers that are being removed elsewhere to leave it
_NETWORK_WAIT_S = 30.0


class SweepReport(msgspec.Struct, omit_defaults=True):
    """What a sweep removed and what it left (and why)."""

    containers: list[str] = []
    networks: list[str] = []
    skipped_alive: int = 0
    skipped_foreign: int = 0
    skipped_kept: int = 0
    errors: list[str] = []

    @property
    def removed(self) -> int:
        return len(self.containers) + len(self.networks)


def _verdict(labels: dict[str, str], *, only_dead: bool, report: SweepReport) -> bool:
    """Whether to remove a resource with ``labels``; counts the reason when not."""
    if not only_dead:
        return True
    if labels.get(LABEL_KEEP) == "1":
        report.skipped_kept += 1
        return False
    alive = owner_alive(labels)
    if alive is None:
        report.skipped_foreign += 1
        return False
    if alive:
        report.skipped_alive += 1
        return False
    return True


async def sweep_orphans(*, run_id: str | None = None, only_dead: bool = True, docker_url: str | None = None,
                        timeout_s: float = 120.0) -> SweepReport:
    """Remove ``agentcompass.*`` containers and networks whose owning process is gone.

    ``run_id`` limits the sweep to one run. ``only_dead=False`` removes every match regardless of its
    owner (alive, another host's, or kept): meant for ``agentcompass cleanup --run-id``.
    """
    label = f"{LABEL_RUN_ID}={run_id}" if run_id is not None else LABEL_RUN_ID
    report = SweepReport()
    docker = make_client(docker_url)
    try:
        async with asyncio.timeout(timeout_s):
            await _sweep(docker, label, only_dead, report)
    except TimeoutError:
        report.errors.append(f"sweep did not finish within {timeout_s:.0f}s")
    except (aiodocker.DockerError, EnvironmentError_) as exc:
        report.errors.append(f"sweep failed: {exc}")
    finally:
        await docker.close()
    if report.removed or report.errors:
        log.info("orphan sweep: removed %d containers, %d networks; %d errors", len(report.containers),
                 len(report.networks), len(report.errors))
    return report


async def _sweep(docker: aiodocker.Docker, label: str, only_dead: bool, report: SweepReport) -> None:
    filters = {"label": [label]}
    found: list[Any] = await call(lambda: docker.containers.list(all=True, filters=filters),
                                  what="container list", timeout_s=30)
    doomed = [c for c in found if _verdict(c["Labels"] or {}, only_dead=only_dead, report=report)]
    gate = asyncio.Semaphore(_PARALLEL_REMOVALS)

    async def remove(container: Any) -> None:
        names = container._container.get("Names") or [container.id]
        name = str(names[0]).lstrip("/")
        async with gate:
            problem = await remove_container(docker, container.id, timeout_s=30)
        if problem is not None:
            report.errors.append(f"container {name}: {problem}")
            return
        report.containers.append(name)

    await asyncio.gather(*(remove(c) for c in doomed))

    networks: list[dict[str, Any]] = await call(lambda: docker.networks.list(filters=filters),
                                                what="network list", timeout_s=30)
    for net in networks:
        if not _verdict(net.get("Labels") or {}, only_dead=only_dead, report=report):
            continue
        problem = await _remove_network(docker, net["Id"])
        if problem == "gone":
            continue
        if problem is not None:
            report.errors.append(f"network {net['Name']}: {problem}")
            continue
        report.networks.append(net["Name"])


async def _attached_and_staying(docker: aiodocker.Docker, network_id: str) -> list[str]:
    """The containers attached to the network that are not on their way out: neither being removed, gone, nor
    of a dead owner (which a sweeper, this one or another, removes)."""
    info: dict[str, Any] = await call(lambda: DockerNetwork(docker, network_id).show(), what="network inspect",
                                      timeout_s=30)
    staying = []
    for cid in (info.get("Containers") or {}):
        try:
            state = await call(functools.partial(docker.containers.get, cid), what="container inspect",
                               timeout_s=30)
        except aiodocker.DockerError as exc:
            if exc.status == 404:
                continue
            raise
        leaving = (state._container.get("State") or {}).get("Status") in ("removing", "dead")
        if not leaving and owner_alive((state._container.get("Config") or {}).get("Labels") or {}) is not False:
            staying.append(str(cid)[:12])
    return staying


async def _remove_network(docker: aiodocker.Docker, network_id: str) -> str | None:
    """Remove one network: None when removed, "gone" when it already was, else what stopped it.

    A network whose last containers another sweeper (a run starting in another process) is still removing
    answers "has active endpoints" for a moment: that is waited out (up to ``_NETWORK_WAIT_S``), while a
    container that stays attached (a kept one) is reported at once."""
    deadline = asyncio.get_running_loop().time() + _NETWORK_WAIT_S
    delay = 0.2
    while True:
        try:
            await call(DockerNetwork(docker, network_id).delete, what="network remove", timeout_s=30)
            return None
        except aiodocker.DockerError as exc:
            if exc.status == 404:
                return "gone"
            if "active endpoint" not in str(exc.message) or asyncio.get_running_loop().time() >= deadline:
                return str(exc.message)
            try:
                staying = await _attached_and_staying(docker, network_id)
            except aiodocker.DockerError as inspect_exc:
                return "gone" if inspect_exc.status == 404 else str(exc.message)
            if staying:
                return f"{exc.message} (still attached: {', '.join(staying)})"
        except EnvironmentError_ as exc:
            return str(exc)
        await asyncio.sleep(delay)
        delay = min(2.0, delay * 2)
