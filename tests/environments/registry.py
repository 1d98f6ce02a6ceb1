"""A real Docker registry on 127.0.0.1 (Debian's ``docker-registry``), a stalling TCP proxy in front of it, and
images pushed to it for pull tests.

The daemon treats registries on 127.0.0.0/8 as insecure-OK, so plain HTTP works with no daemon config.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REGISTRY_BIN = "/usr/bin/docker-registry"
START_DEADLINE_S = 30.0
#: every image a test pushes or pulls carries this label (set at build time)
TEST_LABEL = "agentcompass.test=registry-pull"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def need_registry() -> str:
    """The registry binary; skips without it (fails under CI, whose .ci/run installs it)."""
    if not os.access(REGISTRY_BIN, os.X_OK):
        if os.environ.get("CI"):
            pytest.fail(f"{REGISTRY_BIN} is missing; CI installs Debian's docker-registry (.ci/run)")
        pytest.skip(f"{REGISTRY_BIN} is missing: apt-get install docker-registry")
    return REGISTRY_BIN


@dataclass
class Registry:
    """One running registry process; ``host`` is ``127.0.0.1:<port>``."""

    host: str
    storage: Path
    proc: subprocess.Popen[bytes]
    log: Path

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def start_registry(workdir: Path, *, storage: Path | None = None, htpasswd: Path | None = None) -> Registry:
    """``docker-registry serve`` on a free 127.0.0.1 port with ``storage`` (a fresh dir by default), optionally
    behind htpasswd basic auth; returns once ``/v2/`` answers (deadline ``START_DEADLINE_S``)."""
    binary = need_registry()
    port = free_port()
    storage = storage or workdir / f"storage-{port}"
    storage.mkdir(parents=True, exist_ok=True)
    auth = (f"auth:\n  htpasswd:\n    realm: agentcompass-test\n    path: {htpasswd}\n" if htpasswd else "")
    config = workdir / f"registry-{port}.yml"
    config.write_text(f"""version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: {storage}
  delete:
    enabled: true
http:
  addr: 127.0.0.1:{port}
{auth}""")
    log = workdir / f"registry-{port}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([binary, "serve", str(config)], stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    reg = Registry(host=f"127.0.0.1:{port}", storage=storage, proc=proc, log=log)
    deadline = time.monotonic() + START_DEADLINE_S
    while True:
        try:
            with urllib.request.urlopen(f"http://{reg.host}/v2/", timeout=2):
                return reg
        except urllib.error.HTTPError as exc:
            if exc.code == 401:  # up, and asking for credentials
                return reg
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            reg.stop()
            raise RuntimeError(f"docker-registry did not come up on {reg.host}: {log.read_text()[-2000:]}")
        time.sleep(0.1)


@contextlib.contextmanager
def running_registry(**kwargs: object) -> Iterator[Registry]:
    with tempfile.TemporaryDirectory(prefix="agentcompass-registry-") as tmp:
        reg = start_registry(Path(tmp), **kwargs)  # type: ignore[arg-type]
        try:
            yield reg
        finally:
            reg.stop()


# ----------------------------------------------------------------------------- the stalling proxy


@dataclass
class StallingProxy:
    """A TCP proxy to ``upstream`` that forwards at most ``budget`` bytes of responses (all connections
    together), then stops forwarding and holds the connections open, until ``release()``."""

    upstream: tuple[str, int]
    budget: int
    forwarded: int = 0
    port: int = 0
    _released: asyncio.Event = field(default_factory=asyncio.Event)
    _server: asyncio.Server | None = None
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def release(self) -> None:
        """Forward everything from now on."""
        self._released.set()

    async def start(self) -> StallingProxy:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def aclose(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.close()
            self._tasks.discard(task)
            return
        up = asyncio.create_task(self._pipe(reader, up_writer, limited=False))
        down = asyncio.create_task(self._pipe(up_reader, writer, limited=True))
        try:
            await asyncio.gather(up, down)
        except (asyncio.CancelledError, OSError):
            up.cancel()
            down.cancel()
        finally:
            for w in (writer, up_writer):
                w.close()
            self._tasks.discard(task)

    async def _pipe(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, *, limited: bool) -> None:
        while data := await src.read(16384):
            if limited and not self._released.is_set():
                room = self.budget - self.forwarded
                if room < len(data):
                    if room > 0:
                        dst.write(data[:room])
                        self.forwarded += room
                        await dst.drain()
                        data = data[room:]
                    await self._released.wait()  # stalled: hold the connection, send nothing
                self.forwarded += len(data)
            dst.write(data)
            await dst.drain()
        if dst.can_write_eof():
            dst.write_eof()


# ----------------------------------------------------------------------------- images


def docker(*args: str, timeout: float = 300.0, stdin: bytes | None = None) -> str:
    """The docker CLI (test setup and observation only); a failure raises with what the CLI said."""
    proc = subprocess.run(["docker", *args], capture_output=True, timeout=timeout, input=stdin)
    if proc.returncode != 0:
        raise DockerCliError(f"docker {' '.join(args)} exited {proc.returncode}: "
                             f"{(proc.stderr or proc.stdout).decode(errors='replace').strip()[-2000:]}")
    return proc.stdout.decode()


class DockerCliError(RuntimeError):
    """The docker CLI failed (its stderr in the message)."""


def image_present(ref: str) -> bool:
    return subprocess.run(["docker", "image", "inspect", ref], capture_output=True, timeout=60).returncode == 0


def remove_image(ref: str) -> None:
    subprocess.run(["docker", "rmi", "-f", ref], capture_output=True, timeout=120)


def swebench_name(registry: str, instance_id: str) -> str:
    """The official-style name of ``instance_id``'s image in ``registry``."""
    return f"{registry}/swebench/sweb.eval.x86_64.{instance_id.replace('__', '_1776_').lower()}:latest"


def build_random_image(base: str, *, layers_mb: tuple[int, ...] = (3, 3), from_dir: Path | None = None) -> str:
    """Build ``FROM base`` plus one layer of ``n`` MB of random bytes per ``layers_mb`` entry (incompressible, so
    the registry serves about that many bytes); a unique local tag, labelled ``TEST_LABEL``."""
    tag = f"agentcompass-test/pull:{uuid.uuid4().hex[:12]}"
    with tempfile.TemporaryDirectory(prefix="agentcompass-pullimg-", dir=from_dir) as ctx:
        lines = [f"FROM {base}", f"LABEL {TEST_LABEL}"]
        for i, mb in enumerate(layers_mb):
            Path(ctx, f"blob{i}").write_bytes(os.urandom(mb << 20))
            lines.append(f"COPY blob{i} /opt/pulltest/blob{i}")
        Path(ctx, "Dockerfile").write_text("\n".join(lines) + "\n")
        failures: list[str] = []
        while True:  # a stand-in's setup: a daemon's passing failure (seen once mid-build under load) is retried
            try:
                docker("build", "-q", "-t", tag, ctx, timeout=600)
                break
            except DockerCliError as exc:
                failures.append(str(exc))
                if len(failures) == 3:
                    raise DockerCliError("\n".join(failures)) from None
                print(f"build_random_image: retrying after {exc}", file=sys.stderr)
    return tag


def push_as(local: str, ref: str) -> None:
    """Push image ``local`` as ``ref``, then drop both local tags so the unique layers are gone from the daemon."""
    docker("tag", local, ref)
    docker("push", ref, timeout=600)
    remove_image(ref)
    remove_image(local)


def cli_available() -> bool:
    return shutil.which("docker") is not None
