"""Containers started ahead of need: handed out once, within ``provider_limits``, removed on every path."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import agentcompass
from agentcompass._errors import ConfigError
from agentcompass.engine.env_pool import EnvironmentPool, active_environments, creates_in_flight, provider_slots
from agentcompass.environments.docker.network import PUBLIC_NETWORK
from agentcompass.environments.docker.prestart import PRESTART_ROLE, PrestartPool, Shape
from agentcompass.environments.docker.provider import DockerProvider
from agentcompass.environments.docker.sweep import sweep_orphans
from agentcompass.interfaces import ComponentContext, EnvOpenSpec, NetworkPolicy

from ..conftest import containers_of, docker_cli
from .test_docker_runs import SAMPLE, _Sampler

pytestmark = pytest.mark.timeout(180)

REPO = Path(__file__).resolve().parents[3]
LIMIT = 3


def _labels(container_id: str) -> dict[str, str]:
    labels: dict[str, str] = json.loads(docker_cli("inspect", container_id))[0]["Config"]["Labels"]
    return labels


def _prestarted(run_id: str) -> list[str]:
    return docker_cli("ps", "-aq", "--no-trunc", "--filter", f"label=agentcompass.run_id={run_id}",
                      "--filter", f"label=agentcompass.role={PRESTART_ROLE}").split()


def test_prestart_param_is_checked() -> None:
    for bad in (-1, 65, 1.5, "2", True):
        with pytest.raises(ConfigError, match="prestart") as info:
            DockerProvider({"prestart": bad}, ComponentContext())
        assert info.value.field == "environment.params.prestart"
    assert DockerProvider({"prestart": 0}, ComponentContext())._prestart is None


async def test_an_open_takes_a_container_started_ahead_within_the_provider_limit(
        busybox_image: str, docker_run_id: str) -> None:
    provider = DockerProvider({"image": busybox_image, "prestart": 2},
                              ComponentContext(run_id=docker_run_id, provider_limit=LIMIT))
    pool = provider._prestart
    assert pool is not None
    engine = EnvironmentPool({"docker": LIMIT}, None, lambda _: None)
    before = active_environments("docker")

    async def open_close(task_id: str, network: str = "public") -> tuple[str, str]:
        env = await engine.open(provider, EnvOpenSpec(run_id=docker_run_id, task_id=task_id,
                                                      network=NetworkPolicy(mode=network)),  # type: ignore[arg-type]
                                timeout=60, request="r")
        try:
            assert active_environments("docker") - before <= LIMIT
            out = (await env.exec("echo $((6 * 7))")).stdout.strip()
        finally:
            await engine.close(env, timeout=60)
        return env.id, out

    try:
        # one task's image is not pooled: nothing starts ahead after the first open
        await open_close("a")
        assert pool.held == 0 and pool.ready_ids() == []
        # a second task opens the same shape: the next one starts ahead, one only (the engine holds a slot,
        # one more stays free for the engine's own opens)
        await open_close("b")
        await pool.settled(60)
        ahead = pool.ready_ids()
        assert len(ahead) == 1 and pool.held == 1
        assert _labels(ahead[0])["agentcompass.role"] == PRESTART_ROLE
        assert _labels(ahead[0])["agentcompass.run_id"] == docker_run_id
        # the next open gets it, and the one after it gets the next (never the same container twice)
        got, out = await open_close("c")
        assert got == ahead[0] and out == "42" and pool.handed_out == 1
        await pool.settled(60)
        [second] = pool.ready_ids()
        assert second != got
        got2, _ = await open_close("d")
        assert got2 == second and pool.handed_out == 2
        assert got not in containers_of(docker_run_id)  # closed as any other
        # another shape (no network) would need a second slot ahead: the limit leaves none
        await open_close("e", "none")
        await open_close("f", "none")
        await pool.settled(60)
        assert pool.held == 1 and pool.peak_held == 1 and pool.peak_active - before == LIMIT - 1
        assert len(containers_of(docker_run_id)) == pool.held
    finally:
        await provider.aclose()
    assert containers_of(docker_run_id) == []
    assert active_environments("docker") == before and pool.held == 0


async def test_an_open_that_must_wait_for_a_slot_makes_the_pool_give_its_containers_back(
        busybox_image: str, docker_run_id: str) -> None:
    # a provider not told the limit (another launch's, say): its pool holds every slot, and the engine's next open
    # must wait; the pool gives its containers back instead of leaving that open waiting for ever
    provider = DockerProvider({"image": busybox_image, "prestart": 2}, ComponentContext(run_id=docker_run_id))
    pool = provider._prestart
    assert pool is not None
    engine = EnvironmentPool({"docker": 2}, None, lambda _: None)
    before = active_environments("docker")
    try:
        for task_id in ("a", "b"):
            env = await engine.open(provider, EnvOpenSpec(run_id=docker_run_id, task_id=task_id), timeout=60,
                                    request="r")
            await engine.close(env, timeout=60)
        await pool.settled(60)
        assert len(pool.ready_ids()) == 2 and active_environments("docker") - before == 2
        held = pool.ready_ids()
        env = await engine.open(provider, EnvOpenSpec(run_id=docker_run_id, task_id="c"), timeout=60, request="r")
        try:
            assert env.id not in held and pool.discarded >= 2 and pool.handed_out == 0
            assert not set(held) & set(containers_of(docker_run_id))
            assert (await env.exec("echo ok")).stdout == "ok\n"
        finally:
            await engine.close(env, timeout=60)
    finally:
        await provider.aclose()
    assert containers_of(docker_run_id) == [] and active_environments("docker") == before


async def test_a_container_started_ahead_for_policy_none_has_no_network(busybox_image: str,
                                                                         docker_run_id: str) -> None:
    provider = DockerProvider({"image": busybox_image, "prestart": 1}, ComponentContext(run_id=docker_run_id))
    pool = provider._prestart
    assert pool is not None
    none = NetworkPolicy(mode="none")
    try:
        for task_id in ("a", "b"):
            env = await provider.open(EnvOpenSpec(run_id=docker_run_id, task_id=task_id, network=none))
            await env.close()
        await pool.settled(60)
        [ahead] = pool.ready_ids()
        assert json.loads(docker_cli("inspect", ahead))[0]["HostConfig"]["NetworkMode"] == "none"
        # a public open is another shape: it does not take it
        env = await provider.open(EnvOpenSpec(run_id=docker_run_id, task_id="c"))
        assert env.id != ahead
        await env.close()
        env = await provider.open(EnvOpenSpec(run_id=docker_run_id, task_id="d", network=none))
        try:
            assert env.id == ahead
            assert (await env.exec("ls /sys/class/net")).stdout.split() == ["lo"]
            assert (await env.exec("wget -T 2 -q -O- http://1.1.1.1/ || echo unreachable")).stdout.strip() \
                == "unreachable"
        finally:
            await env.close()
    finally:
        await provider.aclose()
    assert containers_of(docker_run_id) == []


async def test_the_pool_starts_no_more_containers_than_the_opens_still_to_come(busybox_image: str,
                                                                                docker_run_id: str) -> None:
    # five opens of one shape, told 4, 3, 2, 1, 0 more are to come: every container started ahead is handed
    # out, and after the last open none is ready or was started for nothing (without the hint: 2 left over)
    provider = DockerProvider({"image": busybox_image, "prestart": 2}, ComponentContext(run_id=docker_run_id))
    pool = provider._prestart
    assert pool is not None
    none = NetworkPolicy(mode="none")
    try:
        for i, upcoming in enumerate((4, 3, 2, 1, 0)):
            env = await provider.open(EnvOpenSpec(run_id=docker_run_id, task_id=f"t{i}", network=none,
                                                  upcoming=upcoming))
            try:
                assert (await env.exec("echo $((6 * 7))")).stdout.strip() == "42"
            finally:
                await env.close()
            await pool.settled(60)
            assert len(pool.ready_ids()) <= upcoming
        assert pool.ready_ids() == [] and pool.discarded == 0
        assert pool.started == pool.handed_out >= 2
    finally:
        await provider.aclose()
    assert containers_of(docker_run_id) == []


async def test_closing_the_provider_while_containers_start_ahead_leaves_none(
        busybox_image: str, docker_run_id: str) -> None:
    provider = DockerProvider({"image": busybox_image, "prestart": 4}, ComponentContext(run_id=docker_run_id))
    pool = provider._prestart
    assert pool is not None
    before = active_environments("docker")
    try:
        for task_id in ("a", "b"):
            env = await provider.open(EnvOpenSpec(run_id=docker_run_id, task_id=task_id))
            await env.close()
        assert pool.held == 4  # without a limit: up to ``prestart`` per shape, all being started right now
    finally:
        await provider.aclose()  # cancels the starts in flight: each removes what it made
    assert containers_of(docker_run_id) == []
    assert pool.held == 0 and active_environments("docker") == before
    # a closed provider starts nothing more
    assert pool.take(next(iter(pool._openers)), "c") is None and pool.held == 0


async def test_containers_started_ahead_wait_for_the_launchs_creates_cap_and_open_pacing(
        busybox_image: str, docker_run_id: str) -> None:
    # the launch caps creates in flight at 1 (the provider's own cap is 4) and paces opens at 4/s: the pool's
    # creates wait for both, as the engine's opens do
    engine = EnvironmentPool({"docker": 10}, 4.0, lambda _: None, max_creates_in_flight=1)
    pacer = engine.pacer(DockerProvider)
    provider = DockerProvider({"image": busybox_image, "prestart": 2}, ComponentContext(
        run_id=docker_run_id, provider_limit=10, max_creates_in_flight=engine.creates_limit(DockerProvider),
        open_pacer=pacer.wait))
    pool = provider._prestart
    assert pool is not None
    _, creates = provider_slots("docker")
    before = creates_in_flight("docker")
    holding = False
    try:
        env = await engine.open(provider, EnvOpenSpec(run_id=docker_run_id, task_id="a"), timeout=60, request="r")
        await engine.close(env, timeout=60)
        shape = next(iter(pool._openers))
        await creates.acquire(None)  # another create in flight: the launch's cap is reached
        holding = True
        paced = pacer._next
        assert pool.take(shape, "b") is None and pool.held == 2  # a second task: the shape is pooled
        async with asyncio.timeout(30):
            # the pool's starts wait for a create slot (the counter has no event to wait on)
            while not creates.waiting:  # noqa: ASYNC110
                await asyncio.sleep(0.05)
        assert pool.started == 0 and creates_in_flight("docker") - before == 1
        creates.release()
        holding = False
        await pool.settled(60)
        assert len(pool.ready_ids()) == 2 and pool.started == 2
        assert pacer._next >= paced + 2 * pacer.interval  # each start took an open slot of the launch's pacer
    finally:
        if holding:
            creates.release()
        await provider.aclose()
    assert containers_of(docker_run_id) == [] and creates_in_flight("docker") == before


@pytest.fixture
def own_image(busybox_image: str, tmp_path: Path) -> Iterator[str]:
    """An image of its own (busybox plus a layer) that a test may remove."""
    tag = f"agentcompass-test/prestart:{uuid.uuid4().hex[:10]}"
    # an image id of its own too: a parallel test's containers must not use it
    (tmp_path / "Dockerfile").write_text(f"FROM {busybox_image}\nRUN echo {tag} > /marker\n")
    subprocess.run(["docker", "build", "-q", "-t", tag, str(tmp_path)], check=True, capture_output=True,
                   timeout=300)
    yield tag
    subprocess.run(["docker", "rmi", "-f", tag], capture_output=True, timeout=120)


@pytest.mark.parametrize("settled", [True, False], ids=["ready", "starting"])
async def test_removing_an_image_first_removes_the_containers_started_ahead_on_it(
        own_image: str, docker_run_id: str, settled: bool) -> None:
    provider = DockerProvider({"image": own_image, "prestart": 2}, ComponentContext(run_id=docker_run_id))
    pool = provider._prestart
    assert pool is not None
    try:
        for task_id in ("a", "b"):
            env = await provider.open(EnvOpenSpec(run_id=docker_run_id, task_id=task_id))
            await env.close()
        assert pool.held == 2
        if settled:
            await pool.settled(60)
            assert len(pool.ready_ids()) == 2
        freed = await provider.remove_image(own_image)
        assert freed > 0 and await provider.image_size(own_image) is None
        assert pool.ready_ids() == [] and pool.held == 0
        assert containers_of(docker_run_id) == []
    finally:
        await provider.aclose()


async def test_a_container_started_while_the_pool_closes_is_removed_even_when_close_cancels_the_starts(
        busybox_image: str, docker_run_id: str) -> None:
    provider = DockerProvider({"image": busybox_image}, ComponentContext(run_id=docker_run_id))
    removing, go_on = asyncio.Event(), asyncio.Event()

    async def slow_remove(container_id: str) -> bool:
        removing.set()
        await go_on.wait()
        return await provider.remove_container(container_id)

    name = f"prestart-test-{uuid.uuid4().hex[:8]}"  # counters of its own
    pool = PrestartPool(per_shape=1, provider=name, limit=None, creates_limit=None, start=provider._start_ahead,
                        remove=slow_remove, start_timeout=60)
    active, _ = provider_slots(name)
    shape = Shape(run_id=docker_run_id, image=busybox_image, workdir="/workspace", network=PUBLIC_NETWORK, env=(),
                  labels=())
    try:
        pool.take(shape, "a")
        pool.take(shape, "b")
        assert pool.held == 1
        # an open waits for a slot while the container starts: once started, the pool removes it again
        waiter = asyncio.ensure_future(active.acquire(1))
        async with asyncio.timeout(60):
            await removing.wait()
        closing = asyncio.ensure_future(pool.aclose())  # cancels what it still thinks is starting
        await asyncio.sleep(0.2)
        go_on.set()
        async with asyncio.timeout(90):
            await closing
            await waiter
        active.release()
        assert pool.held == 0 and pool.started == 0 and pool.discarded == 1
        assert containers_of(docker_run_id) == []
    finally:
        go_on.set()
        await provider.aclose()


@pytest.mark.parametrize("limit", [2, 3])
def test_a_run_never_holds_more_containers_than_provider_limits(base_image: str, docker_run_id: str,
                                                                tmp_path: Path, limit: int) -> None:
    # one task at a time: with a limit of 2 the one slot left free for the engine leaves none to start ahead
    # (were the limit not passed to the provider, two more would start); with 3, one
    with _Sampler(docker_run_id) as sampler:
        out = agentcompass.run_evaluation(
            "shell_tasks", "shell_agent", "scripted", "docker", benchmark_params={"sample_ids": SAMPLE[:4]},
            environment_params={"prestart": 2}, task_concurrency=1, provider_limits={"docker": limit},
            run_id=docker_run_id, results_dir=str(tmp_path), progress="none")
    assert out.status == "completed" and out.counts.errors == 0, out.errors_by_kind
    assert 1 <= sampler.peak <= limit
    assert containers_of(docker_run_id) == []


def _start_run(run_id: str, results: Path) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.Popen(
        [sys.executable, "-m", "agentcompass.cli", "run", "shell_tasks", "tests.engine.components:SleepingHarness",
         "scripted", "--env", "docker", "--harness-params", '{"seconds": 120}', "--run-id", run_id,
         "--env-params", '{"prestart": 2}', "--benchmark-params", '{"categories": ["files"]}',
         "--task-concurrency", "2", "--progress", "none", "--results-dir", str(results)],
        env=env, cwd=str(REPO), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        # SIGINT as a terminal delivers it: a test runner started in the background inherits it ignored
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.default_int_handler))


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["cancelled", "killed"])
async def test_a_cancelled_or_killed_run_leaves_no_container_started_ahead(
        base_image: str, docker_run_id: str, tmp_path: Path, sig: signal.Signals) -> None:
    proc = _start_run(docker_run_id, tmp_path)
    try:
        deadline = time.monotonic() + 120
        while not _prestarted(docker_run_id):  # the run's first two tasks opened: the pool fills
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no container was started ahead"
            await asyncio.sleep(0.3)
        proc.send_signal(sig)
        await asyncio.to_thread(proc.communicate, timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    if sig == signal.SIGINT:
        assert proc.returncode == 130
    else:  # nothing cleaned up: the orphan sweep finds them by their labels (or a run starting in another
        # test worker already did: its start-up sweep is host-wide, so their presence is not checked here). A
        # create the killed run had sent is still carried out by the daemon and may land after a sweep: as the
        # next run's start-up sweep would, a later sweep removes it
        deadline = time.monotonic() + 60
        while True:
            report = await sweep_orphans(run_id=docker_run_id)
            assert report.errors == []
            if not containers_of(docker_run_id) or time.monotonic() > deadline:
                break
            await asyncio.sleep(1)
    assert containers_of(docker_run_id) == []
