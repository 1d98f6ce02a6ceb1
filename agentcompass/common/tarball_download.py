"""Downloading a repository tarball into a cache folder, the mechanism shared by the task-directory benchmarks
and the SWE-bench Pro run scripts: streamed over HTTP(S) with a byte cap and one deadline over the whole
transfer and the unpacking (cancellable throughout), unpacked (regular files only, the tarball's top folder
dropped, within caps on the unpacked bytes and files) into a temporary folder next to the cache folder, and
renamed into place when complete, so a killed download never reads as a finished one. Each user states its
own caps, deadline and error class in a :class:`TarballDownload`; what the folder must hold and its manifest
stay with the user.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import io
import logging
import os
import posixpath
import shutil
import tarfile
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

from .._errors import AgentCompassError

#: the file naming where a finished download came from, written last (its users' own msgspec structs)
MANIFEST = "agentcompass-manifest.json"
#: the prefix of the temporary folders next to the cache folder (never read as a download)
PARTIAL = ".partial-"

ProgressCallback = Callable[[int, int], None]
T = TypeVar("T")


@dataclass(frozen=True)
class Fetched:
    """What one download brought: the tarball's sha256 and size, and the number of files unpacked."""

    sha256: str
    bytes: int
    files: int


class _HideUrl(logging.Filter):
    """Shows a URL as ``shown`` in the records of the logger it filters."""

    def __init__(self, url: str, shown: str) -> None:
        super().__init__()
        self.url, self.shown = url, shown

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if self.url in text:
            record.msg, record.args = text.replace(self.url, self.shown), None
        return True


class _Transfer:
    """The transfer's task, for the thread that watches the cancellation; ``all_in`` once every announced byte
    arrived (a later cancellation is then the unpacking's to notice, not the transfer's)."""

    def __init__(self) -> None:
        self.task: tuple[asyncio.AbstractEventLoop, asyncio.Task[Any]] | None = None
        self.all_in = False


@dataclass(frozen=True)
class TarballDownload:
    """How one kind of tarball is downloaded: ``what`` names it in messages ("tasks", "scripts"), ``error`` is
    the class of every failure, ``kept_dirs`` (when given) the only top folders unpacked, ``mode`` the
    :func:`tarfile.open` read mode and ``keep_exec_bits`` whether files keep their executable bits."""

    what: str
    error: type[AgentCompassError]
    #: the whole tarball may not exceed this many bytes
    max_bytes: int
    #: nor unpack to more than this many bytes ...
    max_unpacked_bytes: int
    #: ... or files
    max_files: int
    #: seconds for the whole download, unpacking included
    deadline: float
    #: one unpacked file may not exceed this many bytes (None: no such cap)
    max_file_bytes: int | None = None
    #: seconds to connect / between two reads
    http_timeout: float = 30.0
    kept_dirs: tuple[str, ...] | None = None
    mode: Literal["r:*", "r|gz"] = "r:*"
    keep_exec_bits: bool = False

    def with_caps(self, **caps: Any) -> TarballDownload:
        """This download with some caps (or the deadline) changed."""
        return dataclasses.replace(self, **caps)

    def _late(self) -> str:
        return f"took more than its deadline of {self.deadline:.0f} s"

    # -- the transfer --------------------------------------------------------------------------------------

    async def _transfer(self, url: str, shown: str, into: Path, *, on_progress: ProgressCallback | None,
                        cancelled: threading.Event | None, digest: Any, state: _Transfer) -> None:
        import httpx

        done = 0
        async with httpx.AsyncClient(timeout=httpx.Timeout(self.http_timeout), follow_redirects=True) as client, \
                client.stream("GET", url) as resp:
            if resp.status_code != 200:
                raise self.error(f"GET {shown} answered HTTP {resp.status_code}")
            announced = int(resp.headers.get("content-length") or 0)
            if announced > self.max_bytes:
                raise self.error(f"{shown} is {announced} bytes, over the {self.max_bytes}-byte cap")
            with into.open("wb") as out:
                async for chunk in resp.aiter_bytes():  # as the bytes arrive; the deadline is the caller's
                    if cancelled is not None and cancelled.is_set():
                        raise self.error(f"downloading {shown}: cancelled")
                    done += len(chunk)
                    if done > self.max_bytes:
                        raise self.error(f"{shown}: more than {self.max_bytes} bytes received; download stopped")
                    digest.update(chunk)
                    out.write(chunk)
                    state.all_in = announced > 0 and done >= announced
                    if on_progress is not None:
                        on_progress(done, announced or done)

    async def _fetch_async(self, url: str, shown: str, into: Path, *, end: float,
                           on_progress: ProgressCallback | None, cancelled: threading.Event | None, digest: Any,
                           state: _Transfer) -> None:
        import httpx

        current = asyncio.current_task()
        assert current is not None
        state.task = (asyncio.get_running_loop(), current)
        hide = _HideUrl(url, shown)
        logging.getLogger("httpx").addFilter(hide)  # it logs each request's full URL
        try:
            async with asyncio.timeout(max(0.0, end - time.monotonic())):  # the whole transfer, however it trickles
                await self._transfer(url, shown, into, on_progress=on_progress, cancelled=cancelled, digest=digest,
                                     state=state)
        except TimeoutError:
            raise self.error(f"downloading {shown} {self._late()}") from None
        except asyncio.CancelledError:
            raise self.error(f"downloading {shown}: cancelled") from None
        except httpx.HTTPError as exc:
            raise self.error(f"downloading {shown} failed ({type(exc).__name__}: "
                             f"{str(exc).replace(url, shown)})") from None
        finally:
            logging.getLogger("httpx").removeFilter(hide)

    def fetch(self, url: str, into: Path, *, shown: str, end: float, on_progress: ProgressCallback | None = None,
              cancelled: threading.Event | None = None) -> str:
        """Stream ``url`` into the file ``into`` by ``end`` (a monotonic time, enforced on the whole transfer,
        not per read); its sha256. ``shown`` stands for ``url`` in messages and in httpx's log. The transfer runs
        on its own event loop in a thread (callers may be inside one); this thread watches ``cancelled`` and
        cancels it."""
        digest = hashlib.sha256()
        outcome: list[BaseException | None] = []
        state = _Transfer()

        def work() -> None:
            try:
                asyncio.run(self._fetch_async(url, shown, into, end=end, on_progress=on_progress,
                                              cancelled=cancelled, digest=digest, state=state))
                outcome.append(None)
            except BaseException as exc:  # handed to the caller's thread
                outcome.append(exc)

        worker = threading.Thread(target=work, name=f"{self.what}-download", daemon=True)
        worker.start()
        hard_end = end + 30.0  # the loop's own timeout ends the transfer first
        while worker.is_alive() and time.monotonic() < hard_end:
            worker.join(0.2)
            if cancelled is not None and cancelled.is_set() and state.task is not None and not state.all_in:
                (loop, task), state.task = state.task, None
                try:
                    loop.call_soon_threadsafe(task.cancel)
                except RuntimeError:  # the loop already ended
                    pass
        if not outcome:
            raise self.error(f"downloading {shown} did not end by its deadline")
        if outcome[0] is not None:
            raise outcome[0]
        return digest.hexdigest()

    # -- the unpacking -------------------------------------------------------------------------------------

    def member_path(self, name: str) -> str | None:
        """Where a tarball member goes (its top folder dropped), or None to skip it."""
        parts = name.split("/", 1)
        if len(parts) != 2 or not parts[1]:
            return None
        rel = posixpath.normpath(parts[1])
        if rel.startswith(("/", "..")) or rel == "." or "\\" in rel or "\0" in rel:
            return None
        if self.kept_dirs is not None and rel.split("/", 1)[0] not in self.kept_dirs:
            return None
        return rel

    def unpack(self, tarball: Path, dest: Path, *, end: float, cancelled: threading.Event | None = None) -> int:
        """Unpack the kept regular files of ``tarball`` into ``dest`` (by ``end``, a monotonic time, and within
        the caps); the number of files."""
        count = total = 0
        try:
            with _Guarded(tarball, self, end, cancelled) as raw, tarfile.open(fileobj=raw, mode=self.mode) as tar:
                for member in tar:
                    rel = self.member_path(member.name)
                    if rel is None or not member.isreg():  # links, devices and everything else: never unpacked
                        continue
                    if self.max_file_bytes is not None and member.size > self.max_file_bytes:
                        raise self.error(f"{member.name} in the {self.what} tarball is {member.size} bytes, "
                                         f"over the {self.max_file_bytes}-byte cap")
                    total += member.size
                    count += 1
                    if total > self.max_unpacked_bytes:
                        raise self.error(f"the {self.what} tarball unpacks to more than {self.max_unpacked_bytes} "
                                         f"bytes, over the cap")
                    if count > self.max_files:
                        raise self.error(f"the {self.what} tarball holds more than {self.max_files} files, over "
                                         f"the cap")
                    src = tar.extractfile(member)
                    if src is None:
                        continue
                    target = dest / rel
                    target.parent.mkdir(parents=True, exist_ok=True)
                    with src, target.open("wb") as out:
                        shutil.copyfileobj(src, out)
                    if self.keep_exec_bits:
                        os.chmod(target, 0o755 if member.mode & 0o111 else 0o644)
        except (tarfile.TarError, EOFError, OSError) as exc:
            raise self.error(f"the {self.what} download is not a readable tarball ({exc})") from None
        return count

    # -- the whole --------------------------------------------------------------------------------------------

    def download(self, url: str, final: Path, *, shown: str, seal: Callable[[Path, Fetched], T],
                 done_elsewhere: Callable[[], bool], on_progress: ProgressCallback | None = None,
                 cancelled: threading.Event | None = None) -> T:
        """Download the tarball at ``url`` and unpack it as the folder ``final``: into a temporary folder next to
        it, which ``seal`` checks and completes (its manifest) before the rename into place; what ``seal``
        returns. A failed rename is fine when ``done_elsewhere()`` (another process finished first). The
        temporary folders are removed on every path."""
        end = time.monotonic() + self.deadline
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = final.parent / f"{PARTIAL}{final.name}-{uuid.uuid4().hex[:8]}"
        tmp.mkdir()
        try:
            with tempfile.TemporaryDirectory(dir=final.parent, prefix=PARTIAL) as spool:
                tarball = Path(spool) / f"{self.what}.tar.gz"
                sha = self.fetch(url, tarball, shown=shown, end=end, on_progress=on_progress, cancelled=cancelled)
                size = tarball.stat().st_size
                count = self.unpack(tarball, tmp, end=end, cancelled=cancelled)
            sealed = seal(tmp, Fetched(sha256=sha, bytes=size, files=count))
            try:
                os.rename(tmp, final)
            except OSError:
                if not done_elsewhere():
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return sealed


class _Guarded(io.FileIO):
    """The tarball, read only until the deadline or a cancellation (checked at every read, so that even
    skipping a huge member of a compression bomb stops in time)."""

    def __init__(self, path: Path, spec: TarballDownload, end: float, cancelled: threading.Event | None) -> None:
        super().__init__(path, "rb")
        self._spec, self._end, self._cancelled = spec, end, cancelled

    def read(self, size: int | None = -1, /) -> bytes:
        if self._cancelled is not None and self._cancelled.is_set():
            raise self._spec.error(f"unpacking the {self._spec.what}: cancelled")
        if time.monotonic() > self._end:
            raise self._spec.error(f"downloading and unpacking the {self._spec.what} {self._spec._late()}")
        return super().read(size)


__all__ = ["MANIFEST", "PARTIAL", "Fetched", "ProgressCallback", "TarballDownload"]
