"""Network policies of Docker environments, switched on live containers.

* ``public``: the default ``bridge`` network.
* ``none``: no network at all (every network disconnected; only loopback is left).
* ``model``: only the model endpoint. The container sits on an *internal* network whose bridge has no
  host address (``com.docker.network.bridge.inhibit_ipv4``), so neither the host nor the outside world is
  reachable from it. A small forwarder container, attached to that network and to ``bridge``, relays one
  port to a host-side relay on the ``bridge`` gateway, which connects to the model endpoint. Without the
  host address a plain internal network would expose every service listening on the host.
* ``allowlist``: refused; filtering by host would need firewall rules inside the container's network
  namespace, which this provider does not manage.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import socket
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import aiodocker
from aiodocker.networks import DockerNetwork

from .._errors import ConfigError, EnvironmentError_
from ..interfaces import NetworkPolicy
from .docker_api import LABEL_ROLE, LABEL_RUN_ID, LABEL_TASK_ID, call, settled

log = logging.getLogger("agentcompass.environments.docker_network")

PUBLIC_NETWORK = "bridge"
SUPPORTED_MODES = ("public", "none", "model")
_INHIBIT_IPV4 = "com.docker.network.bridge.inhibit_ipv4"
_CONNECT_TIMEOUT_S = 10.0
_READY_TIMEOUT_S = 20.0

#: Runs inside the forwarder container: relay ``0.0.0.0:<port>`` to ``<host>:<port>`` and nothing else.
RELAY_SCRIPT = r"""
import asyncio, sys
LPORT, HOST, PORT = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
async def pipe(r, w):
    try:
        while True:
            data = await r.read(65536)
            if not data:
                break
            w.write(data)
            await w.drain()
        if w.can_write_eof():
            w.write_eof()
    except Exception:
        pass
async def handle(r, w):
    try:
        r2, w2 = await asyncio.wait_for(asyncio.open_connection(HOST, PORT), 10)
    except Exception:
        w.close()
        return
    try:
        await asyncio.gather(pipe(r, w2), pipe(r2, w))
    finally:
        w.close()
        w2.close()
async def main():
    server = await asyncio.start_server(handle, "0.0.0.0", LPORT, reuse_address=True)
    async with server:
        await server.serve_forever()
asyncio.run(main())
"""


def check_policy(policy: NetworkPolicy, *, local_daemon: bool = True) -> None:
    """ConfigError unless the Docker provider can enforce ``policy``."""
    if not isinstance(policy, NetworkPolicy):
        raise ConfigError(f"network: expected a NetworkPolicy, got {type(policy).__name__}", field="network")
    if policy.mode == "allowlist":
        raise ConfigError(
            "network: mode 'allowlist' cannot be enforced by the docker provider (it would need firewall "
            f"rules inside each container); use one of {', '.join(SUPPORTED_MODES)}", field="network.mode")
    if policy.mode not in SUPPORTED_MODES:
        raise ConfigError(f"network: mode {policy.mode!r} is not one of {', '.join(SUPPORTED_MODES)}",
                          field="network.mode")
    if policy.hosts:
        raise ConfigError(f"network: hosts are only meaningful for 'allowlist', got mode {policy.mode!r} "
                          f"with hosts {policy.hosts!r}", field="network.hosts")
    if policy.mode == "model" and not local_daemon:
        raise ConfigError("network: mode 'model' needs the Docker daemon on this machine (its relay listens "
                          "on the local bridge gateway); docker_host points elsewhere", field="network.mode")


def _is_local_address(ip: str) -> bool:
    """Whether this host owns ``ip`` (binding to it succeeds)."""
    family = socket.AF_INET6 if ipaddress.ip_address(ip).version == 6 else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((ip, 0))
        except OSError:
            return False
    return True


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        pass


class TcpRelay:
    """A host-side TCP relay: every connection to ``listen_host:port`` is piped to ``target``."""

    def __init__(self, listen_host: str, target_host: str, target_port: int) -> None:
        self.listen_host = listen_host
        self.target = (target_host, target_port)
        self.port = 0
        self._server: asyncio.Server | None = None
        self._conns: set[asyncio.Task[None]] = set()

    async def start(self) -> int:
        """Listen on an ephemeral port; returns it."""
        self._server = await asyncio.start_server(self._accept, self.listen_host, 0)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self.port

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._conns.add(task)
        try:
            try:
                async with asyncio.timeout(_CONNECT_TIMEOUT_S):
                    up_reader, up_writer = await asyncio.open_connection(*self.target)
            except (OSError, TimeoutError) as exc:
                log.warning("model relay: cannot reach %s:%d: %s", *self.target, exc)
                return
            try:
                await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
            finally:
                up_writer.close()
        finally:
            writer.close()
            self._conns.discard(task)

    async def aclose(self) -> None:
        """Stop listening and cut every relayed connection."""
        if self._server is not None:
            self._server.close()
        for task in list(self._conns):
            task.cancel()
        if self._conns:
            await asyncio.wait(list(self._conns), timeout=5)
        if self._server is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(5):
                    await self._server.wait_closed()


class _Route:
    def __init__(self, relay: TcpRelay, container_id: str, address: tuple[str, int]) -> None:
        self.relay = relay
        self.container_id = container_id
        self.address = address


class DockerNetworks:
    """The network side of one provider: attaches containers per policy, owns the ``model`` machinery."""

    def __init__(self, docker: aiodocker.Docker, *, labels: dict[str, str], forwarder_image: str,
                 ensure_image: Callable[[str], Awaitable[str]], daemon_timeout: float = 30.0) -> None:
        self._docker = docker
        self._labels = dict(labels)
        self._forwarder_image = forwarder_image
        self._ensure_image = ensure_image
        self._timeout = daemon_timeout
        self._internal: str | None = None
        self._internal_lock = asyncio.Lock()
        self._routes: dict[tuple[str, int], _Route] = {}
        self._route_locks: dict[tuple[str, int], asyncio.Lock] = {}

    # ------------------------------------------------------------------ policy -> networks

    async def network_for(self, policy: NetworkPolicy) -> str:
        """The network a new container is created on for ``policy`` (``none`` is disconnected later)."""
        if policy.mode == "model":
            return await self.internal_network()
        return PUBLIC_NETWORK

    async def wanted(self, policy: NetworkPolicy) -> set[str]:
        """The networks a container under ``policy`` must be attached to, and no others."""
        if policy.mode == "public":
            return {PUBLIC_NETWORK}
        if policy.mode == "model":
            return {await self.internal_network()}
        return set()

    async def apply(self, container_id: str, policy: NetworkPolicy,
                    current: set[str] | None = None) -> None:
        """Attach the (created or running) container to exactly the networks ``policy`` wants."""
        if current is None:
            info = await call(lambda: self._docker.containers.container(container_id).show(),
                              what="container inspect", timeout_s=self._timeout)
            current = set((info.get("NetworkSettings") or {}).get("Networks") or {})
        want = await self.wanted(policy)
        for name in sorted(current - want):
            await self._disconnect(name, container_id)
        for name in sorted(want - current):
            await self._connect(name, container_id)

    async def _connect(self, network: str, container_id: str) -> None:
        net = DockerNetwork(self._docker, network)
        try:
            await call(lambda: net.connect({"Container": container_id}), what=f"network connect {network}",
                       timeout_s=self._timeout)
        except aiodocker.DockerError as exc:
            if exc.status == 403 and "already exists" in str(exc.message):
                return
            raise EnvironmentError_(f"cannot connect container {container_id[:12]} to {network}: "
                                    f"{exc.message}") from exc

    async def _disconnect(self, network: str, container_id: str) -> None:
        net = DockerNetwork(self._docker, network)
        try:
            await call(lambda: net.disconnect({"Container": container_id, "Force": True}),
                       what=f"network disconnect {network}", timeout_s=self._timeout)
        except aiodocker.DockerError as exc:
            if exc.status == 404 or "is not connected" in str(exc.message):
                return
            raise EnvironmentError_(f"cannot disconnect container {container_id[:12]} from {network}: "
                                    f"{exc.message}") from exc

    # ------------------------------------------------------------------ model mode

    async def internal_network(self) -> str:
        """Name of this provider's internal network (created on first use, host-less bridge)."""
        async with self._internal_lock:
            if self._internal is not None:
                return self._internal
            name = f"agentcompass-model-{uuid.uuid4().hex[:12]}"
            config: dict[str, Any] = {
                "Name": name, "Driver": "bridge", "Internal": True, "CheckDuplicate": True,
                "Labels": {**self._labels, LABEL_ROLE: "network"},
                "Options": {_INHIBIT_IPV4: "true"},
            }
            create = asyncio.ensure_future(call(lambda: self._docker.networks.create(config),
                                                what="network create", timeout_s=self._timeout,
                                                retry_timeouts=False))
            try:
                net = await asyncio.shield(create)
            except BaseException:
                await asyncio.shield(self._discard_network(create, name))
                raise
            try:
                info = await call(net.show, what="network inspect", timeout_s=self._timeout)
                gateways = [c.get("Gateway") for c in (info.get("IPAM") or {}).get("Config") or []]
                if any(gw and _is_local_address(gw) for gw in gateways):
                    raise EnvironmentError_(
                        "this Docker daemon ignores the inhibit_ipv4 bridge option, so an internal network "
                        "would expose the host; network mode 'model' cannot be enforced here")
            except BaseException:
                await self._remove_network(name)
                raise
            self._internal = name
            return name

    async def ensure_model_route(self, model_host: str, model_port: int) -> tuple[str, int]:
        """Make ``model_host:model_port`` reachable from ``model``-mode containers.

        Returns ``(host, port)`` to use inside the container instead (e.g. to rewrite a base_url).
        Idempotent per endpoint.
        """
        if not isinstance(model_host, str) or not model_host:
            raise ConfigError(f"model_host: expected a host name or address, got {model_host!r}",
                              field="model_host")
        if isinstance(model_port, bool) or not isinstance(model_port, int) or not 0 < model_port < 65536:
            raise ConfigError(f"model_port: expected a TCP port 1..65535, got {model_port!r}",
                              field="model_port")
        key = (model_host, model_port)
        lock = self._route_locks.setdefault(key, asyncio.Lock())
        async with lock:
            route = self._routes.get(key)
            if route is None:
                route = await self._start_route(model_host, model_port)
                self._routes[key] = route
            return route.address

    async def _bridge_gateway(self) -> str:
        info = await call(lambda: DockerNetwork(self._docker, PUBLIC_NETWORK).show(),
                          what="network inspect bridge", timeout_s=self._timeout)
        for cfg in (info.get("IPAM") or {}).get("Config") or []:
            gw = cfg.get("Gateway")
            if not gw and cfg.get("Subnet"):
                # The default bridge often lists only its subnet; its gateway is the first host address.
                net = ipaddress.ip_network(cfg["Subnet"], strict=False)
                gw = str(next(net.hosts())) if net.version == 4 else None
            if gw and ipaddress.ip_address(gw).version == 4:
                return str(gw)
        raise EnvironmentError_("the docker 'bridge' network has no IPv4 gateway; cannot relay to the model")

    async def host_address(self) -> str:
        """The bridge gateway: the host's address for containers on the default network."""
        gateway = await self._bridge_gateway()
        if not _is_local_address(gateway):
            raise EnvironmentError_(f"the docker bridge gateway {gateway} is not an address of this machine")
        return gateway

    async def _start_route(self, model_host: str, model_port: int) -> _Route:
        internal = await self.internal_network()
        image = await self._ensure_image(self._forwarder_image)
        gateway = await self._bridge_gateway()
        if not _is_local_address(gateway):
            raise EnvironmentError_(f"the docker bridge gateway {gateway} is not an address of this machine; "
                                    "network mode 'model' needs the daemon on this host")
        relay = TcpRelay(gateway, model_host, model_port)
        await relay.start()
        name = f"agentcompass-fwd-{uuid.uuid4().hex[:12]}"
        config: dict[str, Any] = {
            "Image": image,
            "Entrypoint": ["python3", "-c", RELAY_SCRIPT, str(model_port), gateway, str(relay.port)],
            "Labels": {**self._labels, LABEL_ROLE: "forwarder", LABEL_TASK_ID: "-"},
            "HostConfig": {"Init": True, "NetworkMode": PUBLIC_NETWORK, "Memory": 128 << 20,
                           "PidsLimit": 64},
        }
        create = asyncio.ensure_future(call(lambda: self._docker.containers.create(config, name=name),
                                            what="forwarder create", timeout_s=self._timeout,
                                            retry_timeouts=False))
        try:
            created = await asyncio.shield(create)
            await self._connect(internal, created.id)
            await call(created.start, what="forwarder start", timeout_s=self._timeout)
            info = await call(created.show, what="forwarder inspect", timeout_s=self._timeout)
            nets = info["NetworkSettings"]["Networks"]
            inside_ip = nets[internal]["IPAddress"]
            probe_ip = nets[PUBLIC_NETWORK]["IPAddress"]
            await self._wait_listening(probe_ip, model_port, name)
        except BaseException:
            await asyncio.shield(self._discard_forwarder(create, relay, name))
            raise
        log.info("model route %s:%d -> forwarder %s:%d (relay %s:%d)", model_host, model_port, inside_ip,
                 model_port, gateway, relay.port)
        return _Route(relay, created.id, (inside_ip, model_port))

    async def _discard_forwarder(self, create: asyncio.Future[Any], relay: TcpRelay, name: str) -> None:
        created = await settled(create, 2 * self._timeout)
        await relay.aclose()
        await self._remove_container(created.id if created is not None else name)

    async def _discard_network(self, create: asyncio.Future[DockerNetwork], name: str) -> None:
        created = await settled(create, 2 * self._timeout)
        await self._remove_network(created.id if created is not None else name)

    @staticmethod
    async def _wait_listening(ip: str, port: int, name: str) -> None:
        deadline = asyncio.get_running_loop().time() + _READY_TIMEOUT_S
        while True:
            try:
                async with asyncio.timeout(2):
                    _, writer = await asyncio.open_connection(ip, port)
                writer.close()
                return
            except (OSError, TimeoutError) as exc:
                if asyncio.get_running_loop().time() > deadline:
                    raise EnvironmentError_(f"model forwarder {name} did not start listening on "
                                            f"{ip}:{port} within {_READY_TIMEOUT_S:.0f}s") from exc
                await asyncio.sleep(0.1)

    async def _remove_container(self, ref: str) -> None:
        try:
            await call(lambda: self._docker.containers.container(ref).delete(force=True, v=True),
                       what="forwarder remove", timeout_s=self._timeout)
        except aiodocker.DockerError as exc:
            if exc.status != 404:
                log.warning("removing forwarder %s failed: %s", ref, exc)
        except EnvironmentError_ as exc:
            log.warning("removing forwarder %s failed: %s", ref, exc)

    async def _remove_network(self, name: str) -> None:
        try:
            await call(DockerNetwork(self._docker, name).delete, what="network remove",
                       timeout_s=self._timeout)
        except aiodocker.DockerError as exc:
            if exc.status != 404:
                # e.g. a kept container is still attached; the orphan sweep retries later.
                log.warning("removing network %s failed: %s", name, exc.message)
        except EnvironmentError_ as exc:
            log.warning("removing network %s failed: %s", name, exc)

    async def aclose(self) -> None:
        """Remove forwarders, stop relays, remove the internal network (best effort, bounded)."""
        routes, self._routes = list(self._routes.values()), {}
        await asyncio.gather(*(self._remove_container(r.container_id) for r in routes))
        await asyncio.gather(*(r.relay.aclose() for r in routes))
        if self._internal is not None:
            name, self._internal = self._internal, None
            await self._remove_network(name)


def run_labels(run_id: str, owner: dict[str, str]) -> dict[str, str]:
    """Labels for provider-level resources (networks, forwarders) of run ``run_id``."""
    return {LABEL_RUN_ID: run_id or "-", **owner}
