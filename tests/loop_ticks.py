"""Counting the event loop's turns while a test awaits something that must not block it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class Ticks:
    """How many times a background coroutine got to run (``count``): > 0 means the loop was not blocked."""

    count = 0


@asynccontextmanager
async def loop_ticks() -> AsyncIterator[Ticks]:
    """A coroutine that counts its turns on the running loop while the body runs."""
    ticks = Ticks()

    async def tick() -> None:
        while True:
            ticks.count += 1
            await asyncio.sleep(0)

    beat = asyncio.create_task(tick())
    try:
        yield ticks
    finally:
        beat.cancel()
