"""The installed-agent contract (``harnesses/installed.py``) with a tiny fake agent program (a shell script given as
``binary``): a good run, and misbehaving ones (non-zero exit, garbage instead of a transcript, never exiting) that
end classified with their partial transcript kept and nothing left running, in a local workspace and in docker;
plus finding and installing the program (a local package index, pip --target)."""

from __future__ import annotations

import asyncio
import logging
import os
import shlex
import stat
import uuid
from pathlib import Path
from typing import Any, ClassVar

import msgspec
import pytest

import agentcompass
from agentcompass._errors import ConfigError
from agentcompass.harnesses.installed import (
    AgentProgram,
    AgentRun,
    InstalledAgent,
    JsonLinesTranscript,
    cache_root,
    install_program,
    install_runs,
)
from agentcompass.interfaces import ComponentContext, PreparedTask
from agentcompass.records import Step, TaskDetail
from tests.environments.conftest import (  # noqa: F401 - fixtures used by name
    _sweep_session_leftovers,
    base_image,
    containers_of,
    docker_available,
    docker_provider,
    docker_run_id,
)
from tests.pypi_index import SimpleIndex

HARNESS = "tests.harnesses.test_installed:FakeAgent"
FIB = "def fib(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\n"


class FakeTranscript(JsonLinesTranscript):
    """``{"say": text}``, ``{"run": cmd, "out": output}``, ``{"done": answer}`` per line."""

    def handle(self, event: dict[str, Any]) -> list[Step] | None:
        if "say" in event:
            return [self.new_step(content=str(event["say"]))]
        if "run" in event:
            return [self.new_step(action=str(event["run"]), observation=str(event.get("out", "")))]
        if "done" in event:
            self.final_answer = str(event["done"])
            self.stop_reason = "done"
            return []
        return None


class FakeAgent(InstalledAgent):
    """A shell script as the agent: it gets the prompt file as its argument."""

    name: ClassVar[str] = "fake_agent"
    requires_gateway: ClassVar[bool] = False  # it calls no model
    program: ClassVar[AgentProgram] = AgentProgram(program="fake-agent", distribution="fake-agent-bin",
                                                   import_name="fake_agent_bin", relative_path="bin/fake-agent")

    def command(self, task: PreparedTask, program_path: str, run: AgentRun) -> str:
        return f"{shlex.quote(program_path)} {shlex.quote(run.prompt_file)}"

    def new_transcript(self) -> FakeTranscript:
        return FakeTranscript()


def _program(tmp_path: Path, body: str) -> str:
    # a directory of its own: it is what gets mounted
    d = tmp_path / f"agent-{uuid.uuid4().hex[:6]}"
    d.mkdir()
    path = d / "fake-agent"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    os.chmod(d, 0o755)
    return str(path)


GOOD = f"""echo '{{"say": "writing fib.py"}}'
cat > fib.py <<'EOF'
{FIB}EOF
echo '{{"run": "cat > fib.py", "out": "ok"}}'
echo '{{"done": "written"}}'
"""
NONZERO = """echo '{"say": "about to fail"}'
echo 'something broke' >&2
exit 3
"""
GARBAGE = """echo '<html><body>502 Bad Gateway</body></html>'
echo 'Traceback (most recent call last): nonsense'
"""
HANG = """echo '{"say": "thinking forever"}'
sleep 600 &
sleep 600
"""


def _environment(kind: str, image: str | None) -> dict[str, Any]:
    return {"id": "docker", "params": {"image": image}} if kind == "docker" else {"id": "local"}


async def _run(tmp_path: Path, binary: str, kind: str, image: str | None, run_id: str,
               harness_params: dict[str, Any] | None = None) -> Any:
    result = await agentcompass.async_launch({"requests": [{
        "benchmark": {"id": "shell_tasks", "params": {"sample_ids": ["python/fib"]}},
        "harness": {"id": HARNESS, "params": {"binary": binary, "poll_interval_s": 0.2, **(harness_params or {})}},
        "model": {"id": "scripted"}, "environment": _environment(kind, image), "run_id": run_id,
        "results_dir": str(tmp_path / "results")}], "progress": "none"})
    out = result.outcomes[0]
    assert out.ok, out.error
    (path,) = (out.run_dir / "details").glob("*.json")
    return msgspec.json.decode(path.read_bytes(), type=TaskDetail).attempts["1"]


def _still_running(needle: str) -> list[str]:
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if needle in cmd:
                found.append(f"{pid}: {cmd}")
    return found


@pytest.fixture(params=["local", "docker"])
def where(request: pytest.FixtureRequest) -> tuple[str, str | None, str]:
    if request.param == "local":
        return "local", None, f"inst-{uuid.uuid4().hex[:8]}"
    image = request.getfixturevalue("base_image")
    return "docker", image, request.getfixturevalue("docker_run_id")


@pytest.mark.timeout(300)
async def test_a_good_program_solves_the_task(tmp_path: Path, where: tuple[str, str | None, str]) -> None:
    kind, image, run_id = where
    attempt = await _run(tmp_path, _program(tmp_path, GOOD), kind, image, run_id)
    assert attempt.correct is True and attempt.error_kind is None, attempt.error
    assert [s.content or s.action for s in attempt.trajectory.steps] == ["writing fib.py", "cat > fib.py"]
    assert attempt.final_answer == "written" and attempt.trajectory.stop_reason == "done"
    assert attempt.artifacts["agent"]["exit_code"] == 0
    ran = attempt.artifacts["agent"]["program_path"]
    if kind == "docker":  # the program's directory, bound read-only; in a local workspace the host path itself
        assert ran.startswith("/opt/agentcompass/agents/fake-agent-custom/"), ran
        assert containers_of(run_id) == []
    else:
        assert os.path.isabs(ran) and Path(ran).is_file()


@pytest.mark.timeout(300)
async def test_without_a_mount_the_program_is_copied_in_and_the_mount_is_read_only(
        tmp_path: Path, docker_provider: Any) -> None:  # noqa: F811
    from agentcompass.interfaces import EnvOpenSpec, RunContext

    binary = _program(tmp_path, GOOD)
    agent = FakeAgent({"binary": binary, "poll_interval_s": 0.2}, ComponentContext())
    log = logging.getLogger("test")
    task = PreparedTask(task_id="t", prompt="p")
    # as a remote daemon opens it: no mount, so setup sends a copy
    env = await docker_provider.open(EnvOpenSpec(run_id=docker_provider.ctx.run_id, task_id="t"))
    try:
        await agent.setup(task, env, log)
        result = await agent.run(task, env, None, RunContext(request="r", run_id="x", task_id="t", attempt=1), log)
        assert result.error_kind is None and result.final_answer == "written"
        assert result.artifacts["agent"]["program_path"] == f"{agent.mount_target()}/fake-agent"
    finally:
        await env.close()
    env = await docker_provider.open(EnvOpenSpec(run_id=docker_provider.ctx.run_id, task_id="t",
                                                 mounts=list(agent.mounts())))
    try:
        res = await env.exec(f"test -x {agent.mount_target()}/fake-agent && touch {agent.mount_target()}/x")
        assert res.exit_code != 0 and "Read-only file system" in res.output
    finally:
        await env.close()


@pytest.mark.timeout(300)
async def test_a_non_zero_exit_is_an_agent_error_with_its_steps_and_stderr(
        tmp_path: Path, where: tuple[str, str | None, str]) -> None:
    kind, image, run_id = where
    attempt = await _run(tmp_path, _program(tmp_path, NONZERO), kind, image, run_id)
    assert attempt.status == "completed" and attempt.error_kind == "agent_error"  # graded still
    assert attempt.correct is False
    assert "exited 3" in (attempt.error or "") and "something broke" in attempt.artifacts["stderr_tail"]
    assert [s.content for s in attempt.trajectory.steps] == ["about to fail"]
    if kind == "docker":
        assert containers_of(run_id) == []


@pytest.mark.timeout(300)
async def test_garbage_instead_of_a_transcript_is_classified_with_its_raw_tail(
        tmp_path: Path, where: tuple[str, str | None, str]) -> None:
    kind, image, run_id = where
    attempt = await _run(tmp_path, _program(tmp_path, GARBAGE), kind, image, run_id)
    assert attempt.error_kind == "agent_transcript_invalid" and attempt.trajectory.steps == []
    assert "502 Bad Gateway" in attempt.artifacts["transcript_tail"]
    assert attempt.artifacts["agent"]["invalid_lines"] == 2
    if kind == "docker":
        assert containers_of(run_id) == []


@pytest.mark.timeout(300)
async def test_a_program_that_never_exits_is_killed_at_its_timeout(
        tmp_path: Path, where: tuple[str, str | None, str]) -> None:
    kind, image, run_id = where
    binary = _program(tmp_path, HANG)
    attempt = await _run(tmp_path, binary, kind, image, run_id, {"timeout": 3})
    assert attempt.error_kind == "agent_timeout" and attempt.trajectory.stop_reason == "agent_timeout"
    assert [s.content for s in attempt.trajectory.steps] == ["thinking forever"]  # the partial transcript
    assert attempt.artifacts["agent"]["exit_code"] == 137
    assert _still_running(binary) == []
    if kind == "docker":
        assert containers_of(run_id) == []


@pytest.mark.timeout(300)
async def test_the_engines_agent_timeout_cancels_it_keeps_its_steps_and_kills_it(
        tmp_path: Path, where: tuple[str, str | None, str]) -> None:
    kind, image, run_id = where
    binary = _program(tmp_path, HANG)
    attempt = await _run(tmp_path, binary, kind, image, run_id, {"agent_timeout": 4})
    assert attempt.error_kind == "agent_timeout" and attempt.trajectory.stop_reason == "agent_timeout"
    assert [s.content for s in attempt.trajectory.steps] == ["thinking forever"]
    assert _still_running(binary) == []
    if kind == "docker":
        assert containers_of(run_id) == []


# ----------------------------------------------------------------------------- the program on the host


def test_a_missing_program_without_auto_install_names_the_command(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        FakeAgent({"version": "9.9.9"}, ComponentContext(data_dir=str(tmp_path)))
    text = str(err.value)
    assert "pip install fake-agent-bin==9.9.9" in text and "auto_install_dependencies=True" in text


@pytest.mark.timeout(120)
async def test_claude_code_without_a_model_endpoint_is_refused(tmp_path: Path) -> None:
    result = await agentcompass.async_launch({"requests": [{
        "benchmark": {"id": "shell_tasks", "params": {"sample_ids": ["python/fib"]}},
        "harness": {"id": "claude_code", "params": {"binary": _program(tmp_path, GOOD)}},
        "model": {"id": "scripted"}, "environment": {"id": "local"}, "results_dir": str(tmp_path)}],
        "progress": "none"})
    out = result.outcomes[0]
    (path,) = (out.run_dir / "details").glob("*.json")
    attempt = msgspec.json.decode(path.read_bytes(), type=TaskDetail).attempts["1"]
    assert attempt.status == "run_error" and "model_base_url" in (attempt.error or "")


def test_a_binary_that_is_not_executable_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "prog"
    path.write_text("x")
    with pytest.raises(ConfigError, match="not an executable"):
        FakeAgent({"binary": str(path)}, ComponentContext())


@pytest.mark.timeout(120)
def test_auto_install_puts_the_program_in_the_cache_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = {"fake_agent_bin/__init__.py": "", "fake_agent_bin/bin/fake-agent": "#!/bin/sh\necho hi\n"}
    with SimpleIndex() as index:
        index.add_wheel("fake-agent-bin", "1.2.3", files, executables=frozenset({"fake_agent_bin/bin/fake-agent"}))
        monkeypatch.setenv("PIP_INDEX_URL", index.url)
        monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")
        ctx = ComponentContext(data_dir=str(tmp_path), auto_install_dependencies=True)
        agent = FakeAgent({"version": "1.2.3"}, ctx)  # the constructor runs in a worker thread in the engine
        assert agent.location is not None and agent.location.source == "cache"
        assert agent.location.path == str(cache_root(str(tmp_path)) / "fake-agent-bin-1.2.3" / "fake_agent_bin" /
                                          "bin" / "fake-agent")
        mount = agent.mounts()[0]
        assert mount.read_only and mount.target == "/opt/agentcompass/agents/fake-agent-1.2.3"
        assert agent.resolved_settings()["version"] == "1.2.3"

        async def many() -> list[Any]:  # concurrent callers share one install; a later one finds the cache
            return await asyncio.gather(*(install_program(FakeAgent.program, "1.2.3", str(tmp_path))
                                          for _ in range(3)))

        assert {loc.path for loc in asyncio.run(many())} == {agent.location.path}
        again = FakeAgent({"version": "1.2.3"}, ctx)
        assert again.location == agent.location
        assert install_runs().get("fake-agent-bin==1.2.3") == 1 and index.downloads["fake-agent-bin"] == 1
        # without a version: the newest in the cache
        assert FakeAgent({}, ComponentContext(data_dir=str(tmp_path))).location == agent.location


@pytest.mark.timeout(120)
def test_a_failed_install_is_a_config_error_naming_the_command(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    with SimpleIndex() as index:
        monkeypatch.setenv("PIP_INDEX_URL", index.url)
        with pytest.raises(ConfigError) as err:
            FakeAgent({"version": "0.0.1"}, ComponentContext(data_dir=str(tmp_path), auto_install_dependencies=True))
    assert "pip install fake-agent-bin==0.0.1" in str(err.value)
    assert not any(p.name.startswith("fake-agent-bin") for p in cache_root(str(tmp_path)).iterdir())


def test_docker_binds_mounts_read_only_and_only_on_a_local_daemon() -> None:
    from agentcompass.environments.docker import DockerProvider
    from agentcompass.interfaces import EnvOpenSpec, Mount

    spec = EnvOpenSpec(run_id="r", task_id="t", mounts=[Mount(source="/host/agent", target="/opt/agentcompass/a")])
    local = DockerProvider({}, ComponentContext(run_id="r"))
    binds = local._binds(spec)
    assert binds == (("/host/agent", "/opt/agentcompass/a", True),)
    config = local._container_config({}, "img", "/w", "none", {}, binds)
    assert config["HostConfig"]["Mounts"] == [{"Type": "bind", "Source": "/host/agent", "Target": "/opt/agentcompass/a",
                                              "ReadOnly": True}]
    shape = local._shape(spec, "img", "/w", binds)
    assert shape is None or shape.mounts == binds  # a pre-started container carries the same binds
    remote = DockerProvider({"docker_host": "tcp://10.0.0.1:2376"}, ComponentContext(run_id="r"))
    assert remote._binds(spec) == ()  # its paths are not ours: the harness copies the program in instead
    assert DockerProvider.capabilities.mounts
