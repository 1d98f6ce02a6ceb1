"""ray_docker's placement: a task stays on its node, a shared image draws tasks to the node holding it, a node
holds at most its capacity, and a lost node's tasks are placed again."""

from __future__ import annotations

import asyncio

import pytest

from agentcompass._errors import EnvironmentError_
from agentcompass.environments.ray.placement import NodeSlots, Placement


async def _placement(*nodes: NodeSlots) -> Placement:
    p = Placement()
    for n in nodes:
        await p.add(n)
    return p


async def test_every_environment_of_a_task_goes_to_the_node_it_was_first_placed_on() -> None:
    p = await _placement(NodeSlots("a", capacity=4), NodeSlots("b", capacity=4))
    first = await p.acquire("t1", "img", timeout=1)
    other = await p.acquire("t2", "img2", timeout=1)
    again = [await p.acquire("t1", "img", timeout=1) for _ in range(3)]
    assert {n.name for n in again} == {first.name}
    assert other.name != first.name  # the least loaded node took the new task


async def test_a_task_prefers_the_node_that_already_has_its_image() -> None:
    a, b = NodeSlots("a", capacity=4), NodeSlots("b", capacity=4)
    b.images.add("swe:1")
    p = await _placement(a, b)
    await p.acquire("t0", "x", timeout=1)  # b is emptier or equal: the image decides anyway
    assert (await p.acquire("t1", "swe:1", timeout=1)).name == "b"
    assert (await p.acquire("t2", "swe:1", timeout=1)).name == "b"
    assert (await p.acquire("t3", "other", timeout=1)).name == "a"


async def test_a_full_node_makes_its_tasks_wait_until_a_slot_is_released() -> None:
    p = await _placement(NodeSlots("a", capacity=1))
    held = await p.acquire("t1", None, timeout=1)
    waiter = asyncio.ensure_future(p.acquire("t2", None, timeout=5))
    await asyncio.sleep(0.05)
    assert not waiter.done()
    await p.release(held)
    assert (await waiter).name == "a"
    with pytest.raises(EnvironmentError_, match="no node had room"):
        await p.acquire("t3", None, timeout=0.05)


async def test_a_lost_node_unpins_its_tasks_and_they_go_to_a_live_node() -> None:
    p = await _placement(NodeSlots("a", capacity=2), NodeSlots("b", capacity=2))
    first = await p.acquire("t1", None, timeout=1)
    await p.lose(first.name)
    assert p.pinned("t1") is None
    moved = await p.acquire("t1", None, timeout=1)
    assert moved.name != first.name and moved.alive
    await p.lose(moved.name)
    with pytest.raises(EnvironmentError_, match="every node with Docker was lost"):
        await p.acquire("t1", None, timeout=1)


async def test_waiters_are_woken_when_the_last_node_is_lost() -> None:
    p = await _placement(NodeSlots("a", capacity=1))
    await p.acquire("t1", None, timeout=1)
    waiter = asyncio.ensure_future(p.acquire("t2", None, timeout=5))
    await asyncio.sleep(0.05)
    await p.lose("a")
    with pytest.raises(EnvironmentError_, match="was lost"):
        await waiter
