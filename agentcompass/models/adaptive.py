"""Adaptive concurrency per model endpoint: an AIMD limiter shared by the gateway and in-process clients.

``AdaptiveLimiter`` caps the calls in flight to one endpoint at ``limit`` and moves ``limit`` with what the
endpoint says:

- it starts low (``initial``, 4 by default, never above ``max_limit``);
- *slow start*: until the first rate limit, every successful call made while the limiter was saturated
  (calls waiting, or every slot busy) raises the limit by 1, so the limit doubles per round trip;
- afterwards it grows by 1 per window of ``limit`` saturated successes (additive increase);
- a 429 cuts it (multiplicative decrease) to the calls still in flight, bounded to ``[ceil(limit/2), limit-1]``:
  the other calls in flight when the endpoint said "too many" are about what it serves. One 429 *episode*
  counts once (a window = the calls in flight at the cut): a later 429 of a call started before the cut
  only corrects that estimate by one (that call did not fit either), never below the episode's floor of
  half the limit before it;
- ``Retry-After`` (on a 429 or 5xx) pauses new calls until then;
- the limit stays in ``[1, max_limit]``.

``LimiterRegistry`` keeps one limiter per ``(base_url, model)`` for a launch and tells subscribers (the
requests using that endpoint) when a limit changes.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Literal

from ..common.error_kinds import ErrorKind
from .waiting import waiting

DEFAULT_INITIAL_LIMIT = 4
#: a Retry-After pause never exceeds this (a broken header must not stall a run for hours).
MAX_PAUSE_S = 120.0

Outcome = Literal["ok", "rate_limited", "error"]
#: ``on_change(limit, reason)``; reason is ``increase``, ``rate_limited`` or ``max_changed``.
OnChange = Callable[[int, str], None]


def outcome_of(kind: str | None) -> Outcome:
    """The limiter outcome for a ``ModelError`` kind (``None``: the call succeeded): a rate limit cuts the
    limit; any other failure, transient or not, only gives the slot back."""
    if kind is None:
        return "ok"
    return "rate_limited" if kind == ErrorKind.MODEL_RATE_LIMIT else "error"


class Ticket:
    """One granted slot: remembers the epoch it was granted in and whether the limiter was saturated."""

    __slots__ = ("busy", "epoch", "granted_at", "released")

    def __init__(self, epoch: int, busy: bool, granted_at: float = 0.0) -> None:
        self.epoch = epoch
        self.busy = busy
        self.released = False
        #: the limiter's clock when the slot was granted: how long its call has been waiting for an answer
        self.granted_at = granted_at


class AdaptiveLimiter:
    """An AIMD concurrency limit for one endpoint (see the module doc). Use ``async with limiter.slot()``
    or ``acquire``/``release``."""

    def __init__(self, endpoint: str, max_limit: int, *, initial: int = DEFAULT_INITIAL_LIMIT,
                 on_change: OnChange | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        if max_limit < 1:
            raise ValueError(f"max_limit must be >= 1, got {max_limit}")
        self.endpoint = endpoint
        self.max_limit = max_limit
        self.limit = max(1, min(initial, max_limit))
        self.in_flight = 0
        self.peak_in_flight = 0
        self.rate_limited = 0  # 429s seen
        self.cuts = 0  # 429 episodes that cut the limit
        self.slow_start = True
        self.paused_until = 0.0
        self._epoch = 0
        self._floor = 1  # the lowest the current 429 episode may take the limit (half the limit before it)
        self._acks = 0
        self._waiters: deque[asyncio.Future[Ticket]] = deque()
        self._held: set[Ticket] = set()  # granted, not released: the calls waiting on the endpoint
        self._wake_handle: asyncio.TimerHandle | None = None
        self._on_change = on_change
        self._clock = clock

    def __repr__(self) -> str:
        return (f"AdaptiveLimiter({self.endpoint!r}, limit={self.limit}, max={self.max_limit}, "
                f"in_flight={self.in_flight})")

    @property
    def waiting(self) -> int:
        """Calls waiting for a slot."""
        return len(self._waiters)

    def slow_calls(self, after_s: float) -> tuple[int, float]:
        """(calls holding a slot that have waited ``after_s`` or more for their answer, the longest wait)."""
        now = self._clock()
        waits = [now - t.granted_at for t in self._held]
        return sum(w >= after_s for w in waits), max(waits, default=0.0)

    # ------------------------------------------------------------------ slots

    async def acquire(self) -> Ticket:
        """Wait for a free slot (FIFO) and take it."""
        if not self._waiters and self._can_grant():
            return self._grant()
        fut: asyncio.Future[Ticket] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        self._schedule_wake()
        try:
            with waiting():  # not the try's working time (harness_params.working_limit)
                return await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self.release(fut.result(), "error")  # granted as we were cancelled: give it back
            else:
                with contextlib.suppress(ValueError):  # _wake may have dropped it already
                    self._waiters.remove(fut)
            raise

    def release(self, ticket: Ticket, outcome: Outcome, retry_after: float | None = None) -> None:
        """Give the slot back and learn from how the call went."""
        if ticket.released:
            return
        ticket.released = True
        self._held.discard(ticket)
        self.in_flight -= 1
        now = self._clock()
        if retry_after is not None and retry_after > 0:
            self.paused_until = max(self.paused_until, now + min(retry_after, MAX_PAUSE_S))
        if outcome == "ok":
            self._on_success(ticket)
        elif outcome == "rate_limited":
            self.rate_limited += 1
            if ticket.epoch == self._epoch:
                self._cut()
            elif ticket.epoch == self._epoch - 1 and self.limit > self._floor:
                # another call of the episode just cut was refused: one call fewer fits than estimated
                self._change(self.limit - 1, "rate_limited")
        self._wake()

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[Ticket]:
        """``async with`` form; an exception leaving the block counts as ``error`` unless the body released
        the ticket itself with a better outcome."""
        ticket = await self.acquire()
        try:
            yield ticket
        finally:
            self.release(ticket, "error")  # no-op when the body already released it

    def set_max(self, max_limit: int) -> None:
        """Raise (only) the ceiling, e.g. when a second request with a higher concurrency shares the endpoint."""
        if max_limit > self.max_limit:
            self.max_limit = max_limit
            self._wake()

    # ------------------------------------------------------------------ internals

    def _can_grant(self) -> bool:
        return self.in_flight < self.limit and self._clock() >= self.paused_until

    def _grant(self) -> Ticket:
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        ticket = Ticket(self._epoch, busy=self.in_flight >= self.limit or bool(self._waiters), granted_at=self._clock())
        self._held.add(ticket)
        return ticket

    def _on_success(self, ticket: Ticket) -> None:
        if not ticket.busy or self.limit >= self.max_limit:
            return
        if self.slow_start:
            self._change(self.limit + 1, "increase")
            return
        self._acks += 1
        if self._acks >= self.limit:
            self._acks = 0
            self._change(self.limit + 1, "increase")

    def _cut(self) -> None:
        others = self.in_flight  # this call is already released
        self._floor = math.ceil(self.limit / 2)
        new = min(self.limit - 1, max(self._floor, others))
        self._epoch += 1
        self._acks = 0
        self.slow_start = False
        self.cuts += 1
        self._change(max(1, new), "rate_limited")

    def _change(self, limit: int, reason: str) -> None:
        limit = max(1, min(limit, self.max_limit))
        if limit == self.limit:
            return
        self.limit = limit
        if self._on_change is not None:
            self._on_change(limit, reason)

    def _wake(self) -> None:
        while self._waiters and self._can_grant():
            fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(self._grant())
        self._schedule_wake()

    def _schedule_wake(self) -> None:
        # Paused by Retry-After: come back when the pause ends (a release may never happen meanwhile).
        if self._wake_handle is not None:
            self._wake_handle.cancel()
            self._wake_handle = None
        if not self._waiters or self.in_flight >= self.limit:
            return  # nothing waits, or a release will wake them
        # Only the pause holds them. Always come back (at least 1 ms later): loop timers may fire a little
        # early, and the pause may end between the check in _wake and this one.
        delay = max(self.paused_until - self._clock(), 0.001)
        self._wake_handle = asyncio.get_running_loop().call_later(delay, self._wake)


def endpoint_label(base_url: str, model_id: str) -> str:
    """``model@base_url``, as shown in progress."""
    return f"{model_id}@{base_url.rstrip('/')}"


class LimiterRegistry:
    """One ``AdaptiveLimiter`` per ``(base_url, model)`` for a launch; subscribers hear of limit changes."""

    def __init__(self, *, initial: int = DEFAULT_INITIAL_LIMIT) -> None:
        self.initial = initial
        self._limiters: dict[tuple[str, str], AdaptiveLimiter] = {}
        self._subscribers: dict[tuple[str, str], dict[str, Callable[[str, int, str], None]]] = {}

    def get(self, base_url: str, model_id: str, max_limit: int, *, subscriber: str | None = None,
            on_change: Callable[[str, int, str], None] | None = None) -> AdaptiveLimiter:
        """The endpoint's limiter (created on first use; a higher ``max_limit`` raises its ceiling).

        ``on_change(endpoint, limit, reason)`` registered under ``subscriber`` hears every change (and the
        starting limit once, with reason ``start``)."""
        key = (base_url.rstrip("/"), model_id)
        subs = self._subscribers.setdefault(key, {})
        limiter = self._limiters.get(key)
        if limiter is None:
            label = endpoint_label(*key)

            def changed(limit: int, reason: str) -> None:
                for cb in list(subs.values()):
                    cb(label, limit, reason)

            limiter = self._limiters[key] = AdaptiveLimiter(label, max_limit, initial=min(self.initial, max_limit),
                                                            on_change=changed)
        else:
            limiter.set_max(max_limit)
        if subscriber is not None and on_change is not None:
            subs[subscriber] = on_change
            on_change(limiter.endpoint, limiter.limit, "start")
        return limiter

    def unsubscribe(self, subscriber: str) -> None:
        """Stop telling ``subscriber`` about changes (its request ended)."""
        for subs in self._subscribers.values():
            subs.pop(subscriber, None)

    def limiters(self) -> list[AdaptiveLimiter]:
        """Every limiter of this launch."""
        return list(self._limiters.values())
