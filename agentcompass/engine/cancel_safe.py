"""Cleanup that a second cancellation cannot cut off half-way.

A run stopped by its timeout is cancelled once; a user pressing Ctrl-C during that stop cancels it again. The
stop's own work (cancel the attempts, record what was interrupted, write the summary, release containers and
the run lock) must still finish, or the run is left "running" with its containers behind. Each step is bounded
by its own deadline, so waiting through a few more cancellations never hangs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")

#: cancellations absorbed before the cleanup itself is cancelled (a third Ctrl-C means "now")
MAX_ABSORBED = 2


async def through_cancels(aw: Awaitable[T]) -> T:
    """Await ``aw`` to its end even when the calling task is cancelled meanwhile (up to ``MAX_ABSORBED``
    times); the absorbed cancellations are re-raised once it is done."""
    inner = asyncio.ensure_future(aw)
    me = asyncio.current_task()
    absorbed = 0
    while True:
        try:
            result = await asyncio.shield(inner)
        except asyncio.CancelledError:
            if inner.done() or absorbed >= MAX_ABSORBED:
                inner.cancel()
                raise
            absorbed += 1
            continue
        if absorbed and me is not None:
            raise asyncio.CancelledError()
        return result
