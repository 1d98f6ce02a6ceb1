"""Shared plumbing for the Docker provider: the daemon client, bounded retried calls, ownership labels.

Every call to the daemon goes through :func:`call`: it bounds each try in time and retries only failures
that are transient (connection reset, daemon 5xx); 404/409 and other 4xx reach the caller unchanged.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Awaitable, Callable
from functools import cache
from typing import TypeVar

import aiodocker
import aiohttp

from ..._errors import EnvironmentError_
from ...common.backoff import Jitter, backoff_delay

log = logging.getLogger("agentcompass.environments.docker.provider")

T = TypeVar("T")
#: ``uniform(d/2, 3d/2)`` around the delay: concurrent calls to one busy daemon spread out.
_CALL_JITTER = Jitter(0.5, 1.5)

DEFAULT_BASE_IMAGE = "agentcompass/base:debian-bookworm"

LABEL_RUN_ID = "agentcompass.run_id"
LABEL_TASK_ID = "agentcompass.task_id"
LABEL_ROLE = "agentcompass.role"
LABEL_PID = "agentcompass.pid"
LABEL_PID_START = "agentcompass.pid_start"
LABEL_HOST = "agentcompass.host"
LABEL_KEEP = "agentcompass.keep"

#: aiodocker reports "cannot connect" as DockerError status 900.
_CONNECT_FAILED = 900


@cache
def host_id() -> str:
    """A stable id of this machine, so the sweep never judges another host's pids."""
    for path in ("/etc/machine-id", "/var/lib/dbus/machine-id"):
        try:
            with open(path) as fh:
                value = fh.read().strip()
        except OSError:
            continue
        if value:
            return f"{value[:32]}-{socket.gethostname()[:32]}"
    return socket.gethostname()[:64] or "unknown-host"


def process_start_time(pid: int) -> str | None:
    """The kernel start time of ``pid`` (clock ticks since boot), or None if no such process."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            stat = fh.read()
    except OSError:
        return None
    # comm (field 2) may contain spaces and parentheses: split after the last ')'.
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else None


def owner_labels() -> dict[str, str]:
    """Labels naming the process that owns a container or network (read by the orphan sweep)."""
    pid = os.getpid()
    return {LABEL_PID: str(pid), LABEL_PID_START: process_start_time(pid) or "", LABEL_HOST: host_id()}


def owner_alive(labels: dict[str, str]) -> bool | None:
    """True/False when the owner is on this host and alive/dead; None when it cannot be told here."""
    if labels.get(LABEL_HOST) != host_id():
        return None
    try:
        pid = int(labels.get(LABEL_PID, ""))
    except ValueError:
        return None
    started = process_start_time(pid)
    if started is None:
        return False
    recorded = labels.get(LABEL_PID_START)
    # A pid that was reused by another process counts as dead.
    return not recorded or recorded == started


def make_client(url: str | None = None) -> aiodocker.Docker:
    """An aiodocker client for ``url`` (unix socket by default); needs a running event loop."""
    return aiodocker.Docker(url=url)


def is_transient(exc: BaseException) -> bool:
    """Worth retrying: connection trouble or a daemon-side 5xx."""
    if isinstance(exc, aiodocker.DockerError):
        return exc.status >= 500
    return isinstance(exc, aiohttp.ClientConnectionError | aiohttp.ClientPayloadError | ConnectionError)


async def call(op: Callable[[], Awaitable[T]], *, what: str, timeout_s: float, retries: int = 2,
               retry_timeouts: bool = True) -> T:
    """Run ``op`` with a per-try timeout, retrying transient failures with jittered backoff.

    Raises EnvironmentError_ when every try failed for a transient reason or timed out; other errors
    (e.g. DockerError 404/409) propagate unchanged. ``retry_timeouts=False`` for calls that are not
    safe to repeat after an unknown outcome.
    """
    last: BaseException | None = None
    for attempt in range(retries + 1):
        if attempt:
            await asyncio.sleep(backoff_delay(attempt, 0.2, 2.0, jitter=_CALL_JITTER))
        try:
            async with asyncio.timeout(timeout_s):
                return await op()
        except TimeoutError as exc:
            last = exc
            log.warning("docker %s timed out after %.1fs (try %d)", what, timeout_s, attempt + 1)
            if not retry_timeouts:
                break
        except Exception as exc:
            if not is_transient(exc):
                raise
            last = exc
            log.warning("docker %s failed transiently (try %d): %s", what, attempt + 1, exc)
    if isinstance(last, TimeoutError):
        raise EnvironmentError_(f"docker {what} timed out after {timeout_s:.1f}s") from last
    raise EnvironmentError_(f"docker {what} failed: {last}") from last


async def settled(task: asyncio.Future[T], timeout_s: float) -> T | None:
    """The result of ``task`` once it is done (waiting at most ``timeout_s``); None if it failed.

    For cleanup after a cancel: a create that was still in flight may yet produce something to remove.
    """
    if not task.done():
        try:
            async with asyncio.timeout(timeout_s):
                await asyncio.wait([task])
        except TimeoutError:
            task.cancel()
            return None
    if task.cancelled() or task.exception() is not None:
        return None
    return task.result()


async def image_exists(docker: aiodocker.Docker, ref: str, *, timeout_s: float = 30.0) -> bool:
    """Whether the daemon has image ``ref`` locally."""
    try:
        await call(lambda: docker.images.inspect(ref), what=f"image inspect {ref}", timeout_s=timeout_s)
    except aiodocker.DockerError as exc:
        if exc.status == 404:
            return False
        raise
    return True


async def remove_container(docker: aiodocker.Docker, ref: str, *, timeout_s: float) -> str | None:
    """Force-remove container ``ref`` (id or name) and wait until it is gone, within ``timeout_s``.

    None once it is gone (404 counts: someone else removed it); otherwise what went wrong. A 409
    ("removal already in progress": another sweep or owner got there first) is waited out rather than
    reported, so a network the container was attached to can be removed after.
    """
    loop = asyncio.get_running_loop()
    until = loop.time() + timeout_s
    while True:
        left = until - loop.time()
        try:
            await call(lambda: docker.containers.container(ref).delete(force=True, v=True),
                       what="container remove", timeout_s=max(1.0, left))
            return None
        except aiodocker.DockerError as exc:
            if exc.status == 404:
                return None
            if exc.status != 409 or loop.time() >= until:
                return str(exc.message)
        except EnvironmentError_ as exc:
            return str(exc)
        await asyncio.sleep(0.2)
