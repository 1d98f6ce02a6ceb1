"""Commands in a container: one exec each, its output streamed into capped buffers, a timeout killing its
process group.

Each exec announces its pid (= its process group, runc makes every exec a session leader) on stderr before it
runs the command; that line is cut from stderr as it streams in. The command's environment carries a marker of
its own, so the kill (a second exec, as root) also finds what left the group. A timed-out command exits with
``TIMEOUT_EXIT_CODE``; stdout and stderr keep at most ``output_limit_bytes`` each.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any, Protocol

import aiodocker
from aiodocker.containers import DockerContainer

from ..._errors import EnvironmentError_
from ...interfaces import ExecResult
from .._output import CappedBuffer

log = logging.getLogger("agentcompass.environments.docker.provider")

TIMEOUT_EXIT_CODE = 124
EXEC_MARKER = "AGENTCOMPASS_EXEC"
# Print our pid (the process group leader) on stderr, then become the command.
_WRAPPER = 'echo "$$" >&2; exec "$@"'
_KILL_GRACE_S = 5.0
_EXIT_POLL_S = 3.0


class DaemonCall(Protocol):
    """``DockerEnvironment._daemon``: one daemon call, bounded and retried; a gone container is an
    EnvironmentError_."""

    async def __call__(self, op: Callable[[], Any], what: str, *, retry_timeouts: bool = True,
                       timeout_s: float | None = None) -> Any: ...


async def run_exec(container: DockerContainer, daemon: DaemonCall, argv: list[str], *, name: str, workdir: str,
                   env: dict[str, str], limit: float, output_limit: int, cwd: str | None) -> ExecResult:
    """Run ``argv`` in ``container`` (environment ``name``) in ``workdir`` with ``env``; after ``limit`` seconds
    its process group is killed. ``cwd`` is what the caller asked for, for the error when it is no directory."""
    key = uuid.uuid4().hex
    exec_env = {**env, EXEC_MARKER: key}
    out = CappedBuffer(output_limit)
    err = CappedBuffer(output_limit)
    state: dict[str, Any] = {"pid": None, "exec": None}
    started = time.monotonic()
    deadline = asyncio.timeout(limit)
    try:
        async with deadline:
            await _stream(container, daemon, argv, workdir, exec_env, out, err, state)
    except TimeoutError:
        if not deadline.expired():
            raise
    except BaseException:
        # Cancelled or failed half-way: never leave the command running in the container.
        await asyncio.shield(kill_exec(container, name, state["pid"], key))
        raise
    timed_out = deadline.expired()
    if timed_out:
        await asyncio.shield(kill_exec(container, name, state["pid"], key))
        exit_code: int | None = TIMEOUT_EXIT_CODE
    else:
        exit_code = await _exit_code(daemon, state["exec"])
        if state["pid"] is None and exit_code == 126 and b"chdir to cwd" in out.getvalue():
            # The runtime could not even start the command: same error as the local provider.
            raise EnvironmentError_(f"cwd {cwd!r} is not a directory in environment {name}")
    return ExecResult(
        exit_code=exit_code if exit_code is not None else -1,
        stdout=out.text(), stderr=err.text(), timed_out=timed_out,
        duration_s=time.monotonic() - started, truncated=out.truncated or err.truncated,
        output_bytes=out.total + err.total)


async def _stream(container: DockerContainer, daemon: DaemonCall, argv: list[str], workdir: str,
                  env: dict[str, str], out: CappedBuffer, err: CappedBuffer, state: dict[str, Any]) -> None:
    # Note: when the command leaves background children holding its output, the daemon keeps the
    # stream open ~2 s after the command exits. Closing our end earlier only makes the *next* exec
    # on this container wait for the daemon, so the stream is read to its end.
    full = ["/bin/sh", "-c", _WRAPPER, "sh", *argv]
    ex = await daemon(lambda: container.exec(full, environment=env, workdir=workdir),
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


async def _exit_code(daemon: DaemonCall, ex: Any) -> int | None:
    """The exit code of a finished exec (the daemon may lag behind the end of the stream)."""
    loop = asyncio.get_running_loop()
    until = loop.time() + _EXIT_POLL_S
    while True:
        info = await daemon(ex.inspect, "exec inspect")
        if not info.get("Running") or loop.time() > until:
            code = info.get("ExitCode")
            return int(code) if code is not None else None
        await asyncio.sleep(0.02)


async def kill_exec(container: DockerContainer, name: str, pid: int | None, key: str) -> None:
    """Kill the exec's process group and anything else carrying its marker, through a second exec."""
    script = (
        f'p={pid or ""}; if [ -n "$p" ] && [ "$p" -gt 1 ]; then kill -s KILL -$p 2>/dev/null; '
        'kill -s KILL $p 2>/dev/null; fi; '
        'for d in /proc/[0-9]*; do '
        f'case "$(tr "\\0" "\\n" < $d/environ 2>/dev/null)" in *"{EXEC_MARKER}={key}"*) '
        'kill -s KILL "${d#/proc/}" 2>/dev/null;; esac; done; true')
    try:
        await root_exec(container, script, timeout_s=_KILL_GRACE_S)
    except (TimeoutError, aiodocker.DockerError, OSError) as exc:
        log.warning("environment %s: killing a timed-out command failed: %s", name, exc)


async def root_exec(container: DockerContainer, script: str, *, timeout_s: float) -> int:
    """Run a small ``/bin/sh -c`` script as root, without output; its exit code. TimeoutError if slow."""
    async with asyncio.timeout(timeout_s):
        ex = await container.exec(["/bin/sh", "-c", script], user="0", stdout=False, stderr=False)
        await ex.start(detach=True)
        while True:
            info = await ex.inspect()
            code = info.get("ExitCode")
            if not info.get("Running") and code is not None:
                return int(code)
            await asyncio.sleep(0.02)


__all__ = ["EXEC_MARKER", "TIMEOUT_EXIT_CODE", "DaemonCall", "kill_exec", "root_exec", "run_exec"]
