"""Scheduler: a fair queue across requests that grants task slots.

Limits: ``task_concurrency`` per request and one orchestration-wide ``OrchestrationSpec.task_concurrency``. Requests
are served round-robin so one large request cannot starve the others.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable

from .gc_tuning import relaxed_gc
from .messages import AttemptDone, CancelRequest, MsgQueue, Release, SchedulerMsg, Submit, WorkItem

log = logging.getLogger("agentcompass.scheduler")

RunAttempt = Callable[[WorkItem], Awaitable[AttemptDone]]


class _Lane:
    __slots__ = ("cancelled", "limit", "outbox", "pending", "run", "running", "tasks")

    def __init__(self, limit: int, run: RunAttempt, outbox: MsgQueue[AttemptDone]) -> None:
        self.limit = limit
        self.run = run
        self.outbox = outbox
        self.pending: deque[WorkItem] = deque()
        self.running = 0
        self.tasks: set[asyncio.Task[None]] = set()
        self.cancelled = False


class Scheduler:
    """Owns every running TaskActor; talks to RequestActors only through messages."""

    def __init__(self, max_concurrent: int | None) -> None:
        self.inbox: MsgQueue[SchedulerMsg] = MsgQueue(SchedulerMsg)
        self.max_concurrent = max_concurrent
        self.running = 0
        self.peak_running = 0
        self._lanes: dict[int, _Lane] = {}
        self._order: list[int] = []
        self._rr = 0
        self._closed = False

    def add_lane(self, request: int, limit: int, run: RunAttempt, outbox: MsgQueue[AttemptDone]) -> None:
        """Register a request: how many of its attempts may run at once and how to run one."""
        self._lanes[request] = _Lane(limit, run, outbox)
        self._order.append(request)

    async def run(self) -> None:
        """The actor loop; ends when cancelled (by the supervisor, after every request is done). While it
        runs the cyclic GC collects less often (see ``gc_tuning``)."""
        with relaxed_gc():
            while True:
                msg = await self.inbox.get()
                self._handle(msg)
                # Drain what is already queued before dispatching: cheaper under bursts.
                while not self.inbox.empty():
                    self._handle(self.inbox.get_nowait())
                self._dispatch()

    def _handle(self, msg: SchedulerMsg) -> None:
        if isinstance(msg, Submit):
            lane = self._lanes[msg.item.request]
            if not lane.cancelled:
                lane.pending.append(msg.item)
        elif isinstance(msg, Release):
            self._lanes[msg.request].running -= 1
            self.running -= 1
        elif isinstance(msg, CancelRequest):
            found = self._lanes.get(msg.request)
            if found is None:
                return
            lane = found
            lane.cancelled = True
            lane.pending.clear()
            for t in lane.tasks:
                t.cancel()

    def _has_global_slot(self) -> bool:
        return self.max_concurrent is None or self.running < self.max_concurrent

    def _dispatch(self) -> None:
        if self._closed:
            return
        n = len(self._order)
        idle_rounds = 0
        while self._has_global_slot() and n and idle_rounds < n:
            req = self._order[self._rr % n]
            self._rr += 1
            lane = self._lanes[req]
            if lane.pending and lane.running < lane.limit:
                self._start(req, lane, lane.pending.popleft())
                idle_rounds = 0
            else:
                idle_rounds += 1

    def _start(self, req: int, lane: _Lane, item: WorkItem) -> None:
        lane.running += 1
        self.running += 1
        self.peak_running = max(self.peak_running, self.running)
        task = asyncio.create_task(self._run_one(lane, item), name=f"attempt-{req}-{item.task.task_id}")
        lane.tasks.add(task)

        def _done(t: asyncio.Task[None]) -> None:
            lane.tasks.discard(t)
            self.inbox.put(Release(request=req))

        task.add_done_callback(_done)

    async def _run_one(self, lane: _Lane, item: WorkItem) -> None:
        done = await lane.run(item)
        lane.outbox.put(done)

    async def shutdown(self) -> None:
        """Start nothing more; cancel every running attempt and wait for them to release their environments."""
        self._closed = True
        tasks = [t for lane in self._lanes.values() for t in lane.tasks]
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
