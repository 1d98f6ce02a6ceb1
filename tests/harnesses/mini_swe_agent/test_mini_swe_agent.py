"""mini_swe_agent: the real mini-swe-agent package on a real local environment, with the scripted model
(in-process and over real HTTP), plus one run through the engine."""

from __future__ import annotations

import asyncio
import copy
import hashlib
import importlib.metadata
import json
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml

import agentcompass
from agentcompass._errors import ConfigError, EnvironmentError_, ModelError
from agentcompass.dependencies import Requirement
from agentcompass.harnesses.mini_swe_agent.harness import MiniSweAgent, looks_like_diff
from agentcompass.interfaces import ComponentContext, Environment, ModelResponse, PreparedTask, RunContext
from agentcompass.models.pricing import PriceTable
from agentcompass.models.scripted.model import ScriptedClient
from agentcompass.records import TaskDetail, ToolCall, Usage
from agentcompass.registry import Registries
from agentcompass.specs import ComponentSpec, ModelSpec, OrchestrationSpec, RunRequestSpec

REPO = Path(__file__).resolve().parents[3]
TASK = PreparedTask(task_id="t1", prompt="Task: demo\nWrite the answer into answer.txt.")
SUBMIT_MARKER = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
PIP_COMMAND = "pip install 'agentcompass[mini-swe-agent]'"


def cmd(command: str) -> str:
    """A reply in mini-swe-agent's text format: a THOUGHT and one mswea_bash_command block."""
    return f"THOUGHT: next step.\n\n```mswea_bash_command\n{command}\n```"


def submit(then: str = "") -> str:
    return cmd(f"echo {SUBMIT_MARKER}" + (f" && {then}" if then else ""))


def harness(**params: Any) -> MiniSweAgent:
    return MiniSweAgent(dict(params), ComponentContext())


def scripted(turns: list[str], **params: Any) -> ScriptedClient:
    return ScriptedClient({"bundled": False, "script": [{"match": "", "turns": turns}], **params})


def mini_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("mini-swe-agent:") and t.is_alive()]


def processes_with(marker: str, settle_s: float = 30.0) -> list[int]:
    """Live processes whose command line holds ``marker`` (Linux /proc). A SIGKILLed process can stay visible
    for a moment on a loaded machine, so it waits up to ``settle_s`` for the list to empty."""
    deadline = time.monotonic() + settle_s
    while (found := _scan_cmdlines(marker)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return found


def _scan_cmdlines(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmdline and state != "Z" and int(entry.name) != os.getpid():
            found.append(int(entry.name))
    return found


async def wait_until(check: Callable[[], Any], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.02)


class ToolCallingModel:
    """A model endpoint that answers with ``bash`` tool calls (the scripted model only writes text)."""

    model_id = "tool-caller"

    def __init__(self, turns: list[list[str]]) -> None:
        self.turns = turns
        self.requests: list[dict[str, Any]] = []

    async def complete(self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None = None,
                       **params: Any) -> ModelResponse:
        self.requests.append({"messages": copy.deepcopy(messages), "tools": tools})
        i = min(sum(m["role"] == "assistant" for m in messages), len(self.turns) - 1)
        calls = [ToolCall(id=f"call_{i}_{j}", name="bash", arguments=json.dumps({"command": c}))
                 for j, c in enumerate(self.turns[i])]
        return ModelResponse(content=f"turn {i}", tool_calls=calls, finish_reason="tool_calls",
                             usage=Usage(prompt_tokens=10, completion_tokens=5, total_tokens=15, calls=1))

    async def aclose(self) -> None:
        """Nothing to release."""


# ----------------------------------------------------------------------------- the agent loop


async def test_creates_a_file_then_submits_and_records_each_step(local_env: Environment, run_ctx: RunContext,
                                                                 log: logging.Logger) -> None:
    client = scripted([cmd("echo 42 > answer.txt && ls"), cmd("cat answer.txt seed.txt; exit 3"),
                       submit("cat answer.txt")])
    t0 = time.time()
    result = await harness().run(TASK, local_env, client, run_ctx, log)

    assert result.error is None and result.error_kind is None
    assert result.final_answer == "42\n"
    assert result.patch is None
    assert await local_env.read_file("answer.txt") == b"42\n"
    traj = result.trajectory
    assert traj.stop_reason == "Submitted"
    assert t0 <= (traj.started_at or 0) <= (traj.finished_at or 0)
    steps = traj.steps
    assert [s.index for s in steps] == [0, 1, 2]
    assert steps[0].action == "echo 42 > answer.txt && ls"
    assert steps[0].exit_code == 0
    assert steps[0].observation == "<returncode>0</returncode>\n<output>\nanswer.txt\nseed.txt\n</output>"
    assert steps[1].exit_code == 3
    assert steps[1].observation == "<returncode>3</returncode>\n<output>\n42\nseed\n</output>"
    # the submitting command ran, but its output went to the submission, not back to the model
    assert steps[2].action == f"echo {SUBMIT_MARKER} && cat answer.txt"
    assert steps[2].exit_code == 0 and steps[2].observation is None
    assert all(s.content and "mswea_bash_command" in s.content for s in steps)
    assert all(s.prompt_tokens > 0 and s.completion_tokens > 0 for s in steps)
    assert all(s.model_latency_s is not None and s.exec_latency_s is not None for s in steps)
    assert result.usage.calls == 3 == client.calls
    assert result.usage.prompt_tokens == sum(s.prompt_tokens for s in steps)
    assert result.usage.completion_tokens == sum(s.completion_tokens for s in steps)
    assert result.artifacts["mini_swe_agent"]["config"] == "mini_textbased"
    assert result.artifacts["mini_swe_agent"]["mode"] == "text"
    assert not mini_threads()


async def test_over_http_the_model_gets_its_templates_and_our_observations(
        local_env: Environment, serve_script, run_ctx: RunContext, log: logging.Logger) -> None:
    client, server = await serve_script([cmd("echo out; echo err >&2"), submit()])
    agent = harness(model_params={"temperature": 0.25})
    result = await agent.run(TASK, local_env, client, run_ctx, log)

    assert result.trajectory.stop_reason == "Submitted" and result.final_answer == ""
    first, second = server.recent_requests[0], server.recent_requests[1]
    assert first["temperature"] == 0.25
    system, user = first["messages"]
    assert system["role"] == "system" and system["content"] == agent.agent_kwargs["system_template"].rstrip("\n")
    assert user["role"] == "user" and user["content"].startswith(f"Please solve this issue: {TASK.prompt}")
    # {{system}} {{machine}} come from uname inside the environment
    assert f"{os.uname().sysname} {os.uname().release}" in user["content"]
    # the reply went back as the assistant turn, then the observation (stderr merged into the output)
    assert [m["role"] for m in second["messages"]] == ["system", "user", "assistant", "user"]
    assert second["messages"][2]["content"] == result.trajectory.steps[0].content
    assert second["messages"][3]["content"] == result.trajectory.steps[0].observation
    assert "out\nerr\n" in second["messages"][3]["content"]
    assert all(set(m) <= {"role", "content"} for m in second["messages"])  # no mini-swe-agent "extra"


async def test_step_limit_stops_an_agent_that_never_submits(local_env: Environment, serve_script,
                                                           run_ctx: RunContext, log: logging.Logger) -> None:
    client, server = await serve_script([cmd("echo again >> log.txt")])
    result = await harness(step_limit=3).run(TASK, local_env, client, run_ctx, log)

    assert result.trajectory.stop_reason == "LimitsExceeded"
    assert result.error_kind == "step_limit" and "step_limit of 3" in (result.error or "")
    assert result.final_answer is None
    assert len(result.trajectory.steps) == 3
    assert server.completions_served == 3
    assert await local_env.read_file("log.txt") == b"again\nagain\nagain\n"


async def test_cost_limit_stops_the_agent_at_the_cost_priced_from_the_models_price_table(
        local_env: Environment, run_ctx: RunContext, log: logging.Logger) -> None:
    price = PriceTable(input=500.0, output=1000.0)  # per million tokens: a step here costs about $0.5
    agent = MiniSweAgent({"cost_limit": 1.2}, ComponentContext(price=price))
    result = await agent.run(TASK, local_env, scripted([cmd("echo more >> log.txt")]), run_ctx, log)

    steps = result.trajectory.steps
    costs = [price.cost(Usage(prompt_tokens=s.prompt_tokens, completion_tokens=s.completion_tokens)) for s in steps]
    assert result.error_kind == "cost_limit" and "cost_limit of $1.2" in (result.error or "")
    assert len(steps) >= 2 and sum(costs[:-1]) < 1.2 <= sum(costs)  # it stopped at the first call past the limit
    assert result.usage.cost == pytest.approx(sum(costs))
    assert result.artifacts["mini_swe_agent"]["cost"] == pytest.approx(sum(costs))
    assert agent.resolved_settings()["cost_limit"] == 1.2 and agent.resolved_settings()["cost_limit_note"] is None


async def test_without_a_price_the_cost_is_not_counted_and_the_configs_cost_limit_is_off(
        local_env: Environment, run_ctx: RunContext, log: logging.Logger, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="agentcompass.harnesses.mini_swe_agent.harness")
    agent = harness(step_limit=4)  # mini_textbased asks for a $3 cost limit
    assert agent.cost_limit == 0.0 and agent.agent_kwargs["cost_limit"] == 0.0
    note = agent.resolved_settings()["cost_limit_note"]
    assert "cost_limit of 3 is off" in note and "price_per_million" in note
    warned = [r.getMessage() for r in caplog.records if r.name == "agentcompass.harnesses.mini_swe_agent.harness"]
    assert warned == [f"mini_swe_agent: {note}"]  # once, when the request makes its harness

    result = await agent.run(TASK, local_env, scripted([cmd("echo more >> log.txt")]), run_ctx, log)
    assert result.error_kind == "step_limit" and len(result.trajectory.steps) == 4
    assert result.usage.cost == 0.0 and result.artifacts["mini_swe_agent"]["cost"] == 0.0
    # a limit asked for explicitly that could never fire is refused, naming the param and the price param
    with pytest.raises(ConfigError) as exc:
        harness(cost_limit=2.5)
    assert exc.value.field == "harness.params.cost_limit" and "model_params.price_per_million" in str(exc.value)
    assert harness(cost_limit=0).cost_limit == 0.0


async def test_replies_without_one_action_stop_after_repeated_format_errors(
        local_env: Environment, run_ctx: RunContext, log: logging.Logger) -> None:
    client = scripted(["I think the answer is obvious."])
    result = await harness().run(TASK, local_env, client, run_ctx, log)

    assert result.trajectory.stop_reason == "RepeatedFormatError"
    assert result.error_kind == "format_error_limit"
    steps = result.trajectory.steps
    assert len(steps) == 3
    assert all(s.action is None and "Expected exactly 1 action, found 0" in (s.observation or "") for s in steps)


async def test_command_timeout_kills_a_sleep_and_the_observation_says_so(
        local_env: Environment, serve_script, run_ctx: RunContext, log: logging.Logger) -> None:
    client, server = await serve_script([cmd("echo started; sleep 31.4159"), submit("echo gave up")])
    t0 = time.monotonic()
    # wide: the shell prints "started" before the timeout on a loaded machine
    result = await harness(command_timeout=3).run(TASK, local_env, client, run_ctx, log)

    assert time.monotonic() - t0 < 25  # hang guard: the command would sleep 31 s
    step = result.trajectory.steps[0]
    assert step.exit_code == -1
    obs = step.observation or ""
    assert "timed out after 3 seconds" in obs and "<exception>" in obs
    assert "started" in obs
    assert server.recent_requests[1]["messages"][-1]["content"] == obs
    assert result.trajectory.stop_reason == "Submitted" and result.final_answer == "gave up\n"
    assert result.error_kind == "command_timeout"  # recorded, still graded
    assert processes_with("31.4159") == []


async def test_cancelling_a_run_mid_command_leaves_no_thread_or_process(
        local_env: Environment, run_ctx: RunContext, log: logging.Logger) -> None:
    client = scripted([cmd("sleep 47.3113"), submit()])
    task = asyncio.create_task(harness(command_timeout=120).run(TASK, local_env, client, run_ctx, log))
    await wait_until(lambda: processes_with("47.3113", settle_s=0))
    assert len(mini_threads()) == 1
    t0 = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert time.monotonic() - t0 < 30  # hang guard: the command would sleep 47 s
    assert mini_threads() == []
    assert processes_with("47.3113") == []
    assert client.calls == 1  # the agent made no call after it was stopped


async def test_cancelling_a_run_waiting_for_the_model_stops_the_thread(
        local_env: Environment, run_ctx: RunContext, log: logging.Logger) -> None:
    client = scripted([submit()], latency_s=60)
    task = asyncio.create_task(harness().run(TASK, local_env, client, run_ctx, log))
    await wait_until(mini_threads)
    await asyncio.sleep(0.2)
    t0 = time.monotonic()
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(task, 0.1)  # as the engine's agent_timeout does
    assert time.monotonic() - t0 < 45  # hang guard: the model would answer after 60 s
    assert mini_threads() == []


async def test_timeout_param_stops_the_agent_and_keeps_its_steps(local_env: Environment, run_ctx: RunContext,
                                                                 log: logging.Logger) -> None:
    client = scripted([cmd("echo one"), cmd("sleep 52.7182"), submit()])
    t0 = time.monotonic()
    # wide: two model turns and "echo one" run and the sleep starts before the timeout on a loaded machine
    result = await harness(timeout=5, command_timeout=120).run(TASK, local_env, client, run_ctx, log)

    assert 5 <= time.monotonic() - t0 < 45  # never early; hang guard: the command would sleep 52 s
    assert result.error_kind == "agent_timeout" and "5s timeout" in (result.error or "")
    assert result.trajectory.stop_reason == "TimeExceeded"
    steps = result.trajectory.steps
    assert [s.action for s in steps] == ["echo one", "sleep 52.7182"]
    assert steps[0].exit_code == 0 and steps[1].exit_code is None
    assert result.final_answer is None
    assert mini_threads() == []
    assert processes_with("52.7182") == []


async def test_config_file_sets_templates_env_interpreter_and_a_diff_submission_is_the_patch(
        local_env: Environment, serve_script, run_ctx: RunContext, log: logging.Logger, tmp_path: Path) -> None:
    config = tmp_path / "mine.yaml"
    config.write_text(
        "agent:\n"
        "  system_template: 'Edit code. Reply with one mswea_bash_command block.'\n"
        "  instance_template: 'Fix: {{task}}'\n"
        "  step_limit: 7\n"
        "environment:\n"
        "  timeout: 9\n"
        "  interpreter: ['bash', '-c']\n"
        "  env: {GREETING: hello}\n"
        "model:\n"
        "  observation_template: 'rc={{output.returncode}} out={{output.output}}'\n")
    git = "git -c user.email=a@example.com -c user.name=a"
    client, server = await serve_script([
        cmd(f"git init -q && git add -A && {git} commit -qm init && echo \"$GREETING\" >> seed.txt && echo $0"),
        submit("git diff")])
    agent = harness(config=str(config))
    assert (agent.mode, agent.step_limit, agent.command_timeout) == ("text", 7, 9.0)
    result = await agent.run(TASK, local_env, client, run_ctx, log)

    assert server.recent_requests[0]["messages"][0]["content"] == "Edit code. Reply with one mswea_bash_command block."
    assert server.recent_requests[0]["messages"][1]["content"] == f"Fix: {TASK.prompt}"
    assert result.trajectory.steps[0].observation == "rc=0 out=bash\n"
    assert result.patch is not None and result.patch == result.final_answer
    assert result.patch.startswith("diff --git a/seed.txt b/seed.txt")
    assert "+hello" in result.patch


async def test_tool_mode_runs_bash_tool_calls_and_answers_with_tool_messages(
        local_env: Environment, run_ctx: RunContext, log: logging.Logger) -> None:
    model = ToolCallingModel([["echo a > a.txt", "echo b"], [f"echo {SUBMIT_MARKER} && cat a.txt"]])
    agent = harness(mode="tool")
    assert agent.config_name == "mini"
    result = await agent.run(TASK, local_env, model, run_ctx, log)

    assert result.trajectory.stop_reason == "Submitted" and result.final_answer == "a\n"
    tools = model.requests[0]["tools"]
    assert tools and tools[0]["function"]["name"] == "bash"
    second = model.requests[1]["messages"]
    assert [m["role"] for m in second] == ["system", "user", "assistant", "tool", "tool"]
    assert [c["id"] for c in second[2]["tool_calls"]] == ["call_0_0", "call_0_1"]
    assert [m["tool_call_id"] for m in second[3:]] == ["call_0_0", "call_0_1"]
    step = result.trajectory.steps[0]
    assert [c.id for c in step.tool_calls] == ["call_0_0", "call_0_1"]
    assert step.action == "echo a > a.txt\necho b"
    assert step.observation == f"{second[3]['content']}\n\n{second[4]['content']}"
    assert '"output": "b\\n"' in second[4]["content"]


async def test_model_failure_propagates_and_the_thread_ends(local_env: Environment, serve_script,
                                                            run_ctx: RunContext, log: logging.Logger) -> None:
    client, _ = await serve_script([submit()], fail_status=503)
    with pytest.raises(ModelError):
        await harness().run(TASK, local_env, client, run_ctx, log)
    assert mini_threads() == []


async def test_without_an_environment_it_raises(run_ctx: RunContext, log: logging.Logger) -> None:
    client = scripted([submit()])
    with pytest.raises(EnvironmentError_):
        await harness().run(TASK, None, client, run_ctx, log)
    assert client.calls == 0


def test_looks_like_diff() -> None:
    assert looks_like_diff("diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n")
    assert looks_like_diff("--- x.orig\n+++ x\n@@ -1 +1 @@\n")
    assert not looks_like_diff("42\n") and not looks_like_diff(None) and not looks_like_diff("")


# ----------------------------------------------------------------------------- params and configs


def test_defaults_come_from_the_config_then_ours() -> None:
    plain = harness()
    assert (plain.config_name, plain.mode) == ("mini_textbased", "text")
    assert (plain.step_limit, plain.cost_limit, plain.command_timeout) == (250, 0.0, 60.0)  # its step_limit is 0
    priced = MiniSweAgent({}, ComponentContext(price=PriceTable(input=1.0, output=2.0)))
    assert priced.cost_limit == 3.0  # the config's, now that cost can be counted
    assert plain.interpreter is None and plain.env_vars["PAGER"] == "cat"
    assert "mode" not in plain.agent_kwargs  # its CLI's `mode: confirm` is not an agent setting
    swe = harness(config="swebench")
    assert swe.mode == "tool"  # its prompt asks for bash tool calls
    assert (swe.step_limit, swe.cost_limit, swe.command_timeout) == (250, 0.0, 60.0)
    assert swe.interpreter == ["bash", "-c"] and swe.env_vars["BASH_ENV"] == "/root/.bashrc"
    assert harness(config="swebench_backticks").mode == "text"
    assert harness(config="swebench_xml").model_config["action_regex"].startswith("<mswea_bash_command>")
    mine = harness(config="swebench", mode="text", step_limit=5, cost_limit=0, command_timeout=7, timeout=30)
    assert (mine.mode, mine.step_limit, mine.cost_limit, mine.command_timeout, mine.timeout) == (
        "text", 5, 0.0, 7.0, 30.0)
    assert mine.agent_kwargs["step_limit"] == 5 and mine.agent_kwargs["cost_limit"] == 0.0


def _swebench_runner_config() -> tuple[Path, bytes]:
    """The file mini-swe-agent's own SWE-bench runner defaults to, asked from the installed package."""
    from minisweagent.run.benchmarks.swebench import DEFAULT_CONFIG_FILE  # the package is imported (quietly) by now

    return Path(DEFAULT_CONFIG_FILE), Path(DEFAULT_CONFIG_FILE).read_bytes()


@pytest.mark.parametrize("benchmark", ["swebench_local", "swebench_verified", "swebench", "swebench_multilingual"])
def test_a_swebench_benchmark_gets_mini_swe_agents_own_swebench_config(benchmark: str) -> None:
    agent = MiniSweAgent({}, ComponentContext(benchmark=benchmark))
    path, raw = _swebench_runner_config()
    expected = yaml.safe_load(raw)

    assert agent.config_name == "swebench" and agent.mode == "tool"
    assert agent.agent_kwargs["system_template"] == expected["agent"]["system_template"]
    assert agent.agent_kwargs["instance_template"] == expected["agent"]["instance_template"]
    assert agent.step_limit == expected["agent"]["step_limit"] == agent.agent_kwargs["step_limit"]
    assert agent.command_timeout == expected["environment"]["timeout"]
    assert agent.interpreter == expected["environment"]["interpreter"]
    assert agent.model_config["observation_template"] == expected["model"]["observation_template"]
    assert agent.model_config["format_error_template"] == expected["model"]["format_error_template"]
    settings = agent.resolved_settings()
    assert settings["package"] == {"name": "mini-swe-agent", "version": importlib.metadata.version("mini-swe-agent")}
    assert settings["config"] == {"spec": str(path), "source": "benchmark", "path": str(path.resolve()),
                                  "sha256": hashlib.sha256(raw).hexdigest()}
    assert settings["agent"]["system_template"] == expected["agent"]["system_template"]
    assert settings["mode"] == "tool" and settings["step_limit"] == expected["agent"]["step_limit"]
    assert set(settings["env_names"]) == set(expected["environment"]["env"])


def test_other_benchmarks_keep_the_generic_config_and_an_explicit_config_wins() -> None:
    generic = MiniSweAgent({}, ComponentContext(benchmark="shell_tasks"))
    assert (generic.config_name, generic.mode) == ("mini_textbased", "text")
    assert generic.resolved_settings()["config"]["source"] == "default"
    assert generic.resolved_settings()["config"]["path"].endswith("config/mini_textbased.yaml")

    mine = MiniSweAgent({"config": "swebench_xml", "step_limit": 7}, ComponentContext(benchmark="swebench_local"))
    assert (mine.config_name, mine.mode, mine.step_limit) == ("swebench_xml", "text", 7)
    assert mine.resolved_settings()["config"]["source"] == "param"
    assert mine.resolved_settings()["config"]["path"].endswith("benchmarks/swebench_xml.yaml")
    # text replies asked for on SWE-bench: the text variant of its SWE-bench config
    text = MiniSweAgent({"mode": "text"}, ComponentContext(benchmark="swebench_lite"))
    assert (text.config_name, text.mode) == ("swebench_backticks", "text")
    assert text.resolved_settings()["config"]["source"] == "benchmark"
    assert "mswea_bash_command" in text.model_config["action_regex"]


@pytest.mark.parametrize(("params", "needle"), [
    ({"mode": "json"}, "mode"),
    ({"step_limit": 0}, "step_limit"),
    ({"step_limit": "5"}, "step_limit"),
    ({"cost_limit": -1}, "cost_limit"),
    ({"command_timeout": 0}, "command_timeout"),
    ({"timeout": -3}, "timeout"),
    ({"config": 3}, "config"),
    ({"model_params": ["temperature"]}, "model_params"),
])
def test_bad_params_raise_config_error_naming_the_field(params: dict[str, Any], needle: str) -> None:
    with pytest.raises(ConfigError) as exc:
        harness(**params)
    assert needle in str(exc.value)
    assert exc.value.field == f"harness.params.{needle}"


def test_unknown_param_error_lists_the_allowed_keys() -> None:
    with pytest.raises(ConfigError) as exc:
        harness(stepLimit=3)
    for key in ("config", "mode", "step_limit", "cost_limit", "command_timeout", "timeout", "model_params"):
        assert key in str(exc.value)
    assert exc.value.field == "harness.params.stepLimit"


def test_unknown_config_lists_the_bundled_ones(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as exc:
        harness(config="swebench_nope")
    assert "'swebench_nope'" in str(exc.value) and "mini_textbased" in str(exc.value)
    assert "swebench_backticks" in str(exc.value)
    bad = tmp_path / "bad.yaml"
    bad.write_text("agent:\n  system_template: hi\n")
    with pytest.raises(ConfigError, match="instance_template"):
        harness(config=str(bad))


class MissingPackage(MiniSweAgent):
    package_module = "agentcompass_tests_no_such_module"
    requirements = (Requirement("mini-swe-agent>=2.4,<3", "agentcompass_tests_no_such_module"),)


def test_missing_package_error_names_the_install_command() -> None:
    with pytest.raises(ConfigError) as exc:
        MissingPackage({}, ComponentContext())
    assert PIP_COMMAND in str(exc.value)
    assert exc.value.field == "harness"
    with pytest.raises(ConfigError, match="Unknown parameter 'bogus'"):  # params are checked first
        MissingPackage({"bogus": 1}, ComponentContext())


def test_the_engine_refuses_a_missing_declared_package_before_constructing_the_harness(tmp_path: Path) -> None:
    # installing is tested in tests/test_dependencies.py; without auto_install the request fails naming the command
    result = agentcompass.launch(OrchestrationSpec(requests=[RunRequestSpec(
        benchmark=ComponentSpec("shell_tasks", {"sample_ids": ["files/hello_world"]}),
        harness=ComponentSpec("tests.harnesses.mini_swe_agent.test_mini_swe_agent:MissingPackage"),
        model=ModelSpec("scripted"),
        results_dir=str(tmp_path))], progress="none"))
    o = result.outcomes[0]
    assert o.status == "failed" and o.error_field == "harness" and o.error_type == "ConfigError"
    assert "pip install 'mini-swe-agent>=2.4,<3'" in (o.error or "")
    assert "auto_install_dependencies=True" in (o.error or "")
    assert o.run_dir is None  # refused before anything was written


def test_first_import_is_silent_and_leaves_the_users_config_alone(tmp_path: Path) -> None:
    home = tmp_path / "home"
    user_dir = home / ".config" / "mini-swe-agent"
    user_dir.mkdir(parents=True)
    (user_dir / ".env").write_text("AGENTCOMPASS_TEST_LEAK=1\n")
    code = (
        "import os, sys, agentcompass\n"
        "assert 'minisweagent' not in sys.modules\n"
        "from agentcompass.harnesses.mini_swe_agent.harness import MiniSweAgent\n"
        "from agentcompass.interfaces import ComponentContext\n"
        "MiniSweAgent({}, ComponentContext())\n"
        "assert 'minisweagent' in sys.modules\n"
        "print([os.environ.get(k) for k in ('MSWEA_GLOBAL_CONFIG_DIR', 'MSWEA_SILENT_STARTUP', "
        "'AGENTCOMPASS_TEST_LEAK')])\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MSWEA_", "XDG_"))}
    env.update(HOME=str(home), PYTHONPATH=str(REPO))
    res = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[None, None, None]"
    assert "mini-swe-agent" not in res.stdout + res.stderr  # no banner
    assert sorted(p.relative_to(home).as_posix() for p in home.rglob("*")) == [
        ".config", ".config/mini-swe-agent", ".config/mini-swe-agent/.env"]


def test_registry_name_resolves_to_the_harness() -> None:
    cls = Registries(use_entry_points=False)["harness"].resolve("mini_swe_agent")
    assert cls is MiniSweAgent and cls.needs_environment and cls.evaluates


# ----------------------------------------------------------------------------- through the engine


async def test_engine_runs_shell_tasks_with_mini_swe_agent_and_records_trajectories(tmp_path: Path) -> None:
    script = [
        {"match": "Task: files/hello_world\n",
         "turns": [cmd("echo 'Hello, World!' > hello.txt && cat hello.txt"), submit()]},
        {"match": "Task: answer/count_lines\n", "turns": [submit("wc -l < data.txt")]},
    ]
    sample = ["files/hello_world", "answer/count_lines", "files/mkdir_tree"]  # the last one is not scripted
    spec = OrchestrationSpec(requests=[RunRequestSpec(
        benchmark=ComponentSpec("shell_tasks", {"sample_ids": sample}),
        harness=ComponentSpec("mini_swe_agent", {"step_limit": 5, "command_timeout": 30}),
        model=ModelSpec("scripted", params={"bundled": False, "script": script}),
        name="mini", results_dir=str(tmp_path))], progress="none")
    outcome = (await agentcompass.async_launch(spec))["mini"]

    assert outcome.status == "completed" and outcome.counts.done == 3
    assert outcome.metrics["pass@1"] == pytest.approx(2 / 3)
    assert outcome.errors_by_kind == {"format_error_limit": 1}
    assert outcome.run_dir is not None
    details = {d.task_id: d for d in (msgspec.json.decode(p.read_bytes(), type=TaskDetail)
                                      for p in (outcome.run_dir / "details").glob("*.json"))}
    assert set(details) == set(sample)
    # params.json says which config and package version the scores came from
    settings = json.loads((outcome.run_dir / "params.json").read_text())["component_settings"]["harness"]
    assert settings["package"]["version"] == importlib.metadata.version("mini-swe-agent")
    assert settings["config"]["source"] == "default" and settings["config"]["path"].endswith("mini_textbased.yaml")
    assert len(settings["config"]["sha256"]) == 64 and settings["step_limit"] == 5
    assert settings["cost_limit"] == 0 and "price_per_million" in settings["cost_limit_note"]

    hello = details["files/hello_world"].attempts["1"]
    assert hello.correct is True and hello.status == "completed"
    assert hello.trajectory is not None and hello.trajectory.stop_reason == "Submitted"
    steps = hello.trajectory.steps
    assert len(steps) == 2
    assert steps[0].action == "echo 'Hello, World!' > hello.txt && cat hello.txt"
    assert steps[0].observation == "<returncode>0</returncode>\n<output>\nHello, World!\n</output>"
    assert steps[1].action == f"echo {SUBMIT_MARKER}"
    assert hello.artifacts["mini_swe_agent"]["mode"] == "text"

    count = details["answer/count_lines"].attempts["1"]
    assert count.correct is True and count.final_answer == "137\n"
    assert count.trajectory is not None and len(count.trajectory.steps) == 1

    unscripted = details["files/mkdir_tree"].attempts["1"]
    # a budget the agent was given ran out: still graded (what it did so far is its answer), recorded as such
    assert unscripted.status == "completed" and unscripted.correct is False
    assert unscripted.error_kind == "format_error_limit"
    assert unscripted.trajectory is not None and len(unscripted.trajectory.steps) == 3
    assert mini_threads() == []


async def test_engine_hands_the_models_prices_to_the_harness_so_its_cost_limit_fires(tmp_path: Path) -> None:
    script = [{"match": "Task: files/hello_world\n", "turns": [cmd("echo again >> log.txt")]}]
    spec = OrchestrationSpec(requests=[RunRequestSpec(
        benchmark=ComponentSpec("shell_tasks", {"sample_ids": ["files/hello_world"]}),
        harness=ComponentSpec("mini_swe_agent", {"cost_limit": 1.5, "step_limit": 50}),
        model=ModelSpec("scripted", params={"bundled": False, "script": script,
                                            "price_per_million": {"input": 500.0, "output": 1000.0}}),
        name="priced", results_dir=str(tmp_path))], progress="none")
    outcome = (await agentcompass.async_launch(spec))["priced"]

    assert outcome.status == "completed" and outcome.errors_by_kind == {"cost_limit": 1}
    assert outcome.run_dir is not None
    detail = msgspec.json.decode(next((outcome.run_dir / "details").glob("*.json")).read_bytes(), type=TaskDetail)
    attempt = detail.attempts["1"]
    assert attempt.trajectory is not None and 2 <= len(attempt.trajectory.steps) < 50
    assert attempt.meta["usage"]["cost"] >= 1.5  # what the engine priced from the same table
    settings = json.loads((outcome.run_dir / "params.json").read_text())["component_settings"]["harness"]
    assert settings["cost_limit"] == 1.5 and settings["cost_limit_note"] is None
    assert "price_per_million" not in json.dumps(settings)  # the harness records its limit, not the prices
