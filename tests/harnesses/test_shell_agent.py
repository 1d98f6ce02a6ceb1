"""shell_agent against a real local environment and the scripted model over real HTTP."""

from __future__ import annotations

import logging
import time

import pytest

from agentcompass._errors import ConfigError, EnvironmentError_, ModelError
from agentcompass.harnesses.shell_agent import DEFAULT_SYSTEM_PROMPT, ShellAgent, truncate_middle
from agentcompass.interfaces import ComponentContext, Environment, PreparedTask, RunContext

TASK = PreparedTask(task_id="t1", prompt="Task: demo\nDo the thing.")


def agent(**params: object) -> ShellAgent:
    return ShellAgent(dict(params), ComponentContext())


def bash(cmd: str) -> str:
    return f"Let me run this.\n```bash\n{cmd}\n```"


async def test_runs_commands_in_the_workspace_then_submits(local_env: Environment, serve_script,
                                                            run_ctx: RunContext, log: logging.Logger) -> None:
    client, server = await serve_script([bash("echo hi > out.txt && cat out.txt seed.txt"), bash("exit 3"),
                                         "All done.\n<submit>the answer</submit>"])
    result = await agent().run(TASK, local_env, client, run_ctx, log)

    assert result.final_answer == "the answer"
    assert result.trajectory.stop_reason == "submitted"
    assert await local_env.read_file("out.txt") == b"hi\n"
    steps = result.trajectory.steps
    assert [s.index for s in steps] == [0, 1, 2]
    assert steps[0].action == "echo hi > out.txt && cat out.txt seed.txt"
    assert steps[0].observation == "<returncode>0</returncode>\n<output>\nhi\nseed\n\n</output>"
    assert steps[0].exit_code == 0
    assert steps[1].exit_code == 3
    assert (steps[1].observation or "").startswith("<returncode>3</returncode>")
    assert steps[2].action is None and steps[2].observation is None
    # the observation went back to the model as the next user message, after the system prompt
    second_call = server.recent_requests[1]["messages"]
    assert second_call[0] == {"role": "system", "content": DEFAULT_SYSTEM_PROMPT}
    assert second_call[1]["content"] == TASK.prompt
    assert second_call[-1] == {"role": "user", "content": steps[0].observation}
    assert len(server.recent_requests[2]["messages"]) == 6


async def test_trajectory_records_tokens_latencies_and_summed_usage(local_env: Environment, serve_script,
                                                                    run_ctx: RunContext,
                                                                    log: logging.Logger) -> None:
    client, _ = await serve_script([bash("sleep 0.2; echo slow"), "<submit></submit>"])
    t0 = time.time()
    result = await agent().run(TASK, local_env, client, run_ctx, log)

    steps = result.trajectory.steps
    assert all(s.prompt_tokens > 0 and s.completion_tokens > 0 for s in steps)
    assert all(s.model_latency_s is not None and s.model_latency_s >= 0 for s in steps)
    assert steps[0].exec_latency_s is not None and steps[0].exec_latency_s >= 0.2
    assert steps[1].exec_latency_s is None
    assert result.usage.calls == 2
    assert result.usage.prompt_tokens == sum(s.prompt_tokens for s in steps)
    assert result.usage.completion_tokens == sum(s.completion_tokens for s in steps)
    assert result.usage.total_tokens == result.usage.prompt_tokens + result.usage.completion_tokens
    traj = result.trajectory
    assert traj.started_at is not None and traj.finished_at is not None
    assert t0 <= traj.started_at <= traj.finished_at
    assert result.final_answer == ""


async def test_command_and_submit_in_one_reply_runs_the_command_then_stops(
        local_env: Environment, serve_script, run_ctx: RunContext, log: logging.Logger) -> None:
    client, server = await serve_script(["```bash\ntouch made.txt\n```\n<submit>42</submit>"])
    result = await agent().run(TASK, local_env, client, run_ctx, log)

    assert result.final_answer == "42"
    assert result.trajectory.stop_reason == "submitted"
    assert len(result.trajectory.steps) == 1
    assert result.trajectory.steps[0].exit_code == 0
    assert await local_env.read_file("made.txt") == b""
    assert server.completions_served == 1


async def test_step_limit_stops_an_agent_that_never_submits(local_env: Environment, serve_script,
                                                           run_ctx: RunContext, log: logging.Logger) -> None:
    client, server = await serve_script([bash("echo again >> log.txt")])
    result = await agent(step_limit=3).run(TASK, local_env, client, run_ctx, log)

    assert result.trajectory.stop_reason == "step_limit"
    assert result.final_answer is None
    assert len(result.trajectory.steps) == 3
    assert server.completions_served == 3
    assert await local_env.read_file("log.txt") == b"again\nagain\nagain\n"


async def test_three_consecutive_format_errors_stop_the_run(local_env: Environment, serve_script,
                                                           run_ctx: RunContext, log: logging.Logger) -> None:
    client, server = await serve_script(["I think the answer is obvious."])
    result = await agent().run(TASK, local_env, client, run_ctx, log)

    assert result.trajectory.stop_reason == "format_error_limit"
    assert len(result.trajectory.steps) == 3
    assert all("Format error" in (s.observation or "") for s in result.trajectory.steps)
    assert all(s.action is None for s in result.trajectory.steps)
    # the model was told what went wrong
    assert "Format error" in server.recent_requests[1]["messages"][-1]["content"]


async def test_format_errors_are_observations_and_reset_after_a_valid_reply(
        local_env: Environment, serve_script, run_ctx: RunContext, log: logging.Logger) -> None:
    two_blocks = "```bash\necho a\n```\n```bash\necho b\n```"
    client, _ = await serve_script(["no block here", two_blocks, bash("echo ok"), "still nothing",
                                    "```python\nprint(1)\n```", "<submit>fine</submit>"])
    result = await agent().run(TASK, local_env, client, run_ctx, log)

    steps = result.trajectory.steps
    assert result.trajectory.stop_reason == "submitted"
    assert result.final_answer == "fine"
    assert len(steps) == 6
    assert "found 2 bash blocks" in (steps[1].observation or "")
    assert steps[1].action is None
    assert steps[2].exit_code == 0
    assert "Format error" in (steps[4].observation or "")


async def test_command_timeout_becomes_an_observation(local_env: Environment, serve_script,
                                                     run_ctx: RunContext, log: logging.Logger) -> None:
    client, server = await serve_script([bash("echo started; sleep 30"), "<submit>gave up</submit>"])
    t0 = time.monotonic()
    # wide: the shell prints "started" before the timeout on a loaded machine
    result = await agent(command_timeout=3).run(TASK, local_env, client, run_ctx, log)

    assert time.monotonic() - t0 < 25  # hang guard: the command would sleep 30 s
    step = result.trajectory.steps[0]
    assert step.exit_code == 124
    assert "timed out after 3 seconds" in (step.observation or "")
    assert "started" in (step.observation or "")
    assert result.trajectory.stop_reason == "submitted"
    assert server.recent_requests[1]["messages"][-1]["content"] == step.observation


async def test_long_output_is_cut_in_the_middle(local_env: Environment, serve_script,
                                               run_ctx: RunContext, log: logging.Logger) -> None:
    client, _ = await serve_script([bash("echo HEAD; seq 1 5000; echo TAIL"), "<submit></submit>"])
    result = await agent(observation_limit=300).run(TASK, local_env, client, run_ctx, log)

    obs = result.trajectory.steps[0].observation or ""
    assert "HEAD" in obs and "TAIL" in obs
    assert "characters omitted" in obs
    assert len(obs) < 450


def test_truncate_middle_keeps_short_text_and_bounds_long_text() -> None:
    assert truncate_middle("short", 100) == "short"
    cut = truncate_middle("a" * 50 + "b" * 50, 20)
    assert cut.startswith("a" * 10) and cut.endswith("b" * 10) and "[80 characters omitted]" in cut


async def test_custom_system_prompt_and_model_params_reach_the_model(
        local_env: Environment, serve_script, run_ctx: RunContext, log: logging.Logger) -> None:
    client, server = await serve_script(["<submit>x</submit>"])
    harness = agent(system_prompt="Be brief.", model_params={"temperature": 0.25})
    await harness.run(TASK, local_env, client, run_ctx, log)

    body = server.recent_requests[0]
    assert body["messages"][0] == {"role": "system", "content": "Be brief."}
    assert body["temperature"] == 0.25


async def test_model_failure_propagates_for_the_engine_to_retry(
        local_env: Environment, serve_script, run_ctx: RunContext, log: logging.Logger) -> None:
    client, _ = await serve_script(["<submit>x</submit>"], fail_status=503)
    with pytest.raises(ModelError):
        await agent().run(TASK, local_env, client, run_ctx, log)


async def test_without_an_environment_it_raises(serve_script, run_ctx: RunContext,
                                                log: logging.Logger) -> None:
    client, server = await serve_script(["<submit>x</submit>"])
    with pytest.raises(EnvironmentError_):
        await agent().run(TASK, None, client, run_ctx, log)
    assert server.completions_served == 0


def test_declares_it_needs_an_environment_and_is_graded() -> None:
    assert ShellAgent.needs_environment is True
    assert ShellAgent.evaluates is True


@pytest.mark.parametrize(("params", "needle"), [
    ({"steps": 3}, "'steps'"),
    ({"step_limit": 0}, "step_limit"),
    ({"step_limit": "5"}, "step_limit"),
    ({"command_timeout": -1}, "command_timeout"),
    ({"observation_limit": True}, "observation_limit"),
    ({"system_prompt": 3}, "system_prompt"),
    ({"model_params": ["temperature"]}, "model_params"),
])
def test_bad_params_raise_config_error_naming_the_field(params: dict[str, object], needle: str) -> None:
    with pytest.raises(ConfigError) as exc:
        ShellAgent(dict(params), ComponentContext())
    assert needle in str(exc.value)


def test_unknown_param_error_lists_the_allowed_keys() -> None:
    with pytest.raises(ConfigError) as exc:
        ShellAgent({"stepLimit": 3}, ComponentContext())
    for key in ("step_limit", "command_timeout", "system_prompt", "observation_limit"):
        assert key in str(exc.value)
    assert exc.value.field == "harness.params.stepLimit"
