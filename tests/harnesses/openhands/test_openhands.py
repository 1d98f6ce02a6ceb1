"""openhands: the real OpenHands SDK agent in its own venv (installed from PyPI on first use, cached under
``~/.cache/agentcompass/agents`` for every later test and CI step), talking to the scripted model server over
real HTTP, its tool calls run in a real local environment; plus one shell_tasks run through the engine."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

import msgspec
import pytest

import agentcompass
from agentcompass._errors import ConfigError, ModelError
from agentcompass.harnesses.openhands import venv
from agentcompass.harnesses.openhands.harness import _LINE_LIMIT, BRIDGE, OpenHands, _stop
from agentcompass.interfaces import ComponentContext, Environment, PreparedTask, RunContext
from agentcompass.records import TaskDetail
from agentcompass.registry import Registries
from agentcompass.specs import ComponentSpec, ModelSpec, OrchestrationSpec, RunRequestSpec
from tests.fixtures_scripted import running_scripted_server

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"
TASK = PreparedTask(task_id="t1", prompt="Task: demo\nFix greeting.txt.")
# the first test to run installs OpenHands (about a minute, more on a busy machine); importing it takes ~10 s of CPU
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def bridges() -> list[int]:
    """Our bridge processes still alive (children of this test process)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            ppid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if str(BRIDGE).encode() in cmdline and ppid == os.getpid():
            found.append(int(pid))
    return found


def climbing(path: str | Path) -> str:
    """``path`` written as a model trying to leave a folder would: ``/../../..`` in front."""
    return "/.." * 20 + str(path)


async def run_direct(env: Environment, turns: list[Any], server_options: dict[str, Any] | None = None,
                     component_ctx: ComponentContext | None = None, **params: Any) -> tuple[Any, RunContext]:
    """The harness on ``env`` against a scripted server, its endpoint handed over as the engine would."""
    harness = OpenHands({"max_iterations": 10, **params},
                        component_ctx or ComponentContext(auto_install_dependencies=True))
    await harness.setup(TASK, env, logging.getLogger("test"))
    async with running_scripted_server({"bundled": False, "script": [{"match": "", "turns": turns}]},
                                       **(server_options or {})) as server:
        assert server.base_url is not None
        ctx = RunContext(request="r", run_id="x", task_id="t1", attempt=1, model_env={
            "OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "route-token", "AGENTCOMPASS_MODEL": "scripted",
            "AGENTCOMPASS_MODEL_API_PROTOCOL": "openai-chat"})
        result = await harness.run(TASK, env, None, ctx, logging.getLogger("test"))  # type: ignore[arg-type]
        return result, ctx


async def test_file_editor_edits_files_in_the_environment_and_its_messages_name_the_real_paths(
        local_env: Environment) -> None:
    path = f"{local_env.workdir}/greeting.txt"
    turns = [
        call("file_editor", command="create", path=path, file_text="hello wrld\nbye\n"),
        call("file_editor", command="str_replace", path=path, old_str="wrld", new_str="world"),
        call("file_editor", command="view", path=local_env.workdir),
        call("file_editor", command="str_replace", path=path, old_str="absent", new_str="x"),
        call("terminal", command="cat greeting.txt; echo oops >&2; false"),
        call("finish", message="greeting fixed"),
    ]
    result, ctx = await run_direct(local_env, turns)

    assert (await local_env.read_file(path)).decode() == "hello world\nbye\n"
    assert result.error_kind is None and result.final_answer == "greeting fixed"
    steps = result.trajectory.steps
    assert [s.tool_calls[0].name for s in steps] == ["file_editor"] * 4 + ["terminal", "finish"]
    assert ctx.trajectory is result.trajectory and result.trajectory.stop_reason == "finished"
    create, replace, view, miss, term, _ = (s.observation or "" for s in steps)
    assert f"File created successfully at: {path}" in create
    assert f"The file {path} has been edited" in replace and "hello world" in replace
    assert "greeting.txt" in view and "seed.txt" in view
    assert "did not appear verbatim" in miss and steps[3].exit_code == 1
    assert "agentcompass-openhands-" not in "".join((create, replace, view, miss))  # no host shadow paths
    assert "hello world\nbye\noops" in term and "exit code 1" in term and steps[4].exit_code == 1
    assert steps[4].action == "cat greeting.txt; echo oops >&2; false"
    assert result.artifacts["openhands"]["exit_code"] == 0  # it exited by itself after saying it was done
    assert bridges() == []


async def test_file_editor_paths_that_climb_out_never_reach_the_hosts_files(local_env: Environment,
                                                                          tmp_path: Path) -> None:
    # the host copies the editor works on live in a temporary folder; `/../..` must not lead out of it
    precious = tmp_path / "precious.txt"
    precious.write_text("precious\n")
    planted = tmp_path / "planted.txt"
    inside = f"{local_env.workdir}/inside.txt"
    turns = [
        call("file_editor", command="create", path=climbing(planted), file_text="pwned\n"),
        call("file_editor", command="view", path=climbing(precious)),
        call("file_editor", command="create", path=climbing(inside), file_text="ok\n"),
        call("file_editor", command="view", path=climbing(inside)),
        call("finish", message="done"),
    ]
    result, _ = await run_direct(local_env, turns)

    assert not planted.exists() and precious.read_text() == "precious\n"
    assert (await local_env.read_file(inside)).decode() == "ok\n"  # in the environment, /../x is /x
    create_out, view_out, create_in, view_in, _ = result.trajectory.steps
    # the local environment refuses paths outside its workspace; the agent is told so
    assert create_out.exit_code == 1 and "outside the workspace" in (create_out.observation or "")
    assert view_out.exit_code == 1 and "outside the workspace" in (view_out.observation or "")
    assert f"File created successfully at: {inside}" in (create_in.observation or "")
    assert "ok" in (view_in.observation or "") and result.error_kind is None
    assert bridges() == []


async def test_the_agents_command_timeout_is_clamped_to_the_cap(local_env: Environment) -> None:
    turns = [call("terminal", command="sleep 600", timeout=100000),
             call("terminal", command="sleep 5; echo late", timeout=0.001),
             call("finish", message="done")]
    result, _ = await run_direct(local_env, turns, command_timeout=2)

    long, short, _ = result.trajectory.steps
    assert "[The command was killed after 2 seconds.]" in (long.observation or "")
    assert long.exec_latency_s is not None and long.exec_latency_s < 60
    assert "[The command was killed after 1 seconds.]" in (short.observation or "")  # the floor is 1 s
    assert "late" not in (short.observation or "") and result.error_kind is None


@pytest.mark.slow
async def test_timeout_kills_the_bridge_and_keeps_the_steps(local_env: Environment) -> None:
    turns = [call("terminal", command="echo started > started.txt"), call("terminal", command="sleep 300")]
    # room for a slow start: the bridge imports the SDK first (over 60 s on a loaded 2-core machine once)
    result, _ = await run_direct(local_env, turns, timeout=150, command_timeout=600)  # the sleep outlasts the run

    assert result.error_kind == "agent_timeout" and result.trajectory.stop_reason == "agent_timeout"
    assert (await local_env.read_file(f"{local_env.workdir}/started.txt")).decode() == "started\n"
    assert [s.action for s in result.trajectory.steps] == ["echo started > started.txt", "sleep 300"]
    assert bridges() == []


async def test_max_iterations_stops_an_agent_that_never_finishes(local_env: Environment) -> None:
    result, _ = await run_direct(local_env, [call("terminal", command="echo again >> log.txt")], max_iterations=3)

    assert result.error_kind == "step_limit" and result.trajectory.stop_reason == "max_iterations"
    assert (await local_env.read_file(f"{local_env.workdir}/log.txt")).decode().count("again") == 3


async def test_a_failing_model_call_raises_the_model_error_the_engine_classifies(local_env: Environment) -> None:
    with pytest.raises(ModelError) as err:
        await run_direct(local_env, ["hello"], server_options={"fail_status": 503})
    assert err.value.kind == "model_server_error" and err.value.status == 503
    assert bridges() == []


async def test_an_agent_that_cannot_start_is_an_agent_error_with_its_stderr_kept(local_env: Environment) -> None:
    result, _ = await run_direct(local_env, ["hello"], llm_params={"temperature": "hot"})

    assert result.error_kind == "agent_error" and "temperature" in (result.error or "")
    assert "Traceback" in result.artifacts["openhands"]["stderr_tail"]
    assert bridges() == []


async def test_engine_runs_a_shell_tasks_task_with_openhands_through_the_gateway(tmp_path: Path) -> None:
    script = str(SCRIPTS / "openhands_shell_tasks.json")
    async with running_scripted_server({"bundled": False, "script_file": script}) as server:
        spec = OrchestrationSpec(requests=[RunRequestSpec(
            benchmark=ComponentSpec("shell_tasks", {"sample_ids": ["files/hello_world"]}),
            harness=ComponentSpec("openhands", {"max_iterations": 10}),
            model=ModelSpec("scripted", base_url=server.base_url), auto_install_dependencies=True,
            name="oh", results_dir=str(tmp_path))], progress="none")
        outcome = (await agentcompass.async_launch(spec))["oh"]
        requests = list(server.recent_requests)

    assert outcome.status == "completed" and outcome.metrics["pass@1"] == 1.0
    assert outcome.run_dir is not None
    detail = msgspec.json.decode(next((outcome.run_dir / "details").glob("*.json")).read_bytes(), type=TaskDetail)
    attempt = detail.attempts["1"]
    assert attempt.correct is True and attempt.error_kind is None
    assert attempt.final_answer == "hello.txt holds Hello, World!"
    assert attempt.trajectory is not None and attempt.trajectory.stop_reason == "finished"
    steps = attempt.trajectory.steps
    assert [s.tool_calls[0].name for s in steps] == ["terminal", "terminal", "terminal", "finish"]
    assert steps[0].content == "I will look at the workspace first."
    assert steps[0].observation is not None and steps[0].observation.split("\n")[0].endswith("/sub")
    assert steps[1].observation is not None and steps[1].observation.startswith("Hello, World!\n")
    assert steps[2].observation is not None and steps[2].observation.startswith("hello.txt\n")
    # every model call went through the gateway (a route token, not the model's key) and was counted there
    assert attempt.meta["gateway"]["calls"] == 4 and attempt.meta["usage"]["calls"] == 4
    # each response's tokens (as OpenHands counted them) on its step; the try's usage is the gateway's count
    usage = attempt.meta["usage"]
    assert usage["prompt_tokens"] > 0 and all(s.prompt_tokens > 0 and s.completion_tokens > 0 for s in steps)
    assert sum(s.prompt_tokens for s in steps) == usage["prompt_tokens"]
    assert sum(s.completion_tokens for s in steps) == usage["completion_tokens"]
    assert {t["function"]["name"] for t in requests[0]["tools"]} >= {"terminal", "file_editor", "finish"}
    settings = json.loads((outcome.run_dir / "params.json").read_text())["component_settings"]["harness"]
    assert settings["package"] == {"name": "openhands-sdk", "version": venv.DEFAULT_VERSION}
    assert bridges() == []


@pytest.mark.slow
async def test_the_engines_agent_timeout_keeps_the_steps_and_kills_the_bridge(tmp_path: Path) -> None:
    turns = [call("terminal", command="echo started > started.txt"), call("terminal", command="sleep 300")]
    async with running_scripted_server({"bundled": False, "script": [{"match": "", "turns": turns}]}) as server:
        spec = OrchestrationSpec(requests=[RunRequestSpec(
            benchmark=ComponentSpec("shell_tasks", {"sample_ids": ["files/hello_world"]}),
            harness=ComponentSpec("openhands", {"max_iterations": 10, "agent_timeout": 150,  # a slow start too
                                                  "command_timeout": 600}),  # the sleep outlasts the run
            model=ModelSpec("scripted", base_url=server.base_url), auto_install_dependencies=True,
            name="oh", results_dir=str(tmp_path))], progress="none")
        outcome = (await agentcompass.async_launch(spec))["oh"]

    assert outcome.run_dir is not None
    detail = msgspec.json.decode(next((outcome.run_dir / "details").glob("*.json")).read_bytes(), type=TaskDetail)
    attempt = detail.attempts["1"]
    assert attempt.error_kind == "agent_timeout" and attempt.trajectory is not None
    assert attempt.trajectory.stop_reason == "agent_timeout"
    assert [s.action for s in attempt.trajectory.steps] == ["echo started > started.txt", "sleep 300"]
    assert bridges() == []


def stand_in_bridge(data_dir: Path, body: str) -> ComponentContext:
    """A cached "venv" in ``data_dir`` whose Python is a stand-in bridge running ``body`` (after reading the
    config line) instead of OpenHands: it speaks the protocol as badly as a broken bridge would."""
    _, py_version = venv.find_python(None)
    root = venv.venv_dir(str(data_dir), venv.DEFAULT_VERSION, py_version)
    python = venv.venv_python(root)
    python.parent.mkdir(parents=True)
    python.write_text(f"#!{sys.executable}\nimport json, os, sys, time\nconfig = sys.stdin.readline()\n"
                      f"def say(line):\n    sys.stdout.write(line + '\\n')\n    sys.stdout.flush()\n"
                      f"{textwrap.dedent(body)}")
    python.chmod(0o755)
    (root / ".agentcompass-complete").write_text("stand-in\n")
    assert venv.is_ready(root)
    return ComponentContext(data_dir=str(data_dir))


ACTION = json.dumps({"op": "event", "event": {"kind": "action", "tool": "terminal", "tool_call_id": "c1",
                                               "command": "echo hi", "thought": ["not", "text"],
                                               "tokens": {"prompt_tokens": "many"}}})


@pytest.mark.parametrize(("body", "fault"), [
    (f"""
     say({ACTION!r})
     for junk in ("not json", "[1, 2]", "42", '{{"op": 7}}', '{{"op": "event", "event": "x"}}'):
         say(junk)
     say(json.dumps({{"op": "exec", "id": 1, "command": "echo hi > hi.txt", "timeout": "soon"}}))
     reply = json.loads(sys.stdin.readline())
     print("stand-in: the exec answered", reply["exit_code"], file=sys.stderr)
     sys.exit(3)
     """, "it printed 5 non-protocol line(s)"),
    (f"""
     say({ACTION!r})
     print("stand-in: a long line next", file=sys.stderr, flush=True)
     say("x" * {_LINE_LIMIT + 16})
     time.sleep(300)
     """, f"it printed a line over {_LINE_LIMIT} bytes"),
    (f"""
     say({ACTION!r})
     say(json.dumps({{"op": "exec", "id": 1, "command": "sleep 1; echo hi > hi.txt", "timeout": 30}}))
     print("stand-in: leaving mid-request", file=sys.stderr, flush=True)
     os.close(0)
     time.sleep(0.5)
     sys.exit(3)
     """, ""),
], ids=["garbage", "over-long-line", "dies-mid-request"])
async def test_a_bridge_that_breaks_the_protocol_ends_as_an_agent_error(
        local_env: Environment, tmp_path: Path, body: str, fault: str) -> None:
    result, _ = await run_direct(local_env, ["hello"], component_ctx=stand_in_bridge(tmp_path, body))

    assert result.error_kind == "agent_error" and "without finishing" in (result.error or "")
    assert fault in (result.error or "")
    assert "stand-in: " in result.artifacts["openhands"]["stderr_tail"]
    [step] = result.trajectory.steps  # what it did send is kept, its bad fields dropped
    assert step.action == "echo hi" and step.content is None and step.prompt_tokens == 0
    assert bridges() == []


async def test_a_cancel_during_the_exit_grace_still_kills_the_bridge() -> None:
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", "import time; time.sleep(300)",
                                                stdin=asyncio.subprocess.PIPE, start_new_session=True)
    stopping = asyncio.create_task(_stop(proc, grace_s=120))
    await asyncio.sleep(0)  # its first step closes stdin and starts the grace wait: one loop turn, not some time
    assert proc.stdin is not None and proc.stdin.is_closing() and not stopping.done()
    stopping.cancel()
    with pytest.raises(asyncio.CancelledError):
        await stopping
    assert await asyncio.wait_for(proc.wait(), 30) == -9


async def test_an_in_process_model_has_no_endpoint_for_the_agent(local_env: Environment) -> None:
    harness = OpenHands({}, ComponentContext(auto_install_dependencies=True))
    ctx = RunContext(request="r", run_id="x", task_id="t1", attempt=1)
    with pytest.raises(ConfigError, match="model_base_url"):
        await harness.run(TASK, local_env, None, ctx, logging.getLogger("test"))  # type: ignore[arg-type]


def test_without_auto_install_a_missing_venv_names_the_commands(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        OpenHands({}, ComponentContext(data_dir=str(tmp_path)))
    message = str(err.value)
    assert "auto_install_dependencies=True" in message and err.value.field == "auto_install_dependencies"
    assert f"openhands-sdk=={venv.DEFAULT_VERSION}" in message and "--no-deps" in message
    assert str(tmp_path / "agents" / "openhands-") in message


def test_a_python_older_than_3_12_is_refused() -> None:
    with pytest.raises(ConfigError, match="not a Python >= 3.12") as err:
        OpenHands({"python": "/usr/bin/true"}, ComponentContext())
    assert err.value.field == "harness.params.python"


def test_registry_name_resolves_to_the_harness() -> None:
    cls = Registries(use_entry_points=False)["harness"].resolve("openhands")
    assert cls is OpenHands and cls.needs_environment and cls.needs_model_endpoint
