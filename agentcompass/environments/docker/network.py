"""Network policies of Docker environments, switched on live containers.

* ``public``: the default ``bridge`` network.
* ``none``: no network at all, only loopback (created with NetworkMode ``none``; a live switch disconnects
  every network).
* ``model``: only the model endpoint. Each environment gets its *own* internal network (created when the
  environment first needs it, removed when it closes), whose bridge has no host address
  (``com.docker.network.bridge.inhibit_ipv4``), so neither the host, the outside world nor any other
  environment is reachable from it. Small forwarder containers (one per model endpoint) sit on ``bridge``
  and on every such network under a fixed alias, and relay one port to a host-side relay on the ``bridge``
  gateway, which connects to the model endpoint. Without the host address a plain internal network would
  expose every service listening on the host; a network shared by environments would let them reach
  each other.
* ``allowlist``: only the listed hosts (and the model routes). The environment sits on its own internal
  network as in ``model`` mode, where an egress proxy container (one per distinct allowlist, see
  ``sandbox_programs/egress_proxy.py``) joins it under the alias :data:`PROXY_ALIAS`. The proxy sits on ``bridge``
  too and
  opens a connection only to a listed host and port; every exec of the environment gets ``HTTP(S)_PROXY``
  pointing at it. Anything that ignores the proxy has no route out.

The per-environment networks take ``/28`` subnets from ``10.213.0.0/16`` (bridges without a host address
add no host route), so they neither exhaust nor depend on the daemon's default address pools.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import inspect
import ipaddress
import json
import logging
import random
import socket
import uuid
from collections.abc import Awaitable, Callable
from types import ModuleType
from typing import Any

import aiodocker
from aiodocker.networks import DockerNetwork

from ..._errors import ConfigError, EnvironmentError_
from ...interfaces import NetworkPolicy
from ..sandbox_programs import egress_proxy as _egress_proxy
from ..sandbox_programs import model_relay as _model_relay
from ..sandbox_programs import stream_pipe as _stream_pipe
from ..sandbox_programs.stream_pipe import pipe
from .api import LABEL_KEEP, LABEL_ROLE, LABEL_RUN_ID, LABEL_TASK_ID, call, remove_container, settled

log = logging.getLogger("agentcompass.environments.docker.network")

PUBLIC_NETWORK = "bridge"
#: the create-time network mode of ``none``: no interface but loopback, nothing to disconnect afterwards
NO_NETWORK = "none"
SUPPORTED_MODES = ("public", "none", "model", "allowlist")
#: the egress proxy's name inside every ``allowlist`` environment's network, and its port
PROXY_ALIAS = "ac-egress-proxy"
PROXY_PORT = _egress_proxy.LISTEN_PORT
_INHIBIT_IPV4 = "com.docker.network.bridge.inhibit_ipv4"
_CONNECT_TIMEOUT_S = 10.0
#: connections a host-side model relay pipes at once (each holds two of the engine's descriptors)
RELAY_MAX_CONNECTIONS = 1024
_READY_TIMEOUT_S = 20.0
#: where the per-environment ``model`` networks take their subnets from, and how big each is
MODEL_SUBNET_POOL = ipaddress.IPv4Network("10.213.0.0/16")
_SUBNET_PREFIX = 28
_SUBNET_TRIES = 16
#: empty model networks kept for reuse (more are removed on release)
_IDLE_NETWORKS_MAX = 32

def allowlist_entries(policy: NetworkPolicy) -> tuple[tuple[str, int | None], ...]:
    """The normalised, sorted, deduplicated entries of an ``allowlist`` policy; ConfigError naming the bad one."""
    if not isinstance(policy.hosts, list) or not policy.hosts:
        raise ConfigError("network: mode 'allowlist' needs a non-empty list of hosts, e.g. [\"pypi.org\", "
                          "\"files.pythonhosted.org:443\", \"*.example.com\", \"10.0.0.5:8080\"] (for no "
                          "network at all use 'none')", field="network.hosts")
    entries = set()
    for i, host in enumerate(policy.hosts):
        try:
            entries.add(_egress_proxy.parse_entry(host))
        except ValueError as exc:
            raise ConfigError(f"network: hosts[{i}]: {exc}", field=f"network.hosts[{i}]") from None
    return tuple(sorted(entries, key=lambda e: (e[0], e[1] or 0)))


def check_policy(policy: NetworkPolicy, *, local_daemon: bool = True) -> None:
    """ConfigError unless the Docker provider can enforce ``policy``."""
    if not isinstance(policy, NetworkPolicy):
        raise ConfigError(f"network: expected a NetworkPolicy, got {type(policy).__name__}", field="network")
    if policy.mode not in SUPPORTED_MODES:
        raise ConfigError(f"network: mode {policy.mode!r} is not one of {', '.join(SUPPORTED_MODES)}",
                          field="network.mode")
    if policy.mode == "allowlist":
        allowlist_entries(policy)
    elif policy.hosts:
        raise ConfigError(f"network: hosts are only meaningful for 'allowlist', got mode {policy.mode!r} "
                          f"with hosts {policy.hosts!r}", field="network.hosts")
    if policy.mode in ("model", "allowlist") and not local_daemon:
        raise ConfigError(f"network: mode {policy.mode!r} needs the Docker daemon on this machine (its "
                          "internal networks are checked for a host address from here); docker_host points "
                          "elsewhere", field="network.mode")


def _is_local_address(ip: str) -> bool:
    """Whether this host owns ``ip`` (binding to it succeeds)."""
    family = socket.AF_INET6 if ipaddress.ip_address(ip).version == 6 else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((ip, 0))
        except OSError:
            return False
    return True


class TcpRelay:
    """A host-side TCP relay: every connection to ``listen_host:port`` is piped to ``target``.

    It runs on the engine's event loop and each relayed connection holds two of the engine's file descriptors, so
    at most ``max_connections`` are relayed at once: one over the cap is closed as soon as it is accepted, before
    any connection to ``target`` is made, and counted in ``refused`` (whatever opens connections to it, a sandbox
    or anything else that reaches ``listen_host``, cannot exhaust the engine's descriptors)."""

    def __init__(self, listen_host: str, target_host: str, target_port: int, *,
                 max_connections: int = RELAY_MAX_CONNECTIONS) -> None:
        if max_connections < 1:
            raise ValueError(f"max_connections must be at least 1, not {max_connections}")
        self.listen_host = listen_host
        self.target = (target_host, target_port)
        self.port = 0
        self.max_connections = max_connections
        #: connections closed at accept because ``max_connections`` were open
        self.refused = 0
        #: the most connections relayed at once so far
        self.peak = 0
        self._server: asyncio.Server | None = None
        self._conns: set[asyncio.Task[None]] = set()

    @property
    def open_connections(self) -> int:
        """Connections being relayed now."""
        return len(self._conns)

    async def start(self) -> int:
        """Listen on an ephemeral port; returns it."""
        self._server = await asyncio.start_server(self._accept, self.listen_host, 0)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self.port

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(self._conns) >= self.max_connections:
            self.refused += 1
            if self.refused == 1 or self.refused % 1000 == 0:
                log.warning("model relay to %s:%d: %d connections open, the cap; closed %d over it so far",
                            *self.target, len(self._conns), self.refused)
            writer.transport.abort()  # no FIN handshake to wait for: the descriptor is freed now
            return
        task = asyncio.current_task()
        assert task is not None
        self._conns.add(task)
        self.peak = max(self.peak, len(self._conns))
        try:
            try:
                async with asyncio.timeout(_CONNECT_TIMEOUT_S):
                    up_reader, up_writer = await asyncio.open_connection(*self.target)
            except (OSError, TimeoutError) as exc:
                log.warning("model relay: cannot reach %s:%d: %s", *self.target, exc)
                return
            try:
                await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
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
    """One model endpoint: the host relay and the forwarder container, known as ``alias`` in every network."""

    def __init__(self, relay: TcpRelay, container_id: str, alias: str, port: int) -> None:
        self.relay = relay
        self.container_id = container_id
        self.alias = alias
        self.address = (alias, port)


class _Proxy:
    """The egress proxy container of one allowlist (normalised ``entries``)."""

    def __init__(self, container_id: str, entries: tuple[tuple[str, int | None], ...]) -> None:
        self.container_id = container_id
        self.entries = entries


class _EnvNet:
    """An internal network for one ``model``/``allowlist`` environment at a time, plus the forwarders."""

    def __init__(self, name: str, labels: dict[str, str]) -> None:
        self.name = name
        self.labels = labels
        self.subnet: str | None = None
        self.created: asyncio.Future[None] | None = None  # network create (its own task: cancel-safe)
        self.attached: asyncio.Future[None] | None = None  # forwarders being attached
        self.broken = False  # a forwarder or proxy could not be attached/detached: never reuse
        self.proxy: _Proxy | None = None  # the egress proxy attached (allowlist mode)
        self.proxy_lock = asyncio.Lock()

    def reusable(self) -> bool:
        ok = [f is not None and f.done() and not f.cancelled() and f.exception() is None
              for f in (self.created, self.attached)]
        return all(ok) and not self.broken and self.labels.get(LABEL_KEEP) != "1"


def _failed(fut: asyncio.Future[Any] | None) -> bool:
    return fut is not None and fut.done() and (fut.cancelled() or fut.exception() is not None)


class DockerNetworks:
    """The network side of one provider: attaches containers per policy, owns the ``model`` machinery.

    Environments are known by a key (the container name). In ``model`` mode each holds an internal network
    of its own until :meth:`release`; then, once its container is gone, the network (forwarders still
    attached) waits for the next environment instead of being removed, so only the first opens pay for
    creating networks. The provider's :meth:`aclose` removes them all.
    """

    def __init__(self, docker: aiodocker.Docker, *, labels: dict[str, str], forwarder_image: str,
                 ensure_image: Callable[[str], Awaitable[str]], daemon_timeout: float = 30.0,
                 close_timeout: float = 30.0, relay_max_connections: int = RELAY_MAX_CONNECTIONS) -> None:
        self._docker = docker
        self._relay_max_connections = relay_max_connections
        self._labels = dict(labels)
        self._forwarder_image = forwarder_image
        self._ensure_image = ensure_image
        self._timeout = daemon_timeout
        self._close_timeout = close_timeout
        self._inhibit_checked = False
        self._nets: dict[str, _EnvNet] = {}  # every model network held, by name
        self._env_nets: dict[str, _EnvNet] = {}  # environment key -> its network
        self._idle: list[_EnvNet] = []  # empty, ready for the next environment
        self._subnets: set[str] = set()
        self._leftovers: set[str] = set()
        self._routes: dict[tuple[str, int], _Route] = {}
        self._route_locks: dict[tuple[str, int], asyncio.Lock] = {}
        self._proxies: dict[tuple[tuple[str, int | None], ...], _Proxy] = {}
        self._proxy_locks: dict[tuple[tuple[str, int | None], ...], asyncio.Lock] = {}

    # ------------------------------------------------------------------ policy -> networks

    async def network_for(self, policy: NetworkPolicy, *, key: str, labels: dict[str, str]) -> str:
        """The network a new container ``key`` (with container ``labels``) is created on for ``policy``
        (``none``: NetworkMode ``none``, no interface but loopback). For ``model``/``allowlist`` the forwarders
        may still be attaching to a new network: :meth:`ready` waits for them (an allowlist's proxy is attached
        already)."""
        if policy.mode in ("model", "allowlist"):
            net = await self._env_net(key, labels)
            await self._set_proxy(net, await self._proxy_for(policy) if policy.mode == "allowlist" else None)
            return net.name
        return NO_NETWORK if policy.mode == "none" else PUBLIC_NETWORK

    async def ready(self, key: str) -> None:
        """Wait until the forwarders are attached to ``key``'s network (no-op without one)."""
        net = self._env_nets.get(key)
        if net is not None and net.attached is not None:
            await asyncio.shield(net.attached)

    async def apply(self, container_id: str, policy: NetworkPolicy, *, key: str, labels: dict[str, str],
                    current: set[str] | None = None) -> None:
        """Attach the (created or running) container ``key`` to exactly the networks ``policy`` wants."""
        if current is None:
            info = await call(lambda: self._docker.containers.container(container_id).show(),
                              what="container inspect", timeout_s=self._timeout)
            current = set((info.get("NetworkSettings") or {}).get("Networks") or {})
        if policy.mode == "public":
            want = {PUBLIC_NETWORK}
        elif policy.mode in ("model", "allowlist"):
            net = await self._env_net(key, labels)
            await self.ready(key)
            # The proxy joins (or leaves) before the container does: never a moment with the wrong one.
            await self._set_proxy(net, await self._proxy_for(policy) if policy.mode == "allowlist" else None)
            want = {net.name}
        else:
            want = set()
        for name in sorted(current - want):
            await self._disconnect(name, container_id)
        for name in sorted(want - current):
            await self._connect(name, container_id)

    async def _connect(self, network: str, container_id: str, alias: str | None = None) -> None:
        net = DockerNetwork(self._docker, network)
        config: dict[str, Any] = {"Container": container_id}
        if alias is not None:
            config["EndpointConfig"] = {"Aliases": [alias]}
        try:
            await call(lambda: net.connect(config), what=f"network connect {network}", timeout_s=self._timeout)
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

    # ------------------------------------------------------------------ per-environment networks

    def _net_labels(self, labels: dict[str, str]) -> dict[str, str]:
        out = {**self._labels, LABEL_ROLE: "network"}
        if labels.get(LABEL_RUN_ID):
            out[LABEL_RUN_ID] = labels[LABEL_RUN_ID]
        if labels.get(LABEL_KEEP) == "1":
            out[LABEL_KEEP] = "1"  # the sweep leaves it to its kept container
        return out

    async def _env_net(self, key: str, labels: dict[str, str]) -> _EnvNet:
        net = self._env_nets.get(key)
        if net is None:
            want = self._net_labels(labels)
            net = next((n for n in self._idle if n.labels == want and n.reusable()), None)
            if net is not None:
                self._idle.remove(net)
            else:
                net = _EnvNet(f"agentcompass-model-{uuid.uuid4().hex[:12]}", want)
                self._nets[net.name] = net
                net.created = asyncio.ensure_future(self._create_env_net(net))
            self._env_nets[key] = net
        assert net.created is not None
        try:
            await asyncio.shield(net.created)
        except BaseException:
            if _failed(net.created):  # it removed what it had created
                self._nets.pop(net.name, None)
                if self._env_nets.get(key) is net:
                    del self._env_nets[key]
            raise
        return net

    def _pick_subnet(self) -> str:
        count = 1 << (_SUBNET_PREFIX - MODEL_SUBNET_POOL.prefixlen)
        size = 1 << (32 - _SUBNET_PREFIX)
        while True:
            first = MODEL_SUBNET_POOL.network_address + random.randrange(count) * size
            subnet = f"{first}/{_SUBNET_PREFIX}"
            if subnet not in self._subnets:
                return subnet

    async def _create_env_net(self, net: _EnvNet) -> None:
        """Create ``net`` on a free subnet of the pool, then start attaching the forwarders to it."""
        for _ in range(_SUBNET_TRIES):
            subnet = self._pick_subnet()
            config: dict[str, Any] = {
                "Name": net.name, "Driver": "bridge", "Internal": True, "CheckDuplicate": True,
                "Labels": dict(net.labels), "Options": {_INHIBIT_IPV4: "true"},
                "IPAM": {"Driver": "default", "Config": [{"Subnet": subnet}]},
            }
            try:
                await call(functools.partial(self._docker.networks.create, config), what="network create",
                           timeout_s=self._timeout, retry_timeouts=False)
            except aiodocker.DockerError as exc:
                if "overlaps" in str(exc.message):
                    continue  # another network (maybe another run's) holds that subnet
                if exc.status != 409:  # 409: an earlier try went through before its connection broke
                    raise EnvironmentError_(f"cannot create network {net.name}: {exc.message}") from exc
            except BaseException:
                await self._remove_network(net.name)  # a timed-out create may still have gone through
                raise
            net.subnet = subnet
            self._subnets.add(subnet)
            break
        else:
            raise EnvironmentError_(f"no free /{_SUBNET_PREFIX} subnet in {MODEL_SUBNET_POOL} after "
                                    f"{_SUBNET_TRIES} tries; run `agentcompass cleanup` to remove leftovers")
        if not self._inhibit_checked:
            try:
                await self._check_inhibited(net)
            except BaseException:
                await self._remove_network(net.name)
                self._subnets.discard(subnet)
                raise
            self._inhibit_checked = True
        net.attached = asyncio.ensure_future(self._attach_routes(net))

    async def _check_inhibited(self, net: _EnvNet) -> None:
        info = await call(lambda: DockerNetwork(self._docker, net.name).show(), what="network inspect",
                          timeout_s=self._timeout)
        addresses = [c.get("Gateway") for c in (info.get("IPAM") or {}).get("Config") or []]
        assert net.subnet is not None
        addresses.append(str(next(ipaddress.IPv4Network(net.subnet).hosts())))
        if any(ip and _is_local_address(ip) for ip in addresses):
            raise EnvironmentError_(
                "this Docker daemon ignores the inhibit_ipv4 bridge option, so an internal network would "
                "expose the host; network mode 'model' cannot be enforced here")

    async def _attach_routes(self, net: _EnvNet) -> None:
        # A route registered later attaches itself to this network (see ensure_model_route).
        routes = list(self._routes.values())
        results = await asyncio.gather(*(self._connect(net.name, r.container_id, alias=r.alias) for r in routes),
                                       return_exceptions=True)
        for res in results:
            if isinstance(res, BaseException):
                raise res

    def keep(self, key: str) -> None:
        """Leave ``key``'s network to its kept container (labelled ``keep``, removed by ``cleanup --all``)."""
        net = self._env_nets.pop(key, None)
        if net is not None:
            self._nets.pop(net.name, None)

    async def release(self, key: str, container_removal: Awaitable[bool] | None = None) -> None:
        """``key``'s environment is closing: await ``container_removal`` (True once the container is gone),
        then give its network, if any, to the next environment, or remove it when it cannot be reused.

        Bounded by ``close_timeout``; a network that cannot be removed is retried by :meth:`aclose` and,
        after this process, by the orphan sweep.
        """
        net = self._env_nets.pop(key, None)
        gone = await container_removal if container_removal is not None else True
        if net is None:
            return
        if gone and net.reusable() and len(self._idle) < _IDLE_NETWORKS_MAX and net.name in self._nets:
            try:
                await asyncio.wait_for(self._set_proxy(net, None), self._close_timeout)
            except (EnvironmentError_, TimeoutError) as exc:
                log.warning("detaching the egress proxy from %s failed: %s", net.name, exc)
                net.broken = True
        if gone and net.reusable() and len(self._idle) < _IDLE_NETWORKS_MAX and net.name in self._nets:
            self._idle.append(net)
        else:
            await self._teardown(net)

    async def _teardown(self, net: _EnvNet) -> None:
        self._nets.pop(net.name, None)
        deadline = asyncio.get_running_loop().time() + self._close_timeout
        await self._bounded(deadline, net.name, self._detach_routes(net))
        if await self._bounded(deadline, net.name, self._remove_env_net(net)):
            self._leftovers.discard(net.name)
        else:
            self._leftovers.add(net.name)
        if net.subnet is not None:
            self._subnets.discard(net.subnet)

    @staticmethod
    async def _bounded(deadline: float, name: str, work: Awaitable[bool | None]) -> bool:
        try:
            async with asyncio.timeout_at(deadline):
                done = await work
        except TimeoutError:
            log.warning("releasing network %s did not finish in time", name)
            return False
        return done is not False

    async def _detach_routes(self, net: _EnvNet) -> None:
        for step in (net.created, net.attached):  # a cancelled open may have left them in flight
            if step is not None:
                await settled(step, 2 * self._timeout)
        if _failed(net.created):
            return
        attached = [r.container_id for r in self._routes.values()]
        if net.proxy is not None:
            attached.append(net.proxy.container_id)
        results = await asyncio.gather(*(self._disconnect(net.name, cid) for cid in attached),
                                       return_exceptions=True)
        for res in results:
            if isinstance(res, BaseException):
                log.warning("detaching a forwarder from %s failed: %s", net.name, res)

    async def _remove_env_net(self, net: _EnvNet) -> bool:
        if _failed(net.created):
            return True  # never created, or removed by the failed creation itself
        if await self._remove_network(net.name, quiet=True):
            return True
        # Something is still attached (a route that attached late, a container whose removal failed).
        try:
            info = await call(lambda: DockerNetwork(self._docker, net.name).show(), what="network inspect",
                              timeout_s=self._timeout)
            for cid in (info.get("Containers") or {}):
                await self._disconnect(net.name, cid)
        except (aiodocker.DockerError, EnvironmentError_) as exc:
            log.warning("emptying network %s failed: %s", net.name, exc)
        return await self._remove_network(net.name)

    # ------------------------------------------------------------------ model routes

    async def ensure_model_route(self, model_host: str, model_port: int) -> tuple[str, int]:
        """Make ``model_host:model_port`` reachable from ``model``-mode containers.

        Returns ``(host, port)`` to use inside the container instead (e.g. to rewrite a base_url): the host
        is the forwarder's alias, the same in every environment's network. Idempotent per endpoint.
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
                # Registered before looking at the networks: a network created meanwhile attaches it itself.
                self._routes[key] = route
                await self._attach_everywhere(route)
            return route.address

    async def _attach_everywhere(self, route: _Route) -> None:
        for net in list(self._nets.values()):
            if net.created is None or not net.created.done() or _failed(net.created):
                continue  # still being created: it attaches every registered route once it exists
            try:
                await self._connect(net.name, route.container_id, alias=route.alias)
            except EnvironmentError_:
                if self._nets.get(net.name) is net:
                    net.broken = True
                    raise
                # removed meanwhile: nothing to attach to

    # ------------------------------------------------------------------ egress proxies (allowlist)

    def proxy_env(self) -> dict[str, str]:
        """The variables that send an ``allowlist`` environment's HTTP(S) clients through its proxy (the
        model routes, reached directly, excepted)."""
        url = f"http://{PROXY_ALIAS}:{PROXY_PORT}"
        direct = ",".join(["localhost", "127.0.0.1", "::1", *sorted(r.alias for r in self._routes.values())])
        return {"HTTP_PROXY": url, "HTTPS_PROXY": url, "http_proxy": url, "https_proxy": url,
                "NO_PROXY": direct, "no_proxy": direct}

    async def _proxy_for(self, policy: NetworkPolicy) -> _Proxy:
        """The running proxy of ``policy``'s allowlist (started on first use, shared by its environments)."""
        entries = allowlist_entries(policy)
        lock = self._proxy_locks.setdefault(entries, asyncio.Lock())
        async with lock:
            proxy = self._proxies.get(entries)
            if proxy is None:
                container_id = await self._start_helper(
                    "proxy", [str(PROXY_PORT), json.dumps([list(e) for e in entries]), str(MODEL_SUBNET_POOL)],
                    PROXY_PORT)
                proxy = self._proxies[entries] = _Proxy(container_id, entries)
                log.info("egress proxy %s for %s", container_id[:12],
                         ", ".join(h if p is None else f"{h}:{p}" for h, p in entries))
            return proxy

    async def _set_proxy(self, net: _EnvNet, proxy: _Proxy | None) -> None:
        """Make ``proxy`` (or none) the one egress proxy on ``net``."""
        async with net.proxy_lock:
            if net.proxy is proxy:
                return
            try:
                if net.proxy is not None:
                    await self._disconnect(net.name, net.proxy.container_id)
                    net.proxy = None
                if proxy is not None:
                    await self._connect(net.name, proxy.container_id, alias=PROXY_ALIAS)
                    net.proxy = proxy
            except BaseException:
                net.broken = True  # half-switched: the network is not handed to anyone else
                raise

    async def _start_helper(self, kind: str, args: list[str], port: int) -> str:
        """Start an egress proxy container on ``bridge``; its id once it listens on ``port``."""
        image = await self._ensure_image(self._forwarder_image)
        name = f"agentcompass-{kind}-{uuid.uuid4().hex[:12]}"
        config: dict[str, Any] = {
            "Image": image,
            "Entrypoint": ["python3", "-c", helper_program(_egress_proxy), *args],
            "Labels": {**self._labels, LABEL_ROLE: "forwarder", LABEL_TASK_ID: "-"},
            "HostConfig": {"Init": True, "NetworkMode": PUBLIC_NETWORK, "Memory": 256 << 20,
                           "PidsLimit": 64, "Sysctls": {"net.ipv4.ip_forward": "0"}},
        }
        create = asyncio.ensure_future(call(lambda: self._docker.containers.create(config, name=name),
                                            what=f"{kind} create", timeout_s=self._timeout,
                                            retry_timeouts=False))
        try:
            created = await asyncio.shield(create)
            await call(created.start, what=f"{kind} start", timeout_s=self._timeout)
            info = await call(created.show, what=f"{kind} inspect", timeout_s=self._timeout)
            probe_ip = info["NetworkSettings"]["Networks"][PUBLIC_NETWORK]["IPAddress"]
            await self._wait_listening(probe_ip, port, name)
        except BaseException:
            async def discard() -> None:
                done = await settled(create, 2 * self._timeout)
                await self._remove_container(done.id if done is not None else name)
            await asyncio.shield(discard())
            raise
        return str(created.id)

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
        image = await self._ensure_image(self._forwarder_image)
        gateway = await self._bridge_gateway()
        if not _is_local_address(gateway):
            raise EnvironmentError_(f"the docker bridge gateway {gateway} is not an address of this machine; "
                                    "network mode 'model' needs the daemon on this host")
        relay = TcpRelay(gateway, model_host, model_port, max_connections=self._relay_max_connections)
        await relay.start()
        suffix = uuid.uuid4().hex[:12]
        # the alias follows from the endpoint: every daemon routing to it gives its sandboxes the same address
        # (ray_docker hands one model URL to sandboxes on many nodes)
        alias = "ac-model-" + hashlib.sha256(f"{model_host}:{model_port}".encode()).hexdigest()[:12]
        name = f"agentcompass-fwd-{suffix}"
        config: dict[str, Any] = {
            "Image": image,
            "Entrypoint": ["python3", "-c", helper_program(_model_relay), str(model_port), gateway,
                           str(relay.port)],
            "Labels": {**self._labels, LABEL_ROLE: "forwarder", LABEL_TASK_ID: "-"},
            # No routing between the networks it sits on (environments cannot add routes anyway: no
            # NET_ADMIN), whatever the host's default.
            "HostConfig": {"Init": True, "NetworkMode": PUBLIC_NETWORK, "Memory": 128 << 20,
                           "PidsLimit": 64, "Sysctls": {"net.ipv4.ip_forward": "0"}},
        }
        create = asyncio.ensure_future(call(lambda: self._docker.containers.create(config, name=name),
                                            what="forwarder create", timeout_s=self._timeout,
                                            retry_timeouts=False))
        try:
            created = await asyncio.shield(create)
            await call(created.start, what="forwarder start", timeout_s=self._timeout)
            info = await call(created.show, what="forwarder inspect", timeout_s=self._timeout)
            probe_ip = info["NetworkSettings"]["Networks"][PUBLIC_NETWORK]["IPAddress"]
            await self._wait_listening(probe_ip, model_port, name)
        except BaseException:
            await asyncio.shield(self._discard_forwarder(create, relay, name))
            raise
        log.info("model route %s:%d -> forwarder %s:%d (relay %s:%d)", model_host, model_port, alias,
                 model_port, gateway, relay.port)
        return _Route(relay, created.id, alias, model_port)

    async def _discard_forwarder(self, create: asyncio.Future[Any], relay: TcpRelay, name: str) -> None:
        created = await settled(create, 2 * self._timeout)
        await relay.aclose()
        await self._remove_container(created.id if created is not None else name)

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
                    raise EnvironmentError_(f"{name} did not start listening on "
                                            f"{ip}:{port} within {_READY_TIMEOUT_S:.0f}s") from exc
                await asyncio.sleep(0.1)

    async def _remove_container(self, ref: str) -> None:
        problem = await remove_container(self._docker, ref, timeout_s=self._timeout)
        if problem is not None:
            log.warning("removing forwarder %s failed: %s", ref, problem)

    async def _remove_network(self, name: str, *, quiet: bool = False) -> bool:
        """Remove network ``name``; True when it is gone. Failures are logged unless ``quiet``."""
        try:
            await call(DockerNetwork(self._docker, name).delete, what="network remove", timeout_s=self._timeout)
        except aiodocker.DockerError as exc:
            if exc.status == 404:
                return True
            if not quiet:
                # e.g. a kept container is still attached; the orphan sweep retries later.
                log.warning("removing network %s failed: %s", name, exc.message)
            return False
        except EnvironmentError_ as exc:
            if not quiet:
                log.warning("removing network %s failed: %s", name, exc)
            return False
        return True

    async def aclose(self) -> None:
        """Remove forwarders and proxies, stop relays, remove the networks still held (best effort, bounded)."""
        routes, self._routes = list(self._routes.values()), {}
        proxies, self._proxies = list(self._proxies.values()), {}
        await asyncio.gather(*(self._remove_container(r.container_id) for r in routes),
                             *(self._remove_container(p.container_id) for p in proxies))
        await asyncio.gather(*(r.relay.aclose() for r in routes))
        nets = list(self._nets.values())
        self._env_nets.clear()
        self._idle.clear()
        await asyncio.gather(*(self._teardown(net) for net in nets))
        for name in sorted(self._leftovers):
            await self._remove_network(name)
        self._leftovers.clear()


#: how an in-container helper imports the copy loop; its program carries the copy loop's source instead
_PIPE_IMPORT = "from .stream_pipe import pipe\n"


@functools.cache
def helper_program(module: ModuleType) -> str:
    """The ``python3 -c`` program of an in-container helper module (``_egress_proxy``, ``_model_relay``): the
    copy loop's source, then the module's (the container has no agentcompass package to import it from)."""
    source = inspect.getsource(module)
    if _PIPE_IMPORT not in source:
        raise AssertionError(f"{module.__name__} does not import the copy loop as {_PIPE_IMPORT.strip()!r}")
    return inspect.getsource(_stream_pipe) + "\n\n" + source.replace(_PIPE_IMPORT, "", 1)


def run_labels(run_id: str, owner: dict[str, str]) -> dict[str, str]:
    """Labels for provider-level resources (networks, forwarders) of run ``run_id``."""
    return {LABEL_RUN_ID: run_id or "-", **owner}
