"""The coordinator's connection to a Ray cluster: found at ``address``, else ``RAY_ADDRESS``, else a local
single-machine cluster started for a trial. Ray's driver connection is per process (Ray's own design), so it is
counted: the last ``ray_docker`` provider to let go disconnects (and stops the local cluster it started). A
process already connected (by its own code, or an earlier provider) keeps its cluster: one cluster per process.

Ray's driver calls block; they run in worker threads.

Token auth (Ray 2.5x+): Ray's driver sends its token to an explicit address only when ``RAY_AUTH_MODE=token``;
when that is unset and a token is there (``RAY_AUTH_TOKEN``, the file at ``RAY_AUTH_TOKEN_PATH``, or
``~/.ray/auth_token``), the mode is set for this process before connecting, as Ray itself does for a cluster it
finds on its own. Ray Client (``ray://``) is refused: the node actors' calls are awaited, which its refs do not allow.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec

from ..._errors import ConfigError, EnvironmentError_

log = logging.getLogger("agentcompass.environments.ray.cluster")

_lock = threading.Lock()
_users = 0
_ours = False  # this process called ray.init (so it disconnects at the end)
#: Ray ends a driver process whose cluster head (GCS) has been unreachable for this config's value (default 60 s)
#: with an immediate exit, and a GCS client of the connection can outlive ``ray.shutdown()``; the engine runs
#: other requests and must outlive a head that went away (its attempts fail as lost environments instead). Given
#: to the ``ray.init`` of a cluster we join, unless the user set it.
GCS_RECONNECT_ENV = "RAY_gcs_rpc_server_reconnect_timeout_s"
GCS_RECONNECT_S = 365 * 24 * 3600
#: how long a cluster address gets to accept a TCP connection on its GCS port before it is refused
REACH_TIMEOUT_S = 4.0


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


_AUTH_HINT = ("if the cluster uses token auth: set RAY_AUTH_MODE=token and give this process the cluster's "
              "token (RAY_AUTH_TOKEN_PATH, RAY_AUTH_TOKEN or ~/.ray/auth_token)")


def refuse_ray_client(address: str | None, field: str) -> None:
    """ConfigError for a Ray Client address (``ray://``), which cannot carry the node actors' calls."""
    if address is not None and address.strip().lower().startswith("ray://"):
        raise ConfigError(f"{field}: Ray Client addresses (ray://) are not supported; run the coordinator on a "
                          "node of the cluster and give the GCS address (host:port)", field=field)


def auth_token_source(environ: Mapping[str, str], home: Path) -> str | None:
    """Where Ray would find an auth token (``RAY_AUTH_TOKEN``, ``RAY_AUTH_TOKEN_PATH``, ``~/.ray/auth_token``);
    None when there is none."""
    if environ.get("RAY_AUTH_TOKEN", "").strip():
        return "RAY_AUTH_TOKEN"
    path = environ.get("RAY_AUTH_TOKEN_PATH")
    candidates = [("RAY_AUTH_TOKEN_PATH", Path(path))] if path else [("~/.ray/auth_token",
                                                                        home / ".ray" / "auth_token")]
    for name, p in candidates:
        try:
            if p.is_file() and p.stat().st_size > 0:
                return name
        except OSError:
            continue
    return None


def _enable_token_auth_if_token_found(target: str) -> None:
    """Token auth for an explicit address when ``RAY_AUTH_MODE=token`` is set, or is unset and a token is found.

    Ray reads ``RAY_AUTH_MODE`` into a per-process config once: a process that used Ray before the variable was set
    (a local cluster, an earlier connection) would otherwise still send no token. Ray's own switch refreshes it."""
    if target == "local":
        return
    mode = os.environ.get("RAY_AUTH_MODE")
    if mode is None:
        source = auth_token_source(os.environ, Path.home())
        if source is None:
            return
        log.info("a Ray auth token was found (%s) and RAY_AUTH_MODE is unset: using token auth for %s", source,
                 target)
    elif mode.strip().lower() != "token":
        return
    try:
        from ray._private.authentication.authentication_token_setup import _enable_token_auth
    except ImportError:  # a Ray without token auth
        return
    _enable_token_auth()


def _connect(address: str | None, local_cpus: int | None, cancelled: threading.Event) -> str:
    global _users, _ours
    ray = _ray()
    with _lock:
        if not ray.is_initialized():
            # "local": a new cluster, never one that Ray's own discovery would find (the last `ray start` here)
            target = address or os.environ.get("RAY_ADDRESS") or "local"
            refuse_ray_client(target, "environment.params.address" if address else "RAY_ADDRESS")
            kwargs: dict[str, Any] = {"log_to_driver": False, "include_dashboard": False,
                                      "namespace": "agentcompass"}
            if target == "local":
                kwargs["num_cpus"] = local_cpus if local_cpus is not None else os.cpu_count() or 1
                log.info("no Ray address given (address param, RAY_ADDRESS): starting a local Ray cluster")
            if target not in ("local", "auto"):
                _check_reachable(target, "environment.params.address" if address else "RAY_ADDRESS")
            _enable_token_auth_if_token_found(target)
            patient = target != "local" and GCS_RECONNECT_ENV not in os.environ
            if patient:  # read by Ray's config when it connects; a local cluster's own processes never see it
                os.environ[GCS_RECONNECT_ENV] = str(GCS_RECONNECT_S)
            try:
                ray.init(address=target, **kwargs)
            except BaseException as exc:
                _shutdown_quietly(ray)  # a half-made connection is not kept
                if type(exc).__name__ == "AuthenticationError":
                    raise ConfigError(f"environment ray_docker: the Ray cluster at {target} (address param or "
                                      f"RAY_ADDRESS) needs a token: {exc}",
                                      field="environment.params.address") from exc
                if isinstance(exc, ConnectionError | RuntimeError | ValueError | ray.exceptions.RayError):
                    hint = "" if target == "local" else f" ({_AUTH_HINT})"
                    raise EnvironmentError_(f"cannot connect to the Ray cluster at {target} (address param or "
                                            f"RAY_ADDRESS): {exc}{hint}") from exc
                raise
            finally:
                if patient:
                    os.environ.pop(GCS_RECONNECT_ENV, None)
            if cancelled.is_set():  # the caller gave up meanwhile: nobody would disconnect this
                _shutdown_quietly(ray)
                raise EnvironmentError_("connecting to the Ray cluster was cancelled")
            _ours = True
        elif cancelled.is_set():
            raise EnvironmentError_("connecting to the Ray cluster was cancelled")
        _users += 1
        return str(ray.get_runtime_context().gcs_address)


def _gcs_endpoint(target: str) -> tuple[str, int] | None:
    """``host:port`` (``[v6]:port`` too) of a GCS address; None for a form Ray resolves itself."""
    host, sep, port = target.rpartition(":")
    if not sep or not port.isdigit() or not host:
        return None
    return host.strip("[]"), int(port)


def _check_reachable(target: str, field: str) -> None:
    """Refuse, within ``REACH_TIMEOUT_S``, a cluster address nothing answers at (Ray itself retries for ~20 s
    and then says little): a TCP connect to its GCS port."""
    endpoint = _gcs_endpoint(target)
    if endpoint is None:
        return
    try:
        with socket.create_connection(endpoint, timeout=REACH_TIMEOUT_S):
            pass
    except OSError as exc:
        why = "no answer" if isinstance(exc, TimeoutError) else (exc.strerror or type(exc).__name__)
        raise EnvironmentError_(f"cannot reach the Ray cluster at {target} ({field}): {why} within "
                                f"{REACH_TIMEOUT_S:g}s on its GCS port; is the head running (`ray start --head`) "
                                "and the port open from here?") from None


def _shutdown_quietly(ray: Any) -> None:
    try:
        ray.shutdown()
    except Exception as exc:
        log.debug("ray.shutdown after a failed connect: %r", exc)


async def connect(address: str | None, *, local_cpus: int | None = None, timeout_s: float = 120.0) -> str:
    """Connect this process to the cluster (once per process, counted); the GCS address. A connect given up on
    (timeout, cancel) is undone when its thread finishes."""
    cancelled = threading.Event()
    fut = asyncio.ensure_future(asyncio.to_thread(_connect, address, local_cpus, cancelled))
    try:
        async with asyncio.timeout(timeout_s):
            return await asyncio.shield(fut)
    except BaseException as exc:
        if not fut.done():
            cancelled.set()  # _connect checks it under the lock, before it counts a user
            fut.add_done_callback(_undo_late)
        if isinstance(exc, TimeoutError):
            raise EnvironmentError_(f"connecting to the Ray cluster took longer than {timeout_s:g}s "
                                    f"(connect_timeout; {_AUTH_HINT})") from None
        raise


def _undo_late(fut: asyncio.Future[str]) -> None:
    # the thread had passed its cancelled check before the caller gave up: the user it counted is nobody's
    if not fut.cancelled() and fut.exception() is None:
        threading.Thread(target=_disconnect, name="ray-disconnect-late", daemon=True).start()


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


__all__ = ["ClusterNode", "auth_token_source", "connect", "coordinator_address", "disconnect", "live_nodes",
           "refuse_ray_client"]
