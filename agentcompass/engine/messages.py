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
from ..records import AttemptRecord


class WorkItem(msgspec.Struct):
    """One attempt of one task of one request."""

    request: int
    task: TaskSpec
    attempt: int
    identity: str


class Submit(msgspec.Struct, tag="submit"):
    """RequestActor -> Scheduler: run this attempt when a slot is free."""

    item: WorkItem


class Release(msgspec.Struct, tag="release"):
    """TaskActor (via its wrapper) -> Scheduler: a slot of ``request`` is free again."""

    request: int


class CancelRequest(msgspec.Struct, tag="cancel_request"):
    """RequestActor -> Scheduler: drop the request's queued work and cancel its running attempts."""

    request: int


SchedulerMsg = Submit | Release | CancelRequest


class AttemptDone(msgspec.Struct, tag="attempt_done"):
    """TaskActor -> RequestActor: an attempt finished (after all its tries)."""

    task_id: str
    attempt: int
    record: AttemptRecord


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
