"""``DockerEnvironment``: one open container, as ``agentcompass.interfaces.Environment``.

Its commands run through :mod:`.exec` (one exec each); its files go in as tar archives through
``PUT /containers/{id}/archive`` (prepared by :mod:`.upload`) and come out streamed through :mod:`.archive`.
Closing removes the container through its provider (kept running when opened with ``keep``).
"""

from __future__ import annotations

import asyncio
import logging
import posixpath
import tarfile
from collections.abc import Callable, Sequence
from typing import IO, TYPE_CHECKING, Any

import aiodocker
from aiodocker.containers import DockerContainer

from ..._errors import ConfigError, EnvironmentError_
from ..._validate import env_vars, seconds
from ...interfaces import ExecResult, NetworkPolicy
from .._tar import ArchiveLimits, SpooledArchive, spool, spooled_bytes
from .api import call
from .archive import receive_archive
from .exec import root_exec, run_exec
from .upload import check_member_names, chown_tar, files_tar, numeric_owner

if TYPE_CHECKING:
    from .provider import DockerProvider

log = logging.getLogger("agentcompass.environments.docker.provider")

# One archive transfer may move up to archive_total_limit_bytes and read through members over the caps: it is
# bounded as a whole by this, and a stalled stream much sooner (no data for daemon_timeout).
_TRANSFER_TRY_S = 600.0


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
        # Under ``allowlist`` HTTP(S) clients go through the egress proxy (given variables of the same name
        # win; nothing else has a route out anyway).
        proxy = self._provider.networks.proxy_env() if self.network.mode == "allowlist" else {}
        return await run_exec(self._container, self._daemon, argv, name=self.name, workdir=workdir,
                              env={**proxy, **env_vars(env or {}, "env")}, limit=limit,
                              output_limit=self._provider.output_limit_bytes, cwd=cwd)

    async def root_exec(self, script: str, *, timeout_s: float) -> int:
        """Run a small ``/bin/sh -c`` script as root, without output; its exit code. TimeoutError if slow."""
        return await root_exec(self._container, script, timeout_s=timeout_s)

    # ------------------------------------------------------------------ files

    async def _put(self, path: str, tar: bytes | IO[bytes]) -> None:
        params: dict[str, str] = {"path": path}
        owner = numeric_owner(self._provider.user)
        owned: IO[bytes] | None = None
        if owner is not None:
            owned = await asyncio.to_thread(chown_tar, tar, owner)
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
        tar_bytes = files_tar({base: payload})
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
        await asyncio.to_thread(check_member_names, tar_bytes)
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


__all__ = ["DockerEnvironment"]
