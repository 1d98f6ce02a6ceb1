"""Containers started ahead of need: a small pool per container shape, each container handed out once.

A :class:`Shape` is everything a container is created with except its name: image, workdir, env, network
(``none`` or ``public`` only: ``model`` and ``allowlist`` give each environment a network of its own) and labels.
A shape is pooled once two different tasks have opened it (a task's own image, e.g. SWE-bench's, is opened by
that task alone: starting one ahead would be waste); from then on every open of it refills the pool up to
``per_shape`` containers in the background, so the next open takes a running container instead of waiting on
``docker create`` + ``docker start``. The pool starts no more than the opens the engine still expects
(``EnvOpenSpec.upcoming``: the request's attempts not started yet), so the last attempts of a run leave no
container started for nothing.

Each pre-started container holds a slot of the provider's process-wide count of active environments (the one
``provider_limits`` caps) from before its create until it is handed out (the engine's open holds a slot for it
then) or removed. A slot is taken only when nobody waits for one and one more stays free below the limit, so
the pool never pushes the count past the limit. Should an open wait for a slot all the same (another launch in the
process holds the rest, or a provider built without its limit), the pool gives back every container it holds
and starts none until nobody waits. A create goes through the same gates as the engine's own opens: the launch's
open pacing (``env_open_qps``) and the process-wide creates in flight under the launch's
``max_env_creates_in_flight`` (both handed to the provider in its ``ComponentContext``).

A container started ahead keeps its image in use: before the image cache removes an image, the provider drops
the pool's containers of it (:meth:`PrestartPool.drop_image`).

Pre-started containers carry the run id and owner labels with role ``prestart``: the orphan sweep removes
them after a SIGKILL; :meth:`PrestartPool.aclose` (called by the provider's ``aclose``) on every other path.
"""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from collections import deque
from collections.abc import Awaitable, Callable
from typing import NamedTuple

from aiodocker.containers import DockerContainer

from ...engine.env_pool import provider_slots
from ...interfaces import Resources

log = logging.getLogger("agentcompass.environments.docker.prestart")

#: the label value of ``agentcompass.role`` on a container started ahead of need
PRESTART_ROLE = "prestart"
#: tasks that must open a shape before it is pooled
_OPENERS_TO_POOL = 2


class Shape(NamedTuple):
    """What a pre-started container must match to serve an open."""

    run_id: str
    image: str
    workdir: str
    network: str  # the create-time NetworkMode: "none" or "bridge"
    env: tuple[tuple[str, str], ...]
    labels: tuple[tuple[str, str], ...]  # the spec's own labels
    mounts: tuple[tuple[str, str, bool], ...] = ()  # (source, target, read_only) binds
    limits: Resources = Resources()  # the CPU and memory limits it was created with (None: unlimited)


class Prestarted(NamedTuple):
    """A running container of a shape, not yet handed out."""

    container: DockerContainer
    name: str


#: start a container of the shape under the name; removes what it made itself when it fails or is cancelled
StartFn = Callable[[Shape, str], Awaitable[DockerContainer]]
#: remove a container by id; True once it is gone
RemoveFn = Callable[[str], Awaitable[bool]]


class PrestartPool:
    """Pre-started containers per shape for one provider; see the module docstring."""

    def __init__(self, *, per_shape: int, provider: str, limit: int | None, creates_limit: int | None,
                 start: StartFn, remove: RemoveFn, start_timeout: float,
                 pace: Callable[[], Awaitable[float]] | None = None) -> None:
        self.per_shape = per_shape
        self.limit = limit
        self._creates_limit = creates_limit
        self._pace = pace
        self._active, self._creates = provider_slots(provider)
        self._start = start
        self._remove = remove
        self._start_timeout = start_timeout
        self._ready: dict[Shape, deque[Prestarted]] = {}
        self._starting: dict[Shape, int] = {}
        self._openers: dict[Shape, set[str]] = {}
        self._tasks: dict[asyncio.Task[None], Shape] = {}  # starts (cancelled by aclose and drop_image)
        self._discards: set[asyncio.Task[None]] = set()  # removals (never cancelled)
        self._unregister: Callable[[], None] | None = None
        self._closed = False
        #: slots held right now (containers ready or being started)
        self.held = 0
        #: the most slots held at once, and the process-wide active count right after each one was taken
        self.peak_held = 0
        self.peak_active = 0
        #: containers started, handed out, and removed unused
        self.started = 0
        self.handed_out = 0
        self.discarded = 0

    def ready_ids(self, shape: Shape | None = None) -> list[str]:
        """Ids of the containers ready to be handed out (of ``shape``, or of every shape)."""
        queues = [self._ready.get(shape, deque())] if shape is not None else list(self._ready.values())
        return [p.container.id for q in queues for p in q]

    def take(self, shape: Shape, task_id: str, *, upcoming: int | None = None) -> Prestarted | None:
        """A running container of ``shape`` for task ``task_id``'s open, or None; starts the next ones ahead: up to
        ``per_shape`` ready, and no more than ``upcoming`` (the opens still to come, when the engine knows)."""
        if self._closed:
            return None
        openers = self._openers.setdefault(shape, set())
        if len(openers) < _OPENERS_TO_POOL:
            openers.add(task_id)
        queue = self._ready.get(shape)
        got = queue.popleft() if queue else None
        if got is not None:
            self._give_back()
            self.handed_out += 1
        if len(openers) >= _OPENERS_TO_POOL:
            self._fill(shape, self.per_shape if upcoming is None else min(self.per_shape, upcoming))
        return got

    def _fill(self, shape: Shape, want: int) -> None:
        if self._unregister is None:
            self._unregister = self._active.on_wait(self._yield_all)
        missing = want - len(self._ready.get(shape, ())) - self._starting.get(shape, 0)
        for _ in range(missing):
            if not self._active.try_acquire(self.limit, spare=1):
                return
            self.held += 1
            self.peak_held = max(self.peak_held, self.held)
            self.peak_active = max(self.peak_active, self._active.count)
            self._starting[shape] = self._starting.get(shape, 0) + 1
            task = asyncio.ensure_future(self._start_one(shape))
            self._tasks[task] = shape
            task.add_done_callback(self._forget)

    def _forget(self, task: asyncio.Task[None]) -> None:
        self._tasks.pop(task, None)

    def _yield_all(self) -> None:
        """Someone waits for a slot: remove every ready container (its slot goes back once it is gone)."""
        if self._closed:
            return
        items = [p for q in self._ready.values() for p in q]
        self._ready.clear()
        for item in items:
            self._discard_later(item)
        if items:
            log.info("an open waits for a slot: %d containers started ahead given back", len(items))

    def _discard_later(self, item: Prestarted) -> asyncio.Task[None]:
        """Remove ``item`` in a task of its own that nobody cancels (aclose and settled wait for it)."""
        task = asyncio.ensure_future(self._discard(item))
        self._discards.add(task)
        task.add_done_callback(self._discards.discard)
        return task

    def _give_back(self) -> None:
        self.held -= 1
        self._active.release()

    async def _start_one(self, shape: Shape) -> None:
        name = f"{_name_prefix(shape.run_id)}-{PRESTART_ROLE}-{_suffix()}"
        try:
            async with asyncio.timeout(self._start_timeout):
                if self._pace is not None:
                    await self._pace()
                await self._creates.acquire(self._creates_limit)
                try:
                    container = await self._start(shape, name)
                finally:
                    self._creates.release()
        except BaseException as exc:
            self._give_back()
            if isinstance(exc, asyncio.CancelledError):
                raise
            log.warning("starting a container ahead of need failed (the next open creates its own): %r", exc)
            return
        finally:
            self._starting[shape] -= 1
        if self._closed or self._active.waiting:
            # not awaited here: aclose cancels this task, and a removal cut off would leave the container running
            self._discard_later(Prestarted(container, name))
            return
        self.started += 1
        self._ready.setdefault(shape, deque()).append(Prestarted(container, name))

    async def _discard(self, item: Prestarted) -> None:
        try:
            await self._remove(item.container.id)
        finally:
            self.discarded += 1
            self._give_back()

    async def settled(self, timeout: float) -> None:
        """Wait (at most ``timeout`` s) until no container is being started."""
        async with asyncio.timeout(timeout):
            while self._tasks or self._discards:
                await asyncio.wait([*self._tasks, *self._discards])

    async def drop_image(self, image: str) -> None:
        """Remove the pool's containers of ``image`` (ready ones, and stop the ones being started), so the image
        can be removed; waits at most the start timeout for the starts and the removals."""
        items: list[Prestarted] = []
        for shape in [s for s in self._ready if s.image == image]:
            items.extend(self._ready.pop(shape))
        removals = {self._discard_later(item) for item in items}
        starts = [task for task, shape in self._tasks.items() if shape.image == image]
        for task in starts:  # each removes what it had made before it ends
            task.cancel()
        if starts:
            await asyncio.wait(starts, timeout=self._start_timeout)
        removals.update(self._discards)  # a start that ended meanwhile may have handed its container over
        if removals:
            await asyncio.wait(removals, timeout=self._start_timeout)
        if items or starts:
            log.info("image %s to be removed: %d containers started ahead removed, %d starts stopped", image,
                     len(items), len(starts))

    async def aclose(self) -> None:
        """Stop starting containers and remove every one not handed out (bounded by the start timeout)."""
        self._closed = True
        if self._unregister is not None:
            self._unregister()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:  # each removes what it had started before it ends
            await asyncio.wait(tasks, timeout=self._start_timeout)
        if self._discards:
            await asyncio.wait(list(self._discards), timeout=self._start_timeout)
        items = [p for q in self._ready.values() for p in q]
        self._ready.clear()
        results = await asyncio.gather(*(self._discard(p) for p in items), return_exceptions=True)
        for res in results:
            if isinstance(res, BaseException):
                log.warning("removing a container started ahead of need failed: %r", res)


def _name_prefix(run_id: str) -> str:
    return "ac-" + (re.sub(r"[^a-zA-Z0-9_.-]+", "_", run_id)[:20].strip("_.-") or "x")


def _suffix() -> str:
    return uuid.uuid4().hex[:10]
