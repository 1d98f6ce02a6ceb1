"""Process-wide slot counters, shared by every launch in the process.

A provider's active environments (``provider_limits``), its ``provider.open`` calls in flight
(``max_env_creates_in_flight``) and the image fetches per daemon (``max_concurrent_pulls``) are limits of the
daemon and the machine, which every launch in the process shares, so they are counted once per process, not
per launch (docs/engine.md#limits). The EnvironmentPool (``env_pool.py``) is the launch's own, created by its
Supervisor; it holds these counters only by reference.

Their thread locks are needed, because threads really do touch them: two launches may run on two event loops in
two threads (``agentcompass.launch`` called from worker threads, or ``async_launch`` on loops of
their own), and a waiter is woken on its own loop with ``call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Callable

__all__ = ["PROCESS_COUNTERS", "ProcessSlots", "ProviderCounters"]


class _Waiter:
    __slots__ = ("future", "granted", "limit", "loop")

    def __init__(self, limit: int, loop: asyncio.AbstractEventLoop) -> None:
        self.limit = limit
        self.loop = loop
        self.future: asyncio.Future[None] = loop.create_future()
        self.granted = False  # read and written only under the counter's lock


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class ProcessSlots:
    """A counter shared by every launch in the process, each acquirer bringing its own limit.

    ``acquire(limit)`` returns once the count is below ``limit`` (``None``: at once) and adds one; ``release``
    takes one off and wakes, in FIFO order, every waiter whose own limit the count is now below. Waiters may
    sit on different event loops in different threads: a thread lock guards the count and each waiter is
    woken on its own loop. A waiter whose loop is closed is dropped without taking a slot.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._lock = threading.Lock()
        self._count = 0
        self._waiters: deque[_Waiter] = deque()
        #: (loop, callback) of holders that yield their slots when someone has to wait (see ``on_wait``)
        self._yielders: list[tuple[asyncio.AbstractEventLoop, Callable[[], None]]] = []

    @property
    def waiting(self) -> bool:
        """Whether an ``acquire`` is waiting for a slot."""
        return bool(self._waiters)

    def on_wait(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` on the running loop whenever an ``acquire`` starts waiting (a holder of slots it can
        give up, such as containers started ahead, yields them); returns the function that unregisters it."""
        entry = (asyncio.get_running_loop(), callback)
        with self._lock:
            self._yielders.append(entry)

        def unregister() -> None:
            with self._lock:
                if entry in self._yielders:
                    self._yielders.remove(entry)
        return unregister

    @property
    def count(self) -> int:
        """Slots held right now (including ones granted to a waiter that has not resumed yet)."""
        return self._count

    async def acquire(self, limit: int | None) -> None:
        """Take a slot once the process-wide count is below ``limit``; give it back with ``release``."""
        loop = asyncio.get_running_loop()
        with self._lock:
            # Every waiter that could use a free slot has already been granted one (see _wake_locked), so
            # taking one here jumps over nobody who could have had it.
            if limit is None or self._count < limit:
                self._count += 1
                return
            waiter = _Waiter(limit, loop)
            self._waiters.append(waiter)
            yielders = list(self._yielders)
        for yloop, callback in yielders:
            try:
                yloop.call_soon_threadsafe(callback)
            except RuntimeError:  # its loop is closed
                continue
        try:
            await waiter.future
        except BaseException:
            with self._lock:
                granted = waiter.granted
                if not granted and waiter in self._waiters:  # not there if its loop was found closed
                    self._waiters.remove(waiter)
            if granted:  # granted while being cancelled: the caller never gets it, so give it back
                self.release()
            raise

    def try_acquire(self, limit: int | None, *, spare: int = 0) -> bool:
        """Take a slot only if that leaves at least ``spare`` more below ``limit`` and nobody is waiting; never
        waits. For holders that must not compete with waiters (containers started ahead of need)."""
        with self._lock:
            if self._waiters or (limit is not None and self._count + 1 + spare > limit):
                return False
            self._count += 1
            return True

    def release(self) -> None:
        """Give one slot back and wake whoever may now take it."""
        with self._lock:
            if self._count <= 0:
                raise RuntimeError(f"slots of {self.name!r} released more often than acquired")
            self._count -= 1
            self._wake_locked()

    def _wake_locked(self) -> None:
        if not self._waiters:
            return
        kept: deque[_Waiter] = deque()
        for waiter in self._waiters:
            if self._count >= waiter.limit:
                kept.append(waiter)
                continue
            try:
                waiter.loop.call_soon_threadsafe(_resolve, waiter.future)
            except RuntimeError:  # its loop is closed: nobody is waiting there any more
                continue
            waiter.granted = True
            self._count += 1
        self._waiters = kept


class ProviderCounters:
    """The (active environments, creates in flight) counters of each provider name. ``PROCESS_COUNTERS`` is the
    process's: every EnvironmentPool counts against it unless it is handed counters of its own."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._active: dict[str, ProcessSlots] = {}
        self._creates: dict[str, ProcessSlots] = {}

    def _get(self, table: dict[str, ProcessSlots], name: str) -> ProcessSlots:
        with self._lock:
            slots = table.get(name)
            if slots is None:
                slots = table[name] = ProcessSlots(name)
            return slots

    def active(self, provider: str) -> ProcessSlots:
        """The counter of ``provider``'s environments held open (``provider_limits``)."""
        return self._get(self._active, provider)

    def creates(self, provider: str) -> ProcessSlots:
        """The counter of ``provider``'s ``open`` calls running (``max_env_creates_in_flight``)."""
        return self._get(self._creates, provider)


#: the counters every launch of this process shares (see the module's docstring for why they are shared)
PROCESS_COUNTERS = ProviderCounters()
