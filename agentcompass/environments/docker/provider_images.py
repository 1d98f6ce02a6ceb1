"""The docker provider's images: made present once per image (found on the daemon, built from a task's recipe
or the ``build_context``/``dockerfile`` params, or pulled), and sized, removed and given room for the engine's
image cache.

``ProviderImages`` is a part of ``DockerProvider`` (its base class): the settings and state it uses are the
provider's, set in ``DockerProvider.__init__``.
"""

from __future__ import annotations

import asyncio
import io
import logging
import os
import time
from typing import TYPE_CHECKING

import aiodocker

from ..._errors import ConfigError, EnvironmentError_
from ...interfaces import ImageRecipe
from .._tar import make_tar
from .api import DEFAULT_BASE_IMAGE, call, image_exists
from .images import build_lock
from .params import param_field
from .prestart import PrestartPool
from .pull import ImagePullError, ProgressCallback, PullOptions, PullResult, pull_image

log = logging.getLogger("agentcompass.environments.docker.provider")

#: a build is tried this often when a layer it reused vanished under it (see ``_build``)
_BUILD_TRIES = 3
_VANISHED_LAYER = ("unknown parent image ID", "No such image", "layer does not exist")


class ProviderImages:
    """``DockerProvider``'s image methods (``ensure_image``, ``pull_stats``, ``image_size``, ``remove_image``,
    ``disk_free_bytes``)."""

    # the provider's, set in DockerProvider.__init__
    image: str
    build_context: str | None
    dockerfile: str | None
    build_timeout: float
    daemon_timeout: float
    pull_options: PullOptions
    _prestart: PrestartPool | None
    _images_ready: set[str]
    #: image -> (the error, monotonic time it was raised); retryable pull errors only hold for callers that
    #: were already waiting when it was raised
    _image_errors: dict[str, tuple[BaseException, float]]
    _pull_results: dict[str, PullResult]

    if TYPE_CHECKING:
        @property
        def docker(self) -> aiodocker.Docker: ...

        def _local_daemon(self) -> bool: ...

    async def ensure_image(self, image: str | None = None, recipe: ImageRecipe | None = None, *,
                           on_pull_progress: ProgressCallback | None = None) -> str:
        """Make sure ``image`` (default: the ``image`` param) exists locally.

        Builds it from ``recipe`` (a task's) or from the ``build_context``/``dockerfile`` params when given,
        else pulls it (``docker_pull``: progress to ``on_pull_progress``, no whole-pull bound unless
        ``pull_timeout``, :class:`ImagePullError` with a ``kind`` on failure). Once per image; a failure is
        remembered so concurrent opens fail fast with the same error; a retryable pull failure (stalled,
        unreachable) is tried again by the next caller.
        """
        ref = image or self.image
        if ref in self._images_ready:
            return ref
        called = time.monotonic()
        self._raise_remembered(ref, called)
        async with build_lock(f"image:{ref}"):  # shared by the providers of this loop
            if ref in self._images_ready:
                return ref
            self._raise_remembered(ref, called)
            try:
                if await image_exists(self.docker, ref, timeout_s=self.daemon_timeout):
                    self._pull_results.setdefault(ref, PullResult(image=ref, source="present"))
                elif recipe is not None:
                    await self._build(ref, recipe.context_dir, recipe.dockerfile)
                elif (self.build_context or self.dockerfile) and ref == self.image:
                    await self._build(ref, *await asyncio.to_thread(self._build_inputs))
                else:
                    await self._pull(ref, on_pull_progress)
            except (EnvironmentError_, ConfigError) as exc:
                self._image_errors[ref] = (exc, time.monotonic())
                raise
            self._image_errors.pop(ref, None)
            self._images_ready.add(ref)
            return ref

    def _raise_remembered(self, ref: str, called: float) -> None:
        remembered = self._image_errors.get(ref)
        if remembered is None:
            return
        exc, failed_at = remembered
        if not (isinstance(exc, ImagePullError) and exc.retryable) or failed_at >= called:
            raise exc

    def pull_stats(self, image: str) -> PullResult | None:
        """How ``image`` came to be present for this provider (``present``, ``pulled`` with bytes, seconds and
        attempts, or ``built``); None before ``ensure_image`` made it ready."""
        return self._pull_results.get(image)

    def _build_inputs(self) -> tuple[str, str]:
        """(context dir, dockerfile relative to it) from the params; ConfigError if missing."""
        context = self.build_context or os.path.dirname(os.path.abspath(self.dockerfile or "."))
        if not os.path.isdir(context):
            raise ConfigError(f"environment docker: build_context {context!r} is not a directory",
                              field=param_field("build_context"))
        dockerfile = self.dockerfile or "Dockerfile"
        if os.path.isabs(dockerfile):
            dockerfile = os.path.relpath(dockerfile, context)
        if not os.path.isfile(os.path.join(context, dockerfile)):
            raise ConfigError(f"environment docker: dockerfile {dockerfile!r} not found in {context!r}",
                              field=param_field("dockerfile"))
        return context, dockerfile

    async def _build(self, ref: str, context: str, dockerfile: str) -> None:
        log.info("building image %s from %s", ref, context)
        tar_bytes = await asyncio.to_thread(make_tar, context)
        started = time.monotonic()
        try:
            async with asyncio.timeout(self.build_timeout):
                for attempt in range(1, _BUILD_TRIES + 1):
                    try:
                        await self.docker.images.build(fileobj=io.BytesIO(tar_bytes), encoding="identity",
                                                       tag=ref, path_dockerfile=dockerfile, rm=True, forcerm=True)
                        break
                    except aiodocker.DockerError as exc:
                        # Another process removed an image whose layers this build's cache was reusing (two
                        # runs building the same recipe; one ends and drops its image): building again works.
                        if attempt == _BUILD_TRIES or not any(m in str(exc.message) for m in _VANISHED_LAYER):
                            raise
                        log.warning("building image %s: %s; building it again (try %d of %d)", ref, exc.message,
                                    attempt + 1, _BUILD_TRIES)
        except TimeoutError as exc:
            raise EnvironmentError_(f"building image {ref} timed out after "
                                    f"{self.build_timeout:.0f}s") from exc
        except aiodocker.DockerError as exc:
            raise EnvironmentError_(f"building image {ref} from {context} failed: {exc.message}") from exc
        log.info("built image %s in %.1fs", ref, time.monotonic() - started)
        self._pull_results[ref] = PullResult(image=ref, source="built", seconds=round(time.monotonic() - started, 3))

    async def _pull(self, ref: str, on_progress: ProgressCallback | None) -> None:
        try:
            result = await pull_image(self.docker, ref, self.pull_options, on_progress=on_progress)
        except ImagePullError as exc:
            if ref.startswith("agentcompass/base:"):
                # the base images are built locally, never published
                flag = "" if ref == DEFAULT_BASE_IMAGE else f" --tag {ref}"
                raise ImagePullError(f"{exc}; build it with `agentcompass images build-base{flag}`",
                                     kind=exc.kind, image=ref) from exc
            raise
        self._pull_results[ref] = result

    async def image_size(self, ref: str) -> int | None:
        """The size in bytes of image ``ref`` on the daemon, or None when it has no such image."""
        try:
            info = await call(lambda: self.docker.images.inspect(ref), what=f"image inspect {ref}",
                              timeout_s=self.daemon_timeout)
        except aiodocker.DockerError as exc:
            if exc.status == 404:
                return None
            raise
        return int(info.get("Size") or 0)

    async def remove_image(self, ref: str) -> int:
        """Remove image ``ref``; the bytes freed (its size; layers shared with other images stay). 0, without
        an error, when it is gone already or a container still uses it (containers started ahead of need do not
        count: they are removed first)."""
        self._images_ready.discard(ref)
        if self._prestart is not None:
            await self._prestart.drop_image(ref)
        size = await self.image_size(ref)
        if size is None:
            return 0
        users = await call(lambda: self.docker.containers.list(all=True, filters={"ancestor": [ref]}),
                           what="container list", timeout_s=self.daemon_timeout)
        if users:
            log.info("image %s kept: %d container(s) still use it", ref, len(users))
            return 0
        try:
            await call(lambda: self.docker.images.delete(ref, force=False), what=f"image remove {ref}",
                       timeout_s=self.daemon_timeout)
        except aiodocker.DockerError as exc:
            if exc.status in (404, 409):  # gone, or in use after all (a container created meanwhile)
                return 0
            raise
        return size

    async def disk_free_bytes(self) -> int | None:
        """Free bytes on the daemon's data root (``DockerRootDir``) for a daemon on this machine, else None."""
        if not self._local_daemon():
            return None
        info = await call(self.docker.system.info, what="system info", timeout_s=self.daemon_timeout)
        root = info.get("DockerRootDir")
        if not isinstance(root, str) or not root:
            return None
        try:
            st = await asyncio.to_thread(os.statvfs, root)
        except OSError:  # a daemon in a VM or another mount namespace: its root is not ours to stat
            return None
        return st.f_bavail * st.f_frsize


__all__ = ["ProviderImages"]
