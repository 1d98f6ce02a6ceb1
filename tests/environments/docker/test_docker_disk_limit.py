"""``disk_limit``: a container's writable layer capped through ``HostConfig.StorageOpt`` where the daemon's
storage driver can do it, and the task refused (naming the field, the driver and what would work) where not."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

import agentcompass
from agentcompass._errors import ConfigError
from agentcompass.environments.docker.provider import DockerProvider
from agentcompass.environments.docker.storage import size_unsupported
from agentcompass.interfaces import ComponentContext, EnvOpenSpec

from ..conftest import containers_of, run_in_thread


def _daemon_driver() -> str:
    import aiodocker

    async def get() -> str:
        async with aiodocker.Docker() as docker:
            return str((await docker.system.info())["Driver"])

    return run_in_thread(get)


@pytest.mark.parametrize("value", [0, -1, "", "10x", "ten gigs", 1.5, math.nan, math.inf, True, [10]], ids=repr)
def test_disk_limit_is_validated_naming_the_field(value: Any) -> None:
    with pytest.raises(ConfigError, match="disk_limit") as info:
        DockerProvider({"disk_limit": value}, ComponentContext(run_id="disk"))
    assert info.value.field == "environment.params.disk_limit"


@pytest.mark.parametrize(("value", "size"), [("10g", 10 << 30), ("512m", 512 << 20), (1 << 30, 1 << 30)])
def test_disk_limit_becomes_the_storage_opt_size_of_the_create_config(value: Any, size: int) -> None:
    provider = DockerProvider({"disk_limit": value}, ComponentContext(run_id="disk"))
    spec = EnvOpenSpec(run_id="disk", task_id="t")
    config = provider._container_config(spec.env, "img", "/workspace", "bridge", {})
    assert config["HostConfig"]["StorageOpt"] == {"size": str(size)}
    unlimited = DockerProvider({}, ComponentContext(run_id="disk"))
    assert "StorageOpt" not in unlimited._container_config(spec.env, "img", "/workspace", "bridge", {})["HostConfig"]


@pytest.mark.parametrize(("driver", "status", "refused"), [
    ("overlay2", [["Backing Filesystem", "xfs"], ["Supports d_type", "true"]], None),
    ("overlay2", [["Backing Filesystem", "extfs"], ["Supports d_type", "true"]], "overlay2 on extfs"),
    ("btrfs", [["Build Version", "Btrfs v5.16"]], None),
    ("zfs", [["Zpool", "tank"]], None),
    ("devicemapper", [["Pool Name", "docker-pool"]], None),
    ("fuse-overlayfs", None, "fuse-overlayfs"),
    ("vfs", None, "vfs"),
])
def test_which_storage_drivers_can_cap_a_container(driver: str, status: Any, refused: str | None) -> None:
    # the shape of the daemon's GET /info answer
    assert size_unsupported({"Driver": driver, "DriverStatus": status}) == refused


async def test_disk_limit_on_this_daemons_driver_is_refused_before_any_container(
        base_image: str, docker_run_id: str) -> None:
    driver = _daemon_driver()
    if size_unsupported({"Driver": driver}) is None and driver != "overlay2":
        pytest.skip(f"this daemon's driver {driver} supports a disk limit")
    provider = DockerProvider({"image": base_image, "disk_limit": "10g"}, ComponentContext(run_id=docker_run_id))
    try:
        with pytest.raises(ConfigError) as info:
            await provider.open(EnvOpenSpec(run_id=docker_run_id, task_id="t"))
    finally:
        await provider.aclose()
    message = str(info.value)
    assert info.value.field == "environment.params.disk_limit"
    assert "environment_params.disk_limit" in message and driver in message and "xfs" in message
    assert containers_of(docker_run_id) == []


def test_a_run_with_an_unenforceable_disk_limit_fails_up_front_naming_it(
        base_image: str, docker_run_id: str, tmp_path: Path) -> None:
    driver = _daemon_driver()
    if size_unsupported({"Driver": driver}) is None:
        pytest.skip(f"this daemon's driver {driver} supports a disk limit")
    with pytest.raises(ConfigError, match="environment_params.disk_limit") as info:
        agentcompass.run_evaluation(
            "shell_tasks", "shell_agent", "scripted", "docker", benchmark_params={"sample_ids": ["files/hello_world"]},
            environment_params={"image": base_image, "disk_limit": "10g"}, run_id=docker_run_id,
            results_dir=str(tmp_path), progress="none")
    assert driver in str(info.value)
    assert containers_of(docker_run_id) == []


@pytest.mark.parametrize("value", [["/tmp"], {"tmp": "1m"}, {"/tmp": "lots"}, {"/tmp": 0}, {"/tmp": math.nan},
                                   {"/a,b": "1m"}, "/tmp"], ids=repr)
def test_tmpfs_is_validated_naming_the_field(value: Any) -> None:
    with pytest.raises(ConfigError, match="tmpfs") as info:
        DockerProvider({"tmpfs": value}, ComponentContext(run_id="disk"))
    assert (info.value.field or "").startswith("environment.params.tmpfs")


async def test_a_tmpfs_gets_its_bounded_size_on_any_driver(base_image: str, docker_run_id: str) -> None:
    provider = DockerProvider({"image": base_image, "tmpfs": {"/scratch": "8m"}},
                              ComponentContext(run_id=docker_run_id))
    spec = EnvOpenSpec(run_id=docker_run_id, task_id="t")
    assert provider._container_config(spec.env, "img", "/w", "bridge", {})["HostConfig"]["Tmpfs"] == {
        "/scratch": f"size={8 << 20}"}
    try:
        env = await provider.open(spec)
        size = await env.exec("df -B1 --output=size /scratch | tail -1")
        assert size.stdout.strip() == str(8 << 20), size.output
        fill = await env.exec("head -c 20M /dev/zero > /scratch/fill")
        assert fill.exit_code != 0 and "No space left" in fill.stderr
        await env.close()
    finally:
        await provider.aclose()
