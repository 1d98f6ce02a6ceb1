"""terminus: the model types into a real tmux session inside a local or docker environment, through env.exec."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest

import agentcompass
from agentcompass._errors import ConfigError
from agentcompass.harnesses.terminus.harness import Terminus
from agentcompass.harnesses.terminus.reply import parse_reply
from agentcompass.harnesses.terminus.tmux_session import is_key_names
from agentcompass.interfaces import ComponentContext, Environment, EnvOpenSpec, NetworkPolicy, PreparedTask, RunContext
from agentcompass.models.scripted.server import stop_process
from agentcompass.records import TaskDetail
from agentcompass.registry import Registries
from tests.conftest import start_server_process
from tests.environments.conftest import (  # noqa: F401 - fixtures used by name
    _sweep_session_leftovers,
    base_image,
    busybox_image,
    docker_available,
    docker_provider,
    docker_run_id,
)

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"
TASK = PreparedTask(task_id="t1", prompt="Task: demo\nDo the thing.")


#: the wait after a command whose output or effect a test checks: Terminus reads the screen after a fixed wait,
#: so it is wide (the shell takes milliseconds) for a loaded machine
SETTLE = 2.0


def turn(*commands: tuple[str, float], done: bool = False, analysis: str = "ok") -> str:
    return json.dumps({"analysis": analysis, "plan": "", "task_complete": done,
                       "commands": [{"keystrokes": k, "duration": d} for k, d in commands]})


def agent(**params: Any) -> Terminus:
    return Terminus(dict(params), ComponentContext())


def host_server_gone(socket: str, within_s: float = 30.0) -> bool:
    """Whether the tmux server of ``socket`` is gone from this host within ``within_s`` (a killed server takes a
    moment to exit)."""
    deadline = time.monotonic() + within_s
    while host_server_alive(socket):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def host_server_alive(socket: str) -> bool:
    """Whether a tmux server for ``socket`` answers, or any process still names it, on this host."""
    answered = subprocess.run(["tmux", "-L", socket, "has-session"], capture_output=True, timeout=10).returncode == 0
    named = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if socket.encode() in f.read():
                    named.append(pid)
        except OSError:  # exited while we looked
            continue
    return answered or bool(named)


def processes_of(workdir: str) -> list[str]:
    """Host processes whose command line names ``workdir`` or whose working directory is inside it."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:  # exited while we looked
            continue
        if workdir in cmdline or cwd == workdir or cwd.startswith(workdir + "/"):
            found.append(f"{pid}: {cmdline}")
    return found


async def env_server_gone(env: Environment, socket: str, within_s: float = 30.0) -> bool:
    """Whether the tmux server of ``socket`` is gone from ``env`` (no answer, no process naming it) in time."""
    deadline = time.monotonic() + within_s
    while True:
        res = await env.exec(["tmux", "-L", socket, "has-session"], timeout=30)
        procs = await env.exec("ps -eo args", timeout=30)
        if res.exit_code != 0 and socket not in procs.stdout and "sleep 300" not in procs.stdout:
            return True
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.1)


# ----------------------------------------------------------------------------- the reply format


def test_parse_reply_takes_the_first_json_object_even_in_prose_or_a_fence() -> None:
    reply = parse_reply('Sure.\n```json\n{"analysis": "a", "plan": "p", "commands": [{"keystrokes": "ls\\n", '
                        '"duration": 0.1}, {"keystrokes": "C-c"}], "task_complete": "true"}\n```')
    assert reply.error is None and reply.task_complete is True
    assert [(c.keystrokes, c.duration) for c in reply.commands] == [("ls\n", 0.1), ("C-c", 1.0)]
    assert (reply.analysis, reply.plan) == ("a", "p")


@pytest.mark.parametrize(("text", "problem"), [
    ("no json here", "no JSON object"),
    ('{"analysis": "a"}', '"commands" field is missing'),
    ('{"commands": ["ls"]}', "commands[0] is not an object"),
    ('{"commands": [{"keystrokes": "ls", "duration": "soon"}]}', "commands[0].duration"),
    ('{"commands": [], "task_complete": "maybe"}', '"task_complete" is not true or false'),
])
def test_parse_reply_names_what_is_wrong(text: str, problem: str) -> None:
    error = parse_reply(text).error
    assert error is not None and problem in error


def test_key_names_are_told_apart_from_text() -> None:
    assert all(is_key_names(k) for k in ("C-c", "C-d", "Escape", "Up Up Enter", "M-x", "F5", " Tab "))
    assert not any(is_key_names(k) for k in ("ls\n", "echo C-c", "", "Enter the value", "vim"))


def test_registry_name_resolves_to_the_harness() -> None:
    cls = Registries(use_entry_points=False)["harness"].resolve("terminus")
    assert cls is Terminus and cls.needs_environment and cls.evaluates and not cls.needs_model_endpoint


def test_bad_params_raise_config_error_naming_the_field() -> None:
    with pytest.raises(ConfigError, match="cols"):
        agent(cols=5)
    with pytest.raises(ConfigError, match="step_limt"):
        agent(step_limt=3)


# ----------------------------------------------------------------------------- local environment


async def test_types_into_tmux_reads_new_output_and_ends_after_the_confirmation(
        local_env: Environment, serve_script, run_ctx: RunContext, log: logging.Logger) -> None:
    client, server = await serve_script([
        turn(("echo hi > out.txt; cat out.txt seed.txt\n", SETTLE)),
        turn(("cd sub 2>/dev/null || mkdir sub && cd sub\n", SETTLE), ("pwd > ../where.txt\n", SETTLE), done=True),
        turn(done=True),
    ])
    result = await agent(rows=12, cols=100).run(TASK, local_env, client, run_ctx, log)

    traj = result.trajectory
    assert traj.stop_reason == "task_complete" and result.error_kind is None
    assert await local_env.read_file("out.txt") == b"hi\n"
    # one shell for the whole run: the cd of step 1 still holds when pwd runs
    assert (await local_env.read_file("where.txt")).decode().strip().endswith("/sub")
    steps = traj.steps
    assert [s.index for s in steps] == [0, 1, 2]
    assert steps[0].action == "echo hi > out.txt; cat out.txt seed.txt\n"
    obs = steps[0].observation or ""
    assert obs.startswith("New terminal output:\n") and "echo hi > out.txt" in obs and "\nhi\nseed\n" in obs
    assert steps[1].action == "cd sub 2>/dev/null || mkdir sub && cd sub\npwd > ../where.txt\n"
    assert steps[2].action is None
    assert all(s.exec_latency_s is not None and s.prompt_tokens > 0 and s.completion_tokens > 0 for s in steps)
    assert result.usage.calls == 3 and result.usage.prompt_tokens == sum(s.prompt_tokens for s in steps)
    # what the model saw: the task and the first screen, each turn's output, then the confirmation question
    first = server.recent_requests[0]["messages"]
    assert first[0]["role"] == "system" and '"task_complete"' in first[0]["content"]
    assert first[1]["content"].startswith(TASK.prompt + "\n\nCurrent terminal screen:\n")
    assert server.recent_requests[1]["messages"][-1]["content"] == obs
    confirm = server.recent_requests[2]["messages"][-1]["content"]
    assert confirm.startswith(steps[1].observation or "") and "reply again with \"task_complete\": true" in confirm
    socket = result.artifacts["terminus"]["tmux_socket"]
    assert host_server_gone(socket)
    assert sorted(os.listdir(local_env.workdir)) == ["out.txt", "seed.txt", "sub", "where.txt"]  # no history file


async def test_a_confirmation_can_be_withdrawn(local_env: Environment, serve_script, run_ctx: RunContext,
                                               log: logging.Logger) -> None:
    client, _ = await serve_script([turn(done=True), turn(("touch more.txt\n", SETTLE)), turn(done=True),
                                    turn(done=True)])
    result = await agent().run(TASK, local_env, client, run_ctx, log)

    assert result.trajectory.stop_reason == "task_complete" and len(result.trajectory.steps) == 4
    assert await local_env.read_file("more.txt") == b""


async def test_key_names_interrupt_a_running_command(local_env: Environment, serve_script, run_ctx: RunContext,
                                                     log: logging.Logger) -> None:
    client, _ = await serve_script([turn(("sleep 300\n", SETTLE)), turn(("C-c", SETTLE),
                                                                        ("echo after > after.txt\n", SETTLE)),
                                    turn(done=True), turn(done=True)])
    result = await agent().run(TASK, local_env, client, run_ctx, log)

    assert result.trajectory.stop_reason == "task_complete"
    assert result.trajectory.steps[1].action == "<C-c>echo after > after.txt\n"
    assert await local_env.read_file("after.txt") == b"after\n"
    assert "^C" in (result.trajectory.steps[1].observation or "")


async def test_unusable_replies_get_the_parse_error_until_the_limit(local_env: Environment, serve_script,
                                                                    run_ctx: RunContext, log: logging.Logger) -> None:
    client, server = await serve_script(["I will just describe it.", '{"commands": "ls"}', "still prose"])
    result = await agent(parse_error_limit=3).run(TASK, local_env, client, run_ctx, log)

    assert result.trajectory.stop_reason == "format_error_limit" and result.error_kind == "format_error_limit"
    steps = result.trajectory.steps
    assert len(steps) == 3 and all(s.action is None for s in steps)
    assert "no JSON object found" in (steps[0].observation or "")
    assert '"commands" field is missing or is not a list' in (steps[1].observation or "")
    assert server.recent_requests[1]["messages"][-1]["content"] == steps[0].observation
    assert host_server_gone(result.artifacts["terminus"]["tmux_socket"])


async def test_a_parse_error_in_between_does_not_count_towards_the_limit(
        local_env: Environment, serve_script, run_ctx: RunContext, log: logging.Logger) -> None:
    client, _ = await serve_script(["prose", "prose", turn(("true\n", 0.1)), "prose", "prose", turn(done=True),
                                    turn(done=True)])
    result = await agent(parse_error_limit=3).run(TASK, local_env, client, run_ctx, log)

    assert result.trajectory.stop_reason == "task_complete" and len(result.trajectory.steps) == 7


async def test_step_limit_stops_an_agent_that_never_completes(local_env: Environment, serve_script,
                                                              run_ctx: RunContext, log: logging.Logger) -> None:
    client, server = await serve_script([turn(("echo again >> log.txt\n", SETTLE))])
    result = await agent(step_limit=3).run(TASK, local_env, client, run_ctx, log)

    assert result.trajectory.stop_reason == "step_limit" and result.error_kind == "step_limit"
    assert len(result.trajectory.steps) == 3 and server.completions_served == 3
    assert await local_env.read_file("log.txt") == b"again\nagain\nagain\n"
    assert host_server_gone(result.artifacts["terminus"]["tmux_socket"])


async def test_the_run_ends_when_the_shell_exits(local_env: Environment, serve_script, run_ctx: RunContext,
                                                 log: logging.Logger) -> None:
    client, server = await serve_script([turn(("exit\n", SETTLE)), turn(done=True)])
    result = await agent().run(TASK, local_env, client, run_ctx, log)

    assert result.trajectory.stop_reason == "session_ended" and server.completions_served == 1
    assert "terminal session ended" in (result.trajectory.steps[0].observation or "")


async def test_waits_are_capped_and_long_output_is_cut_in_the_middle(
        local_env: Environment, serve_script, run_ctx: RunContext, log: logging.Logger) -> None:
    client, _ = await serve_script([turn(("echo HEAD; seq 1 3000; echo TAIL\n", 500.0)), turn(done=True),
                                    turn(done=True)])
    # the cap is the whole wait: wide enough that the command has printed TAIL by then on a loaded machine
    result = await agent(max_duration_s=5.0, observation_limit=300).run(TASK, local_env, client, run_ctx, log)

    step = result.trajectory.steps[0]
    assert step.exec_latency_s is not None and step.exec_latency_s < 60  # not the 500 s asked for
    obs = step.observation or ""
    assert "HEAD" in obs and "TAIL" in obs and "characters omitted" in obs and len(obs) < 500


async def test_cancelling_the_run_mid_wait_kills_the_tmux_server(local_env: Environment, serve_script,
                                                                 run_ctx: RunContext, log: logging.Logger) -> None:
    client, _ = await serve_script([turn(("sleep 300\n", 60.0))])
    run = asyncio.create_task(agent().run(TASK, local_env, client, run_ctx, log))
    async with asyncio.timeout(30):
        while not run_ctx.trajectory.steps:  # noqa: ASYNC110 - the model answered: the wait of 60 s has begun
            await asyncio.sleep(0.05)
        # and the command runs in the terminal (what the cancel must end), rather than some time having passed
        while not [p for p in processes_of(local_env.workdir) if p.endswith(": sleep 300 ")]:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    # nothing started in the workspace is left: not the tmux server (named by its -c workdir), not its shell,
    # not the sleep (both working in the workdir); they were told to go, and exiting takes them a moment
    left = processes_of(local_env.workdir)
    for _ in range(100):
        if not left:
            break
        await asyncio.sleep(0.1)
        left = processes_of(local_env.workdir)
    assert left == []


async def test_cancelling_the_run_while_tmux_starts_kills_the_tmux_server(
        local_env: Environment, serve_script, run_ctx: RunContext, log: logging.Logger, tmp_path: Path) -> None:
    # a stand-in tmux: the real one, then a long pause once it has started the session (a slow sandbox)
    started = tmp_path / "started"
    wrapper = tmp_path / "tmux"
    wrapper.write_text(f'#!/bin/sh\n{shutil.which("tmux")} "$@"; rc=$?\n'
                       f'case "$*" in *new-session*) echo "$*" > {started}; sleep 300;; esac\nexit $rc\n')
    wrapper.chmod(0o755)
    client, _ = await serve_script([turn(done=True)])
    run = asyncio.create_task(agent(tmux_path=str(wrapper)).run(TASK, local_env, client, run_ctx, log))
    async with asyncio.timeout(30):
        while not started.exists():  # noqa: ASYNC110 - a file written by the stand-in, nothing to await
            await asyncio.sleep(0.05)
    args = started.read_text().split()
    socket = args[args.index("-L") + 1]
    assert host_server_alive(socket)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert host_server_gone(socket)


async def test_a_missing_tmux_is_a_config_error_naming_what_to_install(local_env: Environment,
                                                                       log: logging.Logger) -> None:
    with pytest.raises(ConfigError, match="apt-get install -y tmux") as info:
        await agent(tmux_path="no-such-tmux").setup(TASK, local_env, log)
    assert info.value.field == "harness.params.tmux_path" and "`no-such-tmux` is not installed" in str(info.value)
    assert "auto_install_dependencies=True" in str(info.value)


# ----------------------------------------------------------------------------- through the engine


def details_of(run_dir: Path | None) -> dict[str, TaskDetail]:
    assert run_dir is not None
    return {d.task_id: d for d in (msgspec.json.decode(p.read_bytes(), type=TaskDetail)
                                   for p in (run_dir / "details").glob("*.json"))}


def test_engine_solves_shell_tasks_through_tmux_locally_and_books_the_limits(tmp_path: Path) -> None:
    sample = ["files/hello_world", "files/rename_logs", "files/mkdir_tree", "files/config_edit"]
    out = agentcompass.run_evaluation(
        "shell_tasks", "terminus", "scripted", "local", harness_params={"step_limit": 4},
        model_params={"bundled": False, "script_file": [str(SCRIPTS / "terminus_shell_tasks.json"),
                                                        str(SCRIPTS / "terminus_limits.json")]},
        benchmark_params={"sample_ids": sample}, results_dir=str(tmp_path), progress="none")

    assert out.status == "completed" and out.counts.done == 4
    assert out.metrics["pass@1"] == pytest.approx(0.5)
    assert out.errors_by_kind == {"format_error_limit": 1, "step_limit": 1}
    details = details_of(out.run_dir)
    hello = details["files/hello_world"].attempts["1"]
    assert hello.correct is True and hello.trajectory is not None
    assert hello.trajectory.stop_reason == "task_complete" and len(hello.trajectory.steps) == 3
    assert hello.trajectory.steps[0].action == "printf 'Hello, World!\\n' > hello.txt\ncat hello.txt\n"
    assert "Hello, World!" in (hello.trajectory.steps[0].observation or "")
    assert details["files/rename_logs"].attempts["1"].correct is True
    for task_id, kind in (("files/mkdir_tree", "format_error_limit"), ("files/config_edit", "step_limit")):
        attempt = details[task_id].attempts["1"]
        assert attempt.status == "completed" and attempt.correct is False and attempt.error_kind == kind
    for d in details.values():
        assert host_server_gone(d.attempts["1"].artifacts["terminus"]["tmux_socket"])


def test_engine_books_a_missing_tmux_as_a_setup_error_naming_what_to_install(tmp_path: Path) -> None:
    out = agentcompass.run_evaluation(
        "shell_tasks", "terminus", "scripted", "local", harness_params={"tmux_path": "/nonexistent/tmux"},
        model_params={"bundled": False, "script_file": str(SCRIPTS / "terminus_shell_tasks.json")},
        benchmark_params={"sample_ids": ["files/hello_world"]}, results_dir=str(tmp_path), progress="none")

    assert out.errors_by_kind == {"setup_error": 1}
    attempt = details_of(out.run_dir)["files/hello_world"].attempts["1"]
    assert attempt.error is not None and "apt-get install -y tmux" in attempt.error


# ----------------------------------------------------------------------------- docker


@pytest.mark.timeout(1800)  # the first docker test may build the base image
@pytest.mark.parametrize("policy", ["none", "model"])
def test_engine_solves_a_shell_task_through_tmux_in_docker(tmp_path: Path, base_image: str,  # noqa: F811
                                                          docker_run_id: str, policy: str) -> None:  # noqa: F811
    script = str(SCRIPTS / "terminus_shell_tasks.json")
    server = None
    if policy == "model":  # needs a model over HTTP: the scripted server, behind the gateway with wrapped keys
        server, base_url = start_server_process("--script-file", script)
        model: dict[str, Any] = {"model_base_url": base_url, "wrap_api_key": True}
    else:
        model = {"model_params": {"bundled": False, "script_file": script}}
    try:
        out = agentcompass.run_evaluation(
            "shell_tasks", "terminus", "scripted", "docker", run_id=docker_run_id,
            environment_params={"image": base_image, "network_policy": policy},
            benchmark_params={"sample_ids": ["files/hello_world"]}, results_dir=str(tmp_path), progress="none",
            **model)
    finally:
        if server is not None:
            stop_process(server)

    assert out.status == "completed" and not out.errors_by_kind and out.metrics["pass@1"] == 1.0
    hello = details_of(out.run_dir)["files/hello_world"].attempts["1"]
    assert hello.trajectory is not None and hello.trajectory.stop_reason == "task_complete"
    assert "Hello, World!" in (hello.trajectory.steps[0].observation or "")
    # the container is gone with the run (docker_run_id's teardown fails the test on a leak)


@pytest.mark.timeout(600)
async def test_auto_install_in_an_image_without_tmux_or_a_package_manager_says_so(
        busybox_image: str, docker_run_id: str, log: logging.Logger) -> None:  # noqa: F811
    from agentcompass.environments.docker.provider import DockerProvider

    provider = DockerProvider({"image": busybox_image}, ComponentContext(run_id=docker_run_id))
    try:
        env = await provider.open(EnvOpenSpec(run_id=docker_run_id, task_id="t1"))
        try:
            with pytest.raises(ConfigError, match="auto_install_dependencies=True"):
                await agent().setup(TASK, env, log)
            auto = Terminus({}, ComponentContext(auto_install_dependencies=True))
            with pytest.raises(ConfigError, match=r"installing it failed \(exit 127\):\nno package manager"):
                await auto.setup(TASK, env, log)
        finally:
            await env.close()
    finally:
        await provider.aclose()


@pytest.mark.timeout(600)
async def test_in_docker_the_tmux_server_is_gone_before_the_environment_closes(
        docker_provider: Any, docker_run_id: str, serve_script, run_ctx: RunContext,  # noqa: F811
        log: logging.Logger) -> None:
    spec = EnvOpenSpec(run_id=docker_run_id, task_id="t1", network=NetworkPolicy(mode="none"))
    env = await docker_provider.open(spec)
    try:
        client, _ = await serve_script([turn(("sleep 300 &\n", SETTLE), ("echo hi > hi.txt\n", SETTLE)),
                                        turn(done=True), turn(done=True)])
        result = await agent().run(TASK, env, client, run_ctx, log)
        assert result.trajectory.stop_reason == "task_complete"
        assert await env.read_file("hi.txt") == b"hi\n"
        # the server, its shell and the shell's background job are gone while the container is still there
        assert await env_server_gone(env, result.artifacts["terminus"]["tmux_socket"])
    finally:
        await env.close()
