"""The ``openai_chat`` harness: one model call, the reply is the final answer."""

from __future__ import annotations

import logging
import time
from typing import Any, ClassVar

from ..interfaces import ComponentContext, Environment, HarnessResult, ModelClient, PreparedTask, RunContext
from ..records import Step, Trajectory, Usage
from . import check_param_keys, dict_param, str_param
from .base import Harness

_WHERE = "harness openai_chat"


class OpenAIChatHarness(Harness):
    """One-shot chat: optional ``system_prompt``, the task prompt as the user message.

    Params: ``system_prompt`` (str), ``model_params`` (dict merged into the model call).
    """

    evaluates: ClassVar[bool] = True
    needs_environment: ClassVar[bool] = False

    def __init__(self, params: dict[str, Any], ctx: ComponentContext) -> None:
        check_param_keys(params, ("system_prompt", "model_params"), _WHERE)
        self.system_prompt = str_param(params, "system_prompt", _WHERE)
        self.model_params = dict_param(params, "model_params", _WHERE)

    async def run(self, task: PreparedTask, env: Environment | None, model: ModelClient,
                  ctx: RunContext, log: logging.Logger) -> HarnessResult:
        messages: list[dict[str, Any]] = []
        if self.system_prompt:
            messages.append({"role": "system", "content": self.system_prompt})
        messages.append({"role": "user", "content": task.prompt})
        started = time.time()
        resp = await model.complete(messages, **self.model_params)
        usage = Usage()
        usage.add(resp.usage)
        if resp.usage.calls == 0:  # a client that does not count its calls
            usage.calls += 1
        step = Step(index=0, content=resp.content, reasoning=resp.reasoning,
                    prompt_tokens=resp.usage.prompt_tokens, completion_tokens=resp.usage.completion_tokens,
                    model_latency_s=resp.latency_s, finish_reason=resp.finish_reason, started_at=started)
        log.debug("openai_chat %s: %d completion tokens", ctx.task_id, resp.usage.completion_tokens)
        trajectory = Trajectory(started_at=started, finished_at=time.time(), steps=[step],
                                stop_reason="answered")
        return HarnessResult(final_answer=resp.content, trajectory=trajectory, usage=usage)
