"""The overall bound of one HTTP exchange with a model endpoint, shared by the HTTP clients and the gateway.

httpx times each socket operation, so an endpoint that keeps a connection busy with keep-alive bytes (SSE
``: ping`` comments, Anthropic ``ping`` events, whitespace before a JSON body) or trickles its answer never
trips it. A ``Deadline`` bounds the exchange itself: ``stall`` seconds without progress, ``total`` in all.
"""

from __future__ import annotations

import asyncio

#: SSE event names / ``type`` values that only keep the connection alive (Anthropic sends ``ping``).
KEEPALIVE_EVENTS = frozenset({"ping", "keepalive"})
#: ``total_timeout`` when not given: ``max(this x timeout, TOTAL_TIMEOUT_FLOOR_S)``. The floor keeps a long
#: but steadily streaming answer (tens of thousands of reasoning tokens) from being cut when ``timeout`` is short.
TOTAL_TIMEOUT_FACTOR = 10.0
TOTAL_TIMEOUT_FLOOR_S = 1800.0


def default_total_timeout(timeout: float) -> float:
    """``total_timeout`` when the params do not set it: ``max(10 x timeout, 1800)`` seconds."""
    return max(TOTAL_TIMEOUT_FACTOR * timeout, TOTAL_TIMEOUT_FLOOR_S)


class Deadline:
    """The overall bound of one HTTP exchange, in loop time, on top of httpx's per-read timeouts.

    It ends ``total`` seconds after the request is sent, and ``stall`` seconds after the last progress (the
    request itself, then each content event of a stream). ``seen()`` runs per event and only reads the
    clock: the asyncio timeout moves (to ``stall + slack`` ahead) only once it is due within ``stall``, so a
    stream is cut after between ``stall`` and ``stall + slack`` seconds without progress, never earlier.
    """

    __slots__ = ("_loop", "_slack", "end", "scope", "stall", "total")

    def __init__(self, stall: float, total: float) -> None:
        self._loop = asyncio.get_running_loop()
        now = self._loop.time()
        self.stall = stall
        self.total = total
        self.end = now + total
        self._slack = min(0.1 * stall, 1.0)
        self.scope = asyncio.timeout_at(min(self.end, now + stall))

    def seen(self) -> None:
        """Record progress (a content event arrived)."""
        now = self._loop.time()
        when = self.scope.when()
        if when is not None and when < now + self.stall and when < self.end:
            self.scope.reschedule(min(self.end, now + self.stall + self._slack))

    def renew(self) -> asyncio.Timeout:
        """A fresh ``scope`` with the same expiry, to continue the deadline in another ``async with`` (a
        scope can be entered only once; the gateway sends the request and forwards the answer in two)."""
        self.scope = asyncio.timeout_at(self.scope.when())
        return self.scope

    def hit_total(self) -> bool:
        """Whether the expiry was the total cap (else: no progress for ``stall`` seconds)."""
        when = self.scope.when()
        return when is not None and when >= self.end

    def reason(self, stream: bool) -> str:
        """Why the exchange was cut, for an error message."""
        if self.hit_total():
            return f"the call took longer than total_timeout={self.total:g}s"
        if stream:
            return (f"its stream made no progress for {self.stall:g}s (keep-alives do not count; "
                    "model param `timeout`)")
        return f"no response within {self.stall:g}s (model param `timeout`)"
