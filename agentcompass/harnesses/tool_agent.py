"""The ``tool_agent`` harness: a native tool-calling loop over a benchmark's ``ToolSession``.

The benchmark's tools are offered through the model's own tool calling (OpenAI chat, OpenAI Responses and
Anthropic Messages alike); each tool call is executed by the session on the host and its result goes back as a
``tool`` message; an answer without tool calls asks the session for the next user turn (None ends the episode).
Each assistant turn is one step of the trajectory, streamed into ``RunContext.trajectory``; the session's
record is kept in ``RunContext.artifacts`` after every turn, so a run stopped at ``agent_timeout`` is still graded
on what it did.
"""

from __future__ import annotations

import logging
import time
from typing import Any, ClassVar

import msgspec

from ..common.error_kinds import ErrorKind
from ..common.text import truncate_middle
from ..interfaces import ComponentContext, Environment, HarnessResult, ModelClient, PreparedTask, RunContext
from ..records import Step, ToolCall, Usage
from ..tool_json import JSONBoundError, loads_bounded
from ..tools import RECORD_KEY, ToolError, ToolSession
from .base import Harness


class ToolAgentParams(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """``step_limit``: model turns at most (a session's ``max_tool_rounds`` may end it sooner);
    ``tool_output_limit``: characters of one tool result the model sees (None: the session's
    ``max_tool_output``, else 20,000; a value set here overrides the session's); ``model_params``: merged into every
    model call; ``parallel_tool_calls``: execute all calls of a turn (else only the first, the others answered with
    an error); ``max_calls_per_turn``: calls of one turn executed (the others answered with an error)."""

    step_limit: int = msgspec.field(default=50)
    tool_output_limit: int | None = None
    model_params: dict[str, Any] = {}
    parallel_tool_calls: bool = True
    max_calls_per_turn: int = 64

    def __post_init__(self) -> None:
        if self.step_limit < 1:
            raise ValueError("step_limit must be >= 1")
        if self.tool_output_limit is not None and self.tool_output_limit < 100:
            raise ValueError("tool_output_limit must be >= 100")
        if self.max_calls_per_turn < 1:
            raise ValueError("max_calls_per_turn must be >= 1")


#: the tool output limit when neither the user nor the session sets one.
DEFAULT_TOOL_OUTPUT_LIMIT = 20_000
#: the size of one call's raw arguments (JSON text) the harness parses; a larger one is answered with an error.
MAX_ARGUMENT_CHARS = 256 * 1024


def _arguments(raw: str) -> dict[str, Any]:
    """A call's arguments as an object; ToolError (shown to the model) when they are not a JSON object."""
    if len(raw) > MAX_ARGUMENT_CHARS:
        raise ToolError(f"the arguments are {len(raw)} characters long; at most {MAX_ARGUMENT_CHARS} are accepted")
    if not raw.strip():
        return {}
    try:
        value = loads_bounded(raw, what="the arguments text", max_chars=MAX_ARGUMENT_CHARS)
    except JSONBoundError as exc:  # not JSON, or nested deeper than tool_json.MAX_DEPTH
        raise ToolError(str(exc)) from None
    if not isinstance(value, dict):
        raise ToolError("the arguments must be a JSON object")
    return value


def _assistant_message(content: str | None, calls: list[ToolCall]) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": content or ""}
    if calls:
        msg["tool_calls"] = [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                             for c in calls]
    return msg


class ToolAgent(Harness):
    """Native tool calling over the benchmark's tools (see the module doc). Needs a benchmark with tools."""

    name: ClassVar[str] = "tool_agent"
    needs_environment: ClassVar[bool] = False
    needs_tools: ClassVar[bool] = True
    Params: ClassVar[type[ToolAgentParams]] = ToolAgentParams
    params: ToolAgentParams

    def __init__(self, params: ToolAgentParams | dict[str, Any], ctx: ComponentContext) -> None:
        super().__init__(params, ctx)

    async def run(self, task: PreparedTask, env: Environment | None, model: ModelClient, ctx: RunContext,
                  log: logging.Logger) -> HarnessResult:
        session: ToolSession | None = ctx.tools
        if session is None:
            return HarnessResult(error=f"benchmark {self.ctx.benchmark or '?'} offers no tools: tool_agent runs "
                                 "tool-use benchmarks (bfcl, tau2, agentdojo)", error_kind=ErrorKind.HARNESS_CRASH)
        usage = Usage()
        traj = ctx.trajectory
        traj.started_at = time.time()
        await session.start()
        # written before the first model call: a try stopped then (agent_timeout, a model error) is still graded
        ctx.artifacts[RECORD_KEY] = session.record()
        output_limit = self.params.tool_output_limit or session.max_tool_output or DEFAULT_TOOL_OUTPUT_LIMIT
        rounds_allowed = session.max_tool_rounds
        turns = self.params.step_limit if rounds_allowed is None else min(self.params.step_limit, rounds_allowed + 1)
        rounds = 0
        messages = list(session.initial_messages())
        stop = "step_limit"
        for index in range(turns):
            if session.finished():
                stop = "session_finished"
                break
            started = time.time()
            tools = session.tools()
            resp = await model.complete(messages, tools=tools or None, **self.params.model_params)
            usage.add(resp.usage)
            if resp.usage.calls == 0:
                usage.calls += 1
            calls = list(resp.tool_calls)
            message = _assistant_message(resp.content, calls)
            messages.append(message)
            await session.on_assistant(message)
            step = Step(index=index, content=resp.content, reasoning=resp.reasoning, tool_calls=calls,
                        prompt_tokens=resp.usage.prompt_tokens, completion_tokens=resp.usage.completion_tokens,
                        model_latency_s=resp.latency_s, finish_reason=resp.finish_reason, started_at=started)
            traj.steps.append(step)
            if calls and session.executes_tools:
                if rounds_allowed is not None and rounds >= rounds_allowed:
                    # the benchmark's round budget is spent: this turn's calls are not executed (AgentDojo's loop)
                    stop = "tool_round_limit"
                    ctx.artifacts[RECORD_KEY] = session.record()
                    break
                rounds += 1
                t0 = time.monotonic()
                observations = []
                for n, call in enumerate(calls):
                    if n and not self.params.parallel_tool_calls:
                        out = "Error: only one tool call per turn is executed; call it again."
                    elif n >= self.params.max_calls_per_turn:
                        out = ("Error: too many tool calls in one turn; only the first "
                               f"{self.params.max_calls_per_turn} are executed.")
                    else:
                        try:
                            out = await session.call(call.name, _arguments(call.arguments))
                        except ToolError as exc:
                            out = f"Error: {exc}"
                    out = truncate_middle(out, output_limit)
                    observations.append(f"[{call.name}] {out}")
                    messages.append({"role": "tool", "tool_call_id": call.id, "name": call.name, "content": out})
                step.observation = "\n".join(observations)
                step.exec_latency_s = round(time.monotonic() - t0, 6)
                ctx.artifacts[RECORD_KEY] = session.record()
                if not session.ends_turn():
                    continue
            ctx.artifacts[RECORD_KEY] = session.record()
            nxt = await session.next_user_message(messages)
            if nxt is None:
                stop = "answered"
                break
            messages.append({"role": "user", "content": nxt})
        else:
            log.info("tool_agent %s: step limit %d reached", ctx.task_id, turns)
        traj.finished_at = time.time()
        traj.stop_reason = stop
        final = next((m.get("content") for m in reversed(messages) if m.get("role") == "assistant"), None)
        return HarnessResult(final_answer=final or None, trajectory=traj, usage=usage,
                             artifacts={RECORD_KEY: session.record()})


__all__ = ["ToolAgent", "ToolAgentParams"]
