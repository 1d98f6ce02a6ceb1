"""The ``local`` provider: a fresh temp directory per environment, commands run as host subprocesses.

Not a sandbox: commands run as the engine's user with the host's network, so only network policy
``public`` is accepted. What it does guarantee is cleanup: every command runs in its own process group,
which is SIGKILLed on timeout or cancellation; where a cgroup is writable (``_cgroup``) every process a
command starts is in the environment's cgroup, capped at ``pids_limit``, and ``close()`` kills all of it;
``close()`` also kills what carries the environment's marker variable, then removes the directory.

Exit codes: the command's own code; ``-N`` when it died of signal N; ``124`` (like coreutils ``timeout``)
with ``timed_out=True`` when it ran past its timeout; ``127``/``126`` when a list command's program is
missing / not executable.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import re
import shutil
import signal
import stat
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import IO, Annotated, Any, ClassVar, TypeVar

import msgspec

from ..._errors import ConfigError, EnvironmentError_
from ..._validate import Seconds, env_vars, seconds
from ...interfaces import ComponentContext, EnvOpenSpec, ExecResult, NetworkPolicy
from .._output import CappedBuffer
from .._tar import (
    ArchiveLimits,
    ArchiveParams,
    SpooledArchive,
    extract_tar,
    safe_relpath,
    spool,
    spooled_bytes,
    write_tree,
)
from ..base import EnvironmentProvider, ProviderCapabilities
from .cgroup import JOIN_FAILED_EXIT, JOIN_FAILED_MARK, EnvCgroup, Support, support, sweep_stale
from .pidns import PidNamespace
from .pidns import available as pidns_unavailable_reason

log = logging.getLogger(__name__)
_T = TypeVar("_T")

#: exit code reported for a command killed by its timeout (as coreutils ``timeout`` does).
TIMEOUT_EXIT_CODE = 124
#: environment variable carrying the environment id into every process it starts.
MARKER_VAR = "AGENTCOMPASS_LOCAL_ENV"

_DEFAULT_PIDS_LIMIT = 512
_MAX_PIDS_LIMIT = 4_194_304  # the kernel's PID_MAX_LIMIT
_DEFAULT_OUTPUT_LIMIT = 128 * 1024  # per stream: 256 KiB kept per command at most
_MAX_OUTPUT_LIMIT = 1 << 30  # per stream: what one command may keep in memory
_DEFAULT_TIMEOUT_S = 300.0
# After the command exits, how long a background process still holding stdout/stderr may keep us reading.
_DRAIN_GRACE_S = 0.5
_REAP_WAIT_S = 5.0
_CLOSE_TIMEOUT_S = 60.0
_FILE_OPS_WAIT_S = 20.0  # within the close's bound: a write or one archive member takes far less


_HAVE_PROC = os.path.isdir("/proc")
# runs the cgroup prelude before exec'ing the command: the quickest POSIX shell to start (else the provider's)
_PRELUDE_SHELL = "/bin/sh" if os.access("/bin/sh", os.X_OK) else None


def _default_shell() -> str:
    return "/bin/bash" if os.access("/bin/bash", os.X_OK) else "/bin/sh"


def _inside(root: str, path: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _killpg(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _kill_marked(marker: bytes, rounds: int = 5, *, prefix: bool = False) -> int:
    """SIGKILL every process whose environment holds ``marker`` (or, with ``prefix``, an entry starting with
    it) (Linux ``/proc``); returns how many."""
    me = os.getpid()
    killed = 0
    for _ in range(rounds):  # repeat: a process may fork while we scan
        found = 0
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) == me:
                continue
            try:
                with open(f"/proc/{name}/environ", "rb") as f:
                    environ = f.read()
            except OSError:
                continue
            entries = environ.split(b"\0")
            if (any(e.startswith(marker) for e in entries) if prefix else marker in entries):
                with contextlib.suppress(OSError):
                    os.kill(int(name), signal.SIGKILL)
                    found += 1
        killed += found
        if not found:
            break
    return killed


def _start_ticks(pid: int) -> str | None:
    """A live process's start time (clock ticks since boot): with the pid it names one process for ever.
    None for a process that is gone or a zombie (dead, not yet reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    if len(fields) < 20 or fields[0] in ("Z", "X"):
        return None
    return fields[19]


def owner_tag(pid: int | None = None) -> str:
    """``p<pid>s<start ticks>``: put in workspace names and env ids so a later run can tell ours are orphans."""
    pid = os.getpid() if pid is None else pid
    return f"p{pid}s{_start_ticks(pid) or 0}"


_ORPHAN_DIR = re.compile(r"^agentcompass-(?P<role>[A-Za-z0-9_.]+)-p(?P<pid>\d+)s(?P<ticks>\d+)-")


def sweep_orphan_workspaces(base_dir: str | None = None) -> list[str]:
    """Remove workspaces (and kill the processes) of runs whose process is gone, e.g. after a SIGKILL.

    Kept workspaces (``keep_environment``) carry no owner tag and are never touched. Returns what was removed.
    """
    base = base_dir or tempfile.gettempdir()
    removed: list[str] = []
    try:
        names = os.listdir(base)
    except OSError:
        return removed
    for name in names:
        m = _ORPHAN_DIR.match(name)
        if m is None or _start_ticks(int(m["pid"])) == m["ticks"]:
            continue  # not ours, or its owner is alive
        tag = f"p{m['pid']}s{m['ticks']}"
        _kill_marked(f"{MARKER_VAR}=local-{m['role']}-{tag}-".encode(), prefix=True)
        _remove_tree(os.path.join(base, name))
        removed.append(name)
    return removed


def _remove_tree(path: str) -> None:
    """rmtree that also removes what a command made unwritable (chmod 000 directories)."""
    try:
        shutil.rmtree(path)
        return
    except FileNotFoundError:
        return
    except OSError:
        pass
    for dirpath, dirnames, _ in os.walk(path):
        for d in dirnames:
            full = os.path.join(dirpath, d)
            with contextlib.suppress(OSError):
                if not os.path.islink(full):
                    os.chmod(full, stat.S_IRWXU)
    with contextlib.suppress(OSError):
        os.chmod(path, stat.S_IRWXU)
    for pause in (0.0, 0.05, 0.2):  # a just-killed process may still finish the syscall that made a file
        time.sleep(pause)
        shutil.rmtree(path, ignore_errors=True)
        if not os.path.lexists(path):
            return
    log.warning("could not remove workspace %s; a later run sweeps it", path)


def _make_workspace(base_dir: str | None, prefix: str, workdir_rel: str | None,
                    files: Mapping[str, str | bytes]) -> tuple[str, str]:
    """Create the temp root, its workdir and the files; nothing is left behind on failure."""
    root = os.path.realpath(tempfile.mkdtemp(prefix=prefix, dir=base_dir))
    try:
        workdir = os.path.join(root, workdir_rel) if workdir_rel else root
        os.makedirs(workdir, exist_ok=True)
        for rel, content in files.items():
            target = os.path.join(workdir, rel)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "wb") as f:
                f.write(content.encode() if isinstance(content, str) else bytes(content))
    except BaseException:
        _remove_tree(root)
        raise
    return root, workdir


def _refuse_policy(policy: NetworkPolicy) -> None:
    if not isinstance(policy, NetworkPolicy):
        raise ConfigError(f"network_policy: expected a NetworkPolicy, got {type(policy).__name__}",
                          field="network_policy")
    if policy.mode != "public":
        raise ConfigError(
            f'network_policy "{policy.mode}" cannot be enforced by the local environment provider (it runs '
            'commands on the host with full network access); it needs an isolating provider such as docker. '
            'Allowed with local: "public".', field="network_policy")


class _Capture(asyncio.SubprocessProtocol):
    """Collects a command's stdout/stderr into CappedBuffers and signals its exit and the pipes' EOF.

    The pipes are created and owned by the loop's subprocess transport. We never touch their file
    descriptors: handing our own ``os.pipe()`` ends to the loop made uvloop close each read end twice
    (libuv closes the fd, then uvloop closes the attached file object again), which, with worker threads
    opening files meanwhile, closed descriptors that belonged to someone else.
    """

    def __init__(self, out: CappedBuffer, err: CappedBuffer, loop: asyncio.AbstractEventLoop) -> None:
        self._bufs = {1: out, 2: err}
        self._open_pipes = {1, 2}
        self.exited: asyncio.Future[None] = loop.create_future()
        self.drained: asyncio.Future[None] = loop.create_future()

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        buf = self._bufs.get(fd)
        if buf is not None:
            buf.feed(data.encode() if isinstance(data, str) else data)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        self._open_pipes.discard(fd)
        if not self._open_pipes:
            _resolve(self.drained)

    def process_exited(self) -> None:
        _resolve(self.exited)

    def connection_lost(self, exc: Exception | None) -> None:
        # The transport is finished (or closed by us): nothing more will arrive.
        _resolve(self.exited)
        _resolve(self.drained)


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


def _close_transport(transport: asyncio.SubprocessTransport, _: object = None) -> None:
    with contextlib.suppress(ProcessLookupError):
        transport.close()


class LocalEnvironment:
    """An open local workspace. Implements ``agentcompass.interfaces.Environment``."""

    def __init__(self, *, env_id: str, root: str, workdir: str, env: dict[str, str], shell: str,
                 default_timeout: float, output_limit: int, keep: bool,
                 on_close: Callable[[LocalEnvironment], None], cgroup: EnvCgroup | None = None,
                 archive_limits: ArchiveLimits = ArchiveLimits(), spool_dir: str | None = None,
                 pidns: PidNamespace | None = None) -> None:
        self.id = env_id
        self.root = root
        self.workdir = workdir
        self._env = env
        self._shell = shell
        self._default_timeout = default_timeout
        self._output_limit = output_limit
        self._keep = keep
        self._on_close = on_close
        self._cgroup = cgroup  # every process of this environment is in it (None: marker + groups only)
        self._pidns = pidns  # every command runs inside it; killing its init kills all (None: not asked for)
        self._archive_limits = archive_limits
        self._spool_dir = spool_dir
        self._running: dict[int, asyncio.SubprocessTransport] = {}  # pgid -> leader's transport
        self._lingering: set[int] = set()  # groups whose leader exited while members lived on
        self._closed = False
        self._close_future: asyncio.Future[None] | None = None
        self._file_ops = threading.Condition()  # guards _file_ops_running, and _closed's effect on them
        self._file_ops_running = 0

    def __repr__(self) -> str:
        return f"LocalEnvironment(id={self.id!r}, workdir={self.workdir!r})"

    @property
    def closed(self) -> bool:
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise EnvironmentError_(f"environment {self.id} is closed")

    # ------------------------------------------------------------------ commands

    def _argv(self, cmd: str | Sequence[str]) -> list[str]:
        if isinstance(cmd, str):
            return [self._shell, "-c", cmd]
        argv = list(cmd)
        if not argv or not all(isinstance(a, str) for a in argv):
            raise ConfigError(f"cmd: expected a str or a non-empty list of str, got {cmd!r}", field="cmd")
        return argv

    def _exec_cwd(self, cwd: str | None) -> str:
        if cwd is None:
            if not os.path.isdir(self.workdir):  # the sandbox itself is gone: not the agent's doing to fix
                raise EnvironmentError_(f"the workspace of environment {self.id} is gone ({self.workdir})")
            return self.workdir
        if not isinstance(cwd, str) or "\0" in cwd:
            raise ConfigError(f"cwd: expected a path str, got {cwd!r}", field="cwd")
        path = cwd if os.path.isabs(cwd) else os.path.join(self.workdir, cwd)
        if not os.path.isdir(path):
            raise EnvironmentError_(f"cwd {cwd!r} is not a directory in environment {self.id}")
        return path

    async def exec(self, cmd: str | Sequence[str], *, timeout: float | None = None,
                   cwd: str | None = None, env: dict[str, str] | None = None) -> ExecResult:
        """Run ``cmd`` (a str through ``shell -c``, a list directly) and capture its capped output.

        ``cwd``: relative to the workdir (absolute paths are used as given); ``env`` is merged over the
        environment's variables; ``timeout`` defaults to the provider's ``default_timeout``.
        """
        self._check_open()
        argv = self._argv(cmd)
        if timeout is None:
            limit = self._default_timeout
        else:
            limit = seconds(timeout, "timeout")
        run_cwd = self._exec_cwd(cwd)
        run_env = {**self._env, **env_vars(env or {}, "env"), MARKER_VAR: self.id}
        if self._pidns is not None:
            if not self._pidns.alive():
                raise EnvironmentError_(f"environment {self.id}: its pid namespace is gone")
            argv = self._pidns.enter(argv, run_cwd)
        spawn_argv = argv if self._cgroup is None else self._cgroup.wrap(_PRELUDE_SHELL or self._shell, argv)

        refused_before = self._cgroup.host_refusals() if self._cgroup is not None else None
        loop = asyncio.get_running_loop()
        out_buf, err_buf = CappedBuffer(self._output_limit), CappedBuffer(self._output_limit)
        capture = _Capture(out_buf, err_buf, loop)
        transport: asyncio.SubprocessTransport | None = None
        pid = 0
        timed_out = False
        start = time.monotonic()
        try:
            try:
                # Bounded: the spawn is part of the command (a spawn that never reports back must not hang).
                async with asyncio.timeout(limit):
                    transport, _ = await loop.subprocess_exec(
                        lambda: capture, *spawn_argv, stdin=asyncio.subprocess.DEVNULL,
                        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                        cwd=run_cwd, env=run_env, start_new_session=True)
            except TimeoutError:
                raise EnvironmentError_(f"starting a command in environment {self.id} did not complete within "
                                        f"{limit:g}s") from None
            except FileNotFoundError as exc:
                return ExecResult(exit_code=127, stderr=f"{argv[0]}: command not found ({exc.strerror})",
                                  duration_s=time.monotonic() - start)
            except PermissionError as exc:
                return ExecResult(exit_code=126, stderr=f"{argv[0]}: cannot execute ({exc.strerror})",
                                  duration_s=time.monotonic() - start)
            except (OSError, RuntimeError) as exc:
                # fork/pipe failed (EAGAIN/ENOMEM/EMFILE under process-table or fd pressure): the host, not the
                # command; retryable as a lost environment.
                raise EnvironmentError_(f"could not start a command in environment {self.id}: "
                                        f"{type(exc).__name__}: {exc}") from None
            pid = transport.get_pid()
            self._running[pid] = transport
            if self._closed:  # close() ran while we were spawning
                raise EnvironmentError_(f"environment {self.id} was closed while starting a command")
            # Wait for the exit only, not for the pipes' EOF (a background child may hold them forever);
            # asyncio.wait does not cancel the future on timeout.
            await asyncio.wait([capture.exited], timeout=limit)
            if not capture.exited.done():
                timed_out = True
                _killpg(pid)
                await asyncio.wait([capture.exited], timeout=_REAP_WAIT_S)
            await asyncio.wait([capture.drained], timeout=_DRAIN_GRACE_S)
        finally:
            if transport is not None:
                self._running.pop(pid, None)
                if transport.get_returncode() is None:  # cancelled, or the kill did not take
                    _killpg(pid)
                    # Close once the loop has reaped it: closing a live transport makes the stdlib loop
                    # poll() the child itself, racing its child watcher.
                    capture.exited.add_done_callback(functools.partial(_close_transport, transport))
                else:
                    if _group_alive(pid):
                        self._lingering.add(pid)
                    _close_transport(transport)  # closes the pipes: the loop owns each fd and closes it once

        returncode = transport.get_returncode()
        if returncode == JOIN_FAILED_EXIT and self._cgroup is not None and \
                err_buf.text().startswith(JOIN_FAILED_MARK):
            gone = "" if self._cgroup.exists() else " (it is gone)"
            raise EnvironmentError_(f"environment {self.id}: cannot start a command in its cgroup{gone}")
        if (timed_out or returncode != 0) and refused_before is not None and self._cgroup is not None:
            refused = (self._cgroup.host_refusals() or refused_before) - refused_before
            if refused > 0:  # a starved command (bash retries each refused fork, sleeping) is the host's failure
                outcome = f"ran past its {limit:g}s timeout" if timed_out else f"exited {returncode}"
                raise EnvironmentError_(
                    f"environment {self.id}: the host refused {refused} of the command's forks (process-table "
                    f"pressure outside the environment, which stayed below its pids_limit) and it {outcome}")
        exit_code = TIMEOUT_EXIT_CODE if timed_out else returncode
        return ExecResult(
            exit_code=exit_code if exit_code is not None else -signal.SIGKILL,
            stdout=out_buf.text(), stderr=err_buf.text(), timed_out=timed_out,
            duration_s=time.monotonic() - start, truncated=out_buf.truncated or err_buf.truncated,
            output_bytes=out_buf.total + err_buf.total)

    # ------------------------------------------------------------------ files

    def _resolve(self, path: str, field: str = "path") -> str:
        """Host path for ``path`` (relative to workdir, or absolute inside the workspace)."""
        if not isinstance(path, str) or not path or "\0" in path:
            raise ConfigError(f"{field}: expected a non-empty path str, got {path!r}", field=field)
        full = path if os.path.isabs(path) else os.path.join(self.workdir, path)
        real = os.path.realpath(full)
        if not _inside(self.root, real):
            raise ConfigError(f"{field}: {path!r} is outside the workspace of environment {self.id} "
                              f"({self.root}); use a path relative to the workdir", field=field)
        return real

    async def _in_thread(self, work: Callable[[], _T]) -> _T:
        """``work`` on a worker thread, registered with this environment: it does not start once close()
        has begun, and close() waits for it before removing the workspace. A caller cancelled (or whose
        thread could not be started under process-table pressure) may leave it queued or running; unguarded,
        it would recreate the workspace close() had just removed."""

        def guarded() -> _T:
            with self._file_ops:
                self._check_open()
                self._file_ops_running += 1
            try:
                return work()
            finally:
                with self._file_ops:
                    self._file_ops_running -= 1
                    self._file_ops.notify_all()

        try:
            pending = asyncio.get_running_loop().run_in_executor(None, guarded)
        except RuntimeError as exc:  # no thread could be started (process-table pressure): the host's failure
            raise EnvironmentError_(f"environment {self.id}: cannot run a file operation: {exc}") from None
        return await pending

    async def write_file(self, path: str, data: bytes | str) -> None:
        """Write ``data`` (str as UTF-8) to ``path``, creating parent directories."""
        self._check_open()
        target = self._resolve(path)
        payload = data.encode() if isinstance(data, str) else bytes(data)

        def _write() -> None:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "wb") as f:
                f.write(payload)

        await self._in_thread(_write)

    async def read_file(self, path: str) -> bytes:
        """The bytes of ``path``; FileNotFoundError if it does not exist, OSError if it is larger than
        ``archive_file_limit_bytes``."""
        self._check_open()
        target = self._resolve(path)
        cap = self._archive_limits.file_bytes

        def _read() -> bytes:
            with open(target, "rb") as f:
                data = f.read(cap + 1)
            if len(data) > cap:
                raise OSError(f"{path!r} in environment {self.id} is larger than archive_file_limit_bytes "
                              f"({cap}); read it in parts with a command instead")
            return data

        return await self._in_thread(_read)

    async def put_archive(self, path: str, tar_bytes: bytes | IO[bytes]) -> None:
        """Extract a tar (bytes, or a file object read from its start) of a directory's contents into
        directory ``path``, creating it if needed."""
        self._check_open()
        target = self._resolve(path)

        def _put() -> None:
            os.makedirs(target, exist_ok=True)
            extract_tar(tar_bytes, target, before_member=self._check_open)  # stops once close() began

        await self._in_thread(_put)

    async def get_archive_file(self, path: str) -> SpooledArchive:
        """A tar of directory ``path``'s contents (names relative to it) or of the single file ``path``,
        streamed to an unlinked temp file under the archive limits; what they left out is in ``skipped``."""
        self._check_open()
        source = self._resolve(path)
        return await spool(lambda archive: self._in_thread(
            functools.partial(write_tree, source, archive, self._archive_limits)), self._spool_dir)

    async def get_archive(self, path: str) -> bytes:
        """``get_archive_file``'s tar as bytes (at most ``archive_total_limit_bytes``)."""
        return await spooled_bytes(self.get_archive_file(path))

    async def set_network_policy(self, policy: NetworkPolicy) -> None:
        """Only ``public`` is possible locally; anything else raises ConfigError."""
        self._check_open()
        _refuse_policy(policy)

    # ------------------------------------------------------------------ lifecycle

    async def close(self) -> None:
        """Kill what this environment started and remove its directory (kept when ``keep``). Idempotent.

        Bounded: waits at most ``_CLOSE_TIMEOUT_S``. The work runs in a worker thread started before the
        first await, so a cancelled caller (or a loop shutting down, which waits for its executor) cannot
        stop it half-way.
        """
        if self._close_future is None:
            self._closed = True
            for pgid in list(self._running):
                _killpg(pgid)
            loop = asyncio.get_running_loop()
            try:
                self._close_future = loop.run_in_executor(None, self._close_sync, list(self._lingering))
            except RuntimeError:  # the loop's executor is already shut down: clean up inline
                self._close_sync(list(self._lingering))
                self._on_close(self)
                return
            self._close_future.add_done_callback(lambda _: self._on_close(self))
        try:
            await asyncio.wait_for(asyncio.shield(self._close_future), _CLOSE_TIMEOUT_S)
        except TimeoutError:
            log.warning("environment %s: close did not finish within %.0f s; it continues in the background",
                        self.id, _CLOSE_TIMEOUT_S)
        if self._pidns is not None:
            await self._pidns.wait()

    def _close_sync(self, lingering: list[int]) -> None:
        try:
            if self._pidns is not None:  # first: it also ends what left the cgroup, the group and the marker
                self._pidns.kill()
            if self._cgroup is not None and not self._cgroup.close():
                log.warning("environment %s: processes left in cgroup %s after close", self.id,
                            self._cgroup.name)
            for pgid in lingering:
                _killpg(pgid)
            if _HAVE_PROC:
                n = _kill_marked(f"{MARKER_VAR}={self.id}".encode())
                if n:
                    log.debug("environment %s: killed %d leftover processes", self.id, n)
        finally:  # the workspace goes even when killing failed part-way
            with self._file_ops:  # none starts now (_closed is set); the running ones stop at their next member
                self._closed = True
                if not self._file_ops.wait_for(lambda: self._file_ops_running == 0, _FILE_OPS_WAIT_S):
                    log.warning("environment %s: %d file operations still running after %.0f s", self.id,
                                self._file_ops_running, _FILE_OPS_WAIT_S)
            if self._keep:
                log.info("environment %s: keeping workspace %s", self.id, self.root)
            else:
                _remove_tree(self.root)

    def release_now(self) -> None:
        """The provider's last resort at its close: kill and remove inline, on the caller's thread."""
        if not self._keep and os.path.lexists(self.root):
            self._closed = True
            for pgid in list(self._running):
                _killpg(pgid)
            self._close_sync(list(self._lingering))


_WARNED_NO_CGROUP: list[bool] = []


def _warn_no_cgroup(*, pids_only: bool = False) -> None:
    if _WARNED_NO_CGROUP:
        return
    _WARNED_NO_CGROUP.append(True)
    if pids_only:
        log.warning("local environments: no cgroup with the pids controller is writable here, so pids_limit is "
                    "not enforced (close() still kills every process through the cgroup)")
    else:
        log.warning("local environments: no writable cgroup on this machine, so pids_limit is not enforced and "
                    "close() finds a command's processes only by process group and marker variable (a process "
                    "that leaves both, e.g. `env -i setsid ...`, survives); see docs/environments.md")


class LocalParams(ArchiveParams, frozen=True):
    """``local`` params: ``base_dir`` (an existing directory for the workspaces; default: the temp dir),
    ``output_limit_bytes`` per stream, ``default_timeout`` seconds per command, ``shell`` (an absolute path),
    ``pids_limit`` (processes per environment, when cgroups allow), ``pid_namespace`` (root only: each
    environment's commands run in their own pid namespace, so close kills even a root agent that left its
    cgroup) and the archive caps."""

    base_dir: str | None = None
    output_limit_bytes: Annotated[int, msgspec.Meta(gt=64, le=_MAX_OUTPUT_LIMIT)] = _DEFAULT_OUTPUT_LIMIT
    default_timeout: Seconds = _DEFAULT_TIMEOUT_S
    shell: str | None = None
    pids_limit: Annotated[int, msgspec.Meta(ge=1, le=_MAX_PIDS_LIMIT)] = _DEFAULT_PIDS_LIMIT
    pid_namespace: bool = False


class LocalProvider(EnvironmentProvider):
    """Opens ``LocalEnvironment``s. Params: base_dir, output_limit_bytes, default_timeout, shell, pids_limit,
    archive_file_limit_bytes, archive_total_limit_bytes."""

    name: ClassVar[str] = "local"
    capabilities: ClassVar[ProviderCapabilities] = ProviderCapabilities()  # on this host, public network only
    Params: ClassVar[type[LocalParams]] = LocalParams
    params: LocalParams

    def __init__(self, params: LocalParams | dict[str, Any] | None, ctx: ComponentContext) -> None:
        super().__init__(params, ctx)
        p = self.params
        self.base_dir = self._param_base_dir(p.base_dir)
        self.output_limit_bytes = p.output_limit_bytes
        self.default_timeout = p.default_timeout
        shell = _default_shell() if p.shell is None else p.shell
        if not os.path.isabs(shell) or not os.access(shell, os.X_OK):
            raise ConfigError(f"environment local: shell must be an absolute path to an executable, got "
                              f"{shell!r}", field="environment.params.shell")
        self.shell = shell
        self.pids_limit = p.pids_limit
        if p.pid_namespace and (why := pidns_unavailable_reason()) is not None:
            raise ConfigError(f"environment local: pid_namespace cannot be used here: {why}. Allowed: false "
                              "(the default) unless the engine runs as root with util-linux.",
                              field="environment.params.pid_namespace")
        self.pid_namespace = p.pid_namespace
        self._cgroups: Support | None = support()
        if self._cgroups is None:
            _warn_no_cgroup()
        elif self._cgroups.pids is None:
            _warn_no_cgroup(pids_only=True)
        self.archive_limits = p.archive_limits()
        self._envs: set[LocalEnvironment] = set()
        self._closed = False
        self._owner = owner_tag()

    async def start(self) -> None:
        """Called by the engine before a request's first task: sweep what killed runs left behind."""
        removed = await asyncio.to_thread(sweep_orphan_workspaces, self.base_dir)
        if removed:
            log.warning("removed %d workspaces of dead runs from %s", len(removed),
                        self.base_dir or tempfile.gettempdir())
        if self._cgroups is not None:
            swept = await asyncio.to_thread(sweep_stale, lambda pid, ticks: _start_ticks(pid) == ticks)
            if swept:
                log.warning("killed and removed %d cgroups of dead runs", len(swept))

    @staticmethod
    def _param_base_dir(value: str | None) -> str | None:
        if value is None:
            return None
        if not os.path.isdir(value):
            raise ConfigError(f"environment local: base_dir must be an existing directory, got {value!r}",
                              field="environment.params.base_dir")
        return os.path.realpath(value)

    @property
    def open_environments(self) -> int:
        """How many environments this provider opened that are not closed yet."""
        return len(self._envs)

    def check_network_policy(self, policy: NetworkPolicy) -> None:
        """Accept only ``public``: local commands share the host's network."""
        _refuse_policy(policy)

    async def open(self, spec: EnvOpenSpec) -> LocalEnvironment:
        """A fresh temp workspace with ``spec.files`` written relative to its workdir."""
        if self._closed:
            raise EnvironmentError_("the local provider is closed")
        self.check_network_policy(spec.network)
        spec_env = env_vars(spec.env, "env")
        sub = (spec.workdir or "").strip("/")
        workdir_rel = safe_relpath(sub, field="workdir") if sub else None
        files = {safe_relpath(name, field=f"files[{name!r}]"): content
                 for name, content in spec.files.items()}
        role = re.sub(r"[^A-Za-z0-9_.-]", "_", spec.role)[:32] or "env"

        # Synchronous on purpose: no await between mkdtemp and tracking, so a cancel cannot leak the dir (the one
        # await, the pid namespace's start, releases the dir and the cgroup itself when it fails or is cancelled).
        # The owner tag lets a later run sweep this workspace if we die; kept ones are left out of that.
        owner = "keep" if spec.keep else self._owner
        root, workdir = _make_workspace(self.base_dir, f"agentcompass-{role}-{owner}-", workdir_rel, files)
        env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": workdir,
               "LANG": os.environ.get("LANG", "C.UTF-8"), **spec_env}
        env_id = f"local-{role}-{owner}-{uuid.uuid4().hex[:12]}"
        cgroup = None
        if self._cgroups is not None:
            try:  # named by the engine's tag even when kept: a crashed run's cgroups are always swept
                cgroup = EnvCgroup.create(f"{self._owner}.{env_id}", pids_limit=self.pids_limit,
                                          sup=self._cgroups)
            except OSError as exc:
                _remove_tree(root)
                raise EnvironmentError_(f"cannot create the cgroup of environment {env_id}: {exc}") from None
        pidns = await self._start_pidns(env_id, root, cgroup, env) if self.pid_namespace else None
        handle = LocalEnvironment(
            env_id=env_id, root=root, workdir=workdir, env=env,
            shell=self.shell, default_timeout=self.default_timeout, output_limit=self.output_limit_bytes,
            keep=spec.keep, on_close=self._envs.discard, cgroup=cgroup, archive_limits=self.archive_limits,
            spool_dir=self.base_dir, pidns=pidns)
        self._envs.add(handle)
        log.debug("opened %s at %s for task %s", handle.id, root, spec.task_id)
        return handle

    async def _start_pidns(self, env_id: str, root: str, cgroup: EnvCgroup | None,
                           env: dict[str, str]) -> PidNamespace:
        """The environment's pid namespace, its holder in the environment's cgroup; on any failure (or a
        cancel) the workspace and the cgroup are released before the error goes on."""
        def wrap(argv: list[str]) -> list[str]:
            return argv if cgroup is None else cgroup.wrap(_PRELUDE_SHELL or self.shell, argv)
        try:
            return await PidNamespace.start(wrap, {**env, MARKER_VAR: env_id})
        except BaseException as exc:
            if cgroup is not None:
                await asyncio.shield(asyncio.to_thread(cgroup.close))
            _remove_tree(root)
            if isinstance(exc, OSError):
                raise EnvironmentError_(f"cannot start the pid namespace of environment {env_id}: {exc}") from None
            raise

    async def aclose(self) -> None:
        """Close every environment this provider opened that is still open."""
        self._closed = True
        leftovers = list(self._envs)
        if leftovers:
            log.info("local provider: closing %d environments left open", len(leftovers))
        results = await asyncio.gather(*(env.close() for env in leftovers), return_exceptions=True)
        for env, res in zip(leftovers, results, strict=True):
            if isinstance(res, BaseException):
                log.warning("local provider: closing %s failed: %r", env.id, res)
        # A close still queued for a worker thread (none could be started under process-table pressure) would
        # die with the process: whatever is still there is released here, inline.
        for env in leftovers:
            env.release_now()
