"""The shared file lock: one holder at a time across open files, waits end with the caller's own error at the
deadline or on cancellation, and the lock is free again once the holder leaves (or dies)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from agentcompass.common.file_lock import LockWaitEnd, async_file_lock, file_lock


class _Ended(Exception):
    def __init__(self, end: LockWaitEnd) -> None:
        super().__init__(end)
        self.end = end


def test_a_second_holder_waits_until_the_deadline_and_gets_the_callers_error(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "x.lock"  # its directory is made
    with file_lock(path, 1, _Ended):
        with pytest.raises(_Ended) as info, file_lock(path, 0.3, _Ended, poll_s=0.05):
            pass
        assert info.value.end == "timeout"
    with file_lock(path, 0.3, _Ended):  # released on exit
        pass


def test_a_cancelled_wait_ends_at_once_with_the_cancelled_error(tmp_path: Path) -> None:
    path = tmp_path / "x.lock"
    cancelled = threading.Event()
    with file_lock(path, 1, _Ended):
        threading.Timer(0.2, cancelled.set).start()
        with pytest.raises(_Ended) as info, file_lock(path, 60, _Ended, cancelled=cancelled, poll_s=30):
            pass
    assert info.value.end == "cancelled"  # woken by the event, not after the 30 s poll or the 60 s wait


def test_a_waiter_gets_the_lock_once_the_holder_leaves(tmp_path: Path) -> None:
    path = tmp_path / "x.lock"
    order: list[str] = []
    held = threading.Event()

    def holder() -> None:
        with file_lock(path, 1, _Ended):
            held.set()
            threading.Event().wait(0.3)
            order.append("holder done")

    t = threading.Thread(target=holder)
    t.start()
    held.wait(5)
    with file_lock(path, 10, _Ended, poll_s=0.05):
        order.append("waiter in")
    t.join(5)
    assert order == ["holder done", "waiter in"]


def test_the_async_form_waits_on_the_loop_and_ends_with_the_callers_error(tmp_path: Path) -> None:
    path = tmp_path / "x.lock"

    async def main() -> list[str]:
        seen: list[str] = []
        async with async_file_lock(path, 1, _Ended):
            ticks = asyncio.ensure_future(asyncio.sleep(0.1))  # the loop keeps running while one waits
            with pytest.raises(_Ended) as info:
                async with async_file_lock(path, 0.3, _Ended, poll_s=0.05):
                    pass
            assert ticks.done()
            seen.append(info.value.end)
        async with async_file_lock(path, 0.3, _Ended):
            seen.append("free")
        return seen

    assert asyncio.run(main()) == ["timeout", "free"]
