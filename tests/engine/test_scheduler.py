"""The scheduler, driven through its inbox only: it grants slots fairly within the limits, and a request that
ends gives back every slot it held, grants it never started included."""

from __future__ import annotations

import asyncio

import pytest

from agentcompass.engine.messages import (
    CancelRequest,
    Grant,
    MsgQueue,
    OpenLane,
    Release,
    RequestMsg,
    Shutdown,
    Submit,
    WorkItem,
)
from agentcompass.engine.scheduler import Scheduler
from agentcompass.interfaces import TaskSpec

pytestmark = pytest.mark.timeout(60)


def _item(request: int, task: str) -> WorkItem:
    return WorkItem(request=request, task=TaskSpec(task_id=task), attempt=1, identity="x")


async def _grant(q: MsgQueue[RequestMsg]) -> str:
    msg = await asyncio.wait_for(q.get(), 10)
    assert isinstance(msg, Grant)
    return msg.item.task.task_id


def test_a_closed_lane_gives_back_its_unstarted_grants_and_the_next_request_runs() -> None:
    async def main() -> None:
        inboxes: dict[int, MsgQueue[RequestMsg]] = {0: MsgQueue(RequestMsg, strict=True),
                                                     1: MsgQueue(RequestMsg, strict=True)}
        sched = Scheduler(1, inboxes)
        running = asyncio.create_task(sched.run())
        sched.inbox.put(OpenLane(request=0, limit=4))
        sched.inbox.put(OpenLane(request=1, limit=4))
        for item in (_item(0, "a"), _item(0, "b"), _item(1, "c")):
            sched.inbox.put(Submit(item))
        assert await _grant(inboxes[0]) == "a"  # one global slot: request 1 waits
        sched.inbox.put(Release(request=0))
        assert await _grant(inboxes[1]) == "c"  # round-robin: the other request is next
        sched.inbox.put(Release(request=1))
        assert await _grant(inboxes[0]) == "b"
        # request 0 ends without starting "b": closing its lane takes the slot back
        sched.inbox.put(CancelRequest(request=0))
        sched.inbox.put(Submit(_item(1, "d")))
        sched.inbox.put(Submit(_item(0, "late")))  # a closed lane's late submit is dropped
        assert await _grant(inboxes[1]) == "d"
        sched.inbox.put(Shutdown())
        assert await asyncio.wait_for(running, 10) == 1  # the peak number of slots held at once
        assert inboxes[0].empty()

    asyncio.run(main())
