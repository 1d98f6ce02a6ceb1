"""The node actor of ``ray_docker``: one long-lived async Ray actor per node, wrapping a ``docker`` provider on
that node's own Docker daemon (``DOCKER_HOST`` of the node, or the ``docker_host`` param).

Everything Docker does stays on the node: labels, network policies and the model forwarders, the orphan sweep
(in ``start``), the per-daemon cap on creates in flight and the node's own open pacing. The coordinator only
sends calls and gets their results back as Ray call results; nothing needs a shared filesystem.

Every method answers ``("ok", value)`` or ``("err", ErrorWire)``: the coordinator rebuilds the error as the type
the engine classifies (``EnvironmentError_`` with its ``kind``, ``ConfigError`` with its field, the file errors of
``read_file``), instead of relying on how Ray pickles a foreign exception.

This module imports neither Ray nor aiodocker at import time: ``ray_docker`` wraps ``NodeActor`` with
``ray.remote`` when it places it, and the actor builds its provider inside the node's worker process.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Awaitable
from typing import Any

import msgspec

from ..._errors import ConfigError, EnvironmentError_
from ...common.error_kinds import ErrorKind

#: the built-in exception types rebuilt by name on the coordinator (others become ``EnvironmentError_``)
_BUILTIN_ERRORS: dict[str, type[BaseException]] = {
    t.__name__: t for t in (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError, OSError,
                            ValueError, TypeError, KeyError, RuntimeError, AttributeError, NotImplementedError)}


class ErrorWire(msgspec.Struct, frozen=True):
    """An exception raised on a node, as it crosses to the coordinator."""

    type: str
    message: str
    field: str | None = None
    kind: str | None = None
    image: str | None = None


def encode_error(exc: BaseException) -> ErrorWire:
    """``exc`` as an ``ErrorWire``."""
    return ErrorWire(type=type(exc).__name__, message=str(exc), field=getattr(exc, "field", None),
                     kind=getattr(exc, "kind", None), image=getattr(exc, "image", None))


def decode_error(wire: ErrorWire, node: str) -> BaseException:
    """The exception the coordinator raises for ``wire`` (raised on ``node``)."""
    if wire.type == "ConfigError":
        return ConfigError(wire.message, field=wire.field)
    if wire.type == "ImagePullError" and wire.kind and wire.image:
        from ..docker.pull import ImagePullError

        return ImagePullError(wire.message, kind=wire.kind, image=wire.image)  # type: ignore[arg-type]
    builtin = _BUILTIN_ERRORS.get(wire.type)
    if builtin is not None:
        return builtin(wire.message)
    err = EnvironmentError_(f"node {node}: {wire.message}" if wire.type == "EnvironmentError_"
                            else f"node {node}: {wire.type}: {wire.message}")
    if wire.kind:
        err.kind = ErrorKind.of(wire.kind)
    return err


class NodeFacts(msgspec.Struct, frozen=True):
    """What a node actor reports when it starts: who it is and how much it holds."""

    node_id: str
    hostname: str
    pid: int
    cpus: int
    memory_bytes: int
    disk_free_bytes: int | None
    docker_host: str
    swept: int


class OpenedWire(msgspec.Struct, frozen=True):
    """An environment opened on a node: its key there, its container id and workdir."""

    key: str
    id: str
    workdir: str


async def _answer(work: Awaitable[Any]) -> tuple[str, Any]:
    try:
        return "ok", await work
    except asyncio.CancelledError:
        raise
    except BaseException as exc:
        return "err", encode_error(exc)


class NodeActor:
    """Wraps a ``DockerProvider`` on this node's daemon. Constructed by Ray on the node it is pinned to."""

    def __init__(self, docker_params: dict[str, Any], ctx: dict[str, Any], *, node_id: str,
                 creates_in_flight: int, open_qps: float, env_limit: int | None) -> None:
        self._params = dict(docker_params)
        self._ctx = dict(ctx)
        self._node_id = node_id
        self._creates_limit = creates_in_flight
        self._open_qps = open_qps
        self._env_limit = env_limit
        self._provider: Any = None
        self._envs: dict[str, Any] = {}
        self._creates: asyncio.Semaphore | None = None
        self._pacer: Any = None
        #: the heartbeat's own client (own connection pool): every attached exec holds a connection of the
        #: provider's pool for as long as its command runs, so a ping queued there waits behind a busy node's work
        self._ping_client: Any = None

    def _docker(self) -> Any:
        if self._provider is None:
            raise EnvironmentError_("the node actor was not started")
        return self._provider

    async def start(self) -> tuple[str, Any]:
        """Build the provider on this node's daemon and sweep what dead owners left there; ``NodeFacts``."""
        return await _answer(self._start())

    async def _start(self) -> NodeFacts:
        from ...engine.env_pool import OpenPacer
        from ...interfaces import ComponentContext
        from ..docker.provider import DockerProvider
        from ..docker.sweep import sweep_orphans

        self._creates = asyncio.Semaphore(self._creates_limit)
        self._pacer = OpenPacer(self._open_qps)
        ctx = ComponentContext(run_id=self._ctx.get("run_id", ""), request=self._ctx.get("request", ""),
                               k=int(self._ctx.get("k", 1)), environment="docker", provider_limit=self._env_limit,
                               max_creates_in_flight=self._creates_limit, open_pacer=self._pacer.wait)
        provider = DockerProvider(self._params, ctx)
        report = await sweep_orphans(docker_url=provider.docker_host, timeout_s=provider.daemon_timeout)
        if report.errors:
            raise EnvironmentError_(f"the docker daemon of this node did not answer: {report.errors[0]}")
        await provider.check_disk_limit()
        self._provider = provider
        disk = await provider.disk_free_bytes()
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        return NodeFacts(node_id=self._node_id, hostname=socket.gethostname(), pid=os.getpid(),
                         cpus=os.cpu_count() or 1, memory_bytes=mem, disk_free_bytes=disk,
                         docker_host=provider.image_store(), swept=report.removed)

    async def ping(self) -> tuple[str, Any]:
        """The coordinator's heartbeat: the actor's pid once this node's daemon answered (a node whose daemon
        died is as lost as one whose actor died)."""
        async def run() -> int:
            if self._provider is not None:
                if self._ping_client is None:
                    from ..docker.api import make_client

                    self._ping_client = make_client(self._provider.docker_host)
                await self._ping_client.version()
            return os.getpid()
        return await _answer(run())

    async def ensure_image(self, ref: str | None, recipe: dict[str, Any] | None) -> tuple[str, Any]:
        """``DockerProvider.ensure_image`` on this node (pulled from the registry here); (ref, pull stats)."""
        async def run() -> tuple[str, Any]:
            from ...interfaces import ImageRecipe

            rec = msgspec.convert(recipe, ImageRecipe) if recipe else None
            got = await self._docker().ensure_image(ref, rec)
            stats = self._docker().pull_stats(got)
            return got, msgspec.to_builtins(stats) if stats is not None else None
        return await _answer(run())

    async def ensure_model_route(self, host: str, port: int) -> tuple[str, Any]:
        return await _answer(self._docker().ensure_model_route(host, port))

    async def image_size(self, ref: str) -> tuple[str, Any]:
        return await _answer(self._docker().image_size(ref))

    async def remove_image(self, ref: str) -> tuple[str, Any]:
        return await _answer(self._docker().remove_image(ref))

    async def disk_free_bytes(self) -> tuple[str, Any]:
        return await _answer(self._docker().disk_free_bytes())

    async def open(self, spec: bytes) -> tuple[str, Any]:
        """Open one environment (``EnvOpenSpec`` as msgpack), within this daemon's cap on creates in flight and
        this node's open pacing."""
        async def run() -> OpenedWire:
            from ...interfaces import EnvOpenSpec

            open_spec = msgspec.msgpack.decode(spec, type=EnvOpenSpec)
            assert self._creates is not None and self._pacer is not None
            await self._pacer.wait()
            async with self._creates:
                env = await self._docker().open(open_spec)
            self._envs[env.id] = env
            return OpenedWire(key=env.id, id=env.id, workdir=env.workdir)
        return await _answer(run())

    def _env(self, key: str) -> Any:
        env = self._envs.get(key)
        if env is None:
            raise EnvironmentError_(f"environment {key[:12]} is not open on this node")
        return env

    async def exec(self, key: str, cmd: Any, timeout: float | None, cwd: str | None,
                   env: dict[str, str] | None) -> tuple[str, Any]:
        async def run() -> Any:
            return await self._env(key).exec(cmd, timeout=timeout, cwd=cwd, env=env)
        return await _answer(run())

    async def write_file(self, key: str, path: str, data: bytes | str) -> tuple[str, Any]:
        async def run() -> None:
            await self._env(key).write_file(path, data)
        return await _answer(run())

    async def read_file(self, key: str, path: str) -> tuple[str, Any]:
        async def run() -> bytes:
            data: bytes = await self._env(key).read_file(path)
            return data
        return await _answer(run())

    async def put_archive(self, key: str, path: str, tar: bytes) -> tuple[str, Any]:
        async def run() -> None:
            await self._env(key).put_archive(path, tar)
        return await _answer(run())

    async def get_archive(self, key: str, path: str) -> tuple[str, Any]:
        """The capped tar of ``path`` as bytes, with what was left out: (tar, skipped, skipped_count)."""
        async def run() -> tuple[bytes, list[dict[str, Any]], int]:
            archive = await self._env(key).get_archive_file(path)
            with archive:
                data = await asyncio.to_thread(archive.read_bytes)
                return data, archive.skipped_report(), archive.skipped_count
        return await _answer(run())

    async def set_network_policy(self, key: str, policy: dict[str, Any]) -> tuple[str, Any]:
        async def run() -> None:
            from ...interfaces import NetworkPolicy

            await self._env(key).set_network_policy(msgspec.convert(policy, NetworkPolicy))
        return await _answer(run())

    async def close(self, key: str) -> tuple[str, Any]:
        async def run() -> None:
            env = self._envs.pop(key, None)
            if env is not None:
                await env.close()
        return await _answer(run())

    async def open_count(self) -> tuple[str, Any]:
        """Environments open on this node right now."""
        return "ok", len(self._envs)

    async def aclose(self) -> tuple[str, Any]:
        """Close every environment still open here and the provider (its forwarders and networks)."""
        async def run() -> None:
            self._envs.clear()
            if self._ping_client is not None:
                client, self._ping_client = self._ping_client, None
                await client.close()
            if self._provider is not None:
                await self._provider.aclose()
        return await _answer(run())


__all__ = ["ErrorWire", "NodeActor", "NodeFacts", "OpenedWire", "decode_error", "encode_error"]
