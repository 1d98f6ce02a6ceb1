"""Host-side tool calls in a child process the engine can kill at their deadline.

A tool that runs on the engine's host in pure Python (BFCL's multi-turn API classes, a grader's regexes over the
model's text) can be made to compute without end by its arguments. A thread cannot be stopped and a call on the
event loop stops everything, so such calls run in a ``HostWorker``: a child Python process that imports the named
function (``"package.module:function"``) and calls it with JSON arguments, one call at a time. The parent waits
for the answer on the event loop (never blocked) under the call's deadline; past it the child is killed
(SIGKILL), the call raises ``TimeoutError`` and the worker takes no further call (its state is gone). A function
that raises is a ``WorkerCallError`` naming the exception; a child that dies or answers garbage is a
``WorkerError``. A worker keeps state between calls in its own module globals (one worker per tool session).

The child gets the parent's ``sys.path`` and a minimal environment (no API keys: it runs code on hostile input);
its stdout is its stderr, so a function that prints cannot corrupt the answers; what it prints is discarded.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import os
import struct
import sys
from typing import Any

import msgspec

#: bytes of one answer read from a worker at most.
MAX_REPLY_BYTES = 64 << 20
#: environment variables a worker inherits (everything else, keys included, is left out).
_ENV_KEEP = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "TEMP", "TMP", "SYSTEMROOT", "BFCL_PROJECT_ROOT")
_HEADER = struct.Struct(">Q")
#: seconds a worker gets to exit after its input is closed before it is killed.
_EXIT_GRACE_S = 2.0


class WorkerError(RuntimeError):
    """The worker failed: it died, answered something unreadable or was stopped before (the message says)."""


class WorkerCallError(WorkerError):
    """The called function raised in the worker; the message is ``ExceptionType: message``."""


def _child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in _ENV_KEEP}
    env["PYTHONPATH"] = os.pathsep.join(os.path.abspath(p) if p else os.getcwd() for p in sys.path)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


class HostWorker:
    """One child process running calls in order, each under a deadline (see the module doc)."""

    def __init__(self, name: str, *, max_reply_bytes: int = MAX_REPLY_BYTES) -> None:
        self.name = name
        self.max_reply_bytes = max_reply_bytes
        self._proc: asyncio.subprocess.Process | None = None
        self._lock = asyncio.Lock()
        #: why the worker takes no more calls (None while it does)
        self.stopped: str | None = None

    @property
    def pid(self) -> int | None:
        """The child's pid once started."""
        return self._proc.pid if self._proc is not None else None

    @property
    def returncode(self) -> int | None:
        """The child's exit status once it ended (``-9``: killed)."""
        return self._proc.returncode if self._proc is not None else None

    async def call(self, fn: str, *args: Any, timeout_s: float) -> Any:
        """``fn(*args)`` in the worker (starting it if needed); its JSON-decoded result. ``TimeoutError`` past
        ``timeout_s`` (the worker is killed), ``WorkerCallError`` when ``fn`` raised, ``WorkerError`` otherwise."""
        request = msgspec.json.encode([fn, list(args)])
        async with self._lock:
            if self.stopped is not None:
                raise WorkerError(f"{self.name}: the worker takes no more calls ({self.stopped})")
            try:
                async with asyncio.timeout(timeout_s):
                    reply = await self._exchange(request)
            except TimeoutError:
                self._kill(f"a call ran past its {timeout_s:g}s deadline")
                raise
            except BaseException:  # cancelled mid-call, or the pipe broke: its state is unknown
                self._kill("a call was interrupted")
                raise
        try:
            ok, value = msgspec.json.decode(reply)
        except (msgspec.DecodeError, RecursionError, ValueError, TypeError):
            raise WorkerError(f"{self.name}: the worker's answer is not readable") from None
        if not ok:
            raise WorkerCallError(str(value))
        return value

    async def _exchange(self, request: bytes) -> bytes:
        if self._proc is None:
            self._proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "agentcompass.host_worker", stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL, env=_child_env(),
                start_new_session=os.name == "posix")
        proc = self._proc
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(_HEADER.pack(len(request)) + request)
            await proc.stdin.drain()
            (size,) = _HEADER.unpack(await proc.stdout.readexactly(_HEADER.size))
            if size > self.max_reply_bytes:
                raise WorkerError(f"{self.name}: the worker's answer is {size} bytes; the cap is "
                                  f"{self.max_reply_bytes}")
            return await proc.stdout.readexactly(size)
        except (asyncio.IncompleteReadError, ConnectionError):
            code = await _exit_code(proc)
            raise WorkerError(f"{self.name}: the worker process ended during the call (exit status {code})") from None

    def _kill(self, why: str) -> None:
        self.stopped = why
        if self._proc is not None and self._proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self._proc.kill()

    def abandon(self, why: str) -> None:
        """Kill the worker without waiting for it, from outside the event loop that started it (that loop may be
        closed): its pipes are let go so they are not reported as left open."""
        self._kill(why)
        transport = getattr(self._proc, "_transport", None)
        if transport is not None:
            with contextlib.suppress(Exception):  # a closed loop cannot schedule the close callbacks
                transport.close()

    async def aclose(self) -> None:
        """Stop the worker: its input is closed, and it is killed if it has not exited soon after."""
        if self.stopped is None:
            self.stopped = "closed"
        proc = self._proc
        if proc is None:
            return
        if proc.returncode is None and proc.stdin is not None:
            proc.stdin.close()
        try:
            async with asyncio.timeout(_EXIT_GRACE_S):
                await proc.wait()
        except TimeoutError:
            self._kill(self.stopped)
            await proc.wait()


async def _exit_code(proc: asyncio.subprocess.Process) -> int | None:
    try:
        async with asyncio.timeout(_EXIT_GRACE_S):
            return await proc.wait()
    except TimeoutError:
        proc.kill()
        return await proc.wait()


class WorkerPool:
    """Workers reused across calls of functions that keep no state between calls (a grader's check of one
    answer): a call takes an idle worker, or starts one, and gives it back when the function returned or raised.
    A worker whose call ran past its deadline, was interrupted or died is gone (``HostWorker.call`` killed it);
    one that served ``max_calls`` calls is closed rather than given back, and at most ``max_idle`` wait idle.
    Starting a Python per call cost ~0.1 CPU-s each (BFCL grades thousands of answers per run).

    Workers belong to the event loop that started them: called from another loop, the pool drops the idle ones
    (killed) and starts afresh. ``aclose`` closes the idle ones; the pool takes no further call after it."""

    def __init__(self, name: str, *, max_idle: int = 4, max_calls: int = 256) -> None:
        self.name = name
        self.max_idle = max_idle
        self.max_calls = max_calls
        #: workers started so far (each one Python process)
        self.started = 0
        self._idle: list[tuple[HostWorker, int]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False

    async def call(self, fn: str, *args: Any, timeout_s: float) -> Any:
        """``fn(*args)`` in a pooled worker (see ``HostWorker.call`` for what it raises)."""
        if self._closed:
            raise WorkerError(f"{self.name}: the worker pool is closed")
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._drop_idle()
            self._loop = loop
        if self._idle:
            worker, calls = self._idle.pop()
        else:
            worker, calls = HostWorker(self.name), 0
            self.started += 1
        try:
            return await worker.call(fn, *args, timeout_s=timeout_s)
        finally:
            calls += 1
            if (worker.stopped is None and not self._closed and calls < self.max_calls
                    and len(self._idle) < self.max_idle and worker.returncode is None):
                self._idle.append((worker, calls))
            else:
                await worker.aclose()

    def _drop_idle(self) -> None:
        for worker, _ in self._idle:
            worker.abandon("its event loop is gone")
        self._idle.clear()

    async def aclose(self) -> None:
        """Close the idle workers (a call in flight closes its own when it ends)."""
        self._closed = True
        idle, self._idle = self._idle, []
        if self._loop is not asyncio.get_running_loop():
            for worker, _ in idle:
                worker.abandon("closed")
            return
        await asyncio.gather(*(worker.aclose() for worker, _ in idle), return_exceptions=True)


async def run_in_worker(fn: str, *args: Any, timeout_s: float, name: str = "host worker") -> Any:
    """``fn(*args)`` in a fresh worker, closed afterwards (see ``HostWorker.call``)."""
    worker = HostWorker(name)
    try:
        return await worker.call(fn, *args, timeout_s=timeout_s)
    finally:
        await worker.aclose()


def _serve() -> None:
    """The child's loop: read a request, call, answer, until the input closes."""
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # what the called code prints goes to stderr, not into the answers
    sys.stdout = sys.stderr
    requests = sys.stdin.buffer
    while True:
        header = requests.read(_HEADER.size)
        if len(header) < _HEADER.size:
            return
        body = requests.read(_HEADER.unpack(header)[0])
        try:
            fn, args = msgspec.json.decode(body)
            module, _, attr = fn.partition(":")
            reply: list[Any] = [True, getattr(importlib.import_module(module), attr)(*args)]
        except Exception as exc:  # the function's failure is the caller's answer
            reply = [False, _describe(exc)]
        try:
            data = msgspec.json.encode(reply, enc_hook=repr)
        except Exception as exc:
            data = msgspec.json.encode([False, f"the result could not be encoded ({_describe(exc)})"])
        answers.write(_HEADER.pack(len(data)) + data)
        answers.flush()


def _describe(exc: BaseException) -> str:
    try:
        text = str(exc)
    except Exception:
        text = "(unprintable)"
    return f"{type(exc).__name__}: {text}"[:4000]


if __name__ == "__main__":
    _serve()


__all__ = ["MAX_REPLY_BYTES", "HostWorker", "WorkerCallError", "WorkerError", "WorkerPool", "run_in_worker"]
