"""A host-side tool call run off the event loop under a deadline the engine enforces.

A benchmark's tool code (tau2's domains, AgentDojo's suites) is plain Python over an in-process environment; run on
the event loop, one slow call would stop every other try of the run and the agent timeout with it. ``run_tool_call``
runs it in a worker thread of the loop's default executor and waits at most ``timeout_s``; past it the call is
``ToolCallTimeout``, a ``ToolError`` whose message the agent sees as the tool's answer. A thread cannot be stopped:
the call may still finish in the background, so the caller must treat the state the call could touch as lost (stop
calling into it). Use this where a call's work is bounded by its inputs (the benchmark bounds them first: argument
size and nesting, ``tool_json``; arithmetic size, tau2's ``calculate``); a call that can run without end on hostile
input belongs in a killable ``host_worker.HostWorker`` instead.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Callable
from typing import TypeVar

from .tools import ToolError

T = TypeVar("T")
#: seconds a host-side tool call of tau2 or AgentDojo gets unless the benchmark's ``tool_timeout`` says otherwise.
DEFAULT_TOOL_TIMEOUT_S = 60.0


class ToolCallTimeout(ToolError):
    """A tool call that did not finish within its deadline (the message is the agent's tool result)."""


async def run_tool_call(fn: Callable[..., T], /, *args: object, timeout_s: float,
                        what: str = "the tool call") -> T:
    """``fn(*args)`` in a worker thread, awaited at most ``timeout_s`` seconds; ``ToolCallTimeout`` naming ``what``
    and the deadline past it. The function's own exceptions propagate; cancelling the caller stops the wait."""
    loop = asyncio.get_running_loop()
    ctx = contextvars.copy_context()
    future = loop.run_in_executor(None, functools.partial(ctx.run, fn, *args))
    try:
        return await asyncio.wait_for(future, timeout_s)
    except TimeoutError:
        raise ToolCallTimeout(f"{what} did not finish within {timeout_s:g} s and was abandoned") from None


__all__ = ["DEFAULT_TOOL_TIMEOUT_S", "ToolCallTimeout", "run_tool_call"]
