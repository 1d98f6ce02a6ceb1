"""The engine's image policy on a real Docker daemon: per-task images built from tiny recipes; what the engine
decided is read from its events (progress.jsonl / on_progress) and summary.json, never from timing."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import agentcompass
from agentcompass._errors import ConfigError
from agentcompass.engine import image_cache
from agentcompass.engine.image_cache import (
    CACHE_LEVELS,
    ImageCache,
    ImagePolicy,
    image_level,
    lease_prefix,
    pop_image_policy,
)
from agentcompass.environments.base import EnvironmentProvider, ProviderCapabilities
from agentcompass.environments.docker.provider import DockerProvider
from agentcompass.interfaces import ComponentContext, Environment, EnvOpenSpec, ImageRecipe, PreparedTask, TaskSpec
from agentcompass.records import AttemptStarted, ImagePull, ImageRemoved, ProgressEvent, TaskFinished
from agentcompass.specs import ComponentSpec, ModelSpec, OrchestrationSpec, RunRequestSpec

BENCH = "tests.engine.components:ImageTasksBenchmark"
HARNESS = "tests.engine.components:SleepingHarness"


def _exists(tag: str) -> bool:
    return subprocess.run(["docker", "image", "inspect", tag], capture_output=True, timeout=60).returncode == 0


def _build(tag: str, base: str, ctx: Path) -> None:
    ctx.mkdir(parents=True, exist_ok=True)
    (ctx / "Dockerfile").write_text(f"FROM {base}\nLABEL agentcompass.test=image_cache\nRUN echo pre > /marker\n")
    subprocess.run(["docker", "build", "-q", "-t", tag, str(ctx)], check=True, capture_output=True, timeout=300)


@pytest.fixture
def tags(docker_available: None) -> Iterator[list[str]]:
    """Fresh image tags for one test; whatever of them is left is removed afterwards (we created them)."""
    prefix = f"agentcompass-test/imgcache:{uuid.uuid4().hex[:10]}"
    made = [f"{prefix}-{i}" for i in range(4)]
    yield made
    for tag in made:
        subprocess.run(["docker", "rmi", "-f", tag], capture_output=True, timeout=120)


def _request(name: str, run_id: str, tmp: Path, tags: list[str], base: str, **env: Any) -> RunRequestSpec:
    return RunRequestSpec(
        name=name, run_id=run_id, results_dir=str(tmp / "results"), data_dir=str(tmp / "data"), task_concurrency=1,
        benchmark=ComponentSpec(BENCH, {"tags": tags, "base": base, "context_root": str(tmp / "ctx")}),
        harness=ComponentSpec(HARNESS, {"seconds": 0.1}), model=ModelSpec("scripted"),
        environment=ComponentSpec("docker", {"image": base, **env}))


def _launch(*requests: RunRequestSpec) -> tuple[Any, list[ProgressEvent]]:
    events: list[ProgressEvent] = []
    result = agentcompass.launch(OrchestrationSpec(requests=list(requests), progress="none"),
                                 on_progress=events.append)
    return result, events


def _index(events: list[ProgressEvent], cls: type, **match: Any) -> int:
    for i, ev in enumerate(events):
        if isinstance(ev, cls) and all(getattr(ev, k) == v for k, v in match.items()):
            return i
    raise AssertionError(f"no {cls.__name__} {match} in {events}")


def _max_fetches_in_flight(events: list[ProgressEvent]) -> int:
    running, peak = 0, 0
    for ev in events:
        if isinstance(ev, ImagePull) and ev.status in ("building", "pulling") and not ev.bytes_done:
            running += 1
            peak = max(peak, running)
        elif isinstance(ev, ImagePull) and ev.status in ("done", "failed") and running:
            running -= 1
    return peak


# ----------------------------------------------------------------------------- params


def test_image_params_are_validated_and_named() -> None:
    policy, given = pop_image_policy({"cache_level": "instance", "min_free_disk": "10g", "prefetch_images": 0},
                                     supported=True, provider="docker")
    assert (policy.cache_level, policy.min_free_disk, policy.prefetch_images) == ("instance", 10 << 30, 0)
    assert given == {"cache_level": "instance", "min_free_disk": "10g", "prefetch_images": 0}
    for params, field in (({"cache_level": "all"}, "cache_level"), ({"min_free_disk": "lots"}, "min_free_disk"),
                          ({"max_concurrent_pulls": 0}, "max_concurrent_pulls"),
                          ({"prefetch_images": -1}, "prefetch_images")):
        with pytest.raises(ConfigError) as info:
            pop_image_policy(dict(params), supported=True, provider="docker")
        assert info.value.field == f"environment_params.{field}"
    with pytest.raises(ConfigError, match="none, base, env, instance"):
        pop_image_policy({"cache_level": "all"}, supported=True, provider="docker")
    with pytest.raises(ConfigError, match="has no images") as info:
        pop_image_policy({"cache_level": "env"}, supported=False, provider="local")
    assert info.value.field == "environment_params.cache_level"
    assert CACHE_LEVELS == ("none", "base", "env", "instance")


def test_a_provider_without_images_refuses_the_image_params(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="has no images") as info:
        agentcompass.run_evaluation("shell_tasks", "shell_agent", "scripted", "local",
                                    environment_params={"cache_level": "env"}, results_dir=str(tmp_path),
                                    progress="none")
    assert info.value.field == "environment_params.cache_level"


class _NoSizeImages(EnvironmentProvider):
    """Runs images and can remove them, but cannot tell whether one is there (no ``image_size``)."""

    name = "nosize"
    capabilities = ProviderCapabilities(images=True)

    def __init__(self) -> None:
        super().__init__(None, ComponentContext())
        self.ensured: list[str] = []
        self.removed: list[str] = []

    async def open(self, spec: EnvOpenSpec) -> Environment:
        raise NotImplementedError

    async def ensure_image(self, image: str | None = None, recipe: ImageRecipe | None = None, *,
                           on_pull_progress: Any = None) -> str | None:
        assert image is not None
        self.ensured.append(image)
        return image

    async def remove_image(self, ref: str) -> int:
        self.removed.append(ref)
        return 1


def test_a_provider_that_cannot_tell_an_images_size_never_has_it_removed() -> None:
    events: list[ProgressEvent] = []

    async def main() -> tuple[_NoSizeImages, dict[str, int]]:
        provider = _NoSizeImages()
        cache = ImageCache(events.append)
        images = cache.open_request("r", "run", provider, ImagePolicy(min_free_disk=None, cache_level="none"))
        assert await images.ensure("t0", "example/own:1", None) == "example/own:1"
        images.task_done("t0")
        stats = await images.close()
        return provider, stats

    provider, stats = asyncio.run(main())
    assert provider.ensured == ["example/own:1"]
    assert provider.removed == []  # it may have been there before the run: never removed
    assert not [e for e in events if isinstance(e, ImagePull) and e.status in ("pulling", "building")]
    assert not [e for e in events if isinstance(e, ImageRemoved)]
    assert stats.get("pulled", 0) == 0 and stats.get("removed", 0) == 0


def test_levels_follow_the_official_names() -> None:
    assert image_level("swebench/sweb.eval.x86_64.astropy_1776_astropy-12907:latest", per_task=False) == "instance"
    assert image_level("sweb.env.py.x86_64.abc:latest", per_task=True) == "env"
    assert image_level("sweb.base.py.x86_64:latest", per_task=True) == "base"
    assert image_level("agentcompass/swebench-local:x", per_task=True) == "instance"
    assert image_level("agentcompass/base:debian-bookworm", per_task=False) == "base"


# ----------------------------------------------------------------------------- docker


@pytest.mark.timeout(600)
def test_prefetch_limit_and_removal_of_what_the_run_built(busybox_image: str, docker_run_id: str,
                                                          tags: list[str], tmp_path: Path) -> None:
    _build(tags[0], busybox_image, tmp_path / "pre")  # there before the run: must stay
    result, events = _launch(_request("r", docker_run_id, tmp_path, tags, busybox_image, prefetch_images=1,
                                      max_concurrent_pulls=1))
    out = result["r"]
    assert out.status == "completed", (out.error, out.errors_by_kind)
    # cache_level env (default): the instance-level images this run built are gone, the one from before stays
    assert _exists(tags[0])
    assert [t for t in tags[1:] if _exists(t)] == []
    removed = {ev.image for ev in events if isinstance(ev, ImageRemoved) and ev.bytes_freed > 0}
    assert removed == set(tags[1:])
    assert _index(events, ImagePull, image=tags[0], status="present") >= 0
    # prefetch: task i+1's image was scheduled (and its build started by the prefetch) before task i finished,
    # and no further ahead than prefetch_images=1 past the tasks that had started
    for i in range(1, len(tags)):
        scheduled = _index(events, ImagePull, image=tags[i], status="scheduled")
        assert scheduled < _index(events, TaskFinished, task_id=f"t{i - 1}")
        built = [ev for ev in events if isinstance(ev, ImagePull) and ev.image == tags[i] and ev.status == "building"]
        assert len(built) == 1 and built[0].prefetch is True
    for i in range(2, len(tags)):
        assert _index(events, ImagePull, image=tags[i], status="scheduled") > \
            _index(events, AttemptStarted, task_id=f"t{i - 1}")
    # the pull limit: never more than one fetch in flight
    assert _max_fetches_in_flight(events) == 1
    summary = json.loads((out.run_dir / "summary.json").read_text())
    assert summary["images"]["built"] == 3 and summary["images"]["removed"] == 3
    assert summary["images"]["bytes_removed"] > 0 and summary["images"]["pulled"] == 0
    progress = (out.run_dir / "progress.jsonl").read_text()
    assert '"event":"image_pull"' in progress and '"event":"image_removed"' in progress


@pytest.mark.timeout(600)
def test_two_requests_share_one_build_and_instance_level_keeps_it(busybox_image: str,
                                                                   docker_run_id: str, tags: list[str],
                                                                   tmp_path: Path) -> None:
    both = tags[:2]
    result, events = _launch(
        _request("a", docker_run_id + "-a", tmp_path, both, busybox_image, cache_level="instance"),
        _request("b", docker_run_id + "-b", tmp_path, both, busybox_image, cache_level="instance"))
    assert result["a"].status == "completed" and result["b"].status == "completed"
    for tag in both:
        fetches = [ev for ev in events if isinstance(ev, ImagePull) and ev.image == tag and ev.status == "building"]
        assert len(fetches) == 1, fetches  # one build for both requests
        assert _exists(tag)  # cache_level instance: kept
    assert not [ev for ev in events if isinstance(ev, ImageRemoved)]


@pytest.mark.timeout(300)
def test_below_the_disk_floor_the_task_fails_with_disk_full(busybox_image: str, docker_run_id: str,
                                                            tags: list[str], tmp_path: Path) -> None:
    result, events = _launch(_request("r", docker_run_id, tmp_path, tags[:2], busybox_image,
                                      min_free_disk="1000000t"))
    out = result["r"]
    assert out.status == "failed" and out.errors_by_kind == {"disk_full": 2}
    detail = json.loads((out.run_dir / "details" / "t0.json").read_text())
    assert "environment_params.min_free_disk" in detail["attempts"]["1"]["error"]
    assert not [t for t in tags[:2] if _exists(t)]
    assert any(isinstance(ev, ImagePull) and ev.status == "failed" for ev in events)


@pytest.mark.timeout(300)
def test_an_image_another_live_process_holds_is_kept(busybox_image: str, docker_run_id: str, tags: list[str],
                                                     tmp_path: Path) -> None:
    other = subprocess.Popen(["sleep", "300"])
    lease = Path(f"{lease_prefix(('docker@' + (os.environ.get('DOCKER_HOST') or 'local'), tags[0]))}.{other.pid}")
    lease.parent.mkdir(parents=True, exist_ok=True)
    lease.touch()
    try:
        result, events = _launch(_request("r", docker_run_id, tmp_path, tags[:2], busybox_image))
    finally:
        other.kill()
        other.wait()
        lease.unlink(missing_ok=True)
    assert result["r"].status == "completed"
    assert _exists(tags[0]) and not _exists(tags[1])
    kept = [ev for ev in events if isinstance(ev, ImageRemoved) and ev.image == tags[0]]
    assert len(kept) == 1 and kept[0].kept == "another process holds it" and kept[0].bytes_freed == 0


def test_leases_do_not_follow_links_and_another_users_lease_is_ignored(tmp_path: Path) -> None:
    key = ("docker@test-leases", f"agentcompass-test/lease:{uuid.uuid4().hex[:10]}")
    mine = Path(f"{lease_prefix(key)}.{os.getpid()}")
    victim = tmp_path / "victim"
    victim.write_text("keep")
    assert image_cache._lease_dir_ok()
    assert os.stat(image_cache.LEASE_DIR).st_mode & 0o777 == 0o700 and str(os.getuid()) in image_cache.LEASE_DIR
    mine.symlink_to(victim)
    try:
        image_cache._lease(key, True)  # a planted link: not followed, the victim untouched
        assert victim.read_text() == "keep" and mine.is_symlink()
    finally:
        mine.unlink()
    image_cache._lease(key, True)
    assert mine.is_file() and not mine.is_symlink() and mine.stat().st_mode & 0o777 == 0o600
    image_cache._lease(key, False)
    assert not mine.exists()
    if os.getuid() != 0:
        return
    other = subprocess.Popen(["sleep", "60"])
    lease = Path(f"{lease_prefix(key)}.{other.pid}")
    try:
        lease.touch()
        assert image_cache._held_elsewhere(key)
        os.chown(lease, 12345, 12345)  # a lease some other user wrote is not one of ours
        assert not image_cache._held_elsewhere(key)
    finally:
        other.kill()
        other.wait()
        lease.unlink(missing_ok=True)


class _SlowImages:
    """Benchmark stand-in for ``plan``: task t<i> needs tags[i], built by a recipe that takes a while."""

    def __init__(self, tags: list[str], base: str, root: Path) -> None:
        self.tags, self.root = tags, root
        root.mkdir(parents=True, exist_ok=True)
        (root / "Dockerfile").write_text(f"FROM {base}\nLABEL agentcompass.test=image_cache\nRUN sleep 30\n")

    def prepare(self, task: Any) -> PreparedTask:
        return PreparedTask(task_id=task.task_id, prompt="", image=self.tags[int(task.task_id[1:])],
                            image_recipe=ImageRecipe(str(self.root)))


@pytest.mark.timeout(300)
def test_closing_a_request_stops_its_fetches_and_ends_their_rows(busybox_image: str, docker_run_id: str,
                                                                 tags: list[str], tmp_path: Path) -> None:
    events: list[ProgressEvent] = []

    async def main() -> tuple[dict[str, int], bool]:
        building = asyncio.Event()

        def on_event(ev: ProgressEvent) -> None:
            events.append(ev)
            if isinstance(ev, ImagePull) and ev.status == "building":
                building.set()

        provider = DockerProvider({"image": busybox_image}, ComponentContext(run_id=docker_run_id))
        try:
            cache = ImageCache(on_event)
            images = cache.open_request("r", docker_run_id, provider,
                                        ImagePolicy(min_free_disk=None, prefetch_images=1))
            await images.plan(_SlowImages(tags, busybox_image, tmp_path / "slow"), [TaskSpec(task_id="t0")])
            async with asyncio.timeout(120):  # the prefetch's build has started
                await building.wait()
            img = cache._images[(image_cache.daemon_key(provider), tags[0])]
            stats = await images.close()
            return stats, img.fetch is not None and img.fetch.done()
        finally:
            await provider.aclose()

    stats, fetch_over = asyncio.run(main())
    assert fetch_over  # the build nobody needs any more was stopped, not left running
    assert stats["built"] == 0 and not _exists(tags[0])
    pulls = [e for e in events if isinstance(e, ImagePull) and e.image == tags[0]]
    assert pulls[-1].status == "cancelled", pulls  # the display drops the row


@pytest.mark.timeout(600)
def test_a_prefetch_never_takes_the_last_room_above_the_floor(busybox_image: str, docker_run_id: str,
                                                             tags: list[str], tmp_path: Path) -> None:
    root = subprocess.run(["docker", "info", "-f", "{{.DockerRootDir}}"], capture_output=True, text=True,
                          check=True, timeout=60).stdout.strip()
    st = os.statvfs(root)
    # the floor 1 GiB under the free space: a task's own fetch fits, a prefetch (estimated 2 GiB) does not
    floor = st.f_bavail * st.f_frsize - (1 << 30)
    result, events = _launch(_request("r", docker_run_id, tmp_path, tags[:3], busybox_image, prefetch_images=1,
                                      min_free_disk=floor))
    out = result["r"]
    assert out.status == "completed", (out.error, out.errors_by_kind)
    for tag in tags[1:3]:
        pulls = [e for e in events if isinstance(e, ImagePull) and e.image == tag]
        assert any(e.status == "cancelled" and e.prefetch and "prefetch deferred" in (e.error or "")
                   for e in pulls), pulls
        builds = [e for e in pulls if e.status == "building"]
        assert len(builds) == 1 and builds[0].prefetch is False, pulls
