"""Time a model call spends waiting on what it shares with other calls: a free slot at the endpoint (the
adaptive limiter's queue) and the pause before a retry.

An attempt's working time leaves it out (``harness_params.working_limit``, as Inspect's ``working_limit``): the
engine sets a ``WaitClock`` for the calls of one try (a context variable, so the tasks a call starts inherit
it) and the limiter and the retry loops report to whichever clock is set. Waits of concurrent calls overlap; the
clock counts the time any of them waited once.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar

__all__ = ["WaitClock", "counting_waits", "pause", "waiting"]


class WaitClock:
    """The time during which at least one of a try's model calls was waiting."""

    __slots__ = ("_clock", "_since", "_waiting", "total")

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._waiting = 0
        self._since = 0.0
        self.total = 0.0

    def begin(self) -> None:
        if self._waiting == 0:
            self._since = self._clock()
        self._waiting += 1

    def end(self) -> None:
        self._waiting -= 1
        if self._waiting == 0:
            self.total += self._clock() - self._since

    @property
    def busy(self) -> bool:
        """Whether a call is waiting now."""
        return self._waiting > 0

    def seconds(self) -> float:
        """Waited so far (the wait going on included)."""
        return self.total + (self._clock() - self._since if self._waiting else 0.0)


_clock: ContextVar[WaitClock | None] = ContextVar("agentcompass_model_wait_clock", default=None)


@contextlib.contextmanager
def counting_waits(clock: WaitClock | None) -> Iterator[None]:
    """The model calls made inside report their waits to ``clock`` (None: to nobody)."""
    token = _clock.set(clock)
    try:
        yield
    finally:
        _clock.reset(token)


@contextlib.contextmanager
def waiting() -> Iterator[None]:
    """The block is time the current call waits on a shared resource."""
    clock = _clock.get()
    if clock is None:
        yield
        return
    clock.begin()
    try:
        yield
    finally:
        clock.end()


async def pause(seconds: float) -> None:
    """``asyncio.sleep(seconds)`` counted as waiting (a retry's backoff)."""
    with waiting():
        await asyncio.sleep(seconds)
