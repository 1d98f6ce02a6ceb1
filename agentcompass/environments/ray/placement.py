"""Where ``ray_docker`` opens each environment: which node of the cluster.

* Every environment of a task (its attempts, their agent and verifier environments, their retries) goes to the
  node the task was first placed on, while that node is alive; a task whose node was lost is placed again.
* A new task goes to a node with room, preferring one that already has the task's image (a 1-3 GB pull saved),
  then the least loaded (open environments over capacity), then the name (stable).
* A node holds at most its capacity of open environments; an open waits (bounded by the caller) for room on
  its task's node, or on any node for a new task.

Pure bookkeeping on the coordinator's event loop: no Ray calls here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..._errors import EnvironmentError_


@dataclass(eq=False)
class NodeSlots:
    """One node as placement sees it."""

    name: str
    capacity: int
    active: int = 0
    alive: bool = True
    #: images this node is known to hold (opened with, or pulled)
    images: set[str] = field(default_factory=set)
    #: environments opened here over the run
    opened: int = 0

    @property
    def load(self) -> float:
        return self.active / self.capacity if self.capacity else 1.0

    @property
    def has_room(self) -> bool:
        return self.alive and self.active < self.capacity


class Placement:
    """Nodes, their room, and which node each task is pinned to."""

    def __init__(self) -> None:
        self._nodes: dict[str, NodeSlots] = {}
        self._pins: dict[str, str] = {}
        self._changed = asyncio.Condition()

    @property
    def nodes(self) -> list[NodeSlots]:
        return list(self._nodes.values())

    def alive(self) -> list[NodeSlots]:
        """The nodes that can take environments."""
        return [n for n in self._nodes.values() if n.alive]

    def node(self, name: str) -> NodeSlots | None:
        return self._nodes.get(name)

    def pinned(self, task_id: str) -> str | None:
        """The node ``task_id`` is pinned to, if any."""
        return self._pins.get(task_id)

    async def add(self, slots: NodeSlots) -> None:
        """A node joined (or came back under the same name: its old record is replaced)."""
        self._nodes[slots.name] = slots
        await self._notify()

    async def lose(self, name: str) -> None:
        """A node is gone: its tasks are unpinned (placed again on their next open) and waiters woken."""
        node = self._nodes.get(name)
        if node is None or not node.alive:
            return
        node.alive = False
        for task in [t for t, n in self._pins.items() if n == name]:
            del self._pins[task]
        await self._notify()

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    def _choose(self, image: str | None) -> NodeSlots | None:
        free = [n for n in self._nodes.values() if n.has_room]
        if not free:
            return None
        return min(free, key=lambda n: (0 if image is not None and image in n.images else 1, n.load, n.name))

    async def acquire(self, task_id: str, image: str | None, *, timeout: float,
                      what: str = "open_timeout") -> NodeSlots:
        """A slot on ``task_id``'s node (placing the task if it has none), waiting at most ``timeout`` seconds
        for room; EnvironmentError_ when no node is alive or none had room in time (``what`` names the bound)."""
        try:
            async with asyncio.timeout(timeout), self._changed:
                while True:
                    node = self._take(task_id, image)
                    if node is not None:
                        return node
                    if not self.alive():
                        raise EnvironmentError_("no node of the Ray cluster can take environments (every node "
                                                "with Docker was lost)")
                    await self._changed.wait()
        except TimeoutError:
            raise EnvironmentError_(f"no node had room for task {task_id} within {timeout:g}s "
                                    f"(ray_docker's {what})") from None

    def _take(self, task_id: str, image: str | None) -> NodeSlots | None:
        pinned = self._pins.get(task_id)
        node = self._nodes.get(pinned) if pinned is not None else None
        if node is None or not node.alive:
            node = self._choose(image)
            if node is None:
                return None
            self._pins[task_id] = node.name
        elif not node.has_room:
            return None
        node.active += 1
        node.opened += 1
        if image is not None:
            node.images.add(image)
        return node

    async def release(self, node: NodeSlots) -> None:
        """Give back a slot taken with ``acquire``."""
        node.active = max(0, node.active - 1)
        await self._notify()

    def unpin(self, task_ids: Iterable[str]) -> None:
        """Forget where these tasks ran (they are done)."""
        for task in task_ids:
            self._pins.pop(task, None)


__all__ = ["NodeSlots", "Placement"]
