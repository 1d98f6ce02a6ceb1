"""Is a silent endpoint slow or dead? A probe on the side of a call that has had no answer for a while.

A model call may legitimately take minutes (a long answer from a reasoning model, a busy server), so the
client's ``timeout`` is long (600 s by default), and an endpoint that accepts connections but never answers
would hold every call for that long, retried six times: over an hour before the first error. So when a call has
had no answer for ``probe_after`` seconds, the client sends the endpoint's URL a bodiless ``GET`` on a
connection of its own (a busy pool cannot delay it). Any HTTP answer, even 404 or 405, means a server is there
and working: the call goes on waiting (and is probed again every ``probe_after``). No answer within
``probe_timeout`` means nothing is answering: the call ends at once as an *unresponsive* ``model_connection_error``,
which the retry policy retries only ``unresponsive_retries`` times (1 by default). A dead endpoint then fails a
call in about ``2 x (probe_after + probe_timeout)`` (under 3 minutes by default) instead of 70.

One probe runs at a time per client; calls that need a verdict while it runs share it, and a verdict is reused
for ``probe_after / 2`` seconds, so hundreds of waiting calls cost one probe. The probe reads no body.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Awaitable
from typing import TypeVar

import httpx

T = TypeVar("T")

#: a call without an answer for this long makes the client probe its endpoint (model param ``probe_after``)
DEFAULT_PROBE_AFTER_S = 60.0
#: how long the probe waits for any HTTP answer (model param ``probe_timeout``)
DEFAULT_PROBE_TIMEOUT_S = 20.0


class Liveness:
    """The probe of one client's endpoint (``url``): ``await alive(timeout)``; ``aclose()`` at the end."""

    def __init__(self, url: str, *, verify: ssl.SSLContext | bool, trust_env: bool, fresh_s: float) -> None:
        self.url = url
        self._verify = verify
        self._trust_env = trust_env
        self._fresh_s = fresh_s
        self._http: httpx.AsyncClient | None = None
        self._probe: asyncio.Task[bool] | None = None
        self._verdict: tuple[float, bool] | None = None
        #: probes sent (for tests and logs)
        self.probes = 0

    async def alive(self, timeout: float) -> bool:
        """Whether the endpoint answered (any status) a probe within ``timeout``; shared and cached."""
        if self._verdict is not None and time.monotonic() - self._verdict[0] < self._fresh_s:
            return self._verdict[1]
        if self._probe is None or self._probe.done():
            self._probe = asyncio.get_running_loop().create_task(self._send(timeout))
        # shielded: a caller cancelled mid-probe must not cancel the probe the others wait on
        return await asyncio.shield(self._probe)

    async def _send(self, timeout: float) -> bool:
        if self._http is None:
            self._http = httpx.AsyncClient(verify=self._verify, trust_env=self._trust_env,
                                           limits=httpx.Limits(max_connections=1, max_keepalive_connections=0),
                                           headers={"User-Agent": "agentcompass-probe"})
        self.probes += 1
        ok = False
        try:
            async with asyncio.timeout(timeout):
                async with self._http.stream("GET", self.url, timeout=timeout):
                    ok = True  # the status line and headers came: a server is there; the body is not read
        except (TimeoutError, httpx.HTTPError, OSError):
            ok = False
        self._verdict = (time.monotonic(), ok)
        return ok

    async def aclose(self) -> None:
        """Stop a running probe and close its connection (idempotent)."""
        if self._probe is not None and not self._probe.done():
            self._probe.cancel()
            await asyncio.wait({self._probe}, timeout=5.0)  # bounded, and our own cancellation still ends it
        if self._http is not None:
            await self._http.aclose()
            self._http = None


class Unresponsive(Exception):
    """The endpoint answered neither a call nor the probe sent after ``probe_after`` seconds of it."""


async def probed(call: Awaitable[T], liveness: Liveness, probe_after: float, probe_timeout: float) -> T:
    """``call``'s result, probing the endpoint each ``probe_after`` seconds it goes unanswered; ``Unresponsive``
    (``call`` cancelled) when a probe gets no answer either. Cancelling the caller cancels ``call``."""
    work = asyncio.ensure_future(call)
    try:
        while True:
            done, _ = await asyncio.wait({work}, timeout=probe_after)
            if done:
                return work.result()
            alive = await liveness.alive(probe_timeout)
            if work.done():  # answered while the probe ran
                return work.result()
            if not alive:
                raise Unresponsive
    finally:
        if not work.done():
            work.cancel()
            await asyncio.wait({work}, timeout=5.0)  # httpx ends on cancel; bounded all the same
