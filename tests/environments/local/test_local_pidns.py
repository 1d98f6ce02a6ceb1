"""``local`` with ``pid_namespace``: a root agent that leaves every cgroup, its session and its marker variable
still dies when its environment closes (the namespace's init dies, and the kernel kills the rest)."""

from __future__ import annotations

import asyncio
import os
import shutil
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agentcompass._errors import ConfigError
from agentcompass.environments.local import cgroup as _cgroup
from agentcompass.environments.local.provider import LocalProvider
from agentcompass.interfaces import ComponentContext, EnvOpenSpec

pytestmark = pytest.mark.timeout(120)
needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or _cgroup.support() is None or not (shutil.which("unshare") and shutil.which("nsenter")),
    reason="needs root, a writable cgroup hierarchy and util-linux unshare/nsenter")

#: the agent moves itself into the root cgroup of every hierarchy, starts a new session and drops its
#: environment (so neither the cgroup, the process group nor the marker variable finds it), then sleeps on
ESCAPE = ("for f in $(awk '$3 == \"cgroup\" || $3 == \"cgroup2\" {{print $2 \"/cgroup.procs\"}}' /proc/self/mounts);"
          " do echo 0 > $f 2>/dev/null; done\nexec env -i setsid sleep {tag}\n")


def _find(tag: str) -> list[int]:
    """Host pids of live processes whose command line is ``sleep <tag>``."""
    want = f"sleep\0{tag}\0".encode()
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if Path(f"/proc/{name}/cmdline").read_bytes() == want and \
                        Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                    out.append(int(name))
            except OSError:
                continue
    return out


async def _until(check: object, within: float = 30.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return True
        await asyncio.sleep(0.02)
    return bool(check())  # type: ignore[operator]


@pytest.fixture
async def providers(tmp_path: Path) -> AsyncIterator[dict[bool, LocalProvider]]:
    made = {ns: LocalProvider({"base_dir": str(tmp_path), "pid_namespace": ns}, ComponentContext(run_id="r1"))
            for ns in (False, True)}
    try:
        yield made
    finally:
        for p in made.values():
            await p.aclose()


@needs_root
@pytest.mark.parametrize("pid_namespace", [False, True])
async def test_a_root_agent_that_leaves_its_cgroups_dies_at_close(providers: dict[bool, LocalProvider],
                                                                 pid_namespace: bool) -> None:
    tag = f"3599.{uuid.uuid4().int % 10**6:06d}"
    env = await providers[pid_namespace].open(EnvOpenSpec(run_id="r1", task_id="t1"))
    try:
        await env.write_file("escape.sh", ESCAPE.format(tag=tag))
        res = await env.exec("sh escape.sh >/dev/null 2>&1 &")
        assert res.exit_code == 0, res
        assert await _until(lambda: bool(_find(tag))), "the escaping process never started"
        [pid] = _find(tag)
        # it did leave: every hierarchy shows it in the root cgroup
        assert all(line.endswith(":/") for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines()), pid
        assert b"AGENTCOMPASS" not in Path(f"/proc/{pid}/environ").read_bytes()
        await env.close()
        if pid_namespace:
            assert await _until(lambda: not _find(tag)), f"pid {pid} survived the close"
        else:  # without the namespace nothing of ours can find it: the gap the option closes
            assert _find(tag) == [pid]
    finally:
        for p in _find(tag):
            os.kill(p, 9)


@needs_root
async def test_commands_in_a_pid_namespace_see_their_own_processes(providers: dict[bool, LocalProvider]) -> None:
    env = await providers[True].open(EnvOpenSpec(run_id="r1", task_id="t1", workdir="work"))
    try:
        res = await env.exec("echo $$; pwd; sleep 30 & echo $! > bg.pid; ls /proc | grep -c '^[0-9]'")
        assert res.exit_code == 0, res
        own_pid, cwd, count = res.stdout.split()
        assert cwd == env.workdir and 1 < int(own_pid) < 100 and int(count) < 10
        # a background process outlives its command and is seen (and killable) by the next one
        res = await env.exec("kill -0 $(cat bg.pid) && echo alive; exit 3")
        assert (res.exit_code, res.stdout.strip()) == (3, "alive")
        timed = await env.exec("sleep 30", timeout=0.5)
        assert timed.timed_out
    finally:
        await env.close()


def test_pid_namespace_without_root_is_refused_naming_the_param(tmp_path: Path) -> None:
    if os.geteuid() == 0 and shutil.which("unshare") and shutil.which("nsenter"):
        pytest.skip("root with unshare/nsenter: the option is available")
    with pytest.raises(ConfigError) as info:
        LocalProvider({"base_dir": str(tmp_path), "pid_namespace": True}, ComponentContext(run_id="r1"))
    assert info.value.field == "environment.params.pid_namespace"
