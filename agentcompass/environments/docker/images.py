"""Build the base images locally, with no registry: a debootstrap Debian rootfs or a busybox one.

The rootfs is imported through the Engine API (``POST /images/create?fromSrc=-``, the API behind
``docker import``). Images are cached by content: each build is tagged ``<tag>-<recipe hash>`` and labelled
with the hash of its recipe (suite, packages, the build code itself), and ``<tag>`` points at it. An existing
``<tag>`` is kept only when its label matches the current recipe, so a changed recipe is rebuilt and an
unchanged one never is. Builds of one tag are serialised across processes by a host file lock (test workers,
two CLIs).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import glob
import hashlib
import inspect
import io
import json
import logging
import os
import shutil
import subprocess
import tarfile
import tempfile
import time
import weakref
from collections.abc import AsyncIterator, Sequence
from typing import Literal, get_args

import aiodocker
from yarl import URL

from ..._errors import ConfigError, EnvironmentError_
from ...common.file_lock import LockWaitEnd, async_file_lock
from .api import DEFAULT_BASE_IMAGE, make_client

log = logging.getLogger("agentcompass.environments.docker.images")

BuildMethod = Literal["debootstrap", "busybox"]
METHODS: tuple[str, ...] = get_args(BuildMethod)
BUSYBOX_IMAGE = "agentcompass/base:busybox"

DEBOOTSTRAP_SUITE = "bookworm"
DEBOOTSTRAP_VARIANT = "minbase"
#: python3: checkers, the model forwarder and the egress proxy; git and patch: SWE-bench; procps: ``ps``;
#: tmux: the ``terminus`` harness's terminal
DEBOOTSTRAP_PACKAGES = ("python3", "coreutils", "bash", "procps", "git", "patch", "tmux")
#: dropped from the rootfs after debootstrap: nothing in a sandbox reads them
TRIM_GLOBS = ("var/cache/apt/archives/*.deb", "var/lib/apt/lists/*", "var/log/*.log", "debootstrap",
              "usr/share/doc/*", "usr/share/man/*", "usr/share/info/*", "usr/share/locale/*",
              "var/cache/debconf/*-old", "var/lib/dpkg/*-old")
#: bump when a build changes meaning in a way the hashed constants and functions below do not show
RECIPE_VERSION = "2"
LABEL_RECIPE = "agentcompass.recipe_hash"
DEFAULT_MIRROR = "http://deb.debian.org/debian"

DEBOOTSTRAP_TIMEOUT_S = 1800.0
APT_TIMEOUT_S = 900.0
IMPORT_TIMEOUT_S = 900.0
#: how long a process waits for another process's build of the same tag
HOST_LOCK_TIMEOUT_S = DEBOOTSTRAP_TIMEOUT_S + IMPORT_TIMEOUT_S + APT_TIMEOUT_S

_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# One lock table per event loop: a lock must not be shared across loops (two runs, two loops).
_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Lock]] = (
    weakref.WeakKeyDictionary())


def build_lock(key: str) -> asyncio.Lock:
    """The lock serialising builds of ``key`` within the running event loop."""
    table = _locks.setdefault(asyncio.get_running_loop(), {})
    return table.setdefault(key, asyncio.Lock())


def split_tag(ref: str) -> tuple[str, str]:
    """``repo:tag`` -> (repo, tag); the tag defaults to ``latest``."""
    repo, sep, tag = ref.rpartition(":")
    if not sep or "/" in tag:
        return ref, "latest"
    return repo, tag


# ----------------------------------------------------------------------------- host tools


async def _run(argv: Sequence[str], *, timeout_s: float, what: str, env: dict[str, str] | None = None) -> str:
    """Run a host command, bounded in time; its combined output, or EnvironmentError_ with the tail."""
    proc = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        stdin=asyncio.subprocess.DEVNULL, env={**os.environ, **(env or {})}, start_new_session=True)
    try:
        async with asyncio.timeout(timeout_s):
            out, _ = await proc.communicate()
    except BaseException:
        _kill_group(proc)
        await proc.wait()
        raise
    text = out.decode(errors="replace")
    if proc.returncode != 0:
        tail = "\n".join(text.strip().splitlines()[-15:])
        raise EnvironmentError_(f"{what} failed (exit {proc.returncode}):\n{tail}")
    return text


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        try:
            os.killpg(proc.pid, 9)
        except ProcessLookupError:
            pass


async def ensure_apt_package(package: str, binary: str) -> str:
    """Path of ``binary``, installing Debian ``package`` with apt-get when it is missing."""
    found = shutil.which(binary) or shutil.which(binary, path="/usr/sbin:/sbin:/usr/bin:/bin")
    if found:
        return found
    if os.geteuid() != 0:
        raise EnvironmentError_(f"{binary} is missing and installing {package} needs root: "
                                f"run `apt-get install {package}` as root")
    if not shutil.which("apt-get"):
        raise EnvironmentError_(f"{binary} is missing and this host has no apt-get to install {package}")
    env = {"DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "--no-install-recommends", package]
    try:
        await _run(install, timeout_s=APT_TIMEOUT_S, what=f"apt-get install {package}", env=env)
    except EnvironmentError_:
        await _run(["apt-get", "update"], timeout_s=APT_TIMEOUT_S, what="apt-get update", env=env)
        await _run(install, timeout_s=APT_TIMEOUT_S, what=f"apt-get install {package}", env=env)
    found = shutil.which(binary) or shutil.which(binary, path="/usr/sbin:/sbin:/usr/bin:/bin")
    if not found:
        raise EnvironmentError_(f"installed {package} but {binary} is still not on PATH")
    return found


def apt_mirror(suite: str = DEBOOTSTRAP_SUITE, *, apt_dir: str = "/etc/apt") -> str:
    """The first http(s) Debian mirror in this machine's apt sources that serves ``suite``."""
    entries: list[tuple[list[str], list[str]]] = []  # (uris, suites)
    one_line = [os.path.join(apt_dir, "sources.list"),
                *sorted(glob.glob(os.path.join(apt_dir, "sources.list.d", "*.list")))]
    for path in one_line:
        try:
            with open(path) as fh:
                lines = fh.read().splitlines()
        except OSError:
            continue
        for line in lines:
            words = line.split("#", 1)[0].split()
            if len(words) >= 3 and words[0] == "deb":
                rest = words[1:]
                if rest[0].startswith("["):
                    while rest and not rest[0].endswith("]"):
                        rest = rest[1:]
                    rest = rest[1:]
                if len(rest) >= 2:
                    entries.append(([rest[0]], [rest[1]]))
    for path in sorted(glob.glob(os.path.join(apt_dir, "sources.list.d", "*.sources"))):
        try:
            with open(path) as fh:
                text = fh.read()
        except OSError:
            continue
        for stanza in text.split("\n\n"):
            fields: dict[str, str] = {}
            for line in stanza.splitlines():
                if line.startswith("#") or ":" not in line or line[:1].isspace():
                    continue
                key, _, value = line.partition(":")
                fields[key.strip().lower()] = value.strip()
            if "deb" in fields.get("types", "").split() and fields.get("enabled", "yes") != "no":
                entries.append((fields.get("uris", "").split(), fields.get("suites", "").split()))
    for uris, suites in entries:
        if suite in suites:
            for uri in uris:
                if uri.startswith(("http://", "https://")):
                    return uri.rstrip("/")
    return DEFAULT_MIRROR


# ----------------------------------------------------------------------------- import


async def _import_rootfs(docker: aiodocker.Docker, tag: str, body: AsyncIterator[bytes] | bytes,
                         *, cmd: str, recipe: str = "") -> None:
    """``docker import`` through the Engine API: the tar stream ``body`` becomes image ``tag``."""
    repo, name = split_tag(tag)
    query = [("fromSrc", "-"), ("repo", repo), ("tag", name), ("message", "agentcompass base image"),
             ("changes", f"ENV PATH={_PATH}"), ("changes", "ENV LANG=C.UTF-8"),
             ("changes", f"CMD {json.dumps([cmd])}"), ("changes", "LABEL agentcompass.image=base")]
    if recipe:
        query.append(("changes", f"LABEL {LABEL_RECIPE}={recipe}"))
    url = URL("images/create").with_query(query)
    async with asyncio.timeout(IMPORT_TIMEOUT_S), docker._query(
            url, method="POST", data=body, headers={"Content-Type": "application/x-tar"},
            timeout=None) as response:
        raw = await response.read()
    for line in raw.decode(errors="replace").splitlines():
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if isinstance(msg, dict) and msg.get("error"):
            raise EnvironmentError_(f"importing {tag} failed: {msg['error']}")


async def _tar_stream(root: str) -> AsyncIterator[bytes]:
    """Stream ``root`` as a tar (GNU tar keeps owners, modes, links and device-free /dev)."""
    proc = await asyncio.create_subprocess_exec(
        "tar", "--numeric-owner", "-C", root, "--exclude=./dev/*", "--exclude=./proc/*",
        "--exclude=./sys/*", "-cf", "-", ".", stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, stdin=asyncio.subprocess.DEVNULL, start_new_session=True)
    assert proc.stdout is not None and proc.stderr is not None
    try:
        while chunk := await proc.stdout.read(1 << 20):
            yield chunk
        err = await proc.stderr.read()
        if await proc.wait() != 0:
            raise EnvironmentError_(f"tar of {root} failed: {err.decode(errors='replace')[-500:]}")
    finally:
        _kill_group(proc)
        await proc.wait()


# ----------------------------------------------------------------------------- methods


def _trim_rootfs(root: str) -> None:
    """Drop package caches and logs from a fresh rootfs; add /workspace."""
    for junk in TRIM_GLOBS:
        for path in glob.glob(os.path.join(root, junk)):
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.unlink(path)
    os.makedirs(os.path.join(root, "workspace"), exist_ok=True)


#: dpkg settings of the image, as Debian's own container images have them: no fsync per unpacked file. A
#: container's writes end with it (a build step that dies is thrown away whole), and through fuse-overlayfs each
#: fsync is a round trip: ``apt-get install golang-go`` in a derived image took 149-192 CPU-s with them and 78-93
#: without (this 2-core machine)
DPKG_SETTINGS = ("etc/dpkg/dpkg.cfg.d/agentcompass-unsafe-io",
                 "# written by agentcompass images build-base: a container's package installs need no fsync\n"
                 "force-unsafe-io\n")


def _container_settings(root: str) -> None:
    """Write the image's own settings (``DPKG_SETTINGS``) into a fresh rootfs."""
    path, text = DPKG_SETTINGS
    target = os.path.join(root, path)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with open(target, "w", encoding="utf-8") as f:
        f.write(text)


async def _build_debootstrap(docker: aiodocker.Docker, tag: str, recipe: str) -> None:
    if os.geteuid() != 0:
        raise EnvironmentError_("debootstrap needs root; run `agentcompass images build-base` as root")
    debootstrap = await ensure_apt_package("debootstrap", "debootstrap")
    mirror = apt_mirror(DEBOOTSTRAP_SUITE)
    tmp = tempfile.mkdtemp(prefix="agentcompass-rootfs-")
    root = os.path.join(tmp, "rootfs")
    try:
        log.info("debootstrap %s from %s into %s", DEBOOTSTRAP_SUITE, mirror, root)
        await _run([debootstrap, f"--variant={DEBOOTSTRAP_VARIANT}", f"--include={','.join(DEBOOTSTRAP_PACKAGES)}",
                    DEBOOTSTRAP_SUITE, root, mirror], timeout_s=DEBOOTSTRAP_TIMEOUT_S, what="debootstrap")
        await asyncio.to_thread(_trim_rootfs, root)
        await asyncio.to_thread(_container_settings, root)
        await _import_rootfs(docker, tag, _tar_stream(root), cmd="/bin/bash", recipe=recipe)
    finally:
        await asyncio.to_thread(shutil.rmtree, tmp, True)


def _busybox_rootfs(busybox: str) -> bytes:
    """A tar of a minimal rootfs: /bin/busybox, its applet links, /etc/passwd, /tmp."""
    applets = subprocess.run([busybox, "--list-full"], capture_output=True, text=True, timeout=30,
                             check=True).stdout.split()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        def add_dir(name: str, mode: int = 0o755) -> None:
            info = tarfile.TarInfo(name)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, mode, int(time.time())
            tar.addfile(info)

        def add_file(name: str, data: bytes, mode: int = 0o644) -> None:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), mode, int(time.time())
            tar.addfile(info, io.BytesIO(data))

        for d in ("bin", "sbin", "usr", "usr/bin", "usr/sbin", "etc", "root", "workspace", "dev", "proc",
                  "sys", "var", "run"):
            add_dir(d)
        add_dir("tmp", 0o1777)
        with open(busybox, "rb") as fh:
            add_file("bin/busybox", fh.read(), 0o755)
        add_file("etc/passwd", b"root:x:0:0:root:/root:/bin/sh\n"
                               b"nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n")
        add_file("etc/group", b"root:x:0:\nnogroup:x:65534:\n")
        for applet in sorted(set(applets)):
            if applet == "bin/busybox" or "/" not in applet:
                continue
            info = tarfile.TarInfo(applet)
            info.type, info.linkname, info.mode = tarfile.SYMTYPE, "/bin/busybox", 0o777
            tar.addfile(info)
    return buf.getvalue()


def _is_static_elf(path: str) -> bool:
    """Whether ``path`` is an ELF64 executable without a program interpreter (statically linked)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(64)
            if head[:5] != b"\x7fELF\x02":
                return False
            order: Literal["little", "big"] = "little" if head[5] == 1 else "big"
            phoff = int.from_bytes(head[32:40], order)
            phentsize = int.from_bytes(head[54:56], order)
            phnum = int.from_bytes(head[56:58], order)
            fh.seek(phoff)
            table = fh.read(phentsize * phnum)
    except OSError:
        return False
    pt_interp = 3
    return all(int.from_bytes(table[i * phentsize:i * phentsize + 4], order) != pt_interp
               for i in range(phnum))


async def _build_busybox(docker: aiodocker.Docker, tag: str, recipe: str) -> None:
    busybox = "/bin/busybox"
    if not _is_static_elf(busybox):
        if shutil.which("busybox"):
            # A dynamic busybox is installed: busybox-static replaces it.
            await _run(["apt-get", "install", "-y", "busybox-static"], timeout_s=APT_TIMEOUT_S,
                       what="apt-get install busybox-static", env={"DEBIAN_FRONTEND": "noninteractive"})
        else:
            await ensure_apt_package("busybox-static", "busybox")
    if not _is_static_elf(busybox):
        raise EnvironmentError_("busybox-static is not installed (/bin/busybox is missing or not static)")
    rootfs = await asyncio.to_thread(_busybox_rootfs, busybox)
    await _import_rootfs(docker, tag, rootfs, cmd="/bin/sh", recipe=recipe)


def recipe_hash(method: BuildMethod = "debootstrap") -> str:
    """A hash of everything that shapes ``method``'s image: the constants and the source of the build code."""
    h = hashlib.sha256()
    common: list[str] = [RECIPE_VERSION, method, _PATH, inspect.getsource(_import_rootfs)]
    if method == "debootstrap":
        parts = [DEBOOTSTRAP_SUITE, DEBOOTSTRAP_VARIANT, *DEBOOTSTRAP_PACKAGES, *TRIM_GLOBS, *DPKG_SETTINGS,
                 inspect.getsource(_trim_rootfs), inspect.getsource(_container_settings),
                 inspect.getsource(_build_debootstrap)]
    else:
        parts = [inspect.getsource(_busybox_rootfs), inspect.getsource(_build_busybox)]
    for part in (*common, *parts):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def content_tag(tag: str, method: BuildMethod = "debootstrap") -> str:
    """``tag`` with the recipe hash appended (``repo:name-<12 hex>``): the tag of one exact recipe's build."""
    repo, name = split_tag(tag)
    return f"{repo}:{name[:115]}-{recipe_hash(method)[:12]}"


async def _recipe_of(docker: aiodocker.Docker, ref: str) -> str | None:
    """The recipe-hash label of image ``ref`` ("" when it has none), or None when there is no such image."""
    try:
        info = await asyncio.wait_for(docker.images.inspect(ref), 60)
    except aiodocker.DockerError as exc:
        if exc.status == 404:
            return None
        raise
    return str(((info.get("Config") or {}).get("Labels") or {}).get(LABEL_RECIPE, ""))


@contextlib.asynccontextmanager
async def host_lock(key: str, timeout_s: float = HOST_LOCK_TIMEOUT_S) -> AsyncIterator[None]:
    """An exclusive lock on ``key`` for every process of this host (a ``flock`` on a file in the temp dir)."""
    path = os.path.join(tempfile.gettempdir(), f"agentcompass-build-{hashlib.sha256(key.encode()).hexdigest()[:16]}"
                                               ".lock")

    def error(_: LockWaitEnd) -> EnvironmentError_:
        return EnvironmentError_(f"waited {timeout_s:.0f}s for another process's build of {key} (lock {path})")

    async with async_file_lock(path, timeout_s, error, poll_s=0.5, mode=0o666):
        yield


async def build_base_image(tag: str = DEFAULT_BASE_IMAGE, *, method: BuildMethod = "debootstrap",
                           force: bool = False, docker_url: str | None = None) -> str:
    """Make image ``tag`` the build of the current recipe (no registry); returns ``tag``.

    Kept when ``tag`` already carries the current recipe hash; re-pointed when ``content_tag(tag)`` exists;
    built otherwise (or always with ``force``). ``debootstrap``: Debian bookworm minbase with python3,
    coreutils, bash, procps, git, patch and tmux, fetched from the machine's apt mirror. ``busybox``: a ~2 MB
    image of busybox-static, for fast lifecycle benchmarks.
    """
    if method not in METHODS:
        raise ConfigError(f"method: {method!r} is not one of {', '.join(METHODS)}", field="method")
    if not tag or any(c.isspace() for c in tag):
        raise ConfigError(f"tag: {tag!r} is not a valid image tag", field="tag")
    recipe = recipe_hash(method)
    hashed = content_tag(tag, method)
    docker = make_client(docker_url)
    try:
        async with build_lock(f"base:{tag}"), host_lock(f"base:{tag}"):
            if not force:
                if await _recipe_of(docker, tag) == recipe:
                    log.info("image %s is the current recipe's build; not rebuilding", tag)
                    return tag
                if await _recipe_of(docker, hashed) == recipe:
                    await _retag(docker, hashed, tag)
                    return tag
            started = time.monotonic()
            if method == "debootstrap":
                await _build_debootstrap(docker, hashed, recipe)
            else:
                await _build_busybox(docker, hashed, recipe)
            await _retag(docker, hashed, tag)
            log.info("built %s (%s) as %s in %.1fs", tag, method, hashed, time.monotonic() - started)
            return tag
    finally:
        await docker.close()


async def _retag(docker: aiodocker.Docker, source: str, tag: str) -> None:
    repo, name = split_tag(tag)
    if source != tag:
        await asyncio.wait_for(docker.images.tag(source, repo, tag=name), 60)


def build_base_main(argv: Sequence[str] | None = None) -> int:
    """``agentcompass images build-base [--tag T] [--method debootstrap|busybox] [--force]``."""
    parser = argparse.ArgumentParser(prog="agentcompass images build-base",
                                     description="Build the AgentCompass base image locally (no registry).")
    parser.add_argument("--tag", default=None, help=f"image tag (default {DEFAULT_BASE_IMAGE}, "
                                                    f"or {BUSYBOX_IMAGE} with --method busybox)")
    parser.add_argument("--method", choices=METHODS, default="debootstrap")
    parser.add_argument("--force", action="store_true", help="rebuild even if the tag exists")
    parser.add_argument("--docker-host", default=None, help="Docker daemon url (default: local socket)")
    args = parser.parse_args(list(argv) if argv is not None else None)
    tag = args.tag or (BUSYBOX_IMAGE if args.method == "busybox" else DEFAULT_BASE_IMAGE)
    started = time.monotonic()
    try:
        asyncio.run(build_base_image(tag, method=args.method, force=args.force, docker_url=args.docker_host))
    except (ConfigError, EnvironmentError_, aiodocker.DockerError) as exc:
        print(f"error: {exc}")
        return 1
    print(f"{tag} ready ({args.method}, {time.monotonic() - started:.1f}s)")
    return 0
