"""Run an async job once per key for the whole process: callers on any event loop, in any thread, share it."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Hashable
from concurrent.futures import Future
from typing import Any, Generic, TypeVar

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")


class _Retry(Exception):
    """The caller running the job was cancelled: a waiter runs it instead."""


def _consume(fut: asyncio.Future[Any]) -> None:
    if not fut.cancelled():
        fut.exception()  # a shielded waiter that was cancelled never reads it: not an "unretrieved" error


class ProcessOnce(Generic[K, T]):
    """Per key, one run of an async job at a time in the whole process. Callers arriving while it runs wait for
    it and share its result or its error. A result is kept (later callers get it at once), an error is not (the
    next caller runs the job again). When the caller running the job is cancelled, one of those waiting runs it
    instead; a waiter that is cancelled leaves the run alone."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runs: dict[K, Future[T]] = {}

    async def run(self, key: K, job: Callable[[], Awaitable[T]], *,
                  retell: Callable[[BaseException], BaseException] | None = None) -> tuple[T, bool]:
        """``job()``'s result for ``key``, and whether this call ran the job (False: it shared another's).
        A waiter raises the error of the run it shared, or ``retell(error)`` (chained to it) when given."""
        while True:
            with self._lock:
                shared = self._runs.get(key)
                if shared is None:
                    mine: Future[T] = Future()
                    self._runs[key] = mine
            if shared is None:
                break
            waiting = asyncio.wrap_future(shared)
            waiting.add_done_callback(_consume)
            try:
                # shielded: cancelling this waiter must not cancel the future the running caller will settle
                return await asyncio.shield(waiting), False
            except _Retry:
                continue
            except Exception as exc:
                if retell is None:
                    raise
                raise retell(exc) from exc
        try:
            value = await job()
        except BaseException as exc:
            with self._lock:
                del self._runs[key]
            mine.set_exception(_Retry() if isinstance(exc, asyncio.CancelledError) else exc)
            raise
        mine.set_result(value)
        return value, True


__all__ = ["ProcessOnce"]
