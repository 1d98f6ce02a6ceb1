"""Pulling images through the docker provider from a real registry on 127.0.0.1 (Debian's docker-registry):
progress with byte counts, a stalled registry ends in ``image_pull_stalled`` (not a hang), a killed pull is
completed by the next, and each failure has its own kind."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

import agentcompass
from agentcompass._errors import ConfigError
from agentcompass.environments.docker.provider import DockerProvider
from agentcompass.environments.docker.pull import (
    ImagePullError,
    PullProgress,
    _Tracker,
    registry_credentials,
)
from agentcompass.interfaces import ComponentContext

from ..registry import (
    Registry,
    StallingProxy,
    build_random_image,
    free_port,
    image_present,
    push_as,
    remove_image,
    running_registry,
    swebench_name,
)

pytestmark = [pytest.mark.timeout(600)]

INSTANCE = "pulltest__pulltest-1"


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    with running_registry() as reg:
        yield reg


@pytest.fixture(scope="module")
def pushed(registry: Registry, busybox_image: str) -> Iterator[str]:
    """An image with two 3 MB random layers in the registry under an official SWE-bench name, absent locally."""
    ref = swebench_name(registry.host, INSTANCE)
    push_as(build_random_image(busybox_image), ref)
    yield ref
    remove_image(ref)


@pytest.fixture
def absent(pushed: str) -> Iterator[str]:
    """``pushed``, removed locally before and after the test."""
    remove_image(pushed)
    yield pushed
    remove_image(pushed)


@pytest_asyncio.fixture
async def make_provider(docker_run_id: str) -> AsyncIterator[Any]:
    made: list[DockerProvider] = []

    def make(**params: Any) -> DockerProvider:
        provider = DockerProvider(params, ComponentContext(run_id=docker_run_id))
        made.append(provider)
        return provider

    yield make
    for p in made:
        await p.aclose()


async def test_pull_reports_layers_and_bytes_and_records_the_result(
        registry: Registry, absent: str, make_provider: Any) -> None:
    # The registry is reached through a proxy that holds the pull mid-layer until a progress report with
    # bytes has arrived: a fast local pull may otherwise finish before the daemon sends any byte counts.
    host, port = registry.host.split(":")
    proxy = await StallingProxy((host, int(port)), budget=1 << 20).start()
    ref = absent.replace(registry.host, proxy.host)
    provider = make_provider()
    seen: list[PullProgress] = []

    def on_progress(p: PullProgress) -> None:
        seen.append(p)
        if p.bytes_done > 0:
            proxy.release()

    async def release_anyway() -> None:  # the pull never hangs the test; the assertion below then fails
        await asyncio.sleep(120)
        proxy.release()

    guard = asyncio.create_task(release_anyway())
    try:
        assert await provider.ensure_image(ref, on_pull_progress=on_progress) == ref
    finally:
        guard.cancel()
        await proxy.aclose()
    assert any(0 < p.bytes_done for p in seen[:-1]), "no progress with bytes before the end"
    assert image_present(ref)
    try:
        await _check_recorded_pull(ref, provider, seen, make_provider)
    finally:
        remove_image(ref)


async def _check_recorded_pull(absent: str, provider: Any, seen: list[PullProgress], make_provider: Any) -> None:
    result = provider.pull_stats(absent)
    assert result is not None and result.source == "pulled" and result.attempts == 1
    assert result.bytes_pulled >= 6 << 20  # the two random layers, at least
    assert seen and seen[-1].status == "done"
    final = seen[-1]
    assert final.layers_total >= 2 and final.layers_done == final.layers_total
    assert final.bytes_done == result.bytes_pulled and final.bytes_total >= final.bytes_done
    # present now: no second pull, recorded as such by a new provider
    again = make_provider()
    await again.ensure_image(absent)
    stats = again.pull_stats(absent)
    assert stats is not None and stats.source == "present"


async def test_a_stalled_registry_ends_in_the_stalled_kind_after_the_retries(
        registry: Registry, absent: str, make_provider: Any) -> None:
    host, port = registry.host.split(":")
    proxy = await StallingProxy((host, int(port)), budget=512 << 10).start()
    ref = absent.replace(registry.host, proxy.host)
    provider = make_provider(pull_inactivity_timeout=3, pull_retries=1)
    seen: list[PullProgress] = []
    try:
        async with asyncio.timeout(120):  # the test's deadline: a hang fails here
            with pytest.raises(ImagePullError) as info:
                await provider.ensure_image(ref, on_pull_progress=seen.append)
    finally:
        await proxy.aclose()
        remove_image(ref)
    assert info.value.kind == "image_pull_stalled"
    assert "pull_inactivity_timeout" in str(info.value) and "2 time(s)" in str(info.value)
    assert [p.status for p in seen].count("retrying") == 1 and seen[-1].status == "failed"
    assert 0 < proxy.forwarded


async def test_a_pull_killed_midway_is_completed_by_the_next(
        registry: Registry, absent: str, make_provider: Any) -> None:
    host, port = registry.host.split(":")
    proxy = await StallingProxy((host, int(port)), budget=1 << 20).start()
    ref = absent.replace(registry.host, proxy.host)
    try:
        got_bytes = asyncio.Event()

        def on_progress(p: PullProgress) -> None:
            if p.bytes_done > 0:
                got_bytes.set()

        first = make_provider(pull_inactivity_timeout=300)
        task = asyncio.create_task(first.ensure_image(ref, on_pull_progress=on_progress))
        async with asyncio.timeout(120):
            await got_bytes.wait()
        task.cancel()  # killed mid-pull
        with pytest.raises(asyncio.CancelledError):
            await task
        assert not image_present(ref)
        proxy.release()
        second = make_provider()
        async with asyncio.timeout(300):
            await second.ensure_image(ref)
        assert image_present(ref)
        stats = second.pull_stats(ref)
        assert stats is not None and stats.source == "pulled"
    finally:
        await proxy.aclose()
        remove_image(ref)


async def test_a_missing_image_is_image_not_found_and_not_retried(
        registry: Registry, make_provider: Any) -> None:
    ref = swebench_name(registry.host, "nosuch__nosuch-404")
    provider = make_provider(pull_retries=3)
    with pytest.raises(ImagePullError) as info:
        await provider.ensure_image(ref)
    assert info.value.kind == "image_not_found" and not info.value.retryable
    assert str(info.value).startswith("image_not_found: ") and registry.host in str(info.value)
    with pytest.raises(ImagePullError) as again:
        await provider.ensure_image(ref)
    assert again.value is info.value  # remembered: a missing image stays missing for this provider


async def test_a_registry_nobody_listens_on_is_registry_unreachable(make_provider: Any) -> None:
    ref = swebench_name(f"127.0.0.1:{free_port()}", INSTANCE)
    provider = make_provider(pull_retries=0)
    with pytest.raises(ImagePullError) as info:
        await provider.ensure_image(ref)
    assert info.value.kind == "registry_unreachable" and info.value.retryable
    # retryable: the next caller (a retried attempt) tries the registry again rather than the remembered error
    with pytest.raises(ImagePullError) as again:
        await provider.ensure_image(ref)
    assert again.value is not info.value and again.value.kind == "registry_unreachable"


def _htpasswd(tmp_path: Path, user: str, password: str) -> Path:
    bcrypt = pytest.importorskip("bcrypt", reason="bcrypt makes the htpasswd line of the auth registry")
    path = tmp_path / "htpasswd"
    path.write_text(f"{user}:{bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=5)).decode()}\n")
    return path


async def test_a_registry_with_auth_needs_the_credentials_of_the_docker_config(
        registry: Registry, absent: str, make_provider: Any, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    user, password = "pulluser", "s3cret-pull-pass"
    # a second registry process on the same storage, behind basic auth: it serves the pushed image
    with running_registry(storage=registry.storage, htpasswd=_htpasswd(tmp_path, user, password)) as private:
        ref = absent.replace(registry.host, private.host)
        monkeypatch.delenv("AGENTCOMPASS_REGISTRY_USERNAME", raising=False)
        monkeypatch.delenv("AGENTCOMPASS_REGISTRY_PASSWORD", raising=False)
        monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "empty-config"))
        try:
            with pytest.raises(ImagePullError) as info:
                await make_provider().ensure_image(ref)
            assert info.value.kind == "registry_auth_required" and not info.value.retryable
            assert f"docker login {private.host}" in str(info.value)
            assert "credential helpers" in str(info.value) and "AGENTCOMPASS_REGISTRY" in str(info.value)

            config = tmp_path / "docker-config"
            config.mkdir()
            token = base64.b64encode(f"{user}:{password}".encode()).decode()
            (config / "config.json").write_text(json.dumps({"auths": {f"http://{private.host}": {"auth": token}}}))
            monkeypatch.setenv("DOCKER_CONFIG", str(config))
            assert registry_credentials(ref) == {"username": user, "password": password,
                                                 "serveraddress": f"http://{private.host}"}
            provider = make_provider()
            await provider.ensure_image(ref)
            assert image_present(ref)
        finally:
            remove_image(ref)


def test_a_run_whose_registry_stalls_ends_in_the_stalled_kind_not_a_hang(
        registry: Registry, absent: str, docker_run_id: str, tmp_path: Path) -> None:
    """Through the engine: the request's image check pulls through a proxy that stops forwarding; the run ends
    (within the test's deadline) failed with ``image_pull_stalled`` named."""
    row = {"instance_id": INSTANCE, "repo": "pulltest/pulltest", "base_commit": "0" * 40,
           "problem_statement": "never reached", "patch": "", "test_patch": "", "FAIL_TO_PASS": [],
           "PASS_TO_PASS": []}
    dataset = tmp_path / "instances.jsonl"
    dataset.write_text(json.dumps(row) + "\n")
    host, port = registry.host.split(":")

    async def start_proxy() -> StallingProxy:
        return await StallingProxy((host, int(port)), budget=512 << 10).start()

    loop = asyncio.new_event_loop()
    proxy = loop.run_until_complete(start_proxy())  # on its own loop: run_evaluation runs a loop of its own
    runner = threading.Thread(target=loop.run_forever, daemon=True)
    runner.start()
    ref = absent.replace(registry.host, proxy.host)
    try:
        out = agentcompass.run_evaluation(
            "swebench_jsonl", "shell_agent", "scripted", "docker",
            benchmark_params={"dataset_file": str(dataset), "image_namespace": f"{proxy.host}/swebench"},
            environment_params={"pull_inactivity_timeout": 3, "pull_retries": 1},
            run_id=docker_run_id, results_dir=str(tmp_path / "results"), progress="none", timeout_seconds=300)
    finally:
        asyncio.run_coroutine_threadsafe(proxy.aclose(), loop).result(60)
        loop.call_soon_threadsafe(loop.stop)
        runner.join(30)
        remove_image(ref)
    assert out.status == "failed", out
    assert out.error is not None and "image_pull_stalled" in out.error, out.error
    assert not image_present(ref)


# ----------------------------------------------------------------------------- without docker


def test_a_long_extraction_is_progress_until_it_stops_moving() -> None:
    """The daemon's messages for one big layer: every step of "Extracting" that unpacks more counts as progress
    (the inactivity bound restarts), the same message again does not."""
    tracker = _Tracker("x/y:1", None)
    total = 1_500_000_000

    def msg(status: str, current: int | None = None) -> dict[str, Any]:
        detail = {"current": current, "total": total} if current is not None else {}
        return {"status": status, "id": "abc123", "progressDetail": detail}

    assert tracker.feed(msg("Pulling fs layer"))
    assert tracker.feed(msg("Downloading", 1 << 20))
    assert tracker.feed(msg("Downloading", total))
    assert not tracker.feed(msg("Downloading", total))
    assert tracker.feed(msg("Download complete"))
    decided = [tracker.feed(msg("Extracting", step * 100_000_000)) for step in range(1, 16)]
    assert decided == [True] * 15
    assert not tracker.feed(msg("Extracting", 1_500_000_000))  # nothing new unpacked
    assert tracker.feed(msg("Pull complete"))
    assert tracker.bytes_done == total and tracker.layers["abc123"].done


def _env(tmp_path: Path, **values: str) -> dict[str, str]:
    return {"DOCKER_CONFIG": str(tmp_path / "no-config"), **values}


def test_environment_credentials_go_only_to_the_registry_named(tmp_path: Path) -> None:
    env = _env(tmp_path, AGENTCOMPASS_REGISTRY="mirror.example:5000", AGENTCOMPASS_REGISTRY_USERNAME="u",
               AGENTCOMPASS_REGISTRY_PASSWORD="p")
    assert registry_credentials("mirror.example:5000/swebench/x:1", env) == {
        "username": "u", "password": "p", "serveraddress": "mirror.example:5000"}
    assert registry_credentials("swebench/x:1", env) is None  # Docker Hub never sees the mirror's password
    assert registry_credentials("other.example/x:1", env) is None


@pytest.mark.parametrize(("values", "field"), [
    ({"AGENTCOMPASS_REGISTRY_USERNAME": "u", "AGENTCOMPASS_REGISTRY_PASSWORD": "s3cret"}, "AGENTCOMPASS_REGISTRY"),
    ({"AGENTCOMPASS_REGISTRY_PASSWORD": "s3cret"}, "AGENTCOMPASS_REGISTRY"),
    ({"AGENTCOMPASS_REGISTRY": "mirror.example", "AGENTCOMPASS_REGISTRY_USERNAME": "u"},
     "AGENTCOMPASS_REGISTRY_PASSWORD"),
])
def test_incomplete_environment_credentials_are_refused(tmp_path: Path, values: dict[str, str],
                                                        field: str) -> None:
    with pytest.raises(ConfigError) as info:
        registry_credentials("swebench/x:1", _env(tmp_path, **values))
    assert info.value.field == field and field in str(info.value)
    assert "s3cret" not in str(info.value)


def test_the_provider_refuses_credentials_without_a_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENTCOMPASS_REGISTRY", raising=False)
    monkeypatch.setenv("AGENTCOMPASS_REGISTRY_USERNAME", "u")
    monkeypatch.setenv("AGENTCOMPASS_REGISTRY_PASSWORD", "p")
    with pytest.raises(ConfigError) as info:
        DockerProvider({}, ComponentContext(run_id="r"))
    assert info.value.field == "AGENTCOMPASS_REGISTRY"


def test_a_credential_helper_is_named_as_skipped_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    config = tmp_path / "helper-config"
    config.mkdir()
    (config / "config.json").write_text(json.dumps({"credsStore": "desktop", "auths": {"ghcr.io": {}}}))
    env = {"DOCKER_CONFIG": str(config)}
    with caplog.at_level(logging.WARNING, logger="agentcompass.environments.docker.pull"):
        assert registry_credentials("ghcr.io/x/y:1", env) is None
        assert registry_credentials("ghcr.io/x/z:1", env) is None
    warned = [r for r in caplog.records if "credential helper" in r.getMessage()]
    assert len(warned) == 1
    assert "ghcr.io" in warned[0].getMessage() and "AGENTCOMPASS_REGISTRY" in warned[0].getMessage()
