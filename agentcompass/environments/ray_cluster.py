"""The coordinator's connection to a Ray cluster: found at ``address``, else ``RAY_ADDRESS``, else a local
single-machine cluster started for a trial. Ray's driver connection is per process (Ray's own design), so it is
counted: the last ``ray_docker`` provider to let go disconnects (and stops the local cluster it started). A
process already connected (by its own code, or an earlier provider) keeps its cluster: one cluster per process.

Ray's driver calls block; they run in worker threads.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from typing import Any

import msgspec

from .._errors import ConfigError, EnvironmentError_

log = logging.getLogger("agentcompass.environments.ray_cluster")

_lock = threading.Lock()
_users = 0
_ours = False  # this process called ray.init (so it disconnects at the end)


class ClusterNode(msgspec.Struct, frozen=True):
    """A live node of the cluster."""

    node_id: str
    address: str
    cpus: float
    memory_bytes: float
    resources: dict[str, float]


def _ray() -> Any:
    try:
        import ray
    except ImportError as exc:  # the requirement check names the pip command first; this is the fallback
        raise ConfigError("environment ray_docker needs Ray: pip install 'agentcompass[ray]'",
                          field="environment") from exc
    return ray


def _connect(address: str | None, local_cpus: int | None) -> str:
    global _users, _ours
    ray = _ray()
    with _lock:
        if not ray.is_initialized():
            # "local": a new cluster, never one that Ray's own discovery would find (the last `ray start` here)
            target = address or os.environ.get("RAY_ADDRESS") or "local"
            kwargs: dict[str, Any] = {"log_to_driver": False, "include_dashboard": False,
                                      "namespace": "agentcompass"}
            if target == "local":
                kwargs["num_cpus"] = local_cpus if local_cpus is not None else os.cpu_count() or 1
                log.info("no Ray address given (address param, RAY_ADDRESS): starting a local Ray cluster")
            try:
                ray.init(address=target, **kwargs)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise EnvironmentError_(f"cannot connect to the Ray cluster at {target}: {exc}") from exc
            _ours = True
        _users += 1
        return str(ray.get_runtime_context().gcs_address)


async def connect(address: str | None, *, local_cpus: int | None = None, timeout_s: float = 120.0) -> str:
    """Connect this process to the cluster (once per process, counted); the GCS address."""
    try:
        async with asyncio.timeout(timeout_s):
            return await asyncio.to_thread(_connect, address, local_cpus)
    except TimeoutError:
        raise EnvironmentError_(f"connecting to the Ray cluster took longer than {timeout_s:g}s") from None


def _disconnect() -> None:
    global _users, _ours
    ray = _ray()
    with _lock:
        _users = max(0, _users - 1)
        if _users == 0 and _ours:
            _ours = False
            ray.shutdown()


async def disconnect() -> None:
    """Let go of the connection; the last user disconnects (and stops a local cluster it started)."""
    await asyncio.to_thread(_disconnect)


def _nodes() -> list[ClusterNode]:
    ray = _ray()
    out = []
    for n in ray.nodes():
        if not n.get("Alive"):
            continue
        res = dict(n.get("Resources") or {})
        out.append(ClusterNode(node_id=str(n["NodeID"]), address=str(n.get("NodeManagerAddress") or ""),
                               cpus=float(res.get("CPU", 0.0)), memory_bytes=float(res.get("memory", 0.0)),
                               resources=res))
    return out


async def live_nodes(timeout_s: float = 30.0) -> list[ClusterNode]:
    """The cluster's live nodes."""
    async with asyncio.timeout(timeout_s):
        return await asyncio.to_thread(_nodes)


def coordinator_address() -> str:
    """This process's address as the cluster's nodes reach it (Ray's node IP of the coordinator)."""
    ray = _ray()
    return str(ray.util.get_node_ip_address())


__all__ = ["ClusterNode", "connect", "coordinator_address", "disconnect", "live_nodes"]
