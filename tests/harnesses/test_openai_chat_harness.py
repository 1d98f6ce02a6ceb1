"""openai_chat: one model call over real HTTP; the reply is the final answer."""

from __future__ import annotations

import logging

import pytest

from agentcompass._errors import ConfigError
from agentcompass.harnesses.openai_chat import OpenAIChatHarness
from agentcompass.interfaces import ComponentContext, PreparedTask, RunContext

TASK = PreparedTask(task_id="t1", prompt="What is 6 * 7?")


async def test_one_call_returns_the_reply_as_the_final_answer(serve_script, run_ctx: RunContext,
                                                              log: logging.Logger) -> None:
    client, server = await serve_script(["It is 42.\n<submit>42</submit>", "never used"])
    harness = OpenAIChatHarness({}, ComponentContext())
    result = await harness.run(TASK, None, client, run_ctx, log)

    assert result.final_answer == "It is 42.\n<submit>42</submit>"
    assert server.completions_served == 1
    assert server.recent_requests[0]["messages"] == [{"role": "user", "content": TASK.prompt}]
    traj = result.trajectory
    assert traj.stop_reason == "answered"
    assert len(traj.steps) == 1
    step = traj.steps[0]
    assert step.content == result.final_answer
    assert step.prompt_tokens > 0 and step.completion_tokens > 0
    assert step.model_latency_s is not None
    assert result.usage.calls == 1
    assert result.usage.completion_tokens == step.completion_tokens


async def test_system_prompt_and_model_params_are_sent(serve_script, run_ctx: RunContext,
                                                       log: logging.Logger) -> None:
    client, server = await serve_script(["ok"])
    harness = OpenAIChatHarness({"system_prompt": "Answer tersely.", "model_params": {"max_tokens": 17}},
                                ComponentContext())
    await harness.run(TASK, None, client, run_ctx, log)

    body = server.recent_requests[0]
    assert body["messages"] == [{"role": "system", "content": "Answer tersely."},
                                {"role": "user", "content": TASK.prompt}]
    assert body["max_tokens"] == 17


def test_needs_no_environment() -> None:
    assert OpenAIChatHarness.needs_environment is False
    assert OpenAIChatHarness.evaluates is True


def test_unknown_param_raises_config_error_listing_allowed_keys() -> None:
    with pytest.raises(ConfigError) as exc:
        OpenAIChatHarness({"temperature": 0}, ComponentContext())
    assert "'temperature'" in str(exc.value)
    assert "model_params" in str(exc.value) and "system_prompt" in str(exc.value)
