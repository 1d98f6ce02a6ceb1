"""Progress: the event bus (progress.jsonl, on_progress, display) and the live/plain displays."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import sys
import threading
import time
from collections.abc import Callable
from typing import IO, Any

import msgspec

from ..common.error_kinds import ErrorKind
from ..records import (
    AttemptFinished,
    AttemptStarted,
    DataDownload,
    DependencyInstalled,
    DependencyInstalling,
    ImagePull,
    ModelCallsWaiting,
    ModelLimitChanged,
    ModelRetrying,
    ProgressEvent,
    RequestFinished,
    RequestStarted,
    TaskFinished,
    TryRetrying,
)
from .redact import Redactor

log = logging.getLogger("agentcompass.progress")

#: ImagePull statuses after which the image is no longer being fetched
_PULL_ENDED = ("done", "present", "failed", "cancelled")


def _duration(seconds: float) -> str:
    """``45s``, ``4m10s``, ``1h02m``."""
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def _mb(n: float) -> str:
    return f"{n / 1e6:.1f} MB"


def pull_line(ev: ImagePull) -> str:
    """``[request] image X: pulling 3/7 layers, 120.0/2700.0 MB, 35.2 MB/s``."""
    parts = [ev.status]
    if ev.layers_total:
        parts.append(f"{ev.layers_done}/{ev.layers_total} layers")
    if ev.bytes_done or ev.bytes_total:
        parts.append(f"{_mb(ev.bytes_done)}/{_mb(ev.bytes_total)}" if ev.bytes_total else _mb(ev.bytes_done))
    if ev.rate_bps:
        parts.append(f"{_mb(ev.rate_bps)}/s")
    if ev.error:
        parts.append(ev.error[:200])
    return f"[{ev.request}] image {ev.image}: {', '.join(parts)}"


class RequestStats:
    """Live counters of one request, fed by events."""

    __slots__ = ("correct", "done", "engine_errors", "errors", "finished_at", "model_limits", "model_retries",
                 "model_waiting", "name", "retries", "running", "started_at", "status", "total")

    def __init__(self, name: str) -> None:
        self.name = name
        self.total = 0
        self.done = 0
        self.running = 0
        self.correct = 0
        self.errors = 0
        self.engine_errors = 0  # attempts that ended with engine_error: the run is failed, shown apart
        self.retries = 0
        self.model_retries = 0
        #: the adaptive concurrency limit of each model endpoint this request uses
        self.model_limits: dict[str, int] = {}
        #: (calls, oldest_s) of the model calls that have waited long for an answer; None: none has
        self.model_waiting: tuple[int, float] | None = None
        self.status = "starting"
        self.started_at = time.monotonic()
        self.finished_at: float | None = None

    def apply(self, ev: ProgressEvent) -> None:
        if isinstance(ev, AttemptStarted):
            self.running += 1
        elif isinstance(ev, AttemptFinished):
            self.running = max(0, self.running - 1)
            if ev.status in ("run_error", "eval_error", "run_error_or_eval_error"):
                self.errors += 1
            if ev.error_kind == ErrorKind.ENGINE_ERROR:
                self.engine_errors += 1
        elif isinstance(ev, TryRetrying):
            self.running = max(0, self.running - 1)
            self.retries += 1
        elif isinstance(ev, ModelRetrying):
            self.model_retries += 1
        elif isinstance(ev, ModelLimitChanged):
            self.model_limits[ev.endpoint] = ev.limit
        elif isinstance(ev, ModelCallsWaiting):
            self.model_waiting = (ev.calls, ev.oldest_s) if ev.calls else None
        elif isinstance(ev, TaskFinished):
            self.done += 1
            if ev.correct:
                self.correct += 1
        elif isinstance(ev, RequestStarted):
            self.total = ev.total_tasks
            self.status = "running"
        elif isinstance(ev, RequestFinished):
            self.status = ev.status
            self.running = 0
            self.model_waiting = None
            self.finished_at = time.monotonic()
        elif isinstance(ev, DependencyInstalling):
            self.status = f"installing {ev.package}"
        elif isinstance(ev, DependencyInstalled) and self.status.startswith("installing"):
            self.status = "starting"
        elif isinstance(ev, DataDownload):
            self.status = "starting" if ev.status == "done" else f"downloading {ev.what} {_mb(ev.bytes_done)}"

    def rate(self) -> float:
        elapsed = (self.finished_at or time.monotonic()) - self.started_at
        return self.done / elapsed if elapsed > 0 else 0.0

    def eta_s(self) -> float | None:
        r = self.rate()
        return (self.total - self.done) / r if r > 0 and self.total > self.done else None

    def limit_text(self) -> str:
        """The model concurrency limit(s), ``-`` when none is known."""
        return "/".join(str(v) for v in self.model_limits.values()) or "-"

    def status_text(self) -> str:
        """The status, with the engine errors when there were any (they fail the run)."""
        if self.engine_errors:
            return f"{self.status} ({self.engine_errors} engine error{'s' if self.engine_errors > 1 else ''})"
        return self.status

    def waiting_text(self) -> str:
        """``N model calls waiting, oldest Xs`` while calls wait long for an answer, else ``""``."""
        if self.model_waiting is None:
            return ""
        calls, oldest = self.model_waiting
        return f"{calls} model call{'s' if calls != 1 else ''} waiting, oldest {_duration(oldest)}"

    def line(self) -> str:
        eta = self.eta_s()
        eta_s = f" eta {eta:.0f}s" if eta is not None else ""
        queued = max(0, self.total - self.done - self.running)
        limit = f" model limit {self.limit_text()}," if self.model_limits else ""
        waiting = f" {self.waiting_text()}," if self.model_waiting else ""
        return (f"[{self.name}] {self.status_text()}: {self.done}/{self.total} done, {self.running} running,"
                f" {queued} queued,"
                f" {self.correct} correct, {self.errors} errors, {self.retries} retries,"
                f" {self.model_retries} model retries,{limit}{waiting}"
                f" {self.rate():.1f} tasks/s{eta_s}")


def download_line(ev: DataDownload) -> str:
    """``[request] downloading SWE-bench/SWE-bench_Verified (test): 1.2 / 5.0 MB``."""
    total = f" / {_mb(ev.bytes_total)}" if ev.bytes_total else ""
    verb = "downloaded" if ev.status == "done" else "downloading"
    return f"[{ev.request}] {verb} {ev.what}: {_mb(ev.bytes_done)}{total}"


def download_reporter(emit: Callable[[ProgressEvent], None], request: str, run_id: str,
                      every_s: float = 0.5) -> Callable[[str, int, int], None]:
    """``ComponentContext.report_download`` for a request: callable from any thread (a constructor runs in a
    worker thread), emits ``DataDownload`` on the loop it was made on, at most once per ``every_s`` per
    download plus its end."""
    loop = asyncio.get_running_loop()
    last: dict[str, float] = {}
    lock = threading.Lock()

    def report(what: str, bytes_done: int, bytes_total: int) -> None:
        done = bytes_total > 0 and bytes_done >= bytes_total
        now = time.monotonic()
        with lock:
            if not done and now - last.get(what, -every_s) < every_s:
                return
            last[what] = now
        ev = DataDownload(ts=time.time(), request=request, run_id=run_id, what=what,
                          status="done" if done else "downloading", bytes_done=bytes_done, bytes_total=bytes_total)
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody is watching any more
            loop.call_soon_threadsafe(emit, ev)

    return report


def install_reporter(emit: Callable[[ProgressEvent], None], request: str,
                     run_id: str) -> Callable[[str, str, float | None, str | None], None]:
    """``ComponentContext.report_install`` for a request: callable from any thread, emits
    ``DependencyInstalling`` (``seconds`` None) or ``DependencyInstalled`` on the loop it was made on."""
    loop = asyncio.get_running_loop()

    def report(component: str, package: str, seconds: float | None, error: str | None) -> None:
        ev: ProgressEvent
        if seconds is None:
            ev = DependencyInstalling(ts=time.time(), request=request, run_id=run_id, package=package,
                                      component=component)
        else:
            ev = DependencyInstalled(ts=time.time(), request=request, run_id=run_id, package=package,
                                     component=component, seconds=round(seconds, 3), ok=error is None,
                                     error=error[:500] if error else None)
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody is watching any more
            loop.call_soon_threadsafe(emit, ev)

    return report


def dependency_line(ev: DependencyInstalling | DependencyInstalled) -> str:
    """The plain progress line of a dependency install."""
    if isinstance(ev, DependencyInstalling):
        return f"[{ev.request}] installing {ev.package} for the {ev.component} (auto_install_dependencies)"
    how = " (another request's install)" if ev.shared else ""
    if ev.ok:
        return f"[{ev.request}] installed {ev.package} in {ev.seconds:.1f}s{how}"
    return f"[{ev.request}] installing {ev.package} failed after {ev.seconds:.1f}s: {ev.error}"


class Display:
    """No output."""

    def __init__(self) -> None:
        self.stats: dict[str, RequestStats] = {}
        #: the last event of each image being fetched right now
        self.pulls: dict[str, ImagePull] = {}

    def stat(self, name: str) -> RequestStats:
        st = self.stats.get(name)
        if st is None:
            st = self.stats[name] = RequestStats(name)
        return st

    def update(self, ev: ProgressEvent) -> None:
        if isinstance(ev, ImagePull):
            if ev.status in _PULL_ENDED:
                self.pulls.pop(ev.image, None)
            else:
                self.pulls[ev.image] = ev
            return
        self.stat(ev.request).apply(ev)

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass


class PlainDisplay(Display):
    """A line per request every ``interval`` seconds and when a request ends (for logs, CI, pipes)."""

    def __init__(self, stream: IO[str] | None = None, interval: float = 10.0) -> None:
        super().__init__()
        self.stream = stream or sys.stderr
        self.interval = interval
        self._task: asyncio.Task[None] | None = None
        self._pull_printed: dict[str, float] = {}

    def update(self, ev: ProgressEvent) -> None:
        super().update(ev)
        if isinstance(ev, RequestFinished):
            self._print(self.stats[ev.request])
        elif isinstance(ev, ImagePull) and ev.status != "present":
            # a line when a fetch starts and ends, and at most one per interval while bytes come in
            now = time.monotonic()
            last = self._pull_printed.get(ev.image)
            if ev.status in _PULL_ENDED:
                self._pull_printed.pop(ev.image, None)
            elif last is not None and now - last < self.interval:
                return
            else:
                self._pull_printed[ev.image] = now
            print(pull_line(ev), file=self.stream, flush=True)
        elif isinstance(ev, DependencyInstalling | DependencyInstalled):
            print(dependency_line(ev), file=self.stream, flush=True)
        elif isinstance(ev, DataDownload):
            now = time.monotonic()
            if ev.status == "done" or now - self._pull_printed.get(ev.what, -self.interval) >= self.interval:
                self._pull_printed[ev.what] = now
                print(download_line(ev), file=self.stream, flush=True)

    def _print(self, st: RequestStats) -> None:
        print(st.line(), file=self.stream, flush=True)

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            for st in self.stats.values():
                if st.finished_at is None:
                    self._print(st)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._tick())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()


class RichDisplay(Display):
    """A live table on a TTY: done/running/queued/errors/retries, rate, ETA."""

    def __init__(self) -> None:
        super().__init__()
        from rich.console import Console
        from rich.live import Live

        self._console = Console(stderr=True)
        self._live = Live(console=self._console, refresh_per_second=4, get_renderable=self._render,
                          transient=False)

    def _render(self) -> Any:
        from rich.table import Table

        table = Table(expand=False, box=None, header_style="bold")
        table.add_column("request", overflow="fold", max_width=40)
        table.add_column("status")
        for col in ("done", "run", "queue", "ok", "err", "retry", "429/5xx", "limit", "rate/s", "ETA"):
            table.add_column(col, justify="right", no_wrap=True)
        for st in list(self.stats.values()):
            eta = st.eta_s()
            table.add_row(st.name, st.status_text(), f"{st.done}/{st.total}", str(st.running),
                          str(max(0, st.total - st.done - st.running)), str(st.correct), str(st.errors),
                          str(st.retries), str(st.model_retries), st.limit_text(), f"{st.rate():.1f}",
                          f"{eta:.0f}s" if eta is not None else "-")
        pulls = list(self.pulls.values())
        waits = [f"[{st.name}] {st.waiting_text()}" for st in self.stats.values() if st.model_waiting]
        if not pulls and not waits:
            return table
        from rich.console import Group
        from rich.text import Text

        return Group(table, *(Text(w) for w in waits), *(Text(pull_line(ev)) for ev in pulls[:20]))

    def start(self) -> None:
        self._live.start()

    def stop(self) -> None:
        self._live.stop()


def make_display(mode: str) -> Display:
    """``auto``: rich on a TTY, plain lines elsewhere; ``none``: nothing."""
    if mode == "none":
        return Display()
    if mode == "rich" or (mode == "auto" and sys.stderr.isatty()):
        return RichDisplay()
    return PlainDisplay()


OnProgress = Callable[[ProgressEvent], Any]


class EventBus:
    """Events from every actor, delivered in order to progress.jsonl, ``on_progress`` and the display."""

    def __init__(self, display: Display, on_progress: OnProgress | None = None) -> None:
        self.queue: asyncio.Queue[ProgressEvent | None] = asyncio.Queue()
        self.display = display
        self.on_progress = on_progress
        self._files: dict[str, tuple[IO[bytes], Redactor]] = {}
        self._encoder = msgspec.json.Encoder()
        self._task: asyncio.Task[None] | None = None

    def emit(self, ev: ProgressEvent) -> None:
        self.queue.put_nowait(ev)

    def attach_file(self, request: str, path: str, redactor: Redactor) -> None:
        """Append this request's events to ``path`` (progress.jsonl)."""
        f = open(path, "ab")
        if f.tell() > 0:  # a killed run may have left a torn last line: start ours on a fresh one
            with open(path, "rb") as r:
                r.seek(-1, 2)
                if r.read(1) != b"\n":
                    f.write(b"\n")
        self._files[request] = (f, redactor)

    def detach_file(self, request: str) -> None:
        entry = self._files.pop(request, None)
        if entry:
            try:
                entry[0].close()
            except OSError as exc:
                log.warning("progress.jsonl of %s: %s", request, exc)

    def start(self) -> None:
        self.display.start()
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _deliver(self, ev: ProgressEvent) -> None:
        entry = self._files.get(ev.request)
        if entry is not None:
            f, redactor = entry
            try:
                f.write(redactor.bytes(self._encoder.encode(ev)) + b"\n")
            except OSError as exc:
                self._file_failed(ev.request, exc)
            if isinstance(ev, RequestFinished):  # the last event of a request
                self.detach_file(ev.request)
        self.display.update(ev)
        if self.on_progress is not None:
            try:
                out = self.on_progress(ev)
                if inspect.isawaitable(out):
                    await out
            except Exception as exc:  # a user callback must not break the run
                log.warning("on_progress callback raised: %r", exc)

    async def _run(self) -> None:
        while True:
            ev = await self.queue.get()
            batch = [ev]
            while not self.queue.empty():
                batch.append(self.queue.get_nowait())
            for item in batch:
                if item is None:
                    self._flush()
                    return
                await self._deliver(item)
            self._flush()

    def _flush(self) -> None:
        for name, (f, _) in list(self._files.items()):
            try:
                f.flush()
            except OSError as exc:
                self._file_failed(name, exc)

    def _file_failed(self, request: str, exc: OSError) -> None:
        """A full disk stops that request's progress.jsonl (one warning), never the bus: the run reports it."""
        log.warning("progress.jsonl of %s: %s; no more events are written there", request, exc)
        entry = self._files.pop(request, None)
        if entry is not None:
            try:
                entry[0].close()
            except OSError:
                pass

    async def close(self) -> None:
        """Deliver what is queued, then stop; files are closed."""
        if self._task is not None:
            self.queue.put_nowait(None)
            try:
                await asyncio.wait_for(asyncio.shield(self._task), 30)
            except (TimeoutError, asyncio.CancelledError):
                self._task.cancel()
        for name in list(self._files):
            self.detach_file(name)
        self.display.stop()
