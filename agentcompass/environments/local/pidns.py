"""A pid namespace (with its own mount namespace and ``/proc``) for one ``local`` environment, when root.

A cgroup, a process group and a marker variable can all be left by a root agent: it can write itself into
the root cgroups, ``setsid`` and ``env -i``, and then nothing of ours finds it at close. A pid namespace
cannot be left: a process may only move its children into a namespace below its own, never above. So each
environment gets a small init (a shell that reaps orphans) as pid 1 of a new namespace, every command is
started inside it with ``nsenter``, and close kills that init: the kernel then kills everything left in the
namespace, wherever it moved in the cgroup tree.

The holder is ``unshare --pid --fork --kill-child --mount-proc``: it stays outside (its
``ns/pid_for_children`` and ``ns/mnt`` are what commands join) and its child is the init; with
``--kill-child`` the init dies with the holder. ``--mount-proc`` gives the namespace its own ``/proc``, so a
command's ``$$``, ``ps`` and ``kill`` agree on pids.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import time
from collections.abc import Callable

#: pid 1 of the namespace: bash's ``wait`` reaps every child, orphans reparented to it included.
_INIT = ["/bin/bash", "-c", 'trap "" TERM INT HUP; while :; do sleep 86400 & wait; done']
_START_S = 10.0


def available() -> str | None:
    """None when pid namespaces can be used here (root, Linux, util-linux ``unshare``/``nsenter``, bash),
    else why not."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "it needs root (CAP_SYS_ADMIN) to make a pid namespace"
    missing = [t for t in ("unshare", "nsenter") if shutil.which(t) is None]
    if missing:
        return f"{' and '.join(missing)} (util-linux) not found on PATH"
    if not os.access(_INIT[0], os.X_OK):
        return f"{_INIT[0]} (the namespace's init) not found"
    return None


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except (OSError, ValueError):
        return []


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (OSError, AttributeError):
        return None


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""


class PidNamespace:
    """One environment's namespace: ``enter`` prefixes a command, ``kill`` ends everything in it."""

    def __init__(self, holder: asyncio.subprocess.Process, init_pid: int) -> None:
        self._holder = holder
        self.holder_pid = holder.pid
        self.init_pid = init_pid
        # pidfds: kill() may run on a worker thread after the holder was reaped; a pid could be reused by then
        self._fds = [fd for fd in (_pidfd(holder.pid), _pidfd(init_pid)) if fd is not None]

    @classmethod
    async def start(cls, wrap: Callable[[list[str]], list[str]], env: dict[str, str]) -> PidNamespace:
        """Start the holder and its init (``wrap`` puts the holder in the environment's cgroup) and wait,
        bounded, until the init runs with the namespace's ``/proc`` mounted."""
        unshare = shutil.which("unshare") or "unshare"
        argv = wrap([unshare, "--pid", "--fork", "--kill-child", "--mount-proc", "--", *_INIT])
        holder = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL, env=env, start_new_session=True)
        want = "\0".join(_INIT).encode() + b"\0"
        deadline = time.monotonic() + _START_S
        try:
            while True:
                # the init has exec'd (so /proc is mounted) once its command line is ours
                kids = _children(holder.pid)
                if kids and _cmdline(kids[0]) == want:
                    return cls(holder, kids[0])
                if holder.returncode is not None:
                    raise OSError("the pid namespace's holder exited (exit status "
                                  f"{holder.returncode}) before its init ran")
                if time.monotonic() > deadline:
                    raise OSError(f"the pid namespace's init did not start within {_START_S:g}s")
                await asyncio.sleep(0.002)
        except BaseException:  # a failure or a cancel: the holder (and with it the init) goes
            with contextlib.suppress(ProcessLookupError):
                holder.kill()
            raise

    def alive(self) -> bool:
        """Whether the namespace still has its init (a command may be started in it)."""
        return self._holder.returncode is None and self.init_pid in _children(self.holder_pid)

    def enter(self, argv: list[str], cwd: str) -> list[str]:
        """``argv`` run inside the namespace, in ``cwd``."""
        nsenter = shutil.which("nsenter") or "nsenter"
        return [nsenter, f"--mount=/proc/{self.holder_pid}/ns/mnt",
                f"--pid=/proc/{self.holder_pid}/ns/pid_for_children", f"--wd={cwd}", "--", *argv]

    def kill(self) -> None:
        """SIGKILL the init (the kernel kills every other process of the namespace) and the holder. Safe from
        any thread, and more than once."""
        fds, self._fds = self._fds, []
        for fd in fds:
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(fd, signal.SIGKILL)
            os.close(fd)
        if not fds and self.init_pid in _children(self.holder_pid):  # no pidfds here: the pid is still ours
            with contextlib.suppress(OSError):
                os.kill(self.init_pid, signal.SIGKILL)

    async def wait(self, timeout: float = 5.0) -> None:
        """Reap the holder (bounded)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._holder.wait(), timeout)
