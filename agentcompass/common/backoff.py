"""The one backoff formula: exponential growth from ``base``, capped at ``cap``, times a random jitter factor."""

from __future__ import annotations

import math
import random
from typing import NamedTuple


class Jitter(NamedTuple):
    """The delay is multiplied by ``uniform(low, high)``."""

    low: float
    high: float


#: ``uniform(0, d)``: callers that failed together spread over the whole window (model calls).
FULL_JITTER = Jitter(0.0, 1.0)
#: ``uniform(d/2, d)``: at least half the delay, so a retry never comes back at once (task tries, image pulls).
HALF_JITTER = Jitter(0.5, 1.0)
#: exactly ``d`` (a schedule that must be predictable, e.g. the rescan of a refusing node).
NO_JITTER = Jitter(1.0, 1.0)

#: exponents past this add nothing once capped, and ``2.0 ** 1024`` overflows a float.
_MAX_EXPONENT = 62
_RNG = random.Random()


def backoff_delay(attempt: int, base: float, cap: float, *, jitter: Jitter = HALF_JITTER,
                  retry_after: float | None = None, rng: random.Random | None = None) -> float:
    """Seconds to wait after the ``attempt``-th failure (1-based): ``min(cap, base * 2**(attempt-1))`` times
    ``uniform(*jitter)``, and at least ``retry_after`` (a server's Retry-After) when that is a finite number."""
    if attempt < 1:
        raise ValueError(f"attempt counts from 1, got {attempt}")
    delay = min(cap, base * 2.0 ** min(attempt - 1, _MAX_EXPONENT))
    if jitter != NO_JITTER:
        delay *= (rng or _RNG).uniform(jitter.low, jitter.high)
    if retry_after is not None and math.isfinite(retry_after):
        delay = max(delay, retry_after)
    return delay


__all__ = ["FULL_JITTER", "HALF_JITTER", "NO_JITTER", "Jitter", "backoff_delay"]
