"""One try of an AgentDojo task: the suite's tools over a fresh copy of its environment (``ToolSession``).

The environment is the suite's default one with the attack's injections filled into its injection vectors (none
without an attack), then set up by the user task (``init_environment``), as AgentDojo's ``run_task_with_pipeline``
does. Each tool call runs through AgentDojo's ``FunctionsRuntime`` exactly as its ``ToolsExecutor`` runs it: an
unknown tool is refused with its message, arguments that are a list written as a string are parsed, the result is
formatted by ``tool_result_to_str`` (YAML) and an error goes back as the tool result the way its OpenAI pipeline
sends it; an argument AgentDojo's list parsing chokes on (where its own runner would crash) is an error result too.
The session states AgentDojo's limits: no cut of tool output (``max_tool_output`` is only a cap far above the
largest output) and ``max_iters`` rounds of tool calls (``max_tool_rounds``; AgentDojo's ``ToolsExecutionLoop``):
the calls of a model turn after the last round are not executed but are in the trace, as in AgentDojo's. Every
call runs in a worker thread under ``tool_timeout_s`` (``tool_calls.run_tool_call``): a call past it is answered
with an error, and since its thread may still change the environment, no later call runs (each is answered with an
error); those calls are in the trace but are not re-executed by the grader (``timed_out`` / ``executed``: False).
Arguments nested too deeply are refused by the harness before they reach the session (``tool_json``). The
record is the call trace (name, arguments, error, ``executed``: False for those) and the model's last answer:
grading re-executes the trace on a fresh copy of the same environment (``agentdojo_grading``).
"""

from __future__ import annotations

import asyncio
from ast import literal_eval
from collections.abc import Callable
from typing import Any

from ...tool_calls import DEFAULT_TOOL_TIMEOUT_S, ToolCallTimeout, run_tool_call
from ...tool_json import JSONBoundError, loads_bounded
from ...tools import ToolError, ToolSession

#: AgentDojo's ``ToolsExecutionLoop`` default: rounds of tool calls after the first model turn.
MAX_ITERS = 15
#: the longest string argument parsed as a Python literal (a list written as a string): the parser's memory grows
#: with the input, and no real list argument comes near it.
MAX_LITERAL_CHARS = 10_000
#: characters of a call's arguments the session parses (the harness refuses longer ones first).
MAX_ARGUMENT_CHARS = 256 * 1024
#: a cap on the tool output the model sees, far above AgentDojo's largest (29 k characters): AgentDojo cuts none.
MAX_TOOL_OUTPUT = 1_000_000


def _as_list(value: str) -> Any:
    """``value`` parsed as AgentDojo's ``is_string_list`` + ``literal_eval`` parse it: the list, or ``value``
    itself when it is not a list written as a string. ValueError for an argument the parse fails on in ways
    AgentDojo does not catch (its runner would crash) or one too long to parse."""
    if len(value) > MAX_LITERAL_CHARS:
        stripped = value.strip()
        if stripped[:1] in ("[", "(") and stripped[-1:] in ("]", ")"):
            raise ValueError(f"a list argument of {len(value)} characters is too long (at most {MAX_LITERAL_CHARS})")
        return value  # a long text that is no list literal: not parsed (the parser's memory grows with it)
    try:
        parsed = literal_eval(value)
    except (ValueError, SyntaxError):
        return value
    except Exception as exc:  # TypeError (unhashable), MemoryError, RecursionError: the model's text, not a bug
        raise ValueError(f"{type(exc).__name__}: {exc}") from None
    return parsed if isinstance(parsed, list) else value


def _unchanged(environment: Any) -> Any:
    return environment


def initializer(task: Any) -> Callable[[Any], Any]:
    """The task's ``init_environment``: a user task's own; an injection task run alone as a user task has none
    (AgentDojo's ``run_task_with_pipeline`` leaves the environment as it is)."""
    init = getattr(task, "init_environment", None)
    return init if callable(init) else _unchanged


def fresh_environment(suite: Any, init_environment: Callable[[Any], Any], injections: dict[str, str]) -> Any:
    """The suite's default environment with ``injections`` in its vectors, set up by the user task's
    ``init_environment`` (CPU-bound: a YAML parse and a pydantic validation; call it off the event loop)."""
    return init_environment(suite.load_and_inject_default_environment(dict(injections)))


def execute_call(runtime: Any, env: Any, name: str, arguments: dict[str, Any]) -> tuple[Any, str, str | None]:
    """Run one tool call as AgentDojo's ``ToolsExecutor`` does: (the ``FunctionCall`` for the trace, the result text
    the model sees, the error or None)."""
    from agentdojo.agent_pipeline.tool_execution import tool_result_to_str
    from agentdojo.functions_runtime import FunctionCall

    call = FunctionCall(function=name, args=dict(arguments))
    if name not in runtime.functions:
        error = f"Invalid tool {name} provided."
        return call, error, error
    for key, value in call.args.items():
        if isinstance(value, str):
            try:
                call.args[key] = _as_list(value)
            except ValueError as exc:
                error = f"ValueError: argument {key!r} could not be parsed: {exc}"
                return call, error, error
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

    max_tool_output = MAX_TOOL_OUTPUT

    def __init__(self, suite: Any, tools: list[dict[str, Any]], system_message: str, prompt: str,
                 init_environment: Callable[[Any], Any], injections: dict[str, str], *,
                 max_iters: int = MAX_ITERS, tool_timeout_s: float = DEFAULT_TOOL_TIMEOUT_S) -> None:
        self.max_tool_rounds = max_iters
        self._max_iters = max_iters
        self._turns_with_calls = 0
        self._suite = suite
        self._tools = tools
        self._system = system_message
        self._prompt = prompt
        self._init_environment = init_environment
        self._injections = injections
        self._env: Any = None
        self._runtime: Any = None
        self._lock = asyncio.Lock()
        self.tool_timeout_s = tool_timeout_s
        self._lost: str | None = None  # why the environment takes no more calls (a call ran past its deadline)
        self.calls: list[dict[str, Any]] = []
        self.output: str | None = None

    def tools(self) -> list[dict[str, Any]]:
        return self._tools

    def initial_messages(self) -> list[dict[str, Any]]:
        return [{"role": "system", "content": self._system}, {"role": "user", "content": self._prompt}]

    async def _environment(self) -> Any:
        if self._env is None:
            from agentdojo.functions_runtime import FunctionsRuntime

            self._env = await run_tool_call(fresh_environment, self._suite, self._init_environment,
                                            self._injections, timeout_s=self.tool_timeout_s,
                                            what="building the environment")
            self._runtime = FunctionsRuntime(self._suite.tools)
        return self._env

    async def call(self, name: str, arguments: dict[str, Any]) -> str:
        async with self._lock:  # the calls change one environment: one at a time, in the model's order
            if self._lost is not None:
                self.calls.append({"function": name, "args": dict(arguments), "executed": False})
                raise ToolError(f"the environment is unavailable: {self._lost}")
            try:
                env = await self._environment()
                # off the loop: validation, the tool and the YAML dump are CPU work the other tries must not wait on
                call, text, error = await run_tool_call(execute_call, self._runtime, env, name, arguments,
                                                        timeout_s=self.tool_timeout_s, what=f"the call of {name}")
            except ToolCallTimeout as exc:
                self._lost = str(exc)
                self.calls.append({"function": name, "args": dict(arguments), "error": str(exc), "timed_out": True})
                raise
            entry: dict[str, Any] = {"function": call.function, "args": _plain(dict(call.args))}
            if error is not None:
                entry["error"] = error
            self.calls.append(entry)
            return text

    async def on_assistant(self, message: dict[str, Any]) -> None:
        content = message.get("content")
        self.output = content if isinstance(content, str) else None
        tool_calls = message.get("tool_calls") or []
        if not tool_calls:
            return
        self._turns_with_calls += 1
        if self._turns_with_calls > self._max_iters:
            # the harness will not execute them (the rounds are spent), but AgentDojo's trace lists them
            for tc in tool_calls:
                function = tc.get("function") or {}
                try:
                    args = loads_bounded(function.get("arguments") or "{}", what="the arguments text",
                                         max_chars=MAX_ARGUMENT_CHARS)
                except JSONBoundError:
                    continue  # not in AgentDojo's trace either (its pipeline cannot parse them)
                if isinstance(args, dict):
                    self.calls.append({"function": str(function.get("name")), "args": args, "executed": False})

    def record(self) -> dict[str, Any]:
        return {"calls": list(self.calls), "output": self.output}


__all__ = ["AgentDojoSession", "execute_call", "fresh_environment", "initializer"]
