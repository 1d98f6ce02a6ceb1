"""The default executor of ``launch()``'s event loop: daemon worker threads and a bounded shutdown.

``asyncio.to_thread`` / ``run_in_executor(None, ...)`` calls run here. A call stuck in one (a blocking read, a
hung filesystem) cannot be cancelled; with the stdlib pool it would still hold the process at exit, since the
loop's shutdown and the interpreter both join every worker. Here the shutdown waits ``grace_s`` at most and
the workers are daemons, so Ctrl-C or SIGTERM ends the process once the run is recorded.

The pool is elastic (a worker is started whenever none is idle, up to ``max_workers``, 256 by default; idle
ones retire after ``idle_s``): with the stdlib's ``cpu + 4`` workers, a few calls stuck in blocking reads
starve everything else that needs a thread, e.g. closing the environments of a cancelled run.

It subclasses ``ThreadPoolExecutor`` because the stdlib event loop's ``set_default_executor`` accepts nothing
else (uvloop accepts any executor); it keeps none of the parent's machinery: ``submit`` and ``shutdown`` are
its own, and its state uses names the parent does not (the parent's attributes stay as its ``__init__`` left
them, unused).
"""

from __future__ import annotations

import concurrent.futures
import itertools
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")
_Item = tuple[concurrent.futures.Future[Any], Callable[..., Any], tuple[Any, ...], dict[str, Any]]
_ids = itertools.count()


class DaemonThreadPool(concurrent.futures.ThreadPoolExecutor):
    """A thread pool whose workers are daemon threads and whose ``shutdown`` waits ``grace_s`` at most."""

    def __init__(self, max_workers: int = 256, *, grace_s: float = 5.0, idle_s: float = 30.0) -> None:
        super().__init__(max_workers=max_workers, thread_name_prefix="agentcompass-worker")
        self._max = max_workers
        self._grace_s = grace_s
        self._idle_s = idle_s
        self._queue: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)
        self._lock = threading.Lock()
        self._workers: list[threading.Thread] = []
        #: calls queued when no thread could be started: the next worker to finish takes one, so it is not idle
        self._unclaimed = 0
        self._closed = False

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[T]:
        with self._lock:
            if self._closed:
                raise RuntimeError("cannot schedule new futures after shutdown")
            fut: concurrent.futures.Future[T] = concurrent.futures.Future()
            self._queue.put((fut, fn, args, kwargs))
            if not self._idle.acquire(blocking=False) and len(self._workers) < self._max:
                t = threading.Thread(target=self._work, name=f"agentcompass-worker-{next(_ids)}", daemon=True)
                try:
                    t.start()
                except RuntimeError:  # no thread to be had (process-table pressure): a busy worker gets to it
                    if not self._workers:
                        fut.cancel()
                        raise
                    # That worker must not count itself idle after its call: it is taken by this one. (It did,
                    # and the extra idle count outlived it: with every worker retired, a later call found "an
                    # idle worker", started none and waited forever.)
                    self._unclaimed += 1
                else:
                    self._workers.append(t)
            return fut

    def _work(self) -> None:
        while True:
            try:
                item = self._queue.get(timeout=self._idle_s)
            except queue.Empty:
                with self._lock:
                    # still counted idle, so nobody is relying on us (and nothing queued: ``submit`` queues under
                    # the lock, so a call can never be left with no worker)
                    if self._queue.empty() and self._idle.acquire(blocking=False):
                        self._workers.remove(threading.current_thread())
                        return
                continue
            if item is None:
                return
            fut, fn, args, kwargs = item
            if fut.set_running_or_notify_cancel():
                try:
                    result = fn(*args, **kwargs)
                except BaseException as exc:
                    fut.set_exception(exc)
                else:
                    fut.set_result(result)
            del item, fut, fn, args, kwargs
            with self._lock:
                if self._unclaimed:
                    self._unclaimed -= 1
                else:
                    self._idle.release()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            self._closed = True
            threads = list(self._workers)
        if cancel_futures:
            while True:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is not None:
                    item[0].cancel()
        for _ in threads:
            self._queue.put(None)
        if wait:
            deadline = time.monotonic() + self._grace_s
            for t in threads:
                t.join(max(0.0, deadline - time.monotonic()))
