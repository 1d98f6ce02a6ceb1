"""Shared fixtures and session hooks.

- A scripted model server in a subprocess (for sync tests that call launch()).
- The Docker base images the selected tests need are built once, in a background thread of each worker while
  the tests that need no image run, outside every per-test timeout: a test that
  needs one waits for the build with its timeout paused (a fresh machine's debootstrap build takes minutes). A
  host file lock in ``build_base_image`` makes one worker build and the others reuse the image.
- Docker tests are marked ``docker`` and spread over the workers like the rest: each labels what it creates with
  a run id of its own, and the few that orphan containers on purpose check what happens to them, never that no
  other process's start-up sweep got there first. The tests of Ray clusters and of the second Docker node share
  xdist group ``ray`` (one worker, one at a time): one such node per session is enough.
- The slow tests (but the Ray group's) are scheduled first, so the workers end together.
- ``-n auto`` starts twice as many workers as there are cores (at most cores + 4): many tests wait on a
  subprocess, a container or a server, and on a machine another job loads, more workers get the suite a larger
  share of the cores.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentcompass.models.scripted.server import spawn_server_process, stop_process
from tests.standins.second_node import SecondNode, second_docker_node_fixture

REPO = Path(__file__).resolve().parent.parent
DOCKER_SOCKET = "/var/run/docker.sock"
#: fixture name -> the base image it provides (see tests/environments/conftest.py)
IMAGE_FIXTURES = {"base_image": "base", "busybox_image": "busybox"}
#: any of these in a test's fixture closure means the test talks to the Docker daemon
DOCKER_FIXTURES = {"docker_available", "second_docker_node", *IMAGE_FIXTURES}
#: whole budget of the pre-session builds (debootstrap on a loaded machine took 397 s; the build's own
#: steps are bounded inside ``build_base_image``)
PREBUILD_TIMEOUT_S = 3600.0

#: images built (or found current) by the session's background build: name -> tag, or the error that stopped it
PREBUILT: dict[str, str | BaseException] = {}
#: set when the background build of the images the session needs has ended (None: no build was started)
_PREBUILD_DONE: threading.Event | None = None


def start_server_process(*extra: str) -> tuple[subprocess.Popen[str], str]:
    """Start ``agentcompass serve-scripted --port 0`` and return (process, base_url)."""
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return spawn_server_process(*extra, env=env, capture_stderr=True)


@pytest.fixture(scope="session")
def scripted_url() -> Iterator[str]:
    """Base URL of a real OpenAI-compatible scripted server (bundled scripts), for the whole session."""
    proc, url = start_server_process()
    try:
        yield url
    finally:
        stop_process(proc)


@pytest.fixture(scope="session")
def second_docker_node() -> Iterator[SecondNode]:
    """A second Docker daemon in its own network namespace and address (tests/standins/second_node.py), for
    the whole session; stopped by its pids, its namespace, veth and directories removed, afterwards."""
    yield from second_docker_node_fixture()


# ----------------------------------------------------------------------------- docker images and grouping


def images_needed(items: list[pytest.Item]) -> set[str]:
    """The base images (``base``, ``busybox``) that ``items`` use, through fixtures or ``docker_images``."""
    need: set[str] = set()
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        need.update(image for fixture, image in IMAGE_FIXTURES.items() if fixture in names)
        for mark in item.iter_markers("docker_images"):
            need.update(mark.args)
    return need


def image_spec(name: str) -> tuple[str, str]:
    """(tag, build method) of base image ``name``."""
    from agentcompass.environments.docker.api import DEFAULT_BASE_IMAGE
    from agentcompass.environments.docker.images import BUSYBOX_IMAGE

    return {"base": (DEFAULT_BASE_IMAGE, "debootstrap"), "busybox": (BUSYBOX_IMAGE, "busybox")}[name]


def pytest_configure(config: pytest.Config) -> None:
    """Ray's default token file, made before any test starts a Ray process: a local cluster that ``ray.init()``
    starts (in this session or a concurrent one, e.g. CI's steps 2 and 3) writes its own token there when none
    exists, which raced the two-node cluster's token on a fresh machine (its driver then failed to connect)."""
    from agentcompass.environments.ray.cluster import GCS_RECONNECT_ENV, GCS_RECONNECT_S
    from tests.standins.ray_cluster import auth_env

    auth_env()
    # A test process that was a driver of a stand-in cluster (several tests connect to one in turn) must not be
    # ended by Ray 60 s after that cluster's head stopped: it took an xdist worker down mid-run twice on a loaded
    # machine (the driver log: "Failed to connect to GCS within 60 seconds"), and the session then hung.
    os.environ.setdefault(GCS_RECONNECT_ENV, str(GCS_RECONNECT_S))
    # A local cluster's worker that has not registered within Ray's 60 s is killed and started again: on a loaded
    # 2-core machine a node actor's worker (importing Ray and the package) then never came up (three runs)
    os.environ.setdefault("RAY_worker_register_timeout_seconds", "600")
    config.pluginmanager.register(GroupSuffix(), "agentcompass-xdist-group-suffix")


#: tests (node id prefixes) that start Ray clusters: run in xdist group ``ray``, one at a time on one worker (the
#: layout move of issue 28 left the old prefix ``tests/environments/test_ray_`` matching nothing, and the Ray tests
#: then ran at once on several workers; tests/test_layout.py checks every prefix still names a test file)
RAY_GROUP = ("tests/environments/ray/", "tests/standins/test_second_node.py",
             "tests/test_benchmarks_perf.py::test_scale_out_")


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """Workers for ``-n auto``: 2 x cores, at most cores + 4 (``PYTEST_XDIST_AUTO_NUM_WORKERS`` overrides).

    Many tests wait on containers, processes and servers, so more workers than cores; 3 x cores was tried on a
    2-core machine under ``stress-ng --cpu 2``: slower (2123 s against 1608-1722 s) and five tests with deadlines
    of a second or less missed them."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return int(os.environ["PYTEST_XDIST_AUTO_NUM_WORKERS"])
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(2, min(2 * cores, cores + 4))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if DOCKER_FIXTURES & set(getattr(item, "fixturenames", ())) or item.get_closest_marker("docker_images"):
            item.add_marker(pytest.mark.docker)  # so `-m "not docker"` can leave the daemon's tests out
        if item.nodeid.startswith(RAY_GROUP):
            item.add_marker(pytest.mark.xdist_group("ray"))
    # the Ray group first (its tests run one after another on one worker: the longest chain of the session),
    # then the other slow tests: the workers then end together instead of one finishing a long test while the
    # others idle. (A driver that lost its head under the start-up load was ended by Ray: the session now gives
    # drivers a year of GCS reconnect patience, pytest_configure.)
    # (Putting the tests that need no base image first, to run while the images build, made the CPU-heavy local
    # tests run at once beside the Ray group's local clusters; three loaded runs then lost a node actor's start.)
    items.sort(key=lambda item: 0 if item.nodeid.startswith(RAY_GROUP) else 1 if item.get_closest_marker("slow")
               else 2)


def group_names(item: pytest.Item) -> list[str]:
    """The ``xdist_group`` names of ``item``, sorted, as xdist joins them."""
    return sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                   for m in item.iter_markers("xdist_group")})


class GroupSuffix:
    """``--dist loadgroup`` on pytest >= 9.2: xdist 3.8 tells the controller a test's group by appending
    ``@group`` to its node id through the old ``_nodeid`` field, which pytest 9.2's structured ids no longer read,
    so every group was silently ignored (pytest-dev/pytest-xdist#1386): the Ray tests ran on several workers at
    once. The suffix is set on the structured id here, after xdist's own hook (a no-op where that one worked)."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        if not getattr(config.option, "loadgroup", False):
            return
        try:
            from _pytest.nodes import NodeId  # type: ignore[attr-defined]
        except ImportError:  # an older pytest: xdist's own suffix took effect
            return
        for item in items:
            names = group_names(item)
            if names and not item.nodeid.endswith(f"@{'_'.join(names)}"):
                item._id = NodeId.parse(f"{item.nodeid}@{'_'.join(names)}")  # type: ignore[attr-defined]


def _preinstall_bfcl_eval(items: list[pytest.Item]) -> None:
    """bfcl-eval (the bfcl tests' data and oracle checker), installed ``--no-deps`` into its cache once, before any
    bfcl test (and its timeout) starts; a file lock makes one xdist worker install it and the others wait."""
    if not any("bfcl" in item.nodeid for item in items):
        return
    from agentcompass.benchmarks.bfcl.package import ensure_bfcl_eval

    try:
        ensure_bfcl_eval(auto_install=True)
    except Exception as exc:  # the tests that need it report it again, each naming the install command
        print(f"\nbfcl-eval could not be installed for the bfcl tests: {exc}", file=sys.stderr)


def _preinstall_swebench5(items: list[pytest.Item]) -> None:
    """swebench 5.0.2 (the second oracle of the SWE-bench differential tests, beside the test extra's 4.1.0),
    installed ``--no-deps`` into its cache once, before any of those tests (and its timeout) starts; a file lock
    makes one xdist worker install it and the others wait."""
    if not any(item.nodeid.startswith("tests/benchmarks/swebench/differential/") for item in items):
        return
    from tests.benchmarks.swebench.differential.official5 import ensure_installed

    try:
        ensure_installed()
    except Exception as exc:  # the tests that need it fail on it again, with the pip error
        print(f"\nswebench 5.0.2 could not be installed for the differential tests: {exc}", file=sys.stderr)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Install the packages the bfcl and differential tests need; start building the images the selected tests
    need, in the background (``pytest_runtest_setup`` makes a test that needs one wait for it)."""
    if not session.config.option.collectonly:
        _preinstall_bfcl_eval(session.items)
        _preinstall_swebench5(session.items)
    if session.config.option.collectonly or not os.path.exists(DOCKER_SOCKET):
        return  # without a daemon the docker fixtures skip (or fail, in CI) on their own
    needed = sorted(images_needed(session.items), key=lambda n: n != "base")  # the slow one first
    if needed:
        global _PREBUILD_DONE
        _PREBUILD_DONE = threading.Event()
        threading.Thread(target=_prebuild, args=(needed, _PREBUILD_DONE), name="prebuild-images",
                         daemon=True).start()


def _prebuild(names: list[str], done: threading.Event) -> None:
    """Build (or find current) the base images ``names``: in a thread, while the tests that need no image run."""
    from agentcompass.environments.docker.images import build_base_image

    try:
        for name in names:
            tag, method = image_spec(name)
            started = time.monotonic()
            try:
                PREBUILT[name] = asyncio.run(asyncio.wait_for(build_base_image(tag, method=method),  # type: ignore[arg-type]
                                                              PREBUILD_TIMEOUT_S))
            except Exception as exc:  # reported by the fixture of every test that needs it
                PREBUILT[name] = exc
            took = time.monotonic() - started
            if took > 5:
                print(f"\nDocker image {tag} for the docker tests ready in {took:.0f}s "
                      "(built here, or by another worker)", file=sys.stderr)
    finally:
        done.set()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test that needs a base image (and every test of the Ray group) waits for the background build before its
    fixtures, outside its timeout: pytest-timeout's alarm (armed for setup, call and teardown) is stopped for the
    wait and re-armed with what was left of it, so a slow build on a loaded machine never eats a test's budget."""
    done = _PREBUILD_DONE
    # the Ray group waits whole (its tests as they ran before the build moved to the background): twice a node
    # actor of a local cluster did not come up when the group's tests had run during the build
    if done is None or done.is_set() or not (images_needed([item]) or item.nodeid.startswith(RAY_GROUP)):
        return
    on_main = threading.current_thread() is threading.main_thread()
    left = signal.setitimer(signal.ITIMER_REAL, 0)[0] if on_main else 0.0
    try:
        done.wait(PREBUILD_TIMEOUT_S)
    finally:
        if left > 0:
            signal.setitimer(signal.ITIMER_REAL, left)
