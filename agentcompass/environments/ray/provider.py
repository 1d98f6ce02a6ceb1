"""The ``ray_docker`` environment provider: sandboxes on the Docker daemons of the nodes of a Ray cluster, one
coordinator (this process) keeping the run directory, reuse and commits as with any provider.

At ``start`` it connects to the cluster (``address``, else ``RAY_ADDRESS``, else a local one for a trial) and
places one long-lived async ``NodeActor`` on every live node (pinned by node affinity, ``max_restarts=0``); each
wraps a ``docker`` provider on that node's own daemon and sweeps what dead owners left there. Environments are
proxies (``RayEnvironment``) whose calls are Ray actor calls; ``ray_placement`` picks each task's node.

Node loss: a heartbeat (``ping`` every ``heartbeat_interval``, answered within ``node_timeout``) or a Ray error
on any call declares a node lost. Its calls in flight fail at once with ``EnvironmentError_`` (the engine books
``env_lost``, retryable), its tasks are placed again, its actor is killed (its containers become orphans of a
dead owner, swept by the next actor placed on that node), and an answer that still arrives from it is dropped.
A node that joins (or comes back) during the run gets an actor and takes work.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import time
from collections.abc import Sequence
from typing import IO, Annotated, Any, ClassVar

import msgspec

from ..._errors import ConfigError, EnvironmentError_
from ..._validate import Seconds
from ...common.error_kinds import ErrorKind
from ...dependencies import Requirement
from ...interfaces import ComponentContext, Environment, EnvOpenSpec, ExecResult, NetworkPolicy
from .._tar import SkippedMember, SpooledArchive
from ..base import ALL_NETWORK_MODES, EnvironmentProvider, ProviderCapabilities
from ..docker.api import DEFAULT_BASE_IMAGE
from ..docker.provider import DockerParams, DockerProvider, parse_memory
from .node_actor import ErrorWire, NodeActor, NodeFacts, OpenedWire, decode_error
from .placement import NodeSlots, Placement
from .rescan_backoff import RescanBackoff

log = logging.getLogger("agentcompass.environments.ray.provider")


class RayDockerParams(DockerParams, frozen=True):
    """``ray_docker`` params: every ``docker`` param (applied on each node's daemon) plus where the cluster is,
    how much each node takes, and how node loss is detected (see docs/scale-out.md)."""

    #: the cluster's GCS address (``host:port``; Ray Client ``ray://`` is refused); None: ``RAY_ADDRESS``, else
    #: a local cluster for a trial
    address: Annotated[str, msgspec.Meta(min_length=1)] | None = None
    #: the coordinator's address as the nodes reach it (the model gateway is relayed there); None: Ray's node IP
    gateway_host: Annotated[str, msgspec.Meta(min_length=1)] | None = None
    #: only nodes with this custom resource run sandboxes (e.g. ``docker`` from ``ray start --resources``)
    node_resource: Annotated[str, msgspec.Meta(min_length=1)] | None = None
    #: environments open at once per node: one number, or per node name (others: ``envs_per_cpu``)
    node_capacity: Annotated[int, msgspec.Meta(ge=1, le=100000)] | dict[str, Annotated[int, msgspec.Meta(
        ge=1, le=100000)]] | None = None
    envs_per_cpu: Annotated[float, msgspec.Meta(gt=0, le=1000)] = 2.0
    #: opens per second on each node's daemon (0: not paced beyond ``env_open_qps`` overall)
    node_open_qps: Annotated[float, msgspec.Meta(ge=0, le=10000)] = 0.0
    #: container creates in flight per node's daemon (the daemon saturates on creation)
    node_creates_in_flight: Annotated[int, msgspec.Meta(ge=1, le=1000)] = 4
    heartbeat_interval: Seconds = 2.0
    node_timeout: Seconds = 10.0
    #: how often the cluster is looked at for nodes that joined or came back
    rescan_interval: Seconds = 5.0
    #: CPUs of the local cluster started when no address is given (None: this machine's)
    local_cpus: Annotated[int, msgspec.Meta(ge=1, le=4096)] | None = None
    connect_timeout: Seconds = 120.0
    #: how long an open waits in the queue for room on a node (a full cluster) before it fails; the wait is
    #: not part of ``open_timeout``
    queue_timeout: Seconds = 86400.0


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


class NodeLost(EnvironmentError_):
    """A call went to a node that is lost: ``env_lost`` in every phase (an open included), retryable."""

    kind = ErrorKind.ENV_LOST


class NodeHandle:
    """The coordinator's side of one node actor: its calls, and whether it is alive."""

    def __init__(self, name: str, node_id: str, actor: Any, slots: NodeSlots, facts: NodeFacts) -> None:
        self.name = name
        self.node_id = node_id
        self.actor = actor
        self.slots = slots
        self.facts = facts
        self.lost_reason: str | None = None
        self._lost = asyncio.Event()
        #: answers that arrived after the node was declared lost (dropped, never counted)
        self.late_answers = 0

    @property
    def alive(self) -> bool:
        return self.lost_reason is None

    def mark_lost(self, reason: str) -> bool:
        """Declare the node lost; False if it already was."""
        if self.lost_reason is not None:
            return False
        self.lost_reason = reason
        self._lost.set()
        return True

    async def call(self, method: str, *args: Any) -> Any:
        """``method(*args)`` on the node actor; its value, or its error rebuilt. NodeLost when the node is (or is
        declared, meanwhile) lost."""
        if self.lost_reason is not None:
            raise NodeLost(f"node {self.name} is lost ({self.lost_reason})")
        import ray

        ref = getattr(self.actor, method).remote(*args)
        answer = asyncio.ensure_future(_awaited(ref))
        lost = asyncio.ensure_future(self._lost.wait())
        try:
            await asyncio.wait({answer, lost}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            answer.cancel()
            _cancel_ref(ray, ref)
            raise
        finally:
            lost.cancel()
        if not answer.done():
            answer.add_done_callback(self._late)
            raise NodeLost(f"node {self.name} was lost during {method} ({self.lost_reason})")
        try:
            status, value = answer.result()
        except ray.exceptions.RayTaskError as exc:  # our actor answers every error itself: a bug, not a loss
            raise RuntimeError(f"node {self.name}: {method} failed in Ray: {exc}") from None
        except ray.exceptions.RayError as exc:
            reason = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            self.mark_lost(reason)
            raise NodeLost(f"node {self.name} was lost during {method} ({reason})") from None
        if status == "err":
            raise decode_error(value if isinstance(value, ErrorWire) else msgspec.convert(value, ErrorWire),
                               self.name)
        return value

    def _late(self, fut: asyncio.Future[Any]) -> None:
        if not fut.cancelled() and fut.exception() is None:
            self.late_answers += 1
            log.info("node %s: dropped an answer that came after the node was declared lost", self.name)


async def _awaited(ref: Any) -> Any:
    return await ref


def _cancel_ref(ray: Any, ref: Any) -> None:
    try:
        ray.cancel(ref)
    except Exception as exc:  # the node may be gone: nothing left to cancel
        log.debug("cancelling a call on a node failed: %r", exc)


class RayEnvironment:
    """An environment on a node: every call is a call to that node's actor. Implements ``Environment``."""

    def __init__(self, provider: RayDockerProvider, handle: NodeHandle, slots: NodeSlots, opened: OpenedWire) -> None:
        self.id = opened.id
        self.workdir = opened.workdir
        #: the node it runs on (the engine writes it into the attempt's ``meta.environments``)
        self.node = handle.name
        self._provider = provider
        self._handle = handle
        self._slots = slots
        self._key = opened.key
        self._closed = False

    def __repr__(self) -> str:
        return f"RayEnvironment(id={self.id[:12]!r}, node={self.node!r}, workdir={self.workdir!r})"

    def _check_open(self) -> None:
        if self._closed:
            raise EnvironmentError_(f"environment {self.id[:12]} is closed")

    async def exec(self, cmd: str | Sequence[str], *, timeout: float | None = None, cwd: str | None = None,
                   env: dict[str, str] | None = None) -> ExecResult:
        """Run ``cmd`` in the container on its node."""
        self._check_open()
        wire = cmd if isinstance(cmd, str) else list(cmd)
        result: ExecResult = await self._handle.call("exec", self._key, wire, timeout, cwd, env)
        return result

    async def write_file(self, path: str, data: bytes | str) -> None:
        self._check_open()
        await self._handle.call("write_file", self._key, path, data)

    async def read_file(self, path: str) -> bytes:
        self._check_open()
        data: bytes = await self._handle.call("read_file", self._key, path)
        return data

    async def put_archive(self, path: str, tar_bytes: bytes | IO[bytes]) -> None:
        """Extract a tar into ``path`` (a file object is read here and sent as bytes: no shared filesystem)."""
        self._check_open()
        if isinstance(tar_bytes, bytes | bytearray | memoryview):
            data = bytes(tar_bytes)
        else:
            def read() -> bytes:
                tar_bytes.seek(0)
                return tar_bytes.read()
            data = await asyncio.to_thread(read)
        await self._handle.call("put_archive", self._key, path, data)

    async def get_archive_file(self, path: str) -> SpooledArchive:
        """The capped tar of ``path``, in an unlinked temp file here, with what was left out."""
        self._check_open()
        data, skipped, count = await self._handle.call("get_archive", self._key, path)
        out = SpooledArchive()
        try:
            await asyncio.to_thread(out.file.write, data)
            out.size = len(data)
            out.skipped = [msgspec.convert(s, SkippedMember) for s in skipped]
            out.skipped_count = int(count)
        except BaseException:
            out.file.close()
            raise
        return out

    async def get_archive(self, path: str) -> bytes:
        self._check_open()
        data, _, _ = await self._handle.call("get_archive", self._key, path)
        return bytes(data)

    async def set_network_policy(self, policy: NetworkPolicy) -> None:
        self._check_open()
        await self._handle.call("set_network_policy", self._key, msgspec.to_builtins(policy))

    async def close(self) -> None:
        """Remove the container on its node (bounded); on a lost node there is nothing to call: the node's next
        actor sweeps it. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._handle.alive:
                async with asyncio.timeout(self._provider.close_timeout):
                    await self._handle.call("close", self._key)
        except (NodeLost, TimeoutError) as exc:
            log.info("closing %s on node %s: %s (the node's sweep removes it)", self.id[:12], self.node, exc)
        finally:
            await self._provider.placement.release(self._slots)


class RayDockerProvider(EnvironmentProvider):
    """Opens environments on the Docker daemons of a Ray cluster's nodes (see the module doc)."""

    name: ClassVar[str] = "ray_docker"
    capabilities: ClassVar[ProviderCapabilities] = ProviderCapabilities(
        remote=True, phase_timeouts=True, network_modes=ALL_NETWORK_MODES, model_route=True)
    requirements: ClassVar[tuple[Requirement, ...]] = (Requirement("ray>=2.40", "ray"),)
    Params: ClassVar[type[RayDockerParams]] = RayDockerParams
    params: RayDockerParams

    def __init__(self, params: RayDockerParams | dict[str, Any] | None, ctx: ComponentContext) -> None:
        super().__init__(params, ctx)
        p = self.params
        docker = {f: getattr(p, f) for f in DockerParams.__struct_fields__}
        self.docker_params: dict[str, Any] = msgspec.to_builtins(docker)
        if p.docker_host is not None and not p.docker_host.startswith("unix://"):
            raise ConfigError("environment ray_docker: docker_host must be a unix:// socket on each node (the "
                              "daemon of the node itself); leave it out to use each node's DOCKER_HOST",
                              field="environment.params.docker_host")
        from .cluster import refuse_ray_client

        refuse_ray_client(p.address, "environment.params.address")
        # the docker provider's own checks of its params (pids, workdir, registry env), before any node is asked
        DockerProvider(dict(self.docker_params, prestart=0), ComponentContext())
        self.image: str = p.image or DEFAULT_BASE_IMAGE
        self.close_timeout = p.close_timeout
        self.open_timeout = p.open_timeout
        self.queue_timeout = p.queue_timeout
        self.placement = Placement()
        #: slots taken by ``reserve``, by id of the spec the engine opens next
        self._reserved: dict[int, NodeSlots] = {}
        self._handles: dict[str, NodeHandle] = {}  # by Ray node id
        self._monitor: asyncio.Task[None] | None = None
        self._connected = False
        self._relay: Any = None
        self._route_target: tuple[str, int] | None = None
        self._route: tuple[str, int] | None = None
        self._join_lock = asyncio.Lock()
        self._lost_nodes = 0
        #: nodes that refused an actor are asked again after a doubling delay (5 s up to 5 min), not every rescan
        self._backoff = RescanBackoff()
        self._rescan: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ the cluster

    def _capacity(self, name: str, cpus: float, memory_bytes: float) -> int:
        """``node_capacity`` when it names the node, else ``envs_per_cpu`` x its CPUs, and no more containers than
        its memory holds at the ``memory`` limit when one is set."""
        cap = self.params.node_capacity
        if isinstance(cap, int):
            return cap
        if isinstance(cap, dict) and name in cap:
            return cap[name]
        by_cpu = max(1, int(cpus * self.params.envs_per_cpu))
        if self.params.memory is not None and memory_bytes > 0:
            return max(1, min(by_cpu, int(memory_bytes // parse_memory(self.params.memory))))
        return by_cpu

    def handles(self) -> list[NodeHandle]:
        """Every node actor placed so far (lost ones included)."""
        return list(self._handles.values())

    async def start(self) -> None:
        """Connect to the cluster, place a node actor on every node with Docker (each sweeps its daemon and makes
        sure the default image is there), and start watching the nodes."""
        from . import cluster as ray_cluster

        p = self.params
        await ray_cluster.connect(p.address, local_cpus=p.local_cpus, timeout_s=p.connect_timeout)
        self._connected = True
        joined = await self._join_new()
        if not joined:
            raise EnvironmentError_("no node of the Ray cluster has a Docker daemon the node actor could reach"
                                    + (f" (nodes with resource {p.node_resource!r})" if p.node_resource
                                       else ""))
        if self._monitor is None:
            self._monitor = asyncio.create_task(self._watch(), name="ray_docker-monitor")

    async def _join_new(self) -> list[NodeHandle]:
        """Place actors on live nodes that have none yet; the handles of those that joined."""
        from . import cluster as ray_cluster

        async with self._join_lock:
            nodes = await ray_cluster.live_nodes()
            # a node without an actor: new, come back (a new raylet), or lost while Ray still lists it (its daemon
            # died): its daemon may answer again
            now = time.monotonic()
            fresh = [n for n in nodes if (n.node_id not in self._handles or not self._handles[n.node_id].alive)
                     and (self.params.node_resource is None or n.resources.get(self.params.node_resource, 0) > 0)
                     and self._backoff.due(n.node_id, now)]
            results = await asyncio.gather(*(self._place(n) for n in fresh), return_exceptions=True)
            joined = []
            for node, res in zip(fresh, results, strict=True):
                if isinstance(res, ConfigError):
                    raise res
                if isinstance(res, BaseException):
                    why = str(res).splitlines()[0] if str(res) else type(res).__name__
                    delay, new = self._backoff.refused(node.node_id, why, time.monotonic())
                    # once per reason, not every rescan
                    (log.warning if new else log.debug)(
                        "node %s (%s) takes no environments: %s (asked again in %gs)", node.address,
                        node.node_id[:8], why, delay)
                    continue
                self._backoff.joined(node.node_id)
                joined.append(res)
            return joined

    async def _place(self, node: Any) -> NodeHandle:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        from . import cluster as ray_cluster

        name = node.address or node.node_id[:12]
        if any(h.name == name and h.alive for h in self._handles.values()):
            name = f"{name}:{node.node_id[:8]}"
        capacity = self._capacity(name, node.cpus, node.memory_bytes)
        remote_cls = ray.remote(NodeActor)
        actor = remote_cls.options(
            num_cpus=0, max_restarts=0, max_task_retries=0, max_concurrency=1000,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node.node_id, soft=False),
        ).remote(self.docker_params, {"run_id": self.ctx.run_id, "request": self.ctx.request, "k": self.ctx.k},
                 node_id=node.node_id, creates_in_flight=self.params.node_creates_in_flight,
                 open_qps=self.params.node_open_qps, env_limit=capacity)
        slots = NodeSlots(name=name, capacity=capacity)
        handle = NodeHandle(name, node.node_id, actor, slots, facts=None)  # type: ignore[arg-type]
        try:
            async with asyncio.timeout(self.params.connect_timeout):
                handle.facts = msgspec.convert(await handle.call("start"), NodeFacts)
                got, _ = await handle.call("ensure_image", None, None)  # each node pulls for itself
                slots.images.add(got)
                if self._route_target is not None:
                    await self._node_route(handle)
        except BaseException:
            await asyncio.shield(asyncio.to_thread(_kill, actor))
            raise
        if handle.facts.swept:
            log.warning("node %s: swept %d leftovers of dead runs", name, handle.facts.swept)
        self._handles[node.node_id] = handle
        await self.placement.add(slots)
        log.info("node %s joined: %d environments at once, %d CPUs, daemon %s (coordinator %s)", name, capacity,
                 handle.facts.cpus, handle.facts.docker_host, ray_cluster.coordinator_address())
        return handle

    async def _watch(self) -> None:
        """Heartbeat every node; look for nodes that joined every ``rescan_interval``."""
        last_scan = time.monotonic()
        while True:
            await asyncio.sleep(self.params.heartbeat_interval)
            for h in self._handles.values():  # lost during an environment's call: placement has not heard yet
                if not h.alive and h.slots.alive:
                    await self._lose(h, h.lost_reason or "lost")
            alive = [h for h in self._handles.values() if h.alive]
            await asyncio.gather(*(self._beat(h) for h in alive))
            # the rescan runs beside the heartbeat (placing on a slow node takes up to connect_timeout), one at a time
            if time.monotonic() - last_scan >= self.params.rescan_interval and (
                    self._rescan is None or self._rescan.done()):
                last_scan = time.monotonic()
                self._rescan = asyncio.create_task(self._rescan_once(), name="ray_docker-rescan")

    async def _rescan_once(self) -> None:
        try:
            await self._join_new()
        except Exception as exc:  # the run goes on with the nodes it has
            log.warning("looking for new nodes failed: %s", exc)

    async def _beat(self, handle: NodeHandle) -> None:
        try:
            async with asyncio.timeout(self.params.node_timeout):
                await handle.call("ping")
        except TimeoutError:
            await self._lose(handle, f"no heartbeat for {self.params.node_timeout:g}s")
        except NodeLost:
            await self._lose(handle, handle.lost_reason or "lost")
        except Exception as exc:
            await self._lose(handle, f"heartbeat failed: {exc}")

    async def _lose(self, handle: NodeHandle, reason: str) -> None:
        handle.mark_lost(reason)
        if handle.slots.alive:
            self._lost_nodes += 1
            log.warning("node %s lost (%s): its attempts in flight end as env_lost and are placed again",
                        handle.name, reason)
            await self.placement.lose(handle.name)
            # a node declared lost that is still running must stop: its containers then belong to a dead owner
            await asyncio.to_thread(_kill, handle.actor)

    async def _call(self, handle: NodeHandle, method: str, *args: Any) -> Any:
        try:
            return await handle.call(method, *args)
        except NodeLost:
            await self._lose(handle, handle.lost_reason or "lost")
            raise

    # ------------------------------------------------------------------ the model gateway

    def _gateway_host(self) -> str:
        from . import cluster as ray_cluster

        return self.params.gateway_host or ray_cluster.coordinator_address()

    async def ensure_model_route(self, model_host: str, model_port: int) -> tuple[str, int]:
        """Route ``model``-mode sandboxes on every node to ``model_host:model_port``. A loopback endpoint (the
        coordinator's gateway) is relayed from ``gateway_host``, the address the nodes reach the coordinator by.
        Every node's route has the same in-sandbox address (the forwarder alias is derived from the target)."""
        if self._route_target is None:
            target = (model_host, model_port)
            if _is_loopback(model_host):
                from ..docker.network import TcpRelay

                relay = TcpRelay(self._gateway_host(), model_host, model_port,
                                 max_connections=self.params.relay_max_connections)
                await relay.start()
                self._relay = relay
                target = (self._gateway_host(), relay.port)
                log.info("model gateway %s:%d relayed to the nodes at %s:%d", model_host, model_port, *target)
            self._route_target = target
        routes = await asyncio.gather(*(self._node_route(h) for h in self._handles.values() if h.alive))
        if not routes:
            raise EnvironmentError_("no node is alive to route to the model gateway")
        self._route = routes[0]
        return routes[0]

    async def _node_route(self, handle: NodeHandle) -> tuple[str, int]:
        assert self._route_target is not None
        host, port = await self._call(handle, "ensure_model_route", *self._route_target)
        route = (str(host), int(port))
        if self._route is not None and route != self._route:
            raise EnvironmentError_(f"node {handle.name} routes the model at {route}, the others at {self._route}")
        return route

    async def host_address(self) -> str:
        """The coordinator's address as the nodes reach it (``gateway_host``): ``public`` sandboxes call the
        gateway there."""
        return self._gateway_host()

    # ------------------------------------------------------------------ environments

    def node_of(self, env: Environment) -> str | None:
        """The Ray node ``env`` runs on (its node actor's name)."""
        return env.node if isinstance(env, RayEnvironment) else None

    async def reserve(self, spec: EnvOpenSpec) -> None:
        """Wait (up to ``queue_timeout``) for room on the task's node, placing the task if it has none; the
        slot is ``open``'s."""
        slots = await self.placement.acquire(spec.task_id, spec.image or self.image, timeout=self.queue_timeout,
                                             what="queue_timeout")
        old = self._reserved.pop(id(spec), None)
        self._reserved[id(spec)] = slots
        if old is not None:  # reserved twice without an open: keep one
            await self.placement.release(old)

    async def unreserve(self, spec: EnvOpenSpec) -> None:
        """Give back the slot ``reserve(spec)`` took, unless ``open(spec)`` has it."""
        slots = self._reserved.pop(id(spec), None)
        if slots is not None:
            await self.placement.release(slots)

    async def open(self, spec: EnvOpenSpec) -> RayEnvironment:
        """Open the environment on the task's node, in the slot ``reserve`` took (else one taken now, waiting at
        most ``open_timeout`` for room)."""
        slots = self._reserved.pop(id(spec), None)
        try:
            self.check_network_policy(spec.network)
            if spec.mounts:
                log.debug("ray_docker binds no host directories (mounts %s)", [m.target for m in spec.mounts])
                spec = msgspec.structs.replace(spec, mounts=[])
            if slots is None:
                slots = await self.placement.acquire(spec.task_id, spec.image or self.image,
                                                     timeout=self.open_timeout)
            handle = next((h for h in self._handles.values() if h.slots is slots), None)
            if handle is None:
                raise NodeLost(f"node {slots.name} has no actor")
            opened = msgspec.convert(await self._call(handle, "open", msgspec.msgpack.encode(spec)), OpenedWire)
        except BaseException:
            if slots is not None:
                await asyncio.shield(self.placement.release(slots))
            raise
        return RayEnvironment(self, handle, slots, opened)

    def resolved_settings(self) -> dict[str, Any]:
        """The nodes placed so far (name: capacity) and how many were lost; nothing before ``start``."""
        if not self._handles:
            return {}
        return {"nodes": {h.name: h.slots.capacity for h in self._handles.values()},
                "nodes_lost": self._lost_nodes}

    def node_counts(self) -> dict[str, dict[str, Any]]:
        """Per node: environments opened, whether it is alive, late answers dropped."""
        return {h.name: {"opened": h.slots.opened, "alive": h.alive, "late_answers_dropped": h.late_answers}
                for h in self._handles.values()}

    async def aclose(self) -> None:
        """Stop watching, close what is open on every live node, stop the node actors and the relay, and let go
        of the cluster."""
        from . import cluster as ray_cluster

        for task in (self._monitor, self._rescan):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        self._monitor = self._rescan = None
        alive = [h for h in self._handles.values() if h.alive]

        async def shut(h: NodeHandle) -> None:
            try:
                async with asyncio.timeout(self.close_timeout * 2):
                    await h.call("aclose")
            except Exception as exc:
                log.warning("closing node %s: %s", h.name, exc)
            h.mark_lost("closed")
            await asyncio.to_thread(_kill, h.actor)

        await asyncio.gather(*(shut(h) for h in alive))
        if self._relay is not None:
            relay, self._relay = self._relay, None
            await relay.aclose()
        if self._connected:
            self._connected = False
            await ray_cluster.disconnect()


def _kill(actor: Any) -> None:
    import ray

    try:
        ray.kill(actor, no_restart=True)
    except Exception as exc:  # already dead, or the cluster is gone
        log.debug("killing a node actor: %r", exc)


__all__ = ["NodeHandle", "NodeLost", "RayDockerParams", "RayDockerProvider", "RayEnvironment"]
