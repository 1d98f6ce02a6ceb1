"""Archives out of a container, streamed: the daemon's tar is read chunk by chunk into a capped file on disk.

``GET /containers/{id}/archive`` answers with the whole tree as one tar stream. Rather than reading the
response into memory, a worker thread parses it with :mod:`tarfile` in stream mode while the event loop
feeds it the body 1 MiB at a time; members over the caps are read through and dropped, the rest land in a
:class:`SpooledArchive` (an unlinked temp file), so memory stays flat and the disk copy stays under the cap.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import io
import tarfile
from typing import Any

import aiohttp
from yarl import URL

from ..._errors import EnvironmentError_
from .._tar import ArchiveLimits, SpooledArchive, filter_tar_stream

_CHUNK = 1 << 20


class _LoopReader(io.RawIOBase):
    """A blocking reader, for a worker thread, of an aiohttp response body that is read on the event loop."""

    def __init__(self, content: aiohttp.StreamReader, loop: asyncio.AbstractEventLoop, timeout_s: float) -> None:
        self._content = content
        self._loop = loop
        self._timeout_s = timeout_s
        self._stopped = False
        self._pending: concurrent.futures.Future[bytes] | None = None

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        if self._stopped:
            raise OSError("archive transfer stopped")
        fut = asyncio.run_coroutine_threadsafe(self._content.read(len(b)), self._loop)
        self._pending = fut
        if self._stopped:  # stop() ran between the check and the submit
            fut.cancel()
        try:
            data = fut.result(self._timeout_s)
        except concurrent.futures.CancelledError:
            raise OSError("archive transfer stopped") from None
        except TimeoutError:
            fut.cancel()
            raise OSError(f"the daemon sent no archive data for {self._timeout_s:.0f}s") from None
        n = len(data)
        b[:n] = data
        return n

    def stop(self) -> None:
        """Make the worker's current and next reads fail (called from the loop)."""
        self._stopped = True
        if self._pending is not None:
            self._pending.cancel()


async def receive_archive(docker: Any, container_id: str, path: str, out: SpooledArchive, limits: ArchiveLimits,
                          *, strip_top_dir: bool, read_timeout_s: float) -> None:
    """Stream the container's archive of ``path`` into ``out`` under ``limits`` (``out`` is emptied first,
    so a retried call starts clean). The worker thread is finished when this returns, on every path."""
    out.reset()
    loop = asyncio.get_running_loop()
    async with docker._query(URL(f"containers/{container_id}/archive").with_query({"path": path}),
                             method="GET") as resp:
        raw = _LoopReader(resp.content, loop, read_timeout_s)
        worker = asyncio.ensure_future(asyncio.to_thread(
            filter_tar_stream, io.BufferedReader(raw, _CHUNK), out, limits, strip_top_dir=strip_top_dir))
        try:
            await asyncio.shield(worker)
        except tarfile.TarError as exc:
            raise EnvironmentError_(f"the archive of {path!r} from container {container_id[:12]} is not a "
                                    f"readable tar ({exc})") from exc
        finally:
            if not worker.done():  # cancelled or timed out: stop the thread before anyone reuses ``out``
                raw.stop()
                await asyncio.wait([worker], timeout=read_timeout_s)
