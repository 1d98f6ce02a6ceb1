"""Exclusive ``flock`` locks on a file between processes, waited for with a deadline.

The kernel drops a lock when its holder dies, even by SIGKILL, so a crashed holder never blocks the next one.
Each caller names its own errors: ``error("timeout")`` is raised once ``timeout_s`` has passed, and
``error("cancelled")`` as soon as ``cancelled`` is set (at the next poll in the async form).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Literal

#: why a wait for the lock was given up
LockWaitEnd = Literal["timeout", "cancelled"]


def _open(path: str | Path, mode: int) -> int:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    return os.open(path, os.O_RDWR | os.O_CREAT, mode)


def _try_lock(fd: int) -> bool:
    import fcntl  # here, not at import time: a module using this still imports where fcntl is missing

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _give_up_if_due(deadline: float, cancelled: threading.Event | None,
                    error: Callable[[LockWaitEnd], BaseException]) -> None:
    if cancelled is not None and cancelled.is_set():
        raise error("cancelled")
    if time.monotonic() > deadline:
        raise error("timeout")


@contextlib.contextmanager
def file_lock(path: str | Path, timeout_s: float, error: Callable[[LockWaitEnd], BaseException], *,
              cancelled: threading.Event | None = None, poll_s: float = 0.2, mode: int = 0o644) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created, with its directory, when missing) for the block; the wait
    polls every ``poll_s`` (waking at once when ``cancelled`` is set)."""
    fd = _open(path, mode)
    try:
        deadline = time.monotonic() + timeout_s
        while not _try_lock(fd):
            _give_up_if_due(deadline, cancelled, error)
            if cancelled is not None:
                cancelled.wait(poll_s)
            else:
                time.sleep(poll_s)
        yield
    finally:
        os.close(fd)  # releases the lock


@contextlib.asynccontextmanager
async def async_file_lock(path: str | Path, timeout_s: float, error: Callable[[LockWaitEnd], BaseException], *,
                          cancelled: threading.Event | None = None, poll_s: float = 0.5,
                          mode: int = 0o644) -> AsyncIterator[None]:
    """:func:`file_lock` for the event loop: the wait sleeps on the loop, not in a thread."""
    fd = _open(path, mode)
    try:
        deadline = time.monotonic() + timeout_s
        while not _try_lock(fd):
            _give_up_if_due(deadline, cancelled, error)
            await asyncio.sleep(poll_s)
        yield
    finally:
        os.close(fd)  # releases the lock
