"""ImageCache: the engine's image policy for runs over per-task images (SWE-bench: one image per task).

One per launch, shared by its requests, living on the launch's event loop; requests reach it through a
``RequestImages`` handle. It decides when an image is fetched (pulled or built) and when it is removed:

- fetches are bounded by ``max_concurrent_pulls``, counted process-wide per daemon (like ``provider_limits``);
- asks for one image share one fetch (across the launch's requests; within the process the provider's own
  per-image lock and existence check do the rest);
- each request fetches the images of its next ``prefetch_images`` queued tasks while earlier tasks run;
- ``cache_level`` (as in the official SWE-bench harness): an image above the level that this launch fetched
  is removed after the last task that needs it; an image that was there before is never removed;
- ``min_free_disk``: a fetch starts only while the free space, less an estimate for each fetch in flight, stays
  above it; else it waits (bounded) for this launch's images to be released or fetches to end, or fails the
  task with ``disk_full``; a prefetch that would take the last room above it is skipped (the task fetches
  the image when it starts).
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
import hashlib
import logging
import os
import stat
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .._errors import ConfigError, EnvironmentError_
from .._validate import MAX_COUNT, check_number, seconds, size_text
from ..common.error_kinds import ErrorKind
from ..environments.base import EnvironmentProvider, PullProgress
from ..interfaces import ImageRecipe, TaskSpec
from ..records import ImagePull, ImageRemoved, ProgressEvent
from .process_slots import ProcessSlots

log = logging.getLogger("agentcompass.images")

CACHE_LEVELS: tuple[str, ...] = ("none", "base", "env", "instance")
_RANK = {level: i for i, level in enumerate(CACHE_LEVELS)}
#: the environment params this module owns (popped before the provider sees its params)
IMAGE_PARAMS: tuple[str, ...] = ("cache_level", "min_free_disk", "max_concurrent_pulls", "prefetch_images",
                                 "disk_wait_timeout")
DEFAULT_CACHE_LEVEL = "env"
#: room for the daemon's own metadata, container layers and the run directory after a fetch
DEFAULT_MIN_FREE_DISK = 2 << 30
DEFAULT_MAX_CONCURRENT_PULLS = 3
DEFAULT_PREFETCH_IMAGES = 4
DEFAULT_DISK_WAIT_S = 600.0
#: the cap on one ensure (the wait for a pull slot plus the fetch); the provider bounds the fetch itself
ENSURE_CAP_S = 6 * 3600.0
_REMOVE_CAP_S = 120.0
#: room a fetch in flight is assumed to take while its size is unknown (a build, a pull before its manifests)
FETCH_ESTIMATE = 2 << 30
#: ImagePull statuses after which the image is no longer being fetched
PULL_ENDED: tuple[str, ...] = ("done", "present", "failed", "cancelled")
_PROGRESS_EVERY_S = 0.5


class DiskFull(EnvironmentError_):
    """The daemon's disk is below ``min_free_disk`` and nothing this run holds could be released in time."""

    kind = ErrorKind.DISK_FULL


class _Deferred(Exception):
    """A prefetch not started: it would take the last room above ``min_free_disk``."""


def _field(key: str) -> str:
    return f"environment_params.{key}"


def _size(value: Any, key: str) -> int | None:
    """``"10g"`` / an int of bytes -> bytes; ``0`` or None turns the floor off."""
    if value is None or value == 0:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= 1 << 60:
        return value
    size = size_text(value)
    if size is None:
        raise ConfigError(f"Invalid `{_field(key)}` {value!r}: expected a size like '10g' or '512m' (units k, m, "
                          "g, t), an int of bytes, or 0 / null for no floor.", field=_field(key))
    return size or None


@dataclass(frozen=True)
class ImagePolicy:
    """A request's image settings (environment params of providers with images, e.g. ``docker``)."""

    cache_level: str = DEFAULT_CACHE_LEVEL
    min_free_disk: int | None = DEFAULT_MIN_FREE_DISK
    max_concurrent_pulls: int = DEFAULT_MAX_CONCURRENT_PULLS
    prefetch_images: int = DEFAULT_PREFETCH_IMAGES
    disk_wait_timeout: float = DEFAULT_DISK_WAIT_S

    def keeps(self, level: str) -> bool:
        """Whether an image of ``level`` this run fetched stays after its last task."""
        return _RANK[level] <= _RANK[self.cache_level]


def pop_image_policy(params: dict[str, Any], *, supported: bool, provider: str) -> tuple[ImagePolicy, dict[str, Any]]:
    """Take the image params out of ``params`` (environment params): (the policy, the params as given)."""
    given = {k: params.pop(k) for k in IMAGE_PARAMS if k in params}
    if given and not supported:
        key = next(iter(given))
        raise ConfigError(f"Invalid `{_field(key)}`: environment {provider!r} has no images; the image cache params "
                          f"({', '.join(IMAGE_PARAMS)}) apply to providers with images, such as 'docker'.",
                          field=_field(key))
    level = given.get("cache_level", DEFAULT_CACHE_LEVEL)
    if level not in CACHE_LEVELS:
        raise ConfigError(f"Invalid `{_field('cache_level')}` {level!r}. Allowed: {', '.join(CACHE_LEVELS)}.",
                          field=_field("cache_level"))
    pulls = check_number(given.get("max_concurrent_pulls", DEFAULT_MAX_CONCURRENT_PULLS),
                         _field("max_concurrent_pulls"), ge=1, le=MAX_COUNT, integer=True)
    prefetch = check_number(given.get("prefetch_images", DEFAULT_PREFETCH_IMAGES), _field("prefetch_images"),
                            ge=0, le=MAX_COUNT, integer=True)
    floor = _size(given["min_free_disk"], "min_free_disk") if "min_free_disk" in given else DEFAULT_MIN_FREE_DISK
    wait = seconds(given.get("disk_wait_timeout", DEFAULT_DISK_WAIT_S), _field("disk_wait_timeout"))
    return ImagePolicy(level, floor, int(pulls), int(prefetch), wait), given


def image_level(ref: str, *, per_task: bool) -> str:
    """The official harness's levels by name (``sweb.base.*``, ``sweb.env.*``, ``sweb.eval.*``); other images a
    task names are ``instance`` level, the provider's default image ``base``."""
    name = ref.rsplit("/", 1)[-1]
    if name.startswith("sweb.base."):
        return "base"
    if name.startswith("sweb.env."):
        return "env"
    return "instance" if name.startswith("sweb.eval.") or per_task else "base"


# ----------------------------------------------------------------------------- process-wide counts

_registry_lock = threading.Lock()
_fetch_slots: dict[str, ProcessSlots] = {}
#: launches of this process holding each (daemon, image): a launch removes an image only when no other holds it
_holds: dict[tuple[str, str], int] = {}
#: bytes each fetch in flight of this process may still write, by (daemon, image)
_reserved: dict[tuple[str, str], int] = {}


def _slots(daemon: str) -> ProcessSlots:
    with _registry_lock:
        slots = _fetch_slots.get(daemon)
        if slots is None:
            slots = _fetch_slots[daemon] = ProcessSlots(f"image fetches on {daemon}")
        return slots


def _reserve(key: tuple[str, str], size: int | None) -> None:
    with _registry_lock:
        if size is None:
            _reserved.pop(key, None)
        else:
            _reserved[key] = size


def _reserved_on(daemon: str) -> int:
    with _registry_lock:
        return sum(n for (d, _), n in _reserved.items() if d == daemon)


def _hold(key: tuple[str, str], delta: int) -> int:
    with _registry_lock:
        before = _holds.get(key, 0)
        n = before + delta
        if n > 0:
            _holds[key] = n
        else:
            _holds.pop(key, None)
        if (before == 0) != (n == 0):
            _lease(key, n > 0)
        return n


#: one empty file per (daemon, image, pid) holding it, so other processes of this user on this host keep the
#: image too. The directory is per user (uid in its name, mode 0o700, refused unless ours) and leases are opened
#: with O_NOFOLLOW, so another user of a shared /tmp can neither plant links nor fake holds.
LEASE_DIR = os.path.join(tempfile.gettempdir(), f"agentcompass-image-holds-{os.getuid()}")


def lease_prefix(key: tuple[str, str]) -> str:
    """Leases of ``(daemon_key, image)`` are the files ``<prefix>.<pid>``."""
    return os.path.join(LEASE_DIR, hashlib.sha256("\0".join(key).encode()).hexdigest()[:24])


def _lease_dir_ok() -> bool:
    """Whether LEASE_DIR is a real directory of ours that nobody else can write (made when missing)."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(LEASE_DIR, 0o700)
    st = os.lstat(LEASE_DIR)
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o022


def _lease(key: tuple[str, str], held: bool) -> None:
    path = f"{lease_prefix(key)}.{os.getpid()}"
    try:
        if held:
            if not _lease_dir_ok():
                log.warning("image leases: %s is not a private directory of this user; leases not written",
                            LEASE_DIR)
                return
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600))
        else:
            os.unlink(path)
    except OSError as exc:  # a missing lease only makes another process's removal less careful
        log.debug("image lease %s: %s", path, exc)


def _held_elsewhere(key: tuple[str, str]) -> bool:
    """Whether another live process of this host (and user) holds the image (a dead one's lease is dropped)."""
    for path in glob.glob(f"{lease_prefix(key)}.*"):
        try:
            pid = int(path.rsplit(".", 1)[1])
            st = os.lstat(path)
        except (ValueError, OSError):
            continue
        if pid == os.getpid() or not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
            continue  # not a lease this user's processes wrote
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            try:
                os.unlink(path)
            except OSError:
                pass
            continue
        except PermissionError:  # alive, another user's
            pass
        return True
    return False


def fetches_in_flight(daemon: str) -> int:
    """Pulls and builds running right now on ``daemon`` (a ``daemon_key``) across this process."""
    return _slots(daemon).count


def daemon_key(provider: EnvironmentProvider) -> str:
    """Which daemon ``provider`` talks to: limits and holds count per daemon."""
    return f"{provider.name}@{provider.image_store()}"


# ----------------------------------------------------------------------------- the cache


@dataclass
class _Image:
    ref: str
    key: tuple[str, str]
    level: str
    fetch: asyncio.Task[None] | None = None
    #: absent at the first look and made present by this launch
    fetched: bool = False
    #: its fetch was cancelled after it started: the image may or may not be there
    partial: bool = False
    #: whether it was there at the first look (None: not looked yet); such an image is never removed
    present_before: bool | None = None
    removed: bool = False
    #: the removal task once ``removed`` (a new entry for the same image waits for it before it looks)
    removal: asyncio.Task[None] | None = None
    #: the removal of the previous entry of this image, still running when this one was made
    after: asyncio.Task[None] | None = None
    holds: int = 0
    #: its holds went back to zero once (a fetch ending after that removes it)
    released: bool = False
    #: ensure calls awaiting its fetch right now
    waiters: int = 0
    #: a task (not only a prefetch) asked for it: its fetch waits for room rather than being skipped
    wanted: bool = False
    #: some holder's cache_level keeps it
    keep: bool = False
    #: the last ImagePull status sent for it
    status: str | None = None


def _ok(fetch: asyncio.Task[None] | None) -> bool:
    """Whether ``fetch`` ended and made the image present."""
    return fetch is not None and fetch.done() and not fetch.cancelled() and fetch.exception() is None


def _failed(fetch: asyncio.Task[None] | None) -> bool:
    return fetch is None or (fetch.done() and (fetch.cancelled() or fetch.exception() is not None))


@dataclass
class _Request:
    name: str
    run_id: str
    provider: EnvironmentProvider
    policy: ImagePolicy
    order: list[tuple[str, str, ImageRecipe | None]] = field(default_factory=list)
    asked: set[str] = field(default_factory=set)
    next_prefetch: int = 0
    task_refs: dict[str, set[str]] = field(default_factory=dict)
    background: set[asyncio.Task[Any]] = field(default_factory=set)
    stats: dict[str, int] = field(default_factory=lambda: {"pulled": 0, "built": 0, "removed": 0,
                                                           "bytes_pulled": 0, "bytes_removed": 0})
    closed: bool = False


class ImageCache:
    """The launch's images: what is held by which task, what is being fetched, what to remove."""

    def __init__(self, emit: Callable[[ProgressEvent], None]) -> None:
        self._emit = emit
        self._images: dict[tuple[str, str], _Image] = {}
        self._requests: dict[str, _Request] = {}
        #: set whenever an image is removed or a fetch ends: fetches waiting for disk look again
        self._space = asyncio.Event()
        self._removing = 0

    def open_request(self, name: str, run_id: str, provider: EnvironmentProvider, policy: ImagePolicy) -> RequestImages:
        """A request's handle (its provider fetches and removes the images it asks for)."""
        self._requests[name] = _Request(name, run_id, provider, policy)
        return RequestImages(self, name)

    # ------------------------------------------------------------------ planning and prefetch

    def _entry(self, req: _Request, ref: str, *, per_task: bool) -> _Image:
        key = (daemon_key(req.provider), ref)
        img = self._images.get(key)
        if img is None or img.removed:
            new = self._images[key] = _Image(ref, key, image_level(ref, per_task=per_task))
            if img is not None and img.removal is not None and not img.removal.done():
                new.after = img.removal
            img = new
        return img

    def _take(self, req: _Request, task_id: str, img: _Image) -> None:
        refs = req.task_refs.setdefault(task_id, set())
        if img.ref in refs:
            return
        refs.add(img.ref)
        if img.holds == 0:
            _hold(img.key, +1)
        img.holds += 1
        img.keep = img.keep or req.policy.keeps(img.level)

    def _resolve(self, req: _Request, image: str | None) -> tuple[str, bool]:
        if image:
            return image, True
        return req.provider.image or "", False

    async def plan(self, name: str, benchmark: Any, tasks: Iterable[TaskSpec]) -> None:
        req = self._requests[name]
        for i, task in enumerate(tasks):
            if i % 64 == 63:
                await asyncio.sleep(0)  # thousands of tasks: let the loop breathe
            try:
                prepared = benchmark.prepare(task.public())
            except Exception:  # reported as that task's prepare_error when it runs
                continue
            ref, per_task = self._resolve(req, prepared.image)
            if not ref:
                continue
            img = self._entry(req, ref, per_task=per_task)
            self._take(req, task.task_id, img)
            req.order.append((task.task_id, ref, prepared.image_recipe))
        self._prefetch(req)

    def _prefetch(self, req: _Request) -> None:
        if req.closed:
            return
        window = len(req.asked) + req.policy.prefetch_images
        while req.next_prefetch < min(window, len(req.order)):
            task_id, ref, recipe = req.order[req.next_prefetch]
            req.next_prefetch += 1
            if task_id in req.asked:
                continue
            img = self._images.get((daemon_key(req.provider), ref))
            if img is not None and _ok(img.fetch):
                continue  # already there
            if img is not None:
                img.status = "scheduled"
            self._emit(ImagePull(ts=time.time(), request=req.name, run_id=req.run_id, image=ref, status="scheduled",
                                 task_id=task_id, prefetch=True))
            t = asyncio.get_running_loop().create_task(self._prefetch_one(req, task_id, ref, recipe),
                                                       name=f"prefetch-{ref}")
            req.background.add(t)
            t.add_done_callback(req.background.discard)

    async def _prefetch_one(self, req: _Request, task_id: str, ref: str, recipe: ImageRecipe | None) -> None:
        try:
            await self.ensure(req.name, task_id, ref, recipe, prefetch=True)
        except asyncio.CancelledError:
            img = self._images.get((daemon_key(req.provider), ref))
            if img is not None and img.status not in PULL_ENDED and (img.fetch is None or img.fetch.done()):
                self._event(req, img, "cancelled", task_id, True)  # no fetch left to send the last event
            raise
        except Exception as exc:  # the task that needs it asks again and reports it
            log.info("prefetch of %s failed: %s", ref, exc)

    # ------------------------------------------------------------------ ensure

    async def ensure(self, name: str, task_id: str | None, image: str | None, recipe: ImageRecipe | None, *,
                     prefetch: bool = False) -> str:
        req = self._requests[name]
        ref, per_task = self._resolve(req, image)
        img = self._entry(req, ref, per_task=per_task)
        if task_id is not None:
            self._take(req, task_id, img)
            if not prefetch and task_id not in req.asked:
                req.asked.add(task_id)
                self._prefetch(req)
        if not prefetch:
            img.wanted = True
        if _failed(img.fetch):
            img.fetch = asyncio.get_running_loop().create_task(self._fetch(req, img, recipe, task_id, prefetch))
        fetch = img.fetch
        assert fetch is not None
        img.waiters += 1
        try:
            # shielded: one waiter cancelled must not cancel the fetch the others share
            async with asyncio.timeout(ENSURE_CAP_S):
                await asyncio.shield(fetch)
        finally:
            img.waiters -= 1
        return ref

    def _event(self, req: _Request, img: _Image, status: str, task_id: str | None, prefetch: bool,
               **extra: Any) -> None:
        img.status = status
        self._emit(ImagePull(ts=time.time(), request=req.name, run_id=req.run_id, image=img.ref, status=status,
                             task_id=task_id, prefetch=prefetch, **extra))

    async def _fetch(self, req: _Request, img: _Image, recipe: ImageRecipe | None, task_id: str | None,
                     prefetch: bool) -> None:
        """One fetch, shared by the ensure calls of the image; always ends with a final ImagePull once any
        event of it went out (a display drops the image's row on it)."""
        try:
            await self._fetch_once(req, img, recipe, task_id, prefetch)
        except BaseException as exc:
            if img.status is not None and img.status not in PULL_ENDED:
                if isinstance(exc, asyncio.CancelledError | _Deferred):
                    self._event(req, img, "cancelled", task_id, prefetch, error=str(exc)[:500] or None)
                else:
                    self._event(req, img, "failed", task_id, prefetch, error=str(exc)[:500])
            raise
        finally:
            if img.released and not img.holds:  # it ended after its last task let go of it
                self._schedule_removal(req, img)

    async def _fetch_once(self, req: _Request, img: _Image, recipe: ImageRecipe | None, task_id: str | None,
                          prefetch: bool) -> None:
        provider = req.provider
        if img.after is not None:  # its previous entry is being removed: look once that is over
            await asyncio.wait({img.after}, timeout=_REMOVE_CAP_S)
            img.after = None
        if type(provider).image_size is EnvironmentProvider.image_size:
            # it cannot tell what is there (no image_size of its own): make it present, never remove it
            await provider.ensure_image(img.ref, recipe)
            return
        size_of = provider.image_size
        if img.present_before is None:
            img.present_before = await size_of(img.ref) is not None
            if img.present_before:
                self._event(req, img, "present", task_id, prefetch)
                return
        elif img.present_before or img.fetched:
            return
        await self._wait_for_disk(req, img, task_id, prefetch)
        slots = _slots(daemon_key(provider))
        if slots.count >= req.policy.max_concurrent_pulls:
            self._event(req, img, "queued", task_id, prefetch)
        await slots.acquire(req.policy.max_concurrent_pulls)
        try:
            # again with the slot: fetches that started while this one queued took room
            await self._wait_for_disk(req, img, task_id, prefetch)
            _reserve(img.key, FETCH_ESTIMATE)
            try:
                await self._run_fetch(req, img, recipe, task_id, prefetch, size_of)
            finally:
                _reserve(img.key, None)
                self._space.set()
        finally:
            slots.release()

    async def _run_fetch(self, req: _Request, img: _Image, recipe: ImageRecipe | None, task_id: str | None,
                         prefetch: bool, size_of: Callable[[str], Any]) -> None:
        provider = req.provider
        building = recipe is not None or provider.builds_image(img.ref)
        self._event(req, img, "building" if building else "pulling", task_id, prefetch)
        sent_at = [0.0]  # when the last progress event went out
        pulled = [0]  # bytes so far
        held: list[PullProgress | None] = [None]  # the last report the throttle held back

        def send(p: PullProgress) -> None:
            self._event(req, img, "pulling", task_id, prefetch, layers_done=p.layers_done,
                        layers_total=p.layers_total, bytes_done=pulled[0], bytes_total=p.bytes_total,
                        rate_bps=p.rate_bps)

        def on_progress(p: PullProgress) -> None:
            pulled[0] = p.bytes_done
            total = p.bytes_total
            if total:  # compressed layers plus their extraction
                _reserve(img.key, 2 * total)
            now = time.monotonic()
            if now - sent_at[0] < _PROGRESS_EVERY_S:
                held[0] = p
                return
            sent_at[0], held[0] = now, None
            send(p)

        try:
            await provider.ensure_image(img.ref, recipe, on_pull_progress=on_progress)
        except asyncio.CancelledError:
            img.partial = True  # the daemon may have finished it anyway
            raise
        if held[0] is not None:  # the final counts, even when the pull was quicker than the throttle
            send(held[0])
        img.fetched = True
        size = int(await size_of(img.ref) or 0)
        done = pulled[0]  # the bytes that came (0 when every layer was there)
        req.stats["built" if building else "pulled"] += 1
        if not building:
            req.stats["bytes_pulled"] += done
        self._event(req, img, "done", task_id, prefetch, bytes_done=done, bytes_total=size)

    def _releasable(self) -> int:
        """Images this launch fetched that will be removed once released (space that may come back); an image
        a queued task holds (prefetched) is not: it stays until that task has run."""
        queued = {(daemon_key(r.provider), ref) for r in self._requests.values()
                  for task_id, refs in r.task_refs.items() if task_id not in r.asked for ref in refs}
        return sum(1 for i in self._images.values()
                   if i.fetched and not i.removed and not i.keep and i.key not in queued) + self._removing

    async def _wait_for_disk(self, req: _Request, img: _Image, task_id: str | None, prefetch: bool) -> None:
        floor = req.policy.min_free_disk
        if floor is None:
            return
        deadline = time.monotonic() + req.policy.disk_wait_timeout
        announced = False
        while True:
            free = await req.provider.disk_free_bytes()
            if free is None:
                return
            in_flight = _reserved_on(daemon_key(req.provider))
            room = free - in_flight
            if prefetch and not img.wanted and room - FETCH_ESTIMATE < floor:
                raise _Deferred(f"prefetch deferred: {room / 2**30:.1f} GiB free after the fetches in flight, "
                                f"too close to environment_params.min_free_disk ({floor / 2**30:.1f} GiB); the "
                                "task fetches it when it starts")
            if room >= floor:
                return
            left = deadline - time.monotonic()
            if left <= 0 or not (self._releasable() or in_flight):
                waited = f" after waiting {req.policy.disk_wait_timeout:g}s (disk_wait_timeout)" if left <= 0 else ""
                busy = f" ({in_flight / 2**30:.1f} GiB set aside for fetches in flight)" if in_flight else ""
                msg = (f"image {img.ref}: the daemon's disk has {free / 2**30:.1f} GiB free{busy}, below "
                       f"environment_params.min_free_disk ({floor / 2**30:.1f} GiB){waited}; free space, or lower "
                       "min_free_disk / cache_level")
                self._event(req, img, "failed", task_id, prefetch, error=msg)
                raise DiskFull(msg)
            if not announced:
                self._event(req, img, "waiting_disk", task_id, prefetch)
                announced = True
            self._space.clear()
            try:
                async with asyncio.timeout(min(left, 30.0)):
                    await self._space.wait()
            except TimeoutError:
                pass

    # ------------------------------------------------------------------ release and removal

    def task_done(self, name: str, task_id: str) -> None:
        """Every attempt of ``task_id`` (verifier included) is over: release the images it held."""
        req = self._requests.get(name)
        if req is None:
            return
        for ref in req.task_refs.pop(task_id, set()):
            self._release(req, ref)

    def _release(self, req: _Request, ref: str) -> None:
        img = self._images.get((daemon_key(req.provider), ref))
        if img is None or img.holds <= 0:
            return
        img.holds -= 1
        if img.holds:
            return
        img.released = True
        if _hold(img.key, -1):
            return
        fetch = img.fetch
        if fetch is not None and not fetch.done():
            if not img.waiters:  # nobody needs it any more; what it leaves is removed when it ends
                fetch.cancel()
                req.background.add(fetch)
                fetch.add_done_callback(req.background.discard)
            return
        self._schedule_removal(req, img)

    def _schedule_removal(self, req: _Request, img: _Image) -> None:
        """Remove ``img`` if this launch made it, its level is not kept and nobody in the process holds it."""
        if img.removed or img.keep or img.holds or img.present_before or not (img.fetched or img.partial):
            return
        with _registry_lock:
            if _holds.get(img.key):
                return
        img.removed = True
        self._removing += 1
        t = img.removal = asyncio.get_running_loop().create_task(self._remove(req, img), name=f"remove-{img.ref}")
        req.background.add(t)
        t.add_done_callback(req.background.discard)

    async def _remove(self, req: _Request, img: _Image) -> None:
        try:
            if await asyncio.to_thread(_held_elsewhere, img.key):
                self._emit(ImageRemoved(ts=time.time(), request=req.name, run_id=req.run_id, image=img.ref,
                                        kept="another process holds it"))
                return
            again = self._images.get(img.key)
            if again is not None and again is not img and again.holds:
                # taken again since it was released: the new entry has it (its fetch waited for this)
                if again.present_before is None:
                    again.present_before, again.fetched = False, True
                self._emit(ImageRemoved(ts=time.time(), request=req.name, run_id=req.run_id, image=img.ref,
                                        kept="needed again"))
                return
            async with asyncio.timeout(_REMOVE_CAP_S):
                freed = await req.provider.remove_image(img.ref)
        except Exception as exc:
            log.warning("removing image %s failed: %s", img.ref, exc)
            return
        finally:
            self._removing -= 1
            self._space.set()
        if freed:
            req.stats["removed"] += 1
            req.stats["bytes_removed"] += freed
            self._emit(ImageRemoved(ts=time.time(), request=req.name, run_id=req.run_id, image=img.ref,
                                    bytes_freed=freed))
        elif not img.partial:  # a cancelled fetch that left nothing is not news
            self._emit(ImageRemoved(ts=time.time(), request=req.name, run_id=req.run_id, image=img.ref,
                                    kept="in use or already gone"))

    async def close(self, name: str) -> dict[str, int]:
        """The request is over: stop its prefetches and the fetches nobody else holds, release what it still
        holds, wait (bounded) for its removals. Returns its counts (for summary.json)."""
        req = self._requests.get(name)
        if req is None:
            return {}
        req.closed = True
        prefetches = [t for t in req.background if t.get_name().startswith("prefetch-")]
        for t in prefetches:
            t.cancel()
        if prefetches:  # they stop waiting at once; then their fetches have no waiter left
            await asyncio.wait(prefetches, timeout=_REMOVE_CAP_S)
        for task_id in list(req.task_refs):
            self.task_done(name, task_id)
        deadline = time.monotonic() + _REMOVE_CAP_S
        # a cancelled fetch ending schedules its removal: wait for that too
        while (pending := [t for t in req.background if not t.done()]) and time.monotonic() < deadline:
            await asyncio.wait(pending, timeout=max(0.0, deadline - time.monotonic()))
        del self._requests[name]
        return dict(req.stats)


class RequestImages:
    """One request's access to the launch's ImageCache."""

    def __init__(self, cache: ImageCache, name: str) -> None:
        self._cache = cache
        self.name = name

    async def plan(self, benchmark: Any, tasks: Iterable[TaskSpec]) -> None:
        """Record which image each queued task needs (in queue order) and start prefetching."""
        await self._cache.plan(self.name, benchmark, tasks)

    async def ensure(self, task_id: str | None, image: str | None, recipe: ImageRecipe | None) -> str:
        """Make ``image`` (None: the provider's default) present for ``task_id``; its fetch is shared."""
        return await self._cache.ensure(self.name, task_id, image, recipe)

    def task_done(self, task_id: str) -> None:
        """Every attempt of ``task_id`` is over."""
        self._cache.task_done(self.name, task_id)

    async def close(self) -> dict[str, int]:
        """End of the request: its image counts."""
        return await self._cache.close(self.name)
