"""The ``docker`` environment provider: one container per environment, driven over the Engine API.

Containers run an init process and a do-nothing keep-alive command; every command is a separate exec.
Each exec announces its pid (= its process group, runc makes every exec a session leader) on stderr
before it runs the command, so a timeout kills the whole group inside the container through a second
exec. Containers carry ``agentcompass.*`` labels (run, task, role, owner pid and host) for the sweep.
"""

from __future__ import annotations

import asyncio
import io
import logging
import os
import posixpath
import re
import tarfile
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from typing import IO, Annotated, Any, ClassVar

import aiodocker
import msgspec
from aiodocker.containers import DockerContainer

from ..._errors import ConfigError, EnvironmentError_
from ..._validate import Count, Seconds, Size, env_vars, seconds, size_bytes
from ...interfaces import ComponentContext, EnvOpenSpec, ExecResult, ImageRecipe, NetworkPolicy, Resources
from .._output import CappedBuffer
from .._tar import (
    ArchiveLimits,
    ArchiveParams,
    SpooledArchive,
    forget_members,
    make_tar,
    safe_relpath,
    spool,
    spooled_bytes,
)
from ..base import ALL_NETWORK_MODES, EnvironmentProvider, ProviderCapabilities
from .api import (
    DEFAULT_BASE_IMAGE,
    LABEL_KEEP,
    LABEL_ROLE,
    LABEL_RUN_ID,
    LABEL_TASK_ID,
    call,
    image_exists,
    make_client,
    owner_labels,
    settled,
)
from .api import remove_container as remove_container_until_gone
from .archive import receive_archive
from .images import build_lock
from .network import NO_NETWORK, PUBLIC_NETWORK, DockerNetworks, check_policy, run_labels
from .prestart import PRESTART_ROLE, PrestartPool, Shape
from .pull import ImagePullError, ProgressCallback, PullOptions, PullResult, check_registry_env, pull_image
from .storage import refusal, size_unsupported, storage_opt

log = logging.getLogger("agentcompass.environments.docker.provider")

TIMEOUT_EXIT_CODE = 124
_EXEC_MARKER = "AGENTCOMPASS_EXEC"
# Print our pid (the process group leader) on stderr, then become the command.
_WRAPPER = 'echo "$$" >&2; exec "$@"'
_KEEPALIVE = ["tail", "-f", "/dev/null"]
_KILL_GRACE_S = 5.0
# One archive transfer may move up to archive_total_limit_bytes and read through members over the caps: it is
# bounded as a whole by this, and a stalled stream much sooner (no data for daemon_timeout).
_TRANSFER_TRY_S = 600.0
_EXIT_POLL_S = 3.0

_MAX_PRESTART = 64

_NAME_RE = re.compile(r"[^a-zA-Z0-9_.-]+")


# ----------------------------------------------------------------------------- params


def _field(key: str) -> str:
    return f"environment.params.{key}"


def parse_memory(value: Any, key: str = "memory") -> int:
    """``"2g"``, ``"512m"``, ``"1.5GiB"`` or an int of bytes -> bytes (powers of 1024); ``key`` names the
    param in the error."""
    return size_bytes(value, _field(key), label=f"environment docker: {key}")


_MAX_CPUS = 4096.0
NonEmpty = Annotated[str, msgspec.Meta(min_length=1)]
#: a tmpfs mount point: an absolute path without the ``,`` and ``:`` of docker's mount syntax
MountPoint = Annotated[str, msgspec.Meta(pattern=r"^/[^,:]*$", description="an absolute path without ',' or ':'")]
Platform = Annotated[str, msgspec.Meta(pattern=r"^[a-z0-9_]+(/[a-zA-Z0-9_.-]+){0,2}$",
                                       description="os[/arch[/variant]] (e.g. linux/amd64)")]


class DockerParams(ArchiveParams, frozen=True):
    """``docker`` params: the image and resource limits of each container, the daemon to use and how long
    to wait for it, and the archive caps (see docs/environments.md). ``pids`` is ``pids_limit``'s short name."""

    image: NonEmpty | None = None
    cpus: Annotated[float, msgspec.Meta(gt=0, le=_MAX_CPUS)] | None = None
    memory: Size | None = None
    pids_limit: Count | None = None
    pids: Count | None = None
    user: NonEmpty | None = None
    workdir: NonEmpty | None = None
    docker_host: NonEmpty | None = None
    open_timeout: Seconds = 120.0
    exec_default_timeout: Seconds = 600.0
    close_timeout: Seconds = 30.0
    daemon_timeout: Seconds = 60.0
    init: bool = True
    build_context: NonEmpty | None = None
    dockerfile: NonEmpty | None = None
    pull_timeout: Seconds | None = None
    pull_inactivity_timeout: Seconds = 120.0
    pull_retries: Annotated[int, msgspec.Meta(ge=0, le=100)] = 3
    platform: Platform | None = None
    build_timeout: Seconds = 1800.0
    output_limit_bytes: Annotated[int, msgspec.Meta(ge=64)] = 1 << 20
    forwarder_image: NonEmpty | None = None
    disk_limit: Size | None = None
    tmpfs: dict[MountPoint, Size] | None = None
    #: containers started ahead of need per container shape (0: none); see docker_prestart
    prestart: Annotated[int, msgspec.Meta(ge=0, le=_MAX_PRESTART)] = 2


def _safe_name(text: str, limit: int) -> str:
    return _NAME_RE.sub("_", text)[:limit].strip("_.-") or "x"


def _files_tar(files: dict[str, bytes]) -> bytes:
    """A tar of ``files`` (safe relative path -> bytes), stamped with the current time."""
    now = int(time.time())
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, now
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _tar_source(tar: bytes | IO[bytes]) -> IO[bytes]:
    if isinstance(tar, bytes | bytearray | memoryview):
        return io.BytesIO(tar)
    tar.seek(0)
    return tar


def _chown_tar(tar: bytes | IO[bytes], owner: tuple[int, int]) -> IO[bytes]:
    """The same archive, in an unlinked temp file, with every member owned by ``owner`` (uid, gid)."""
    out = tempfile.TemporaryFile()
    try:
        with tarfile.open(fileobj=_tar_source(tar), mode="r|*") as src, \
                tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as dst:
            for member in src:
                member.uid, member.gid = owner
                member.uname = member.gname = ""
                dst.addfile(member, src.extractfile(member) if member.isfile() else None)
                forget_members(src)
                forget_members(dst)
    except BaseException:
        out.close()
        raise
    return out


def numeric_owner(user: str | None) -> tuple[int, int] | None:
    """``"1000"`` / ``"1000:1000"`` -> (uid, gid); None for root, unset or named users."""
    match = re.fullmatch(r"(\d+)(?::(\d+))?", user or "")
    if not match or user in ("0", "0:0"):
        return None
    uid = int(match.group(1))
    return uid, int(match.group(2)) if match.group(2) is not None else uid


#: a build is tried this often when a layer it reused vanished under it (see ``_build``)
_BUILD_TRIES = 3
_VANISHED_LAYER = ("unknown parent image ID", "No such image", "layer does not exist")


def _check_member_names(tar: bytes | IO[bytes]) -> None:
    """Refuse members with absolute names or ``..``, hard links to outside the target, and members beneath a link
    of the same archive (written through it): an archive's files land inside its target directory. A symlink may
    point anywhere: the daemon extracts inside the container, where it is just a link (a workspace holding a
    virtualenv has absolute ones), and nothing of the archive is written through it."""
    links: set[str] = set()
    try:
        with tarfile.open(fileobj=_tar_source(tar), mode="r|*") as tf:
            for member in tf:
                parts = member.name.split("/")
                if member.name.startswith("/") or ".." in parts:
                    raise ConfigError(f"archive member {member.name!r} would leave the target directory",
                                      field="archive")
                if member.ischr() or member.isblk() or member.isfifo():
                    raise ConfigError(f"archive member {member.name!r} is a device or fifo: refused",
                                      field="archive")
                name = posixpath.normpath(member.name)  # "./a/b/" -> "a/b"
                parts = name.split("/")
                if any("/".join(parts[:i]) in links for i in range(1, len(parts))):
                    raise ConfigError(f"archive member {member.name!r} lies beneath a link of the archive",
                                      field="archive")
                if member.issym() or member.islnk():
                    base = posixpath.dirname(name) if member.issym() else ""
                    target = posixpath.normpath(posixpath.join(base, member.linkname))
                    if member.islnk() and (member.linkname.startswith("/") or target == ".."
                                           or target.startswith("../")):
                        raise ConfigError(f"archive link {member.name!r} -> {member.linkname!r} points outside "
                                          f"the target directory", field="archive")
                    links.add(name)
                forget_members(tf)
    except tarfile.TarError as exc:
        raise ConfigError(f"archive: not a readable tar archive ({exc})", field="archive") from exc


# ----------------------------------------------------------------------------- environment


class DockerEnvironment:
    """An open container. Implements ``agentcompass.interfaces.Environment``."""

    def __init__(self, provider: DockerProvider, container: DockerContainer, *, name: str, workdir: str,
                 keep: bool, labels: dict[str, str], on_close: Callable[[DockerEnvironment], None],
                 network: NetworkPolicy | None = None) -> None:
        self.id = container.id
        self.name = name
        self.workdir = workdir
        self.labels = labels
        self._provider = provider
        self._container = container
        self._keep = keep
        self._on_close = on_close
        self._closed = False
        self._close_task: asyncio.Task[None] | None = None
        self.network = network or NetworkPolicy()

    def __repr__(self) -> str:
        return f"DockerEnvironment(id={self.id[:12]!r}, name={self.name!r}, workdir={self.workdir!r})"

    @property
    def closed(self) -> bool:
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise EnvironmentError_(f"environment {self.name} is closed")

    def _path(self, path: str, field: str = "path") -> str:
        if not isinstance(path, str) or not path or "\0" in path:
            raise ConfigError(f"{field}: expected a non-empty path str, got {path!r}", field=field)
        return posixpath.normpath(posixpath.join(self.workdir, path))

    async def _daemon(self, op: Callable[[], Any], what: str, *, retry_timeouts: bool = True,
                      timeout_s: float | None = None) -> Any:
        try:
            return await call(op, what=what, timeout_s=timeout_s or self._provider.daemon_timeout,
                              retry_timeouts=retry_timeouts)
        except aiodocker.DockerError as exc:
            gone = "No such container" in str(exc.message) or "is not running" in str(exc.message)
            if exc.status in (404, 409) and gone:
                raise EnvironmentError_(f"environment {self.name}: container is gone "
                                        f"({exc.message})") from exc
            raise

    # ------------------------------------------------------------------ commands

    async def exec(self, cmd: str | Sequence[str], *, timeout: float | None = None,
                   cwd: str | None = None, env: dict[str, str] | None = None) -> ExecResult:
        """Run ``cmd`` (a str through ``/bin/sh -c``, a list directly); a timeout kills its process group."""
        self._check_open()
        if isinstance(cmd, str):
            argv = ["/bin/sh", "-c", cmd]
        else:
            argv = list(cmd)
            if not argv or not all(isinstance(a, str) for a in argv):
                raise ConfigError(f"cmd: expected a str or a non-empty list of str, got {cmd!r}", field="cmd")
        if timeout is None:
            limit = self._provider.exec_default_timeout
        else:
            limit = seconds(timeout, "timeout")
        workdir = self._path(cwd, "cwd") if cwd is not None else self.workdir
        key = uuid.uuid4().hex
        # Under ``allowlist`` HTTP(S) clients go through the egress proxy (given variables of the same name
        # win; nothing else has a route out anyway).
        proxy = self._provider.networks.proxy_env() if self.network.mode == "allowlist" else {}
        exec_env = {**proxy, **env_vars(env or {}, "env"), _EXEC_MARKER: key}
        out = CappedBuffer(self._provider.output_limit_bytes)
        err = CappedBuffer(self._provider.output_limit_bytes)
        state: dict[str, Any] = {"pid": None, "exec": None}
        started = time.monotonic()
        deadline = asyncio.timeout(limit)
        try:
            async with deadline:
                await self._run(argv, workdir, exec_env, out, err, state)
        except TimeoutError:
            if not deadline.expired():
                raise
        except BaseException:
            # Cancelled or failed half-way: never leave the command running in the container.
            await asyncio.shield(self._kill(state["pid"], key))
            raise
        timed_out = deadline.expired()
        if timed_out:
            await asyncio.shield(self._kill(state["pid"], key))
            exit_code: int | None = TIMEOUT_EXIT_CODE
        else:
            exit_code = await self._exit_code(state["exec"])
            if state["pid"] is None and exit_code == 126 and b"chdir to cwd" in out.getvalue():
                # The runtime could not even start the command: same error as the local provider.
                raise EnvironmentError_(f"cwd {cwd!r} is not a directory in environment {self.name}")
        return ExecResult(
            exit_code=exit_code if exit_code is not None else -1,
            stdout=out.text(), stderr=err.text(), timed_out=timed_out,
            duration_s=time.monotonic() - started, truncated=out.truncated or err.truncated,
            output_bytes=out.total + err.total)

    async def _run(self, argv: list[str], workdir: str, env: dict[str, str], out: CappedBuffer,
                   err: CappedBuffer, state: dict[str, Any]) -> None:
        # Note: when the command leaves background children holding its output, the daemon keeps the
        # stream open ~2 s after the command exits. Closing our end earlier only makes the *next* exec
        # on this container wait for the daemon, so the stream is read to its end.
        full = ["/bin/sh", "-c", _WRAPPER, "sh", *argv]
        ex = await self._daemon(lambda: self._container.exec(full, environment=env, workdir=workdir),
                                "exec create", retry_timeouts=False)
        state["exec"] = ex
        stream = ex.start(detach=False)
        head: bytearray | None = bytearray()  # stderr until our pid line is complete
        try:
            while (msg := await stream.read_out()) is not None:
                if msg.stream == 1:
                    out.feed(msg.data)
                elif head is None:
                    err.feed(msg.data)
                else:
                    head += msg.data
                    line, nl, rest = bytes(head).partition(b"\n")
                    if nl:
                        head = None
                        if line.strip().isdigit():
                            state["pid"] = int(line)
                            err.feed(rest)
                        else:
                            err.feed(line + nl + rest)
            if head:
                err.feed(bytes(head))
        finally:
            await stream.close()

    async def _exit_code(self, ex: Any) -> int | None:
        """The exit code of a finished exec (the daemon may lag behind the end of the stream)."""
        loop = asyncio.get_running_loop()
        until = loop.time() + _EXIT_POLL_S
        while True:
            info = await self._daemon(ex.inspect, "exec inspect")
            if not info.get("Running") or loop.time() > until:
                code = info.get("ExitCode")
                return int(code) if code is not None else None
            await asyncio.sleep(0.02)

    async def _kill(self, pid: int | None, key: str) -> None:
        """Kill the exec's process group and anything else carrying its marker, through a second exec."""
        script = (
            f'p={pid or ""}; if [ -n "$p" ] && [ "$p" -gt 1 ]; then kill -s KILL -$p 2>/dev/null; '
            'kill -s KILL $p 2>/dev/null; fi; '
            'for d in /proc/[0-9]*; do '
            f'case "$(tr "\\0" "\\n" < $d/environ 2>/dev/null)" in *"{_EXEC_MARKER}={key}"*) '
            'kill -s KILL "${d#/proc/}" 2>/dev/null;; esac; done; true')
        try:
            await self.root_exec(script, timeout_s=_KILL_GRACE_S)
        except (TimeoutError, aiodocker.DockerError, OSError) as exc:
            log.warning("environment %s: killing a timed-out command failed: %s", self.name, exc)

    async def root_exec(self, script: str, *, timeout_s: float) -> int:
        """Run a small ``/bin/sh -c`` script as root, without output; its exit code. TimeoutError if slow."""
        async with asyncio.timeout(timeout_s):
            ex = await self._container.exec(["/bin/sh", "-c", script], user="0", stdout=False, stderr=False)
            await ex.start(detach=True)
            while True:
                info = await ex.inspect()
                code = info.get("ExitCode")
                if not info.get("Running") and code is not None:
                    return int(code)
                await asyncio.sleep(0.02)

    # ------------------------------------------------------------------ files

    async def _put(self, path: str, tar: bytes | IO[bytes]) -> None:
        params: dict[str, str] = {"path": path}
        owner = numeric_owner(self._provider.user)
        owned: IO[bytes] | None = None
        if owner is not None:
            owned = await asyncio.to_thread(_chown_tar, tar, owner)
        elif self._provider.user and self._provider.user not in ("0", "root"):
            # A named user: the daemon looks it up in the container's /etc/passwd.
            params["copyUIDGID"] = "1"
        data = owned if owned is not None else tar

        async def op() -> None:
            if not isinstance(data, bytes):
                data.seek(0)  # a file is streamed from its start, on every try
            async with self._container.docker._query(
                    f"containers/{self.id}/archive", method="PUT", params=params, data=data,
                    headers={"Content-Type": "application/x-tar"}):
                pass

        try:
            # a file (a collected workspace) may be large: bounded as a transfer, not as one daemon call
            await self._daemon(op, "archive put", timeout_s=None if isinstance(data, bytes) else
                               max(_TRANSFER_TRY_S, self._provider.daemon_timeout))
        finally:
            if owned is not None:
                owned.close()

    async def _get(self, path: str, out: SpooledArchive, limits: ArchiveLimits, *, strip_top_dir: bool) -> None:
        """Stream the archive of ``path`` into ``out`` under ``limits`` (never held in memory)."""
        async def op() -> None:
            await receive_archive(self._container.docker, self.id, path, out, limits, strip_top_dir=strip_top_dir,
                                  read_timeout_s=self._provider.daemon_timeout)

        try:
            await self._daemon(op, "archive get", retry_timeouts=False,
                               timeout_s=max(_TRANSFER_TRY_S, self._provider.daemon_timeout))
        except aiodocker.DockerError as exc:
            if exc.status == 404:
                raise FileNotFoundError(f"no such file or directory in {self.name}: {path!r}") from exc
            raise

    async def _mkdir(self, path: str) -> None:
        res = await self.exec(["mkdir", "-p", path], timeout=self._provider.daemon_timeout)
        if res.exit_code != 0:
            raise EnvironmentError_(f"environment {self.name}: cannot create {path!r}: {res.output.strip()}")

    async def write_file(self, path: str, data: bytes | str) -> None:
        """Write ``data`` (str as UTF-8) to ``path`` (relative to the workdir), creating parent dirs."""
        self._check_open()
        target = self._path(path)
        payload = data.encode() if isinstance(data, str) else bytes(data)
        parent, base = posixpath.split(target)
        if not base:
            raise ConfigError(f"path: {path!r} names a directory, not a file", field="path")
        tar_bytes = _files_tar({base: payload})
        try:
            await self._put(parent, tar_bytes)
        except aiodocker.DockerError as exc:
            if exc.status != 404:
                raise EnvironmentError_(f"writing {path!r} in {self.name} failed: {exc.message}") from exc
            await self._mkdir(parent)
            await self._put(parent, tar_bytes)

    async def read_file(self, path: str) -> bytes:
        """The bytes of ``path``; FileNotFoundError if it does not exist, IsADirectoryError for a dir, OSError
        if it is larger than ``archive_file_limit_bytes``."""
        self._check_open()
        return await self._read_file(self._path(path), path, hops=0)

    async def _read_file(self, target: str, path: str, hops: int) -> bytes:
        cap = self._provider.archive_limits.file_bytes
        with SpooledArchive() as archive:
            # one file: the total only needs room for its headers (a directory's contents are cut short)
            await self._get(target, archive, ArchiveLimits(cap, cap + (1 << 20)), strip_top_dir=False)
            if archive.skipped and archive.skipped[0].name == posixpath.basename(target) \
                    and archive.skipped[0].reason == "file_limit":
                raise OSError(f"{path!r} in {self.name} is larger than archive_file_limit_bytes ({cap}); "
                              "read it in parts with a command instead")
            data, link = await asyncio.to_thread(self._first_member, archive, path)
        if link is None:
            return data
        # get_archive does not follow a final symlink: read its target instead.
        if hops >= 16:
            raise OSError(f"too many levels of symbolic links reading {path!r} in {self.name}")
        return await self._read_file(posixpath.normpath(posixpath.join(posixpath.dirname(target), link)), path,
                                     hops + 1)

    def _first_member(self, archive: SpooledArchive, path: str) -> tuple[bytes, str | None]:
        """(content, None) of the archive's single file, or (b"", link target) for a symlink."""
        with tarfile.open(fileobj=archive.rewind(), mode="r:*") as tf:
            member = tf.next()
            if member is None:
                raise FileNotFoundError(f"no such file in {self.name}: {path!r}")
            if member.isdir():
                raise IsADirectoryError(f"{path!r} is a directory in {self.name}")
            if member.issym():
                return b"", member.linkname
            fh = tf.extractfile(member)
            if fh is None:
                raise EnvironmentError_(f"{path!r} in {self.name} is not a regular file")
            return fh.read(), None

    async def put_archive(self, path: str, tar_bytes: bytes | IO[bytes]) -> None:
        """Extract a tar (bytes, or a file object streamed from its start) of a directory's contents into
        directory ``path``, creating it if needed."""
        self._check_open()
        target = self._path(path)
        await asyncio.to_thread(_check_member_names, tar_bytes)
        try:
            await self._put(target, tar_bytes)
        except aiodocker.DockerError as exc:
            if exc.status != 404:
                raise EnvironmentError_(f"extracting into {path!r} in {self.name} failed: "
                                        f"{exc.message}") from exc
            await self._mkdir(target)
            await self._put(target, tar_bytes)

    async def get_archive_file(self, path: str) -> SpooledArchive:
        """A tar of directory ``path``'s contents (names relative to it) or of the single file ``path``,
        streamed from the daemon to an unlinked temp file under the archive limits (``skipped`` lists what
        they left out)."""
        self._check_open()
        return await spool(lambda archive: self._get(self._path(path), archive, self._provider.archive_limits,
                                                     strip_top_dir=True))

    async def get_archive(self, path: str) -> bytes:
        """``get_archive_file``'s tar as bytes (at most ``archive_total_limit_bytes``)."""
        return await spooled_bytes(self.get_archive_file(path))

    # ------------------------------------------------------------------ network, lifecycle

    async def set_network_policy(self, policy: NetworkPolicy) -> None:
        """Attach the live container to exactly the networks ``policy`` allows."""
        self._check_open()
        self._provider.check_network_policy(policy)
        self.network = policy
        await self._provider.networks.apply(self.id, policy, key=self.name, labels=self.labels)

    async def close(self) -> None:
        """Remove the container (kept running when opened with ``keep``). Idempotent, bounded in time."""
        if self._close_task is None:
            self._closed = True
            self._close_task = asyncio.ensure_future(self._do_close())
        # Shielded: a cancelled caller must not abort the removal half-way.
        await asyncio.shield(self._close_task)

    async def _do_close(self) -> None:
        try:
            networks = self._provider._networks
            if self._keep:
                if networks is not None:
                    networks.keep(self.name)
                log.warning("environment %s kept: container %s (%s) is still running", self.name,
                            self.id[:12], self.name)
                return
            removal = self._provider.remove_container(self.id)
            if networks is None:
                await removal
            else:  # and hand its model-mode network on
                await networks.release(self.name, removal)
        finally:
            self._on_close(self)


# ----------------------------------------------------------------------------- provider


class DockerProvider(EnvironmentProvider):
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
                              field=_field("pids"))
        self.image: str = p.image or DEFAULT_BASE_IMAGE
        self.forwarder_image: str = p.forwarder_image or DEFAULT_BASE_IMAGE
        self.cpus: float | None = p.cpus
        self.memory: int | None = parse_memory(p.memory) if p.memory is not None else None
        self.pids_limit: int | None = p.pids if p.pids is not None else p.pids_limit
        self.user: str | None = p.user
        workdir = p.workdir or "/workspace"
        if not workdir.startswith("/"):
            raise ConfigError(f"environment docker: workdir must be an absolute path, got {workdir!r}",
                              field=_field("workdir"))
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
                daemon_timeout=self.daemon_timeout, close_timeout=self.close_timeout)
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

    # ------------------------------------------------------------------ images

    async def ensure_image(self, image: str | None = None, recipe: ImageRecipe | None = None, *,
                           on_pull_progress: ProgressCallback | None = None) -> str:
        """Make sure ``image`` (default: the ``image`` param) exists locally.

        Builds it from ``recipe`` (a task's) or from the ``build_context``/``dockerfile`` params when given,
        else pulls it (``docker_pull``: progress to ``on_pull_progress``, no whole-pull bound unless
        ``pull_timeout``, :class:`ImagePullError` with a ``kind`` on failure). Once per image; a failure is
        remembered so concurrent opens fail fast with the same error; a retryable pull failure (stalled,
        unreachable) is tried again by the next caller.
        """
        ref = image or self.image
        if ref in self._images_ready:
            return ref
        called = time.monotonic()
        self._raise_remembered(ref, called)
        async with build_lock(f"image:{ref}"):  # shared by the providers of this loop
            if ref in self._images_ready:
                return ref
            self._raise_remembered(ref, called)
            try:
                if await image_exists(self.docker, ref, timeout_s=self.daemon_timeout):
                    self._pull_results.setdefault(ref, PullResult(image=ref, source="present"))
                elif recipe is not None:
                    await self._build(ref, recipe.context_dir, recipe.dockerfile)
                elif (self.build_context or self.dockerfile) and ref == self.image:
                    await self._build(ref, *await asyncio.to_thread(self._build_inputs))
                else:
                    await self._pull(ref, on_pull_progress)
            except (EnvironmentError_, ConfigError) as exc:
                self._image_errors[ref] = (exc, time.monotonic())
                raise
            self._image_errors.pop(ref, None)
            self._images_ready.add(ref)
            return ref

    def _raise_remembered(self, ref: str, called: float) -> None:
        remembered = self._image_errors.get(ref)
        if remembered is None:
            return
        exc, failed_at = remembered
        if not (isinstance(exc, ImagePullError) and exc.retryable) or failed_at >= called:
            raise exc

    def pull_stats(self, image: str) -> PullResult | None:
        """How ``image`` came to be present for this provider (``present``, ``pulled`` with bytes, seconds and
        attempts, or ``built``); None before ``ensure_image`` made it ready."""
        return self._pull_results.get(image)

    def _build_inputs(self) -> tuple[str, str]:
        """(context dir, dockerfile relative to it) from the params; ConfigError if missing."""
        context = self.build_context or os.path.dirname(os.path.abspath(self.dockerfile or "."))
        if not os.path.isdir(context):
            raise ConfigError(f"environment docker: build_context {context!r} is not a directory",
                              field=_field("build_context"))
        dockerfile = self.dockerfile or "Dockerfile"
        if os.path.isabs(dockerfile):
            dockerfile = os.path.relpath(dockerfile, context)
        if not os.path.isfile(os.path.join(context, dockerfile)):
            raise ConfigError(f"environment docker: dockerfile {dockerfile!r} not found in {context!r}",
                              field=_field("dockerfile"))
        return context, dockerfile

    async def _build(self, ref: str, context: str, dockerfile: str) -> None:
        log.info("building image %s from %s", ref, context)
        tar_bytes = await asyncio.to_thread(make_tar, context)
        started = time.monotonic()
        try:
            async with asyncio.timeout(self.build_timeout):
                for attempt in range(1, _BUILD_TRIES + 1):
                    try:
                        await self.docker.images.build(fileobj=io.BytesIO(tar_bytes), encoding="identity",
                                                       tag=ref, path_dockerfile=dockerfile, rm=True, forcerm=True)
                        break
                    except aiodocker.DockerError as exc:
                        # Another process removed an image whose layers this build's cache was reusing (two
                        # runs building the same recipe; one ends and drops its image): building again works.
                        if attempt == _BUILD_TRIES or not any(m in str(exc.message) for m in _VANISHED_LAYER):
                            raise
                        log.warning("building image %s: %s; building it again (try %d of %d)", ref, exc.message,
                                    attempt + 1, _BUILD_TRIES)
        except TimeoutError as exc:
            raise EnvironmentError_(f"building image {ref} timed out after "
                                    f"{self.build_timeout:.0f}s") from exc
        except aiodocker.DockerError as exc:
            raise EnvironmentError_(f"building image {ref} from {context} failed: {exc.message}") from exc
        log.info("built image %s in %.1fs", ref, time.monotonic() - started)
        self._pull_results[ref] = PullResult(image=ref, source="built", seconds=round(time.monotonic() - started, 3))

    async def _pull(self, ref: str, on_progress: ProgressCallback | None) -> None:
        try:
            result = await pull_image(self.docker, ref, self.pull_options, on_progress=on_progress)
        except ImagePullError as exc:
            if ref.startswith("agentcompass/base:"):
                # the base images are built locally, never published
                flag = "" if ref == DEFAULT_BASE_IMAGE else f" --tag {ref}"
                raise ImagePullError(f"{exc}; build it with `agentcompass images build-base{flag}`",
                                     kind=exc.kind, image=ref) from exc
            raise
        self._pull_results[ref] = result

    async def image_size(self, ref: str) -> int | None:
        """The size in bytes of image ``ref`` on the daemon, or None when it has no such image."""
        try:
            info = await call(lambda: self.docker.images.inspect(ref), what=f"image inspect {ref}",
                              timeout_s=self.daemon_timeout)
        except aiodocker.DockerError as exc:
            if exc.status == 404:
                return None
            raise
        return int(info.get("Size") or 0)

    async def remove_image(self, ref: str) -> int:
        """Remove image ``ref``; the bytes freed (its size; layers shared with other images stay). 0, without
        an error, when it is gone already or a container still uses it (containers started ahead of need do not
        count: they are removed first)."""
        self._images_ready.discard(ref)
        if self._prestart is not None:
            await self._prestart.drop_image(ref)
        size = await self.image_size(ref)
        if size is None:
            return 0
        users = await call(lambda: self.docker.containers.list(all=True, filters={"ancestor": [ref]}),
                           what="container list", timeout_s=self.daemon_timeout)
        if users:
            log.info("image %s kept: %d container(s) still use it", ref, len(users))
            return 0
        try:
            await call(lambda: self.docker.images.delete(ref, force=False), what=f"image remove {ref}",
                       timeout_s=self.daemon_timeout)
        except aiodocker.DockerError as exc:
            if exc.status in (404, 409):  # gone, or in use after all (a container created meanwhile)
                return 0
            raise
        return size

    async def disk_free_bytes(self) -> int | None:
        """Free bytes on the daemon's data root (``DockerRootDir``) for a daemon on this machine, else None."""
        if not self._local_daemon():
            return None
        info = await call(self.docker.system.info, what="system info", timeout_s=self.daemon_timeout)
        root = info.get("DockerRootDir")
        if not isinstance(root, str) or not root:
            return None
        try:
            st = await asyncio.to_thread(os.statvfs, root)
        except OSError:  # a daemon in a VM or another mount namespace: its root is not ours to stat
            return None
        return st.f_bavail * st.f_frsize

    # ------------------------------------------------------------------ open / close

    def _labels(self, spec: EnvOpenSpec) -> dict[str, str]:
        extra = spec.labels or {}
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in extra.items()):
            raise ConfigError("labels: expected a mapping of str to str", field="labels")
        labels = {**extra, LABEL_RUN_ID: spec.run_id, LABEL_TASK_ID: spec.task_id, LABEL_ROLE: spec.role,
                  **self._owner}
        if spec.keep:
            labels[LABEL_KEEP] = "1"
        return labels

    def _binds(self, spec: EnvOpenSpec) -> tuple[tuple[str, str, bool], ...]:
        """``spec.mounts`` as (source, target, read_only); none for a daemon on another machine (its paths are
        not ours: the harness copies what it needs instead)."""
        if not spec.mounts:
            return ()
        if not self._local_daemon():
            log.info("docker_host is not local: mounts %s are not bound", [m.target for m in spec.mounts])
            return ()
        return tuple((m.source, m.target, m.read_only) for m in spec.mounts)

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
        host: dict[str, Any] = {"Init": self.init, "NetworkMode": network}
        if binds:
            host["Mounts"] = [{"Type": "bind", "Source": src, "Target": dst, "ReadOnly": ro}
                              for src, dst, ro in binds]
        if limits.cpus is not None:
            host["NanoCpus"] = int(limits.cpus * 1e9)
        if limits.memory_bytes is not None:
            host["Memory"] = limits.memory_bytes
            host["MemorySwap"] = limits.memory_bytes  # no swap beyond the limit
        if self.pids_limit is not None:
            host["PidsLimit"] = self.pids_limit
        if self.disk_limit is not None:
            host["StorageOpt"] = storage_opt(self.disk_limit)
        if self.tmpfs:
            host["Tmpfs"] = {path: f"size={size}" for path, size in self.tmpfs.items()}
        return {
            "Image": image, "Entrypoint": _KEEPALIVE, "Cmd": None, "WorkingDir": workdir,
            "Env": [f"{k}={v}" for k, v in env.items()], "Labels": labels,
            "User": self.user or "", "Tty": False, "OpenStdin": False, "AttachStdout": False,
            "AttachStderr": False, "HostConfig": host,
        }

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
        name = "-".join(["ac", _safe_name(spec.run_id, 20), _safe_name(spec.task_id, 40), spec.role[:1],
                         uuid.uuid4().hex[:10]])
        labels = self._labels(spec)
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
                    await handle.put_archive(workdir, _files_tar(files))
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
