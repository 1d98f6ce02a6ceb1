"""A tool body that runs away until released, noting whether the event loop kept turning while it ran."""

from __future__ import annotations

import asyncio
import threading


class Probe:
    """A tool that runs until released, noting whether the event loop turned (``ticks`` grew) meanwhile."""

    def __init__(self) -> None:
        self.ticks = 0
        self.calls = 0
        self.release = threading.Event()
        self.loop_turned = threading.Event()

    def run_away(self) -> None:
        start = self.ticks
        for _ in range(2000):  # at most ~20 s: a bound for the leftover thread (and for the unfixed code's loop)
            if self.release.wait(0.01):
                return
            if self.ticks >= start + 3:
                self.loop_turned.set()

    async def tick(self) -> None:
        while True:
            await asyncio.sleep(0.01)
            self.ticks += 1
