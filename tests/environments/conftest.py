"""Docker fixtures: the base images (built before the session, cached by recipe hash), labelled run ids, leak checks.

Every test that touches Docker takes ``docker_run_id``: containers and networks it leaves behind under
that run id are removed after the test and reported as a teardown error, so a leak fails the suite.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import threading
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, TypeVar

import pytest
import pytest_asyncio

T = TypeVar("T")

DOCKER_SOCKET = "/var/run/docker.sock"
SESSION_PREFIX = f"pytest-{os.getpid()}-{uuid.uuid4().hex[:6]}"
LABEL_RUN_ID = "agentcompass.run_id"


def run_in_thread(make: Callable[[], Awaitable[T]], timeout: float = 120.0) -> T:
    """Run a coroutine on a private loop in a worker thread (safe from sync fixtures and teardowns)."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(asyncio.wait_for(make(), timeout))
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout + 10)
    if "error" in box:
        raise box["error"]
    return box["value"]


def docker_cli(*args: str, timeout: float = 30.0) -> str:
    """Observe the daemon with the docker CLI (tests only; the library never uses it)."""
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout,
                          check=True).stdout


def containers_of(run_id: str) -> list[str]:
    """Ids of every container (any state) labelled with ``run_id``."""
    return docker_cli("ps", "-aq", "--no-trunc", "--filter", f"label={LABEL_RUN_ID}={run_id}").split()


def networks_of(run_id: str) -> list[str]:
    return docker_cli("network", "ls", "-q", "--filter", f"label={LABEL_RUN_ID}={run_id}").split()


async def _remove_labelled(match: Callable[[str], bool]) -> list[str]:
    import aiodocker
    from aiodocker.networks import DockerNetwork

    removed: list[str] = []
    async with aiodocker.Docker() as docker:
        for c in await docker.containers.list(all=True, filters={"label": [LABEL_RUN_ID]}):
            if match((c["Labels"] or {}).get(LABEL_RUN_ID, "")):
                await c.delete(force=True, v=True)
                removed.append(f"container {c.id[:12]}")
        for net in await docker.networks.list(filters={"label": [LABEL_RUN_ID]}):
            if match((net.get("Labels") or {}).get(LABEL_RUN_ID, "")):
                await DockerNetwork(docker, net["Id"]).delete()
                removed.append(f"network {net['Name']}")
    return removed


def remove_labelled(match: Callable[[str], bool]) -> list[str]:
    """Remove containers and networks whose run-id label satisfies ``match``; what was removed."""
    return run_in_thread(lambda: _remove_labelled(match))


async def open_then_cancel(provider: Any, spec: Any, delay: float) -> None:
    """Start ``provider.open(spec)``, cancel it after ``delay`` s; close the environment if it won the race."""
    task = asyncio.create_task(provider.open(spec))
    await asyncio.sleep(delay)
    task.cancel()
    try:
        env = await task
    except asyncio.CancelledError:
        pass
    else:  # finished before the cancel landed
        await env.close()


@pytest.fixture(scope="session")
def docker_available() -> None:
    if not os.path.exists(DOCKER_SOCKET):
        if os.environ.get("CI"):  # CI must run the docker tests for real, never skip them
            pytest.fail(f"no Docker daemon socket at {DOCKER_SOCKET}; CI runs the docker tests against a real engine")
        pytest.skip(f"no Docker daemon socket at {DOCKER_SOCKET}")


@pytest.fixture(scope="session", autouse=True)
def _sweep_session_leftovers() -> Iterator[None]:
    yield
    if os.path.exists(DOCKER_SOCKET):
        remove_labelled(lambda rid: rid.startswith(SESSION_PREFIX))


def _session_image(name: str) -> str:
    """The content tag of base image ``name`` (built by tests/conftest.py before the session; built here,
    lazily, only when that hook did not run)."""
    from agentcompass.environments.docker.images import build_base_image, content_tag
    from tests.conftest import PREBUILT, image_spec

    tag, method = image_spec(name)
    built = PREBUILT.get(name)
    if isinstance(built, BaseException):
        pytest.fail(f"building the Docker image {tag} before the session failed: {built}")
    if built is None:
        run_in_thread(lambda: build_base_image(tag, method=method), timeout=3600)  # type: ignore[arg-type]
    # the exact recipe's build, whatever another process on this daemon makes ``tag`` point at meanwhile
    return content_tag(tag, method)  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def base_image(docker_available: None) -> str:
    """The debootstrap base image (built before the first test; then cached by its recipe hash)."""
    return _session_image("base")


@pytest.fixture(scope="session")
def busybox_image(docker_available: None) -> str:
    return _session_image("busybox")


@pytest.fixture
def docker_run_id(docker_available: None) -> Iterator[str]:
    """A run id unique to this test; anything left labelled with it fails the test at teardown."""
    run_id = f"{SESSION_PREFIX}-{uuid.uuid4().hex[:8]}"
    yield run_id
    leaked = remove_labelled(lambda rid: rid == run_id)
    if leaked:
        pytest.fail(f"test leaked Docker resources (now removed): {', '.join(leaked)}")


@pytest_asyncio.fixture
async def docker_provider(base_image: str, docker_run_id: str) -> AsyncIterator[Any]:
    """A DockerProvider on the base image, closed after the test."""
    from agentcompass.environments.docker.provider import DockerProvider
    from agentcompass.interfaces import ComponentContext

    provider = DockerProvider({"image": base_image}, ComponentContext(run_id=docker_run_id))
    try:
        yield provider
    finally:
        await provider.aclose()
