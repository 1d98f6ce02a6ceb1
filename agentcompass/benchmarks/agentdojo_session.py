"""One try of an AgentDojo task: the suite's tools over a fresh copy of its environment (``ToolSession``).

The environment is the suite's default one with the attack's injections filled into its injection vectors (none
without an attack), then set up by the user task (``init_environment``), as AgentDojo's ``run_task_with_pipeline``
does. Each tool call runs through AgentDojo's ``FunctionsRuntime`` exactly as its ``ToolsExecutor`` runs it: an
unknown tool is refused with its message, arguments that are a list written as a string are parsed, the result is
formatted by ``tool_result_to_str`` (YAML) and an error goes back as the tool result the way its OpenAI pipeline
sends it. The record is the call trace (name, arguments, error) and the model's last answer: grading re-executes
the trace on a fresh copy of the same environment (``agentdojo_grading``).
"""

from __future__ import annotations

import asyncio
from ast import literal_eval
from collections.abc import Callable
from typing import Any

from ..tools import ToolSession


def fresh_environment(suite: Any, init_environment: Callable[[Any], Any], injections: dict[str, str]) -> Any:
    """The suite's default environment with ``injections`` in its vectors, set up by the user task's
    ``init_environment`` (CPU-bound: a YAML parse and a pydantic validation; call it off the event loop)."""
    return init_environment(suite.load_and_inject_default_environment(dict(injections)))


def execute_call(runtime: Any, env: Any, name: str, arguments: dict[str, Any]) -> tuple[Any, str, str | None]:
    """Run one tool call as AgentDojo's ``ToolsExecutor`` does: (the ``FunctionCall`` for the trace, the result text
    the model sees, the error or None)."""
    from agentdojo.agent_pipeline.tool_execution import is_string_list, tool_result_to_str
    from agentdojo.functions_runtime import FunctionCall

    call = FunctionCall(function=name, args=dict(arguments))
    if name not in runtime.functions:
        error = f"Invalid tool {name} provided."
        return call, error, error
    for key, value in call.args.items():
        if isinstance(value, str) and is_string_list(value):
            call.args[key] = literal_eval(value)
    result, error = runtime.run_function(env, name, call.args)
    return call, (error or tool_result_to_str(result)), error


def _plain(value: Any) -> Any:
    """``value`` with pydantic models (a nested ``FunctionCall``) as their dicts, for the JSON record."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    dump = getattr(value, "model_dump", None)
    return dump() if callable(dump) else value


class AgentDojoSession(ToolSession):
    """The tools of one AgentDojo try (see the module doc); ``record()`` has ``calls`` and ``output``."""

    def __init__(self, suite: Any, tools: list[dict[str, Any]], system_message: str, prompt: str,
                 init_environment: Callable[[Any], Any], injections: dict[str, str]) -> None:
        self._suite = suite
        self._tools = tools
        self._system = system_message
        self._prompt = prompt
        self._init_environment = init_environment
        self._injections = injections
        self._env: Any = None
        self._runtime: Any = None
        self._lock = asyncio.Lock()
        self.calls: list[dict[str, Any]] = []
        self.output: str | None = None

    def tools(self) -> list[dict[str, Any]]:
        return self._tools

    def initial_messages(self) -> list[dict[str, Any]]:
        return [{"role": "system", "content": self._system}, {"role": "user", "content": self._prompt}]

    async def _environment(self) -> Any:
        if self._env is None:
            from agentdojo.functions_runtime import FunctionsRuntime

            self._env = await asyncio.to_thread(fresh_environment, self._suite, self._init_environment,
                                                self._injections)
            self._runtime = FunctionsRuntime(self._suite.tools)
        return self._env

    async def call(self, name: str, arguments: dict[str, Any]) -> str:
        async with self._lock:  # the calls change one environment: one at a time, in the model's order
            env = await self._environment()
            call, text, error = execute_call(self._runtime, env, name, arguments)
            entry: dict[str, Any] = {"function": call.function, "args": _plain(dict(call.args))}
            if error is not None:
                entry["error"] = error
            self.calls.append(entry)
            return text

    async def on_assistant(self, message: dict[str, Any]) -> None:
        content = message.get("content")
        self.output = content if isinstance(content, str) else None

    def record(self) -> dict[str, Any]:
        return {"calls": list(self.calls), "output": self.output}


__all__ = ["AgentDojoSession", "execute_call", "fresh_environment"]
