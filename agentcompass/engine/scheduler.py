"""Scheduler: a fair queue across requests that grants attempt slots.

Limits: ``task_concurrency`` per request and one orchestration-wide ``OrchestrationSpec.task_concurrency``. Requests
are served round-robin so one large request cannot starve the others. The scheduler runs nothing itself: it
answers a ``Submit`` with a ``Grant`` on the request's inbox, and the request's attempt runner holds the slot
until the request sends ``Release``.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Mapping

from .gc_tuning import relaxed_gc
from .messages import (
    CancelRequest,
    Grant,
    MsgQueue,
    OpenLane,
    Release,
    RequestMsg,
    SchedulerMsg,
    Shutdown,
    Submit,
    WorkItem,
)

log = logging.getLogger("agentcompass.scheduler")


class _Lane:
    __slots__ = ("limit", "pending", "running")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.pending: deque[WorkItem] = deque()
        #: slots granted and not yet released (started or still on their way to the request)
        self.running = 0


class Scheduler:
    """Grants slots; reached only through its inbox, and talks to RequestActors only through theirs."""

    def __init__(self, max_concurrent: int | None, request_inboxes: Mapping[int, MsgQueue[RequestMsg]]) -> None:
        self.inbox: MsgQueue[SchedulerMsg] = MsgQueue(SchedulerMsg)
        self._max_concurrent = max_concurrent
        self._outboxes = dict(request_inboxes)
        self._running = 0
        self._peak_running = 0
        self._lanes: dict[int, _Lane] = {}
        self._order: list[int] = []
        self._rr = 0

    async def run(self) -> int:
        """The actor loop; ends on ``Shutdown`` and returns the highest number of slots held at once. While it
        runs the cyclic GC collects less often (see ``gc_tuning``)."""
        with relaxed_gc():
            while True:
                msg = await self.inbox.get()
                stop = self._handle(msg)
                # Drain what is already queued before dispatching: cheaper under bursts.
                while not stop and not self.inbox.empty():
                    stop = self._handle(self.inbox.get_nowait())
                if stop:
                    return self._peak_running
                self._dispatch()

    def _handle(self, msg: SchedulerMsg) -> bool:
        if isinstance(msg, Submit):
            lane = self._lanes.get(msg.item.request)
            if lane is not None:  # a closed lane's late submits are dropped
                lane.pending.append(msg.item)
        elif isinstance(msg, Release):
            lane = self._lanes.get(msg.request)
            if lane is not None:  # a closed lane's slots were taken back when it closed
                lane.running -= 1
                self._running -= 1
        elif isinstance(msg, OpenLane):
            self._lanes[msg.request] = _Lane(msg.limit)
            self._order.append(msg.request)
        elif isinstance(msg, CancelRequest):
            closed = self._lanes.pop(msg.request, None)
            if closed is not None:
                self._running -= closed.running
                self._order.remove(msg.request)
        elif isinstance(msg, Shutdown):
            return True
        return False

    def _has_global_slot(self) -> bool:
        return self._max_concurrent is None or self._running < self._max_concurrent

    def _dispatch(self) -> None:
        n = len(self._order)
        idle_rounds = 0
        while self._has_global_slot() and n and idle_rounds < n:
            req = self._order[self._rr % n]
            self._rr += 1
            lane = self._lanes[req]
            if lane.pending and lane.running < lane.limit:
                lane.running += 1
                self._running += 1
                self._peak_running = max(self._peak_running, self._running)
                self._outboxes[req].put(Grant(lane.pending.popleft()))
                idle_rounds = 0
            else:
                idle_rounds += 1
