"""openhands: the real OpenHands SDK agent in its own venv (installed from PyPI on first use, cached under
``~/.cache/agentcompass/agents`` for every later test and CI step), talking to the scripted model server over
real HTTP, its tool calls run in a real local environment; plus one shell_tasks run through the engine."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import msgspec
import pytest

import agentcompass
from agentcompass._errors import ConfigError, ModelError
from agentcompass.harnesses import _openhands_venv as venv
from agentcompass.harnesses.openhands import BRIDGE, OpenHands
from agentcompass.interfaces import ComponentContext, Environment, PreparedTask, RunContext
from agentcompass.records import TaskDetail
from agentcompass.registry import Registries
from agentcompass.specs import ComponentSpec, ModelSpec, OrchestrationSpec, RunRequestSpec
from tests.fixtures_scripted import running_scripted_server

SCRIPTS = Path(__file__).resolve().parent / "scripts"
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


async def run_direct(env: Environment, turns: list[Any], server_options: dict[str, Any] | None = None,
                     **params: Any) -> tuple[Any, RunContext]:
    """The harness on ``env`` against a scripted server, its endpoint handed over as the engine would."""
    harness = OpenHands({"max_iterations": 10, **params}, ComponentContext(auto_install_dependencies=True))
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


async def test_timeout_kills_the_bridge_and_keeps_the_steps(local_env: Environment) -> None:
    turns = [call("terminal", command="echo started > started.txt"), call("terminal", command="sleep 300")]
    result, _ = await run_direct(local_env, turns, timeout=60)  # room for a slow start

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
    assert {t["function"]["name"] for t in requests[0]["tools"]} >= {"terminal", "file_editor", "finish"}
    settings = json.loads((outcome.run_dir / "params.json").read_text())["component_settings"]["harness"]
    assert settings["package"] == {"name": "openhands-sdk", "version": venv.DEFAULT_VERSION}
    assert bridges() == []


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
