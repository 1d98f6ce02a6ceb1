"""One process-wide budget of request-body bytes the model gateway may hold in memory at once."""

from __future__ import annotations

import threading


class ByteBudget:
    """Bytes taken before they are buffered and given back when they are freed; ``take`` refuses what does not
    fit, so the bodies held together never exceed ``limit`` (thread-safe: several loops may share one)."""

    def __init__(self, limit: int) -> None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"ByteBudget limit must be a positive integer, got {limit!r}")
        self.limit = limit
        self._used = 0
        self._lock = threading.Lock()

    @property
    def used(self) -> int:
        """Bytes taken and not given back."""
        return self._used

    def take(self, n: int) -> bool:
        """Take ``n`` bytes if they fit; False (and nothing taken) if not."""
        if n < 0:
            raise ValueError("cannot take a negative number of bytes")
        with self._lock:
            if self._used + n > self.limit:
                return False
            self._used += n
            return True

    def give(self, n: int) -> None:
        """Give back ``n`` bytes taken before."""
        with self._lock:
            self._used = max(0, self._used - n)


class BodyLease:
    """The bytes of one request body, taken from a budget as they arrive; ``release`` gives them all back."""

    __slots__ = ("budget", "held")

    def __init__(self, budget: ByteBudget) -> None:
        self.budget = budget
        self.held = 0

    def grow_to(self, n: int) -> bool:
        """Hold at least ``n`` bytes; False if the budget cannot give the difference."""
        if n <= self.held:
            return True
        if not self.budget.take(n - self.held):
            return False
        self.held = n
        return True

    def release(self) -> None:
        """Give everything back (idempotent)."""
        held, self.held = self.held, 0
        if held:
            self.budget.give(held)


#: request bodies of every gateway in this process: 8 bodies at the gateway's default 64 MiB cap
PROCESS_BODY_BUDGET = ByteBudget(512 * 1024 * 1024)
