"""Pull an image like ``docker pull``: the daemon's progress stream, an inactivity bound, retries, typed errors.

``POST /images/create`` streams one JSON message per layer event ("Pulling fs layer", "Downloading" with
``progressDetail`` current/total, "Download complete", "Extracting", "Pull complete", "Already exists") and
reports a failure either as an HTTP error before the stream starts or as an ``error``/``errorDetail`` message in
it. There is no bound on the whole pull by default (a 3 GB SWE-bench image takes what it takes); a pull that
shows no progress for ``inactivity_timeout`` seconds is cancelled (the request to the daemon is closed, which
cancels its download) and tried again: the daemon keeps the layers it finished, so a retry resumes.

Failures are :class:`ImagePullError` with a ``kind`` the engine books as the attempt's error kind:
``registry_unreachable``, ``image_not_found``, ``registry_auth_required``, ``image_pull_stalled`` (and
``image_pull_timeout`` for the optional whole-pull bound, ``image_pull_failed`` for anything else).

Credentials come from the environment (``AGENTCOMPASS_REGISTRY_USERNAME``/``_PASSWORD``, for the one registry
named by ``AGENTCOMPASS_REGISTRY``, which is required with them) or the user's Docker config
(``$DOCKER_CONFIG/config.json`` or ``~/.docker/config.json``, ``auths`` entries; credential helpers,
``credsStore``/``credHelpers``, are not run). They travel to the daemon in the ``X-Registry-Auth`` header only:
never logged, never written.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import collections
import json
import logging
import os
import time
from collections.abc import Mapping
from typing import Any, Literal

import aiodocker
import aiohttp
import msgspec

from ..._errors import ConfigError, EnvironmentError_
from ...common.backoff import HALF_JITTER, backoff_delay
from ...common.error_kinds import ErrorKind
from ..base import ProgressCallback, PullProgress

log = logging.getLogger("agentcompass.environments.docker.pull")

PullErrorKind = Literal[ErrorKind.REGISTRY_UNREACHABLE, ErrorKind.IMAGE_NOT_FOUND, ErrorKind.REGISTRY_AUTH_REQUIRED,
                        ErrorKind.IMAGE_PULL_STALLED, ErrorKind.IMAGE_PULL_TIMEOUT, ErrorKind.IMAGE_PULL_FAILED]
PULL_ERROR_KINDS: tuple[ErrorKind, ...] = (
    ErrorKind.REGISTRY_UNREACHABLE, ErrorKind.IMAGE_NOT_FOUND, ErrorKind.REGISTRY_AUTH_REQUIRED,
    ErrorKind.IMAGE_PULL_STALLED, ErrorKind.IMAGE_PULL_TIMEOUT, ErrorKind.IMAGE_PULL_FAILED)
#: kinds a retry of the pull may cure (the daemon keeps finished layers)
RETRYABLE_KINDS = frozenset({ErrorKind.REGISTRY_UNREACHABLE, ErrorKind.IMAGE_PULL_STALLED,
                             ErrorKind.IMAGE_PULL_TIMEOUT})

DEFAULT_INACTIVITY_TIMEOUT_S = 120.0
DEFAULT_RETRIES = 3
BACKOFF_BASE_S = 2.0
BACKOFF_MAX_S = 30.0
#: at most this many progress callbacks a second (plus the final one)
PROGRESS_HZ = 4.0
LOG_EVERY_S = 5.0
#: a line of the daemon's stream longer than this is not a progress message
_MAX_LINE = 1 << 16
#: the Docker config file is small; a bigger one is not read
_MAX_CONFIG_BYTES = 1 << 20
_RATE_WINDOW_S = 3.0
DOCKER_HUB = "docker.io"
_HUB_KEYS = ("https://index.docker.io/v1/", "index.docker.io", "docker.io", "registry-1.docker.io")

ENV_USERNAME = "AGENTCOMPASS_REGISTRY_USERNAME"
ENV_PASSWORD = "AGENTCOMPASS_REGISTRY_PASSWORD"
ENV_REGISTRY = "AGENTCOMPASS_REGISTRY"
_HELPERS_NOT_RUN = ("credential helpers (credsStore/credHelpers of the Docker config) are not consulted: set "
                    f"{ENV_REGISTRY}, {ENV_USERNAME} and {ENV_PASSWORD}, or an `auths` entry in the Docker config")
_helper_warned: set[tuple[str, str]] = set()


class ImagePullError(EnvironmentError_):
    """Pulling an image failed; ``kind`` says why (one of ``PULL_ERROR_KINDS``)."""

    def __init__(self, message: str, *, kind: PullErrorKind, image: str) -> None:
        super().__init__(message)
        self.kind: PullErrorKind = kind
        self.image = image

    @property
    def retryable(self) -> bool:
        """Whether trying the pull again may succeed."""
        return self.kind in RETRYABLE_KINDS


class PullResult(msgspec.Struct, frozen=True):
    """How an image came to be present: ``present`` (already there), ``pulled`` or ``built``."""

    image: str
    source: Literal["present", "pulled", "built"]
    bytes_pulled: int = 0
    seconds: float = 0.0
    attempts: int = 0
    layers: int = 0


# ----------------------------------------------------------------------------- names and credentials


def registry_of(ref: str) -> str:
    """The registry host of image ``ref`` (``docker.io`` for Docker Hub names such as ``swebench/x``)."""
    first, sep, _ = ref.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        return first
    return DOCKER_HUB


def _host_key(key: str) -> str:
    """A Docker config ``auths`` key (``https://host/v1/``, ``host``) -> ``host``."""
    key = key.strip()
    for scheme in ("https://", "http://"):
        if key.startswith(scheme):
            key = key[len(scheme):]
    host = key.split("/", 1)[0]
    return DOCKER_HUB if key in _HUB_KEYS or host in _HUB_KEYS else host


def docker_config_path(environ: Mapping[str, str] | None = None) -> str:
    """``$DOCKER_CONFIG/config.json``, else ``~/.docker/config.json``."""
    env = os.environ if environ is None else environ
    base = env.get("DOCKER_CONFIG") or os.path.join(os.path.expanduser("~"), ".docker")
    return os.path.join(base, "config.json")


def _config_credentials(registry: str, path: str) -> dict[str, str] | None:
    try:
        with open(path, "rb") as fh:
            raw = fh.read(_MAX_CONFIG_BYTES + 1)
    except OSError:
        return None
    if len(raw) > _MAX_CONFIG_BYTES:
        log.warning("docker config %s is over %d bytes; not read", path, _MAX_CONFIG_BYTES)
        return None
    try:
        config = json.loads(raw)
    except ValueError:
        log.warning("docker config %s is not JSON; not read", path)
        return None
    if not isinstance(config, dict):
        return None
    auths = config.get("auths")
    auths = auths if isinstance(auths, dict) else {}
    for key, entry in auths.items():
        if not isinstance(key, str) or _host_key(key) != registry or not isinstance(entry, dict):
            continue
        if isinstance(entry.get("identitytoken"), str) and entry["identitytoken"]:
            return {"identitytoken": entry["identitytoken"], "serveraddress": key}
        if isinstance(entry.get("auth"), str) and entry["auth"]:
            try:
                user, sep, password = base64.b64decode(entry["auth"]).decode().partition(":")
            except (binascii.Error, UnicodeDecodeError):
                log.warning("docker config %s: the auth entry for %s is not base64 user:password", path, key)
                continue
            if sep:
                return {"username": user, "password": password, "serveraddress": key}
        if isinstance(entry.get("username"), str) and isinstance(entry.get("password"), str):
            return {"username": entry["username"], "password": entry["password"], "serveraddress": key}
    helpers = config.get("credHelpers")
    helpers = helpers if isinstance(helpers, dict) else {}
    if any(isinstance(k, str) and _host_key(k) == registry for k in helpers) or config.get("credsStore"):
        if (path, registry) not in _helper_warned:  # once per registry: every pull of a run would say it again
            _helper_warned.add((path, registry))
            log.warning("docker config %s names a credential helper for %s, which is skipped; %s", path, registry,
                        _HELPERS_NOT_RUN)
    return None


def check_registry_env(environ: Mapping[str, str] | None = None) -> None:
    """ConfigError unless the ``AGENTCOMPASS_REGISTRY*`` variables are unset or name one registry and both
    credentials: credentials without a registry would be sent to every registry (Docker Hub too)."""
    env = os.environ if environ is None else environ
    user, password, only = env.get(ENV_USERNAME), env.get(ENV_PASSWORD), (env.get(ENV_REGISTRY) or "").strip()
    if (user or password) and not only:
        raise ConfigError(f"{ENV_USERNAME}/{ENV_PASSWORD} are set but {ENV_REGISTRY} is not: set {ENV_REGISTRY} to "
                          "the registry host they are for (e.g. registry.example.com:5000); they are never sent to "
                          "another registry.", field=ENV_REGISTRY)
    if only and not (user and password):
        raise ConfigError(f"{ENV_REGISTRY} is set but {ENV_USERNAME if not user else ENV_PASSWORD} is not: give "
                          f"both {ENV_USERNAME} and {ENV_PASSWORD}, or unset {ENV_REGISTRY}.",
                          field=ENV_USERNAME if not user else ENV_PASSWORD)


def registry_credentials(ref: str, environ: Mapping[str, str] | None = None) -> dict[str, str] | None:
    """The credentials for the registry of ``ref``: the environment's when ``AGENTCOMPASS_REGISTRY`` is that
    registry, else the Docker config's. ConfigError for an incomplete environment (``check_registry_env``)."""
    env = os.environ if environ is None else environ
    check_registry_env(env)
    registry = registry_of(ref)
    user, password, only = env.get(ENV_USERNAME), env.get(ENV_PASSWORD), env.get(ENV_REGISTRY)
    if user and password and only and _host_key(only) == registry:
        return {"username": user, "password": password, "serveraddress": registry}
    return _config_credentials(registry, docker_config_path(env))


def auth_header(credentials: Mapping[str, str]) -> str:
    """The ``X-Registry-Auth`` value for ``credentials`` (URL-safe base64 of JSON, as the daemon reads it)."""
    return base64.urlsafe_b64encode(json.dumps(dict(credentials)).encode()).decode()


def split_ref(ref: str) -> tuple[str, str]:
    """``repo[:tag]`` or ``repo@digest`` -> (``fromImage``, ``tag``) for ``POST /images/create``."""
    if "@" in ref:
        return ref, ""
    repo, sep, tag = ref.rpartition(":")
    if not sep or "/" in tag:
        return ref, "latest"
    return repo, tag


# ----------------------------------------------------------------------------- errors


_UNREACHABLE = ("connection refused", "no such host", "i/o timeout", "network is unreachable", "no route to host",
                "tls handshake timeout", "server misbehaving", "connection reset", "dial tcp",
                "server gave http response to https client", "temporary failure in name resolution",
                "context deadline exceeded", "unexpected eof", "503 service unavailable", "502 bad gateway")
_NOT_FOUND = ("manifest unknown", "not found", "repository does not exist", "name unknown", "no such image",
              "no matching manifest")
_AUTH = ("unauthorized", "authentication required", "denied", "no basic auth credentials", "incorrect username",
         "403 forbidden")


def classify(message: str, status: int | None = None) -> PullErrorKind:
    """The kind of a daemon's pull error message (HTTP ``status`` when the daemon answered with one)."""
    text = message.lower()
    # Docker Hub says "repository does not exist or may require 'docker login'" for both: not found first,
    # the message tells the user about the other possibility.
    if any(s in text for s in _NOT_FOUND):
        return ErrorKind.IMAGE_NOT_FOUND
    if any(s in text for s in _AUTH):
        return ErrorKind.REGISTRY_AUTH_REQUIRED
    if any(s in text for s in _UNREACHABLE):
        return ErrorKind.REGISTRY_UNREACHABLE
    if status == 404:
        return ErrorKind.IMAGE_NOT_FOUND
    if status in (401, 403):
        return ErrorKind.REGISTRY_AUTH_REQUIRED
    return ErrorKind.IMAGE_PULL_FAILED


def _explain(kind: str, ref: str, detail: str, *, has_credentials: bool) -> str:
    registry = registry_of(ref)
    if kind == ErrorKind.IMAGE_NOT_FOUND:
        return f"image_not_found: image {ref} is not in registry {registry} (daemon: {detail})"
    if kind == ErrorKind.REGISTRY_AUTH_REQUIRED:
        how = ("the credentials given were refused" if has_credentials else
               f"no credentials for {registry}; {_HELPERS_NOT_RUN} (`docker login {registry}` writes one when no "
               f"credential helper is configured)")
        return f"registry_auth_required: pulling {ref} needs authentication; {how} (daemon: {detail})"
    if kind == ErrorKind.REGISTRY_UNREACHABLE:
        return f"registry_unreachable: registry {registry} cannot be reached to pull {ref} (daemon: {detail})"
    return f"{kind}: pulling {ref} failed (daemon: {detail})"


# ----------------------------------------------------------------------------- progress


class _Layer:
    __slots__ = ("current", "done", "extracted", "status", "total")

    def __init__(self) -> None:
        self.current = 0
        self.total = 0
        #: bytes of the layer unpacked so far ("Extracting" progressDetail): a long extraction is progress
        self.extracted = 0
        self.done = False
        self.status = ""


class _Tracker:
    """The per-layer state of one image's pull, across its attempts (a retry's "Already exists" keeps the
    bytes an earlier attempt fetched)."""

    def __init__(self, image: str, on_progress: ProgressCallback | None) -> None:
        self.image = image
        self.on_progress = on_progress
        self.layers: dict[str, _Layer] = {}
        self.finished = False  # the daemon said the image is there ("Status: ..." / "Digest: ...")
        self._samples: collections.deque[tuple[float, int]] = collections.deque()
        self._last_emit = 0.0
        self._last_log = time.monotonic()
        self._pending: asyncio.TimerHandle | None = None

    def feed(self, msg: dict[str, Any]) -> bool:
        """Take one stream message; whether it showed progress (a new layer state, more bytes downloaded or
        more of a layer extracted)."""
        status = str(msg.get("status") or "")
        layer_id = msg.get("id")
        if status.startswith(("Status:", "Digest:")):
            self.finished = self.finished or status.startswith("Status:")
            return True
        if not isinstance(layer_id, str) or not layer_id or status.startswith("Pulling from"):
            return bool(status) and not status.startswith("Retrying")
        if status.startswith("Retrying"):  # the daemon's own countdown after a failed layer fetch
            return False
        layer = self.layers.setdefault(layer_id, _Layer())
        before = (layer.status, layer.current, layer.extracted, layer.done)
        detail = msg.get("progressDetail")
        detail = detail if isinstance(detail, dict) else {}
        current, total = detail.get("current"), detail.get("total")
        if status == "Downloading":
            if isinstance(total, int) and total > 0:
                layer.total = total
            if isinstance(current, int) and current >= 0:
                layer.current = max(layer.current, current) if layer.done else current
        elif status == "Extracting":
            if not layer.total and isinstance(total, int) and total > 0:
                layer.total = total
            if isinstance(current, int) and current > layer.extracted:
                layer.extracted = current
        if status in ("Download complete", "Verifying Checksum", "Extracting", "Pull complete") and layer.total:
            layer.current = layer.total
        if status in ("Pull complete", "Already exists"):
            layer.done = True
        layer.status = status
        return (layer.status, layer.current, layer.extracted, layer.done) != before

    def snapshot(self, status: Literal["pulling", "retrying", "done", "failed"]) -> PullProgress:
        now = time.monotonic()
        done = self.bytes_done
        self._samples.append((now, done))
        while len(self._samples) > 2 and now - self._samples[0][0] > _RATE_WINDOW_S:
            self._samples.popleft()
        t0, b0 = self._samples[0]
        rate = (done - b0) / (now - t0) if now > t0 else 0.0
        return PullProgress(image=self.image, layers_total=len(self.layers),
                            layers_done=sum(1 for la in self.layers.values() if la.done), bytes_done=done,
                            bytes_total=sum(la.total for la in self.layers.values()), rate_bps=max(rate, 0.0),
                            status=status)

    @property
    def bytes_done(self) -> int:
        return sum(la.current for la in self.layers.values())

    def tick(self, *, force: Literal["retrying", "done", "failed"] | None = None) -> None:
        """Call back (at most ``PROGRESS_HZ`` a second, always for ``force``) and log a line now and then. A
        change held back by the rate limit is delivered when the interval ends, even if the stream goes quiet."""
        now = time.monotonic()
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None
        wait = self._last_emit + 1.0 / PROGRESS_HZ - now
        if force is None and wait > 0:
            if self.on_progress is not None:
                self._pending = asyncio.get_running_loop().call_later(wait, self.tick)
            if now - self._last_log < LOG_EVERY_S:
                return
        snap = self.snapshot(force or "pulling")
        if self.on_progress is not None and (force is not None or wait <= 0):
            self._last_emit = now
            try:
                self.on_progress(snap)
            except Exception:  # a display's bug must not fail the pull
                log.exception("pull progress callback failed")
        if force is None and now - self._last_log >= LOG_EVERY_S:
            self._last_log = now
            log.info("pulling %s: %d/%d layers, %.1f/%.1f MB, %.1f MB/s", self.image, snap.layers_done,
                     snap.layers_total, snap.bytes_done / 1e6, snap.bytes_total / 1e6, snap.rate_bps / 1e6)

    def close(self) -> None:
        """Drop a held-back callback (the pull is over)."""
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None


# ----------------------------------------------------------------------------- the pull


class PullOptions(msgspec.Struct, frozen=True):
    """How to pull: ``platform`` (``os[/arch[/variant]]``), the inactivity bound, an optional whole-pull bound,
    and how many times to retry a stalled or unreachable pull."""

    platform: str | None = None
    inactivity_timeout: float = DEFAULT_INACTIVITY_TIMEOUT_S
    timeout: float | None = None
    retries: int = DEFAULT_RETRIES


class _Stalled(Exception):
    pass


async def _one_try(docker: aiodocker.Docker, ref: str, opts: PullOptions, headers: dict[str, str],
                   tracker: _Tracker, has_credentials: bool) -> None:
    """One ``POST /images/create``, read to its end; an ``_Stalled`` after ``inactivity_timeout`` s without
    progress (the request is closed, which cancels the daemon's download)."""
    from_image, tag = split_ref(ref)
    params = {"fromImage": from_image}
    if tag:
        params["tag"] = tag
    if opts.platform:
        params["platform"] = opts.platform
    loop = asyncio.get_running_loop()
    try:
        async with asyncio.timeout(opts.inactivity_timeout) as idle:
            try:
                cm = docker._query("images/create", "POST", params=params, headers=headers,
                                   timeout=aiohttp.ClientTimeout(total=None, sock_read=None))
                async with cm as response:
                    try:
                        idle.reschedule(loop.time() + opts.inactivity_timeout)
                        while True:
                            line = await response.content.readline()
                            if not line:
                                break
                            if len(line) > _MAX_LINE:
                                continue
                            try:
                                msg = json.loads(line)
                            except ValueError:
                                continue
                            if not isinstance(msg, dict):
                                continue
                            if msg.get("error") or msg.get("errorDetail"):
                                detail = msg.get("errorDetail")
                                text = str((detail.get("message") if isinstance(detail, dict) else None)
                                           or msg.get("error") or detail)[:2000]
                                kind = classify(text)
                                raise ImagePullError(_explain(kind, ref, text, has_credentials=has_credentials),
                                                     kind=kind, image=ref)
                            if tracker.feed(msg):
                                idle.reschedule(loop.time() + opts.inactivity_timeout)
                            tracker.tick()
                    finally:
                        response.close()  # on a stall or a cancel: drop the connection, the daemon stops
            except aiodocker.DockerError as exc:
                if exc.status == 900:  # the Docker daemon itself, not the registry
                    raise EnvironmentError_(f"pulling {ref}: {exc.message}") from exc
                text = str(exc.message)[:2000]
                kind = classify(text, exc.status)
                raise ImagePullError(_explain(kind, ref, text, has_credentials=has_credentials),
                                     kind=kind, image=ref) from exc
            except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError) as exc:
                raise ImagePullError(f"image_pull_failed: the daemon's pull stream of {ref} broke ({exc!r})",
                                     kind=ErrorKind.IMAGE_PULL_FAILED, image=ref) from exc
    except TimeoutError:
        raise _Stalled() from None
    if not tracker.finished:
        raise ImagePullError(f"image_pull_failed: the daemon's pull stream of {ref} ended before the image "
                             "was complete", kind=ErrorKind.IMAGE_PULL_FAILED, image=ref)


async def pull_image(docker: aiodocker.Docker, ref: str, opts: PullOptions | None = None, *,
                     on_progress: ProgressCallback | None = None,
                     environ: Mapping[str, str] | None = None) -> PullResult:
    """Pull ``ref`` through the daemon, reporting progress; :class:`ImagePullError` when it cannot be had."""
    opts = opts or PullOptions()
    credentials = registry_credentials(ref, environ)
    headers = {"X-Registry-Auth": auth_header(credentials)} if credentials else {}
    tracker = _Tracker(ref, on_progress)
    started = time.monotonic()
    attempts = 0
    log.info("pulling %s (registry %s%s%s)", ref, registry_of(ref), ", with credentials" if credentials else "",
             f", platform {opts.platform}" if opts.platform else "")
    try:
        try:
            async with asyncio.timeout(opts.timeout):
                while True:
                    attempts += 1
                    try:
                        await _one_try(docker, ref, opts, headers, tracker, credentials is not None)
                        break
                    except _Stalled:
                        error = ImagePullError(
                            f"image_pull_stalled: pulling {ref} showed no progress for {opts.inactivity_timeout:g}s "
                            f"(environment param pull_inactivity_timeout), {attempts} time(s); "
                            f"{tracker.bytes_done} bytes had arrived", kind=ErrorKind.IMAGE_PULL_STALLED, image=ref)
                    except ImagePullError as exc:
                        error = exc
                    if not error.retryable or attempts > opts.retries:
                        tracker.tick(force="failed")
                        raise error
                    backoff = backoff_delay(attempts, BACKOFF_BASE_S, BACKOFF_MAX_S, jitter=HALF_JITTER)
                    log.warning("%s; retrying in %.1fs (try %d of %d)", error, backoff, attempts + 1, opts.retries + 1)
                    tracker.tick(force="retrying")
                    await asyncio.sleep(backoff)
        except TimeoutError:
            tracker.tick(force="failed")
            raise ImagePullError(f"image_pull_timeout: pulling {ref} took longer than {opts.timeout:g}s (environment "
                                 f"param pull_timeout); {tracker.bytes_done} bytes had arrived",
                                 kind=ErrorKind.IMAGE_PULL_TIMEOUT, image=ref) from None
    finally:
        tracker.close()  # a cancelled pull calls back no more
    tracker.tick(force="done")
    seconds = time.monotonic() - started
    result = PullResult(image=ref, source="pulled", bytes_pulled=tracker.bytes_done, seconds=round(seconds, 3),
                        attempts=attempts, layers=len(tracker.layers))
    log.info("pulled %s: %d layers, %.1f MB in %.1fs (%d attempt%s)", ref, result.layers,
             result.bytes_pulled / 1e6, seconds, attempts, "" if attempts == 1 else "s")
    return result
