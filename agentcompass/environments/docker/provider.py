"""The ``docker`` environment provider: one container per environment, driven over the Engine API.

``DockerProvider`` holds the daemon client and the provider's settings, and opens and closes containers: an
open creates and starts a labelled container (or takes one started ahead of need, see :mod:`.prestart`),
applies its network policy and writes its files; ``aclose`` removes what is still open. Its parts, one job
each: the params (:mod:`.params`), the container's create body (:mod:`.container_config`), the open container
(:mod:`.environment`: commands through :mod:`.exec`, archives through :mod:`.upload` and :mod:`.archive`) and
the provider's images (:mod:`.provider_images`). ``agentcompass.environments.docker.provider:DockerProvider``
is the registry's ``docker``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import posixpath
import re
from typing import Any, ClassVar

import aiodocker
from aiodocker.containers import DockerContainer

from ..._errors import ConfigError, EnvironmentError_
from ..._validate import env_vars
from ...interfaces import ComponentContext, EnvOpenSpec, NetworkPolicy, Resources
from .._tar import safe_relpath
from ..base import ALL_NETWORK_MODES, EnvironmentProvider, ProviderCapabilities
from .api import (
    DEFAULT_BASE_IMAGE,
    LABEL_ROLE,
    LABEL_RUN_ID,
    LABEL_TASK_ID,
    call,
    make_client,
    owner_labels,
    settled,
)
from .api import remove_container as remove_container_until_gone
from .container_config import bind_mounts, container_config, container_labels, container_name
from .environment import DockerEnvironment
from .exec import TIMEOUT_EXIT_CODE
from .network import NO_NETWORK, PUBLIC_NETWORK, DockerNetworks, check_policy, run_labels
from .params import DockerParams, MountPoint, NonEmpty, Platform, param_field, parse_memory
from .prestart import PRESTART_ROLE, PrestartPool, Shape
from .provider_images import ProviderImages
from .pull import ImagePullError, PullOptions, PullResult, check_registry_env
from .storage import refusal, size_unsupported
from .upload import files_tar, numeric_owner

log = logging.getLogger("agentcompass.environments.docker.provider")


class DockerProvider(ProviderImages, EnvironmentProvider):
    """Opens ``DockerEnvironment``s on the local (or ``docker_host``) Docker daemon."""

    name: ClassVar[str] = "docker"
    #: the daemon saturates on container creation (~4 lifecycles/s on 2 cores): creates in flight are capped
    #: separately from containers alive. ``open_timeout``/``close_timeout`` also bound the daemon calls here.
    capabilities: ClassVar[ProviderCapabilities] = ProviderCapabilities(
        phase_timeouts=True, network_modes=ALL_NETWORK_MODES, images=True, model_route=True, max_creates_in_flight=4,
        mounts=True)
    Params: ClassVar[type[DockerParams]] = DockerParams
    params: DockerParams

    def __init__(self, params: DockerParams | dict[str, Any] | None, ctx: ComponentContext) -> None:
        super().__init__(params, ctx)
        p = self.params
        if p.pids is not None and p.pids_limit is not None:  # the short name users reach for (cpus, memory, pids)
            raise ConfigError("environment docker: give `pids` or `pids_limit`, not both (the same limit).",
                              field=param_field("pids"))
        self.image: str = p.image or DEFAULT_BASE_IMAGE
        self.forwarder_image: str = p.forwarder_image or DEFAULT_BASE_IMAGE
        self.cpus: float | None = p.cpus
        self.memory: int | None = parse_memory(p.memory) if p.memory is not None else None
        self.pids_limit: int | None = p.pids if p.pids is not None else p.pids_limit
        self.user: str | None = p.user
        workdir = p.workdir or "/workspace"
        if not workdir.startswith("/"):
            raise ConfigError(f"environment docker: workdir must be an absolute path, got {workdir!r}",
                              field=param_field("workdir"))
        self.workdir = posixpath.normpath(workdir)
        self.docker_host: str | None = p.docker_host
        self.open_timeout = p.open_timeout
        self.exec_default_timeout = p.exec_default_timeout
        self.close_timeout = p.close_timeout
        self.daemon_timeout = p.daemon_timeout
        self.pull_options = PullOptions(platform=p.platform, inactivity_timeout=p.pull_inactivity_timeout,
                                        timeout=p.pull_timeout, retries=p.pull_retries)
        check_registry_env()  # before any run: not at the first pull
        self.build_timeout = p.build_timeout
        self.init: bool = p.init
        self.build_context: str | None = p.build_context
        self.dockerfile: str | None = p.dockerfile
        self.output_limit_bytes: int = p.output_limit_bytes
        self.archive_limits = p.archive_limits()
        #: the writable layer's size cap (``HostConfig.StorageOpt``), when the storage driver allows one
        self.disk_limit: int | None = parse_memory(p.disk_limit, "disk_limit") if p.disk_limit is not None else None
        self._disk_limit_checked = False
        self._daemon_cpus: int | None = None  # the daemon's CPU count, asked once a task asks for CPUs
        self._capped_cpus: set[float] = set()
        self._disk_limit_param = p.disk_limit
        self.tmpfs: dict[str, int] = {posixpath.normpath(path): parse_memory(size, f"tmpfs[{path!r}]")
                                      for path, size in (p.tmpfs or {}).items()}
        #: containers started ahead of need (None: ``prestart`` 0); see docker_prestart. Their creates wait for
        #: what the engine's opens wait for: the launch's creates-in-flight cap and open pacing.
        creates_limit = ctx.max_creates_in_flight if ctx.max_creates_in_flight is not None \
            else self.capabilities.max_creates_in_flight
        self._prestart: PrestartPool | None = PrestartPool(
            per_shape=p.prestart, provider=self.name, limit=ctx.provider_limit, creates_limit=creates_limit,
            start=self._start_ahead, remove=self.remove_container, start_timeout=self.open_timeout,
            pace=ctx.open_pacer) if p.prestart else None
        self._owner = owner_labels()
        self._docker: aiodocker.Docker | None = None
        self._networks: DockerNetworks | None = None
        self._envs: set[DockerEnvironment] = set()
        self._images_ready: set[str] = set()
        #: image -> (the error, monotonic time it was raised); retryable pull errors only hold for callers that
        #: were already waiting when it was raised
        self._image_errors: dict[str, tuple[BaseException, float]] = {}
        self._pull_results: dict[str, PullResult] = {}
        self._closed = False

    # ------------------------------------------------------------------ plumbing

    @property
    def docker(self) -> aiodocker.Docker:
        """The aiodocker client (created on first use, inside the running loop)."""
        if self._closed:
            raise EnvironmentError_("the docker provider is closed")
        if self._docker is None:
            self._docker = make_client(self.docker_host)
        return self._docker

    @property
    def networks(self) -> DockerNetworks:
        """Network policy machinery of this provider."""
        if self._networks is None:
            self._networks = DockerNetworks(
                self.docker, labels=run_labels(self.ctx.run_id, self._owner),
                forwarder_image=self.forwarder_image, ensure_image=self.ensure_image,
                daemon_timeout=self.daemon_timeout, close_timeout=self.close_timeout,
                relay_max_connections=self.params.relay_max_connections)
        return self._networks

    @property
    def open_environments(self) -> int:
        """How many environments this provider opened that are not closed yet."""
        return len(self._envs)

    def _local_daemon(self) -> bool:
        url = self.docker_host or os.environ.get("DOCKER_HOST")
        return url is None or url.startswith("unix://")

    def image_store(self) -> str:
        """The daemon this provider talks to (``docker_host``, else ``DOCKER_HOST``, else ``local``)."""
        return self.docker_host or os.environ.get("DOCKER_HOST") or "local"

    def builds_image(self, ref: str) -> bool:
        """Whether ``ensure_image(ref)`` without a recipe builds: the default image with ``build_context`` or
        ``dockerfile`` given."""
        return ref == self.image and bool(self.build_context or self.dockerfile)

    def check_network_policy(self, policy: NetworkPolicy) -> None:
        """ConfigError unless ``policy`` is enforceable here (every mode is; ``model`` and ``allowlist`` need a
        local daemon, ``allowlist`` valid hosts)."""
        check_policy(policy, local_daemon=self._local_daemon())

    async def ensure_model_route(self, model_host: str, model_port: int) -> tuple[str, int]:
        """Make the model endpoint reachable from ``model``-mode containers; returns the in-container
        ``(host, port)`` to use instead (rewrite the agent's base_url with it)."""
        self.check_network_policy(NetworkPolicy(mode="model"))
        return await self.networks.ensure_model_route(model_host, model_port)

    async def host_address(self) -> str:
        """This machine's address as ``public``-mode containers reach it (the default bridge's gateway), for
        a host service they must call (the model gateway listens there)."""
        self.check_network_policy(NetworkPolicy(mode="model"))  # the same need: a daemon on this machine
        return await self.networks.host_address()

    async def start(self) -> None:
        """Called by the engine before a request's first task: sweep containers and networks of dead runs.
        (The engine then calls ``ensure_image`` for the first task's image, so a missing image fails fast.)"""
        from .sweep import sweep_orphans

        report = await sweep_orphans(docker_url=self.docker_host, timeout_s=self.daemon_timeout)
        for err in report.errors:
            log.warning("orphan sweep: %s", err)
        await self.check_disk_limit()

    async def check_disk_limit(self) -> None:
        """ConfigError (naming ``environment_params.disk_limit``) when a disk limit is set and the daemon's
        storage driver cannot enforce it. Asks the daemon once."""
        if self.disk_limit is None or self._disk_limit_checked:
            return
        info = await call(self.docker.system.info, what="system info", timeout_s=self.daemon_timeout)
        unsupported = size_unsupported(info)
        if unsupported is not None:
            raise refusal(self._disk_limit_param, unsupported)
        self._disk_limit_checked = True

    # ------------------------------------------------------------------ open / close

    def _binds(self, spec: EnvOpenSpec) -> tuple[tuple[str, str, bool], ...]:
        """``spec.mounts`` as (source, target, read_only); none for a daemon on another machine."""
        return bind_mounts(spec, local_daemon=self._local_daemon())

    async def _limits(self, spec: EnvOpenSpec) -> Resources:
        """The container's CPU and memory limits: the ``cpus``/``memory`` params where set, else what the task
        asks for (``spec.resources``; its cpus at most the daemon's, which Docker would refuse)."""
        asked = spec.resources
        cpus = self.cpus if self.cpus is not None else asked.cpus if asked is not None else None
        memory = self.memory if self.memory is not None else asked.memory_bytes if asked is not None else None
        if self.cpus is None and cpus is not None:
            if self._daemon_cpus is None:
                info = await call(self.docker.system.info, what="system info", timeout_s=self.daemon_timeout)
                self._daemon_cpus = int(info.get("NCPU") or 0)  # 0: the daemon did not say
            if self._daemon_cpus and cpus > self._daemon_cpus:
                if cpus not in self._capped_cpus:
                    self._capped_cpus.add(cpus)
                    log.info("task %s asks for %g CPUs; the daemon has %d: limited to %d", spec.task_id, cpus,
                             self._daemon_cpus, self._daemon_cpus)
                cpus = float(self._daemon_cpus)
        return Resources(cpus=cpus, memory_bytes=memory)

    def _container_config(self, env: dict[str, str], image: str, workdir: str, network: str,
                          labels: dict[str, str], binds: tuple[tuple[str, str, bool], ...] = (),
                          limits: Resources = Resources()) -> dict[str, Any]:
        return container_config(env, image, workdir, network, labels, binds, limits, init=self.init, user=self.user,
                                pids_limit=self.pids_limit, disk_limit=self.disk_limit, tmpfs=self.tmpfs)

    def _shape(self, spec: EnvOpenSpec, image: str, workdir: str,
               binds: tuple[tuple[str, str, bool], ...] = (), limits: Resources = Resources()) -> Shape | None:
        """The pool shape of ``spec``'s container; None when it is never started ahead (kept, or a network of
        its own)."""
        if self._prestart is None or spec.keep or spec.network.mode not in ("none", "public"):
            return None
        return Shape(run_id=spec.run_id, image=image, workdir=workdir,
                     network=NO_NETWORK if spec.network.mode == "none" else PUBLIC_NETWORK,
                     env=tuple(sorted(spec.env.items())), labels=tuple(sorted((spec.labels or {}).items())),
                     mounts=binds, limits=limits)

    async def _start_ahead(self, shape: Shape, name: str) -> DockerContainer:
        """Create and start a container of ``shape`` named ``name`` for the pool; removed again if that fails."""
        labels = {**dict(shape.labels), LABEL_RUN_ID: shape.run_id, LABEL_TASK_ID: "-", LABEL_ROLE: PRESTART_ROLE,
                  **self._owner}
        config = self._container_config(dict(shape.env), shape.image, shape.workdir, shape.network, labels,
                                        shape.mounts, shape.limits)
        create = asyncio.ensure_future(self._create(config, name))
        try:
            container = await asyncio.shield(create)
            await call(container.start, what="container start", timeout_s=self.daemon_timeout)
            if self.user:
                await self._own_workdir(DockerEnvironment(self, container, name=name, workdir=shape.workdir,
                                                          keep=False, labels=labels, on_close=lambda _: None))
        except BaseException:
            await asyncio.shield(self._discard_failed_open(create, name))
            raise
        return container

    async def open(self, spec: EnvOpenSpec) -> DockerEnvironment:
        """Create and start a labelled container (or take one started ahead of need), apply the network
        policy, write ``spec.files``."""
        if self._closed:
            raise EnvironmentError_("the docker provider is closed")
        self.check_network_policy(spec.network)
        workdir = posixpath.normpath(posixpath.join(self.workdir, spec.workdir)) if spec.workdir \
            else self.workdir
        files = {safe_relpath(n, field=f"files[{n!r}]"): c.encode() if isinstance(c, str) else bytes(c)
                 for n, c in spec.files.items()}
        await self.check_disk_limit()
        image = await self.ensure_image(spec.image or self.image, spec.image_recipe)
        name = container_name(spec)
        labels = container_labels(spec, self._owner)
        env = env_vars(spec.env, "env")
        binds = self._binds(spec)
        limits = await self._limits(spec)
        shape = self._shape(spec, image, workdir, binds, limits)
        ahead = (self._prestart.take(shape, spec.task_id, upcoming=spec.upcoming)
                 if self._prestart is not None and shape else None)
        handle: DockerEnvironment | None = None
        create: asyncio.Future[DockerContainer] | None = None
        try:
            async with asyncio.timeout(self.open_timeout):
                if ahead is not None:  # created, started and its workdir owned already
                    name = ahead.name
                    create = asyncio.get_running_loop().create_future()
                    create.set_result(ahead.container)
                    container = ahead.container
                else:
                    # ``model``: the environment's own network; the forwarders attach to it meanwhile.
                    network = await self.networks.network_for(spec.network, key=name, labels=labels)
                    config = self._container_config(env, image, workdir, network, labels, binds, limits)
                    # The create runs as its own task: if we are cancelled while the daemon is still creating,
                    # the cleanup can wait for the id instead of racing the daemon with a remove-by-name.
                    create = asyncio.ensure_future(self._create(config, name))
                    container = await asyncio.shield(create)
                    await call(container.start, what="container start", timeout_s=self.daemon_timeout)
                handle = DockerEnvironment(self, container, name=name, workdir=workdir, keep=spec.keep,
                                           labels=labels, on_close=self._envs.discard, network=spec.network)
                self._envs.add(handle)
                if self.user and ahead is None:
                    await self._own_workdir(handle)
                if files:
                    await handle.put_archive(workdir, files_tar(files))
                await self.networks.ready(name)
        except BaseException as exc:
            # Cancelled, timed out or failed: the container must not outlive this call.
            if handle is not None:
                handle._closed = True
                self._envs.discard(handle)
            await asyncio.shield(self._discard_failed_open(create, name))
            if isinstance(exc, TimeoutError):
                raise EnvironmentError_(f"opening a container for task {spec.task_id} timed out after "
                                        f"{self.open_timeout:.0f}s") from exc
            if isinstance(exc, aiodocker.DockerError):
                raise EnvironmentError_(f"opening a container for task {spec.task_id} failed: "
                                        f"{exc.message}") from exc
            raise
        assert handle is not None
        log.debug("opened %s (%s) for task %s%s", name, handle.id[:12], spec.task_id,
                  " (started ahead)" if ahead is not None else "")
        return handle

    async def _discard_failed_open(self, create: asyncio.Future[DockerContainer] | None, name: str) -> None:
        async def remove() -> bool:
            if create is None:
                return True
            created = await settled(create, self.close_timeout + self.daemon_timeout)
            return await self.remove_container(created.id if created is not None else name)

        if self._networks is None:
            await remove()
        else:
            await self._networks.release(name, remove())

    async def _create(self, config: dict[str, Any], name: str) -> DockerContainer:
        async def op() -> DockerContainer:
            try:
                return await self.docker.containers.create(config, name=name)
            except aiodocker.DockerError as exc:
                if exc.status == 409 and "already in use" in str(exc.message):
                    # An earlier try of ours went through before its connection broke: adopt it.
                    return self.docker.containers.container(name)
                if self.disk_limit is not None and "storage-opt" in str(exc.message).lower():
                    # e.g. overlay2 on xfs without the pquota mount option
                    raise refusal(self._disk_limit_param, f"as configured ({exc.message})") from exc
                raise

        container: DockerContainer = await call(op, what="container create", timeout_s=self.daemon_timeout)
        if not re.fullmatch(r"[0-9a-f]{64}", container.id):
            info = await call(container.show, what="container inspect", timeout_s=self.daemon_timeout)
            container = self.docker.containers.container(info["Id"])
        return container

    async def _own_workdir(self, env: DockerEnvironment) -> None:
        user = str(self.user).replace("'", "")
        code = await env.root_exec(f"chown '{user}' '{env.workdir}'", timeout_s=self.daemon_timeout)
        if code != 0:
            raise EnvironmentError_(f"cannot give {env.workdir} to user {self.user!r} (chown exit {code})")

    async def remove_container(self, ref: str) -> bool:
        """Force-remove container ``ref`` (id or name), bounded by ``close_timeout``; True once it is gone
        (failures are logged, not raised)."""
        if self._docker is None:
            return False
        problem = await remove_container_until_gone(self._docker, ref, timeout_s=self.close_timeout)
        if problem is not None:
            log.warning("removing container %s failed: %s", ref[:12], problem)
        return problem is None

    async def aclose(self) -> None:
        """Close every environment still open, the network machinery, and the daemon client."""
        if self._closed and self._docker is None:
            return
        try:
            if self._prestart is not None:
                await self._prestart.aclose()
            leftovers = list(self._envs)
            if leftovers:
                log.info("docker provider: closing %d environments still open", len(leftovers))
                await asyncio.gather(*(e.close() for e in leftovers), return_exceptions=True)
            if self._networks is not None:
                await self._networks.aclose()
        finally:
            self._closed = True
            if self._docker is not None:
                docker, self._docker = self._docker, None
                await docker.close()


# the names ``agentcompass.environments.docker`` (this module before the split) had, from where they live now
__all__ = ["TIMEOUT_EXIT_CODE", "DockerEnvironment", "DockerParams", "DockerProvider", "ImagePullError", "MountPoint",
           "NonEmpty", "Platform", "PullResult", "numeric_owner", "parse_memory"]
