"""Built-in harnesses (agent loops).

Each harness module is imported lazily through the registry; a component declares its params as a msgspec
``Params`` struct (see ``agentcompass.params``). This package holds what the text harnesses share.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from ..common.text import truncate_middle
from ..records import Step, Usage

if TYPE_CHECKING:
    from ..interfaces import ModelClient

__all__ = ["model_turn", "truncate_middle"]  # truncate_middle: its old home


async def model_turn(model: ModelClient, messages: list[dict[str, Any]], index: int, usage: Usage,
                     model_params: dict[str, Any]) -> Step:
    """One model call of a text agent: the reply appended to ``messages`` as the assistant's turn, its usage added
    to ``usage``; the step it starts (content, reasoning, tokens, latency)."""
    started = time.time()
    resp = await model.complete(messages, **model_params)
    usage.add(resp.usage)
    if resp.usage.calls == 0:  # a client that does not count its calls
        usage.calls += 1
    content = resp.content or ""
    messages.append({"role": "assistant", "content": content})
    return Step(index=index, content=content, reasoning=resp.reasoning, prompt_tokens=resp.usage.prompt_tokens,
                completion_tokens=resp.usage.completion_tokens, model_latency_s=resp.latency_s,
                finish_reason=resp.finish_reason, started_at=started)
