"""The docker provider against the real Docker engine: lifecycle, exec, files, limits, cleanup."""

from __future__ import annotations

import asyncio
import io
import json
import os
import tarfile
import time
from pathlib import Path
from typing import Any

import pytest

from agentcompass._errors import ConfigError, EnvironmentError_
from agentcompass.environments._tar import extract_tar, make_tar
from agentcompass.environments.docker.api import host_id
from agentcompass.environments.docker.provider import TIMEOUT_EXIT_CODE, DockerProvider, parse_memory
from agentcompass.environments.docker.pull import ImagePullError
from agentcompass.interfaces import ComponentContext, Environment, EnvOpenSpec, Resources

from ..conftest import containers_of, docker_cli, open_then_cancel

pytestmark = pytest.mark.timeout(120)


def _spec(run_id: str, **kw: object) -> EnvOpenSpec:
    return EnvOpenSpec(run_id=run_id, task_id=str(kw.pop("task_id", "t1")), **kw)  # type: ignore[arg-type]


def _inspect(container_id: str) -> dict[str, Any]:
    info: dict[str, Any] = json.loads(docker_cli("inspect", container_id))[0]
    return info


# ----------------------------------------------------------------------------- params (no daemon)


def test_unknown_param_is_a_config_error_listing_allowed_keys() -> None:
    with pytest.raises(ConfigError) as info:
        DockerProvider({"imagee": "x"}, ComponentContext())
    assert "imagee" in str(info.value)
    assert "image" in str(info.value) and "pids_limit" in str(info.value)
    assert info.value.field == "environment.params.imagee"


@pytest.mark.parametrize(("key", "value"), [("memory", "2 lots"), ("cpus", -1), ("pids_limit", 1.5),
                                            ("workdir", "relative"), ("init", "yes"),
                                            ("output_limit_bytes", 10), ("open_timeout", 0)])
def test_bad_param_values_are_config_errors_naming_the_field(key: str, value: object) -> None:
    with pytest.raises(ConfigError) as info:
        DockerProvider({key: value}, ComponentContext())
    assert info.value.field == f"environment.params.{key}"


def test_pids_is_accepted_as_the_short_name_of_pids_limit_but_not_both() -> None:
    assert DockerProvider({"pids": 64}, ComponentContext(run_id="r")).pids_limit == 64
    with pytest.raises(ConfigError, match="not both"):
        DockerProvider({"pids": 64, "pids_limit": 32}, ComponentContext(run_id="r"))


def test_memory_sizes_parse_in_powers_of_1024() -> None:
    assert parse_memory("2g") == 2 << 30
    assert parse_memory("512m") == 512 << 20
    assert parse_memory("1.5GiB") == 3 << 29
    assert parse_memory(4096) == 4096


# ----------------------------------------------------------------------------- lifecycle


async def test_open_exec_close_runs_in_a_labelled_init_container(docker_provider: DockerProvider,
                                                                   docker_run_id: str) -> None:
    env = await docker_provider.open(_spec(docker_run_id, task_id="task/1", labels={"team": "x"}))
    assert isinstance(env, Environment)
    info = _inspect(env.id)
    labels = info["Config"]["Labels"]
    assert labels["agentcompass.run_id"] == docker_run_id
    assert labels["agentcompass.task_id"] == "task/1"
    assert labels["agentcompass.role"] == "agent"
    assert labels["agentcompass.pid"] == str(os.getpid())
    assert labels["agentcompass.host"] == host_id()
    assert labels["team"] == "x"
    assert info["HostConfig"]["Init"] is True
    assert info["State"]["Running"] is True

    res = await env.exec("echo out; echo err >&2; exit 3")
    assert (res.exit_code, res.stdout, res.stderr, res.timed_out) == (3, "out\n", "err\n", False)
    assert (await env.exec("pwd")).stdout == "/workspace\n"

    await env.close()
    assert containers_of(docker_run_id) == []


async def test_exec_argv_is_not_shell_interpreted_and_honours_cwd_and_env(
        docker_provider: DockerProvider, docker_run_id: str) -> None:
    env = await docker_provider.open(_spec(docker_run_id, env={"FROM_SPEC": "spec"}))
    try:
        assert (await env.exec(["echo", "$HOME", "a b"])).stdout == "$HOME a b\n"
        await env.exec("mkdir -p sub/dir")
        res = await env.exec('pwd; echo "$FROM_SPEC $FROM_EXEC"', cwd="sub/dir", env={"FROM_EXEC": "exec"})
        assert res.stdout == "/workspace/sub/dir\nspec exec\n"
        missing = await env.exec(["definitely-not-a-command"])
        assert missing.exit_code == 127
        with pytest.raises(EnvironmentError_, match="cwd"):
            await env.exec("true", cwd="/no/such/dir")
        with pytest.raises(ConfigError):
            await env.exec("true", timeout=0)
    finally:
        await env.close()


async def test_spec_files_land_in_the_workdir(docker_provider: DockerProvider, docker_run_id: str) -> None:
    env = await docker_provider.open(_spec(docker_run_id, workdir="proj",
                                           files={"a.txt": "alpha", "deep/b.txt": "beta"}))
    try:
        assert env.workdir == "/workspace/proj"
        res = await env.exec("cat a.txt deep/b.txt")
        assert res.stdout == "alphabeta"
        # written now, not at the epoch: build tools compare mtimes
        age = await env.exec('echo $(( $(date +%s) - $(stat -c %Y a.txt) ))')
        assert int(age.stdout) < 120
    finally:
        await env.close()


async def test_spec_files_may_not_escape_the_workdir(docker_provider: DockerProvider,
                                                     docker_run_id: str) -> None:
    with pytest.raises(ConfigError):
        await docker_provider.open(_spec(docker_run_id, files={"../evil": "x"}))
    assert containers_of(docker_run_id) == []


async def test_write_and_read_file_round_trip_bytes(docker_provider: DockerProvider,
                                                    docker_run_id: str) -> None:
    env = await docker_provider.open(_spec(docker_run_id))
    try:
        payload = bytes(range(256)) * 100
        await env.write_file("new/nested/blob.bin", payload)
        assert await env.read_file("new/nested/blob.bin") == payload
        assert (await env.exec("wc -c < /workspace/new/nested/blob.bin")).stdout.strip() == "25600"
        await env.write_file("/tmp/abs.txt", "absolute")
        assert await env.read_file("/tmp/abs.txt") == b"absolute"
        await env.exec("ln -s /tmp/abs.txt link.txt")
        assert await env.read_file("link.txt") == b"absolute"
        with pytest.raises(FileNotFoundError):
            await env.read_file("missing.txt")
        with pytest.raises(IsADirectoryError):
            await env.read_file("new")
    finally:
        await env.close()


async def test_archives_round_trip_a_directorys_contents(docker_provider: DockerProvider,
                                                         docker_run_id: str, tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "pkg").mkdir(parents=True)
    (src / "top.txt").write_text("top")
    (src / "pkg" / "mod.py").write_text("print('hi')\n")
    (src / "run.sh").write_text("#!/bin/sh\necho ran\n")
    (src / "run.sh").chmod(0o755)
    env = await docker_provider.open(_spec(docker_run_id))
    try:
        await env.put_archive("into/here", make_tar(src))
        assert (await env.exec("./run.sh", cwd="into/here")).stdout == "ran\n"
        tar_bytes = await env.get_archive("into/here")
        with tarfile.open(fileobj=io.BytesIO(tar_bytes)) as tf:
            names = sorted(tf.getnames())
        assert names == ["pkg", "pkg/mod.py", "run.sh", "top.txt"]
        out = tmp_path / "out"
        out.mkdir()
        extract_tar(tar_bytes, out)
        assert (out / "pkg" / "mod.py").read_text() == "print('hi')\n"
        assert os.access(out / "run.sh", os.X_OK)

        single = await env.get_archive("into/here/top.txt")
        with tarfile.open(fileobj=io.BytesIO(single)) as tf:
            assert tf.getnames() == ["top.txt"]
        with pytest.raises(FileNotFoundError):
            await env.get_archive("nowhere")
    finally:
        await env.close()


async def test_put_archive_refuses_members_that_leave_the_target(docker_provider: DockerProvider,
                                                                 docker_run_id: str) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        info = tarfile.TarInfo("../escaped.txt")
        info.size = 1
        tf.addfile(info, io.BytesIO(b"x"))
    env = await docker_provider.open(_spec(docker_run_id))
    try:
        with pytest.raises(ConfigError):
            await env.put_archive("target", buf.getvalue())
        assert (await env.exec("test -e /workspace/escaped.txt")).exit_code == 1
    finally:
        await env.close()


# ----------------------------------------------------------------------------- exec limits


async def test_exec_timeout_kills_a_process_tree_that_ignores_sigterm(docker_provider: DockerProvider,
                                                                      docker_run_id: str) -> None:
    env = await docker_provider.open(_spec(docker_run_id))
    try:
        started = time.monotonic()
        res = await env.exec("trap '' TERM; (trap '' TERM; sleep 4242) & sleep 4243; echo never", timeout=1)
        assert time.monotonic() - started < 120  # hang guard: the tree would sleep 4242 s
        assert res.timed_out and res.exit_code == TIMEOUT_EXIT_CODE
        assert "never" not in res.stdout
        ps = await env.exec("ps -eo args")
        assert ps.exit_code == 0
        assert "sleep 424" not in ps.stdout
        assert (await env.exec("echo still usable")).stdout == "still usable\n"
    finally:
        await env.close()


async def test_exec_timeout_also_kills_children_that_left_the_process_group(
        docker_provider: DockerProvider, docker_run_id: str) -> None:
    env = await docker_provider.open(_spec(docker_run_id))
    try:
        res = await env.exec("setsid sleep 4244 & sleep 4245", timeout=1)
        assert res.timed_out
        assert "sleep 424" not in (await env.exec("ps -eo args")).stdout
    finally:
        await env.close()


async def test_cancelled_exec_does_not_leave_the_command_running(docker_provider: DockerProvider,
                                                                 docker_run_id: str) -> None:
    env = await docker_provider.open(_spec(docker_run_id))
    try:
        task = asyncio.create_task(env.exec("sleep 4246", timeout=60))
        for _ in range(300):  # the command runs in the container (bounded: 30 s), rather than some time passed
            if "sleep 4246" in (await env.exec("ps -eo args")).stdout:
                break
            await asyncio.sleep(0.1)
        else:
            pytest.fail("the command never started")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert "sleep 4246" not in (await env.exec("ps -eo args")).stdout
    finally:
        await env.close()


async def test_exec_output_is_capped_keeping_head_and_tail(base_image: str, docker_run_id: str) -> None:
    provider = DockerProvider({"image": base_image, "output_limit_bytes": 1000},
                              ComponentContext(run_id=docker_run_id))
    try:
        env = await provider.open(_spec(docker_run_id))
        res = await env.exec("echo HEAD; head -c 200000 /dev/zero | tr '\\0' x; echo; echo TAIL")
        assert res.exit_code == 0 and res.truncated
        assert res.output_bytes > 200000
        assert res.stdout.startswith("HEAD\n") and res.stdout.endswith("TAIL\n")
        assert len(res.stdout) < 1200
        await env.close()
    finally:
        await provider.aclose()


async def test_resource_limits_and_user_are_applied(base_image: str, docker_run_id: str) -> None:
    provider = DockerProvider({"image": base_image, "cpus": 1, "memory": "256m", "pids_limit": 64,
                               "user": "1000:1000"}, ComponentContext(run_id=docker_run_id))
    try:
        env = await provider.open(_spec(docker_run_id, files={"given.txt": "x"}))
        host_config = _inspect(env.id)["HostConfig"]
        assert host_config["NanoCpus"] == 1_000_000_000
        assert host_config["Memory"] == 256 << 20
        assert host_config["PidsLimit"] == 64
        assert (await env.exec("id -u")).stdout == "1000\n"
        assert (await env.exec("touch mine && stat -c %u given.txt mine")).stdout == "1000\n1000\n"
        assert (await env.exec("cat /sys/fs/cgroup/pids.max 2>/dev/null "
                               "|| cat /sys/fs/cgroup/pids/pids.max")).stdout.strip() == "64"
        await env.close()
    finally:
        await provider.aclose()


async def test_what_a_task_needs_applies_unless_the_user_set_the_providers_own_limits(
        base_image: str, docker_run_id: str) -> None:
    """A task's ``resources`` (Harbor's cpus / memory_mb) become the container's limits; CPUs beyond the
    daemon's are limited to the daemon's (Docker refuses more); the user's ``cpus``/``memory`` params win; a
    container started ahead for a task of other needs is never handed out."""
    ncpu = json.loads(docker_cli("info", "--format", "{{json .NCPU}}"))
    needs = Resources(cpus=1, memory_bytes=300 << 20)
    plain = DockerProvider({"image": base_image, "prestart": 2}, ComponentContext(run_id=docker_run_id))
    mine = DockerProvider({"image": base_image, "cpus": 0.5, "memory": "256m"}, ComponentContext(run_id=docker_run_id))
    try:
        for task_id in ("a", "b"):  # the same shape twice: the pool now starts containers of it ahead
            await (await plain.open(_spec(docker_run_id, task_id=task_id))).close()
        limited = await plain.open(_spec(docker_run_id, task_id="c", resources=needs))
        host_config = _inspect(limited.id)["HostConfig"]
        assert (host_config["NanoCpus"], host_config["Memory"], host_config["MemorySwap"]) == (
            1_000_000_000, 300 << 20, 300 << 20)
        assert _inspect(limited.id)["Config"]["Labels"]["agentcompass.task_id"] == "c"  # not one started ahead
        greedy = await plain.open(_spec(docker_run_id, task_id="d", resources=Resources(cpus=ncpu + 62)))
        assert _inspect(greedy.id)["HostConfig"]["NanoCpus"] == ncpu * 1_000_000_000
        assert (await greedy.exec("echo ok")).stdout == "ok\n"
        unlimited = await plain.open(_spec(docker_run_id, task_id="e"))
        assert (_inspect(unlimited.id)["HostConfig"]["NanoCpus"], _inspect(unlimited.id)["HostConfig"]["Memory"]) \
            == (0, 0)
        overruled = await mine.open(_spec(docker_run_id, task_id="f", resources=needs))
        host_config = _inspect(overruled.id)["HostConfig"]
        assert (host_config["NanoCpus"], host_config["Memory"]) == (500_000_000, 256 << 20)
    finally:
        await plain.aclose()
        await mine.aclose()
    assert containers_of(docker_run_id) == []


# ----------------------------------------------------------------------------- close and leaks


async def test_close_is_idempotent_and_leaves_no_container(docker_provider: DockerProvider,
                                                           docker_run_id: str) -> None:
    env = await docker_provider.open(_spec(docker_run_id))
    await asyncio.gather(env.close(), env.close())
    await env.close()
    assert containers_of(docker_run_id) == []
    with pytest.raises(EnvironmentError_):
        await env.exec("true")


async def test_keep_leaves_the_container_running(docker_provider: DockerProvider,
                                                 docker_run_id: str) -> None:
    env = await docker_provider.open(_spec(docker_run_id, keep=True))
    try:
        await env.close()
        await docker_provider.aclose()
        info = _inspect(env.id)
        assert info["State"]["Running"] is True
        assert info["Config"]["Labels"]["agentcompass.keep"] == "1"
    finally:
        docker_cli("rm", "-f", env.id)


async def test_provider_aclose_closes_environments_left_open(base_image: str, docker_run_id: str) -> None:
    provider = DockerProvider({"image": base_image}, ComponentContext(run_id=docker_run_id))
    await asyncio.gather(*(provider.open(_spec(docker_run_id, task_id=f"t{i}")) for i in range(2)))
    assert provider._prestart is not None and provider._prestart.held == 2  # the next two, started ahead
    assert len(containers_of(docker_run_id)) == 4
    await provider.aclose()
    await provider.aclose()
    assert containers_of(docker_run_id) == []
    with pytest.raises(EnvironmentError_):
        await provider.open(_spec(docker_run_id))


@pytest.mark.parametrize("delay", [0.0, 0.05, 0.2, 0.4])
async def test_cancelled_open_leaves_no_container(docker_provider: DockerProvider, docker_run_id: str,
                                                  delay: float) -> None:
    await open_then_cancel(docker_provider, _spec(docker_run_id, files={"f.txt": "x"}), delay)
    assert containers_of(docker_run_id) == []


async def test_sixteen_concurrent_opens_all_work_and_close_cleanly(docker_provider: DockerProvider,
                                                                   docker_run_id: str) -> None:
    envs = await asyncio.gather(*(docker_provider.open(_spec(docker_run_id, task_id=f"c{i}"))
                                  for i in range(16)))
    try:
        assert len({e.id for e in envs}) == 16
        results = await asyncio.gather(*(e.exec(f"echo {i}") for i, e in enumerate(envs)))
        assert [r.stdout for r in results] == [f"{i}\n" for i in range(16)]
    finally:
        await asyncio.gather(*(e.close() for e in envs))
    # left: only the next opens' containers, started ahead (the provider's aclose removes them)
    assert docker_provider._prestart is not None
    await docker_provider._prestart.settled(60)
    assert sorted(containers_of(docker_run_id)) == sorted(docker_provider._prestart.ready_ids())
    assert len(docker_provider._prestart.ready_ids()) == 2


# ----------------------------------------------------------------------------- images


async def test_missing_image_without_registry_is_a_clear_error_naming_the_build_command(
        docker_run_id: str) -> None:
    # Docker Hub is out of reach here (no such host): registry_unreachable, with the command that builds the image
    provider = DockerProvider({"image": "agentcompass/base:absent-in-tests", "pull_retries": 0},
                              ComponentContext(run_id=docker_run_id))
    try:
        with pytest.raises(ImagePullError) as info:
            await provider.open(_spec(docker_run_id))
        assert info.value.kind in ("registry_unreachable", "image_not_found", "registry_auth_required")
        assert "agentcompass images build-base --tag agentcompass/base:absent-in-tests" in str(info.value)
        assert info.value.image == "agentcompass/base:absent-in-tests"
    finally:
        await provider.aclose()


async def test_image_from_a_dockerfile_is_built_once_for_concurrent_opens(
        busybox_image: str, docker_run_id: str, tmp_path: Path) -> None:
    tag = f"agentcompass-test/built:{docker_run_id[-8:]}"
    (tmp_path / "Dockerfile").write_text(f"FROM {busybox_image}\nRUN date +%s%N > /built-at\n")
    provider = DockerProvider({"image": tag, "build_context": str(tmp_path)},
                              ComponentContext(run_id=docker_run_id))
    try:
        envs = await asyncio.gather(*(provider.open(_spec(docker_run_id, task_id=f"b{i}")) for i in range(3)))
        stamps = {(await e.exec("cat /built-at")).stdout for e in envs}
        assert len(stamps) == 1  # one build served all three
        await asyncio.gather(*(e.close() for e in envs))
    finally:
        await provider.aclose()
        docker_cli("rmi", "-f", tag)
