"""The ``openai_chat`` harness: one model call, the reply is the final answer."""

from __future__ import annotations

import logging
import time
from typing import Any, ClassVar

import msgspec

from ..interfaces import ComponentContext, Environment, HarnessResult, ModelClient, PreparedTask, RunContext
from ..records import Step, Trajectory, Usage
from .base import Harness


class OpenAIChatParams(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """``system_prompt`` (str), ``model_params`` (dict merged into the model call)."""

    system_prompt: str | None = None
    model_params: dict[str, Any] | None = None


class OpenAIChatHarness(Harness):
    """One-shot chat: optional ``system_prompt``, the task prompt as the user message.

    Params: ``system_prompt`` (str), ``model_params`` (dict merged into the model call).
    """

    name: ClassVar[str] = "openai_chat"
    evaluates: ClassVar[bool] = True
    needs_environment: ClassVar[bool] = False
    Params: ClassVar[type[OpenAIChatParams]] = OpenAIChatParams
    params: OpenAIChatParams

    def __init__(self, params: OpenAIChatParams | dict[str, Any], ctx: ComponentContext) -> None:
        super().__init__(params, ctx)
        p = self.params
        self.system_prompt = p.system_prompt
        self.model_params = dict(p.model_params or {})

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
