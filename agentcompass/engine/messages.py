"""Messages between actors: msgspec Structs in tagged unions, so they can cross a process boundary as is.

Queues carry the Structs themselves (no encode/decode on the hot path); ``MsgQueue(strict=True)`` -- on
when ``AGENTCOMPASS_STRICT_MESSAGES=1`` -- round-trips every message through msgspec to prove it would.
"""

from __future__ import annotations

import asyncio
import os
from typing import Generic, TypeVar

import msgspec

from ..interfaces import TaskSpec
from ..records import AttemptRecord, TryRecord


class WorkItem(msgspec.Struct):
    """One attempt of one task of one request."""

    request: int
    task: TaskSpec
    attempt: int
    identity: str


# ---------------------------------------------------------------- to the Scheduler


class OpenLane(msgspec.Struct, tag="open_lane"):
    """RequestActor -> Scheduler: the request's attempts may run, at most ``limit`` at once."""

    request: int
    limit: int


class Submit(msgspec.Struct, tag="submit"):
    """RequestActor -> Scheduler: grant this attempt a slot when one is free."""

    item: WorkItem


class Release(msgspec.Struct, tag="release"):
    """RequestActor -> Scheduler: an attempt of ``request`` has reported; its slot is free again."""

    request: int


class CancelRequest(msgspec.Struct, tag="cancel_request"):
    """RequestActor -> Scheduler: the request has ended (none of its attempts runs any more): drop its queued
    work and take back its slots, including grants it never started."""

    request: int


class Shutdown(msgspec.Struct, tag="shutdown"):
    """Supervisor -> Scheduler: grant nothing more and end (``Scheduler.run`` returns its stats)."""


SchedulerMsg = OpenLane | Submit | Release | CancelRequest | Shutdown


# ---------------------------------------------------------------- to a RequestActor


class Grant(msgspec.Struct, tag="grant"):
    """Scheduler -> RequestActor: a slot is the item's: start its attempt runner."""

    item: WorkItem


class AttemptDone(msgspec.Struct, tag="attempt_done"):
    """AttemptRun -> RequestActor: an attempt finished (after all its tries). Also sent, as an ``engine_error``
    record, when the runner itself failed."""

    task_id: str
    attempt: int
    record: AttemptRecord


class AttemptInterrupted(msgspec.Struct, tag="attempt_interrupted"):
    """AttemptRun -> RequestActor: the attempt was cancelled; the tries it made (the running one marked
    ``INTERRUPTED``), recorded by the request with the stop's kind."""

    task_id: str
    attempt: int
    tries: list[TryRecord]


RequestMsg = Grant | AttemptDone | AttemptInterrupted


M = TypeVar("M")


class MsgQueue(Generic[M]):
    """An asyncio queue of messages of one union type."""

    def __init__(self, msg_type: type[M] | object, *, strict: bool | None = None) -> None:
        self._q: asyncio.Queue[M] = asyncio.Queue()
        self._strict = os.environ.get("AGENTCOMPASS_STRICT_MESSAGES") == "1" if strict is None else strict
        if self._strict:
            self._enc = msgspec.msgpack.Encoder()
            self._dec = msgspec.msgpack.Decoder(msg_type)

    def put(self, msg: M) -> None:
        if self._strict:
            msg = self._dec.decode(self._enc.encode(msg))
        self._q.put_nowait(msg)

    async def get(self) -> M:
        return await self._q.get()

    def get_nowait(self) -> M:
        return self._q.get_nowait()

    def empty(self) -> bool:
        return self._q.empty()
