"""The one runtime pip installer: every install the engine makes at runtime (declared requirements, installed
agents' programs, bfcl-eval, the OpenHands venv) goes through here.

An install holds the lock of its target (an exclusive ``flock`` across processes, waited for on the event loop;
by default next to a ``--target`` directory, else one per Python environment) while it runs pip as an awaited
subprocess in a process group of its own. One deadline covers the wait for the lock and every step; past it, or
when the caller is cancelled (the awaiting task, or a ``threading.Event`` set by the engine for a constructor's
worker thread), pip's process group is killed and the lock released. pip's output is kept capped (its head and
its tail), URL credentials masked; a failure raises :class:`PipInstallError` naming the packages and quoting the
end of pip's output::

    run = await pip_install(["mpmath==1.3.0"], target=cache, timeout_s=600, done=lambda: is_there(cache))

Steps that go together (a venv, then pip in it; pip into a staging directory, then a rename) run in one
``locked`` block::

    async with locked("openhands-sdk==1.0", lock=lock_path, timeout_s=900) as install:
        await install.run([python, "-m", "venv", str(tmp)])
        await install.pip(["openhands-sdk==1.0"], python=tmp / "bin" / "python")
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import re
import shlex
import signal
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from .file_lock import LockWaitEnd, async_file_lock

__all__ = ["ERROR_TAIL_CHARS", "Installer", "PipInstallError", "PipRun", "default_lock", "locked",
           "mask_credentials", "pip_argv", "pip_install", "pip_shell_command"]

#: pip output kept: the first and the last bytes of it.
OUTPUT_HEAD_BYTES = 4096
OUTPUT_TAIL_BYTES = 16384
#: characters of the output's end quoted in an error (where pip says what went wrong).
ERROR_TAIL_CHARS = 1500
_KILL_WAIT_S = 10.0
#: how often a wait looks at the caller's cancellation event (and the lock, when another holds it).
_POLL_S = 0.2
log = logging.getLogger("agentcompass.pip_install")
_URL_CREDENTIALS = re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.-]*://)[^/\s@]+@")

#: why an install did not complete
Failure = Literal["failed", "timeout", "cancelled", "lock_timeout"]


class PipInstallError(Exception):
    """An install that did not complete: pip (or another step) failed, the deadline passed, the caller's
    cancellation event was set, or another installer held the lock past the deadline."""

    def __init__(self, message: str, *, packages: Sequence[str], reason: Failure, returncode: int | None = None,
                 output: str = "") -> None:
        super().__init__(message)
        self.packages = tuple(packages)
        self.reason: Failure = reason
        self.returncode = returncode
        #: the step's output (capped, credentials masked)
        self.output = output


@dataclass(frozen=True)
class PipRun:
    """What :func:`pip_install` did."""

    #: False: ``done`` said, once the lock was held, that another installer had made it already
    ran: bool
    #: pip's combined stdout/stderr, capped (head and tail), URL credentials masked
    output: str = ""
    seconds: float = 0.0


def mask_credentials(text: str) -> str:
    """``https://user:token@host`` -> ``https://***@host``."""
    return _URL_CREDENTIALS.sub(r"\1***@", text)


def pip_argv(packages: Sequence[str], *, python: str | Path | None = None, target: str | Path | None = None,
             options: Sequence[str] = (), batch: bool = True) -> list[str]:
    """The pip command installing ``packages`` with ``python`` (default: this interpreter), into ``target``
    (``--target``) when given; ``batch`` adds the flags of an unattended run. The only place one is built."""
    cmd = [str(python or sys.executable), "-m", "pip", "install"]
    if batch:
        cmd += ["--disable-pip-version-check", "--no-input"]
    cmd += options
    if target is not None:
        cmd += ["--target", str(target)]
    return [*cmd, *packages]


def pip_shell_command(packages: Sequence[str], *, python: str | Path | None = None,
                      target: str | Path | None = None, options: Sequence[str] = ()) -> str:
    """The pip command as a user types it (no batch flags), for error messages."""
    return shlex.join(pip_argv(packages, python=python, target=target, options=options, batch=False))


def default_lock(python: str | Path | None = None, target: str | Path | None = None) -> Path:
    """The lock of an install's target: ``.<name>.lock`` beside a ``--target`` directory, else one per Python
    environment (keyed by ``sys.prefix`` or ``python``'s path) under ``~/.cache/agentcompass/locks``."""
    if target is not None:
        path = Path(target).absolute()
        return path.parent / f".{path.name}.lock"
    # not resolved: a venv's python is a symlink to the base interpreter, and the venv is the target
    env = sys.prefix if python is None else os.path.abspath(python)
    key = hashlib.sha256(env.encode()).hexdigest()[:16]
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "agentcompass" / "locks" / f"pip-{key}.lock"


class _CappedOutput:
    def __init__(self) -> None:
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def add(self, chunk: bytes) -> None:
        room = OUTPUT_HEAD_BYTES - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        self.tail += chunk
        if len(self.tail) > OUTPUT_TAIL_BYTES:
            cut = len(self.tail) - OUTPUT_TAIL_BYTES
            self.dropped += cut
            del self.tail[:cut]

    def text(self) -> str:
        gap = f"\n[... {self.dropped} bytes of output left out ...]\n" if self.dropped else ""
        return mask_credentials((bytes(self.head).decode(errors="replace") + gap
                                 + bytes(self.tail).decode(errors="replace")).strip())


def _tail(text: str) -> str:
    return text[-ERROR_TAIL_CHARS:] if text else "(no output)"


class Installer:
    """The steps of one install, run while its lock is held (made by :func:`locked`): each a killable process
    group, all sharing the install's deadline and cancellation."""

    def __init__(self, what: str, *, deadline: float, timeout_s: float, cancelled: threading.Event | None,
                 env: Mapping[str, str] | None, on_run: Callable[[list[str]], None] | None) -> None:
        self.what = what
        self.deadline = deadline
        self.timeout_s = timeout_s
        self.cancelled = cancelled
        self.env = {**os.environ, **env} if env else None
        self.on_run = on_run

    async def pip(self, packages: Sequence[str], *, python: str | Path | None = None,
                  target: str | Path | None = None, options: Sequence[str] = ()) -> str:
        """Run pip for ``packages`` (see :func:`pip_argv`); its output (capped, credentials masked)."""
        return await self._step(pip_argv(packages, python=python, target=target, options=options),
                                list(packages), is_pip=True)

    async def run(self, argv: Sequence[str]) -> str:
        """Run another step of the install (``python -m venv``); its output. Raises PipInstallError when it
        exits non-zero, at the deadline and when the cancellation event is set (the process group killed)."""
        return await self._step([str(a) for a in argv], [self.what], is_pip=False)

    async def _step(self, argv: list[str], names: list[str], *, is_pip: bool) -> str:
        who = ", ".join(names)
        if self.on_run is not None:
            self.on_run(argv)
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT, env=self.env, start_new_session=True)
        except OSError as exc:
            raise PipInstallError(f"Installing {who} failed: cannot start {argv[0]}: {exc}", packages=names,
                                  reason="failed") from None
        out = _CappedOutput()

        async def pump() -> None:
            assert proc.stdout is not None
            while chunk := await proc.stdout.read(65536):
                out.add(chunk)
            await proc.wait()

        pumping = asyncio.ensure_future(pump())
        try:
            while not pumping.done():
                left = self.deadline - time.monotonic()
                if self.cancelled is not None and self.cancelled.is_set():
                    raise PipInstallError(f"Installing {who} was cancelled.", packages=names, reason="cancelled",
                                          output=out.text())
                if left <= 0:
                    text = out.text()
                    raise PipInstallError(f"Installing {who} timed out after {self.timeout_s:g}s. "
                                          f"{'pip' if is_pip else argv[0]} said: {_tail(text)}", packages=names,
                                          reason="timeout", output=text)
                await asyncio.wait({pumping}, timeout=min(left, _POLL_S) if self.cancelled is not None else left)
            pumping.result()
        finally:
            if proc.returncode is None:  # timed out, cancelled, or failed: it must not outlive the install
                await _kill(proc)
            pumping.cancel()
        text = out.text()
        if proc.returncode != 0:
            step = "pip" if is_pip else f"`{shlex.join(argv)}`"
            raise PipInstallError(f"Installing {who} failed ({step} exit {proc.returncode}): {_tail(text)}",
                                  packages=names, reason="failed", returncode=proc.returncode, output=text)
        return text


async def _kill(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)  # pip's own children (build backends) too
    try:
        await asyncio.wait_for(asyncio.shield(proc.wait()), _KILL_WAIT_S)
    except TimeoutError:
        log.warning("pip (pid %d) was killed but did not exit within %gs", proc.pid, _KILL_WAIT_S)
    except BaseException:  # cancelled again while reaping: the first cancellation is already on its way out
        pass


def _make_lock_file(path: Path) -> None:
    """The lock file and its directory, made in a thread (the lock then opens it without touching the disk
    much); an unwritable place is the install's error, not a bare OSError."""
    path.parent.mkdir(parents=True, exist_ok=True)
    os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o644))


@contextlib.asynccontextmanager
async def locked(what: str, *, lock: str | Path, timeout_s: float, cancelled: threading.Event | None = None,
                 env: Mapping[str, str] | None = None,
                 on_run: Callable[[list[str]], None] | None = None) -> AsyncIterator[Installer]:
    """Hold the install lock ``lock`` for the block and give its :class:`Installer`. ``timeout_s`` covers the
    wait for the lock and every step; ``env`` is added to the steps' environment; ``on_run(argv)`` is called
    before each step starts. The lock is released however the block ends."""
    deadline = time.monotonic() + timeout_s

    def error(end: LockWaitEnd) -> PipInstallError:
        if end == "cancelled":
            return PipInstallError(f"Installing {what} was cancelled while waiting for the install lock {lock}.",
                                   packages=[what], reason="cancelled")
        return PipInstallError(f"Installing {what}: another installer held the install lock {lock} for over "
                               f"{timeout_s:g}s.", packages=[what], reason="lock_timeout")

    try:
        await asyncio.to_thread(_make_lock_file, Path(lock))
    except OSError as exc:
        raise PipInstallError(f"Installing {what} failed: cannot create the install lock {lock}: {exc}",
                              packages=[what], reason="failed") from None
    async with async_file_lock(lock, timeout_s, error, cancelled=cancelled, poll_s=_POLL_S):
        yield Installer(what, deadline=deadline, timeout_s=timeout_s, cancelled=cancelled, env=env, on_run=on_run)


async def pip_install(packages: Sequence[str], *, timeout_s: float, python: str | Path | None = None,
                      target: str | Path | None = None, options: Sequence[str] = (), lock: str | Path | None = None,
                      done: Callable[[], bool] | None = None, cancelled: threading.Event | None = None,
                      env: Mapping[str, str] | None = None,
                      on_run: Callable[[list[str]], None] | None = None) -> PipRun:
    """Install ``packages`` with pip under the lock of their target (``lock``, default :func:`default_lock`).
    ``done`` (run in a thread once the lock is held) says another installer made the install meanwhile: pip is
    then not run. See :func:`locked` for the rest."""
    started = time.monotonic()
    async with locked(", ".join(packages), lock=lock or default_lock(python, target), timeout_s=timeout_s,
                      cancelled=cancelled, env=env, on_run=on_run) as install:
        if done is not None and await asyncio.to_thread(done):
            return PipRun(ran=False, seconds=round(time.monotonic() - started, 3))
        output = await install.pip(packages, python=python, target=target, options=options)
    return PipRun(ran=True, output=output, seconds=round(time.monotonic() - started, 3))
