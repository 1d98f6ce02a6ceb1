"""A benchmark's tools for one try: the contract between tool-use benchmarks and the ``tool_agent`` harness.

A tool-use benchmark (BFCL, tau2, AgentDojo) returns a ``ToolSession`` from ``Benchmark.tool_session``; the engine
hands it to the harness in ``RunContext.tools``. The session runs on the host, in the benchmark's code: the model
only ever sees the messages and tool results the session gives it, and never the task's ground truth. The harness
offers ``tools()`` through the model's native tool calling (all three protocols take OpenAI-shaped tools), passes
every assistant turn to ``on_assistant``, executes each tool call with ``call`` when ``executes_tools``, and asks
``next_user_message`` for the next user turn when the model answers without a tool call (a multi-turn question's
next part, a simulated user's reply); None ends the episode. ``start()`` runs before ``initial_messages()`` (a
start that needs I/O); ``finished()`` lets the session end the episode before the next model turn (a budget
spent); ``ends_turn()`` ends the current user turn once an assistant turn's calls are answered.
``max_tool_output`` and ``max_tool_rounds`` state the benchmark's own limits (how much of a tool result the model
sees, how many rounds of tool calls it gets), so a default run gives the benchmark's numbers; the harness honours
them (a ``tool_output_limit`` the user sets on the harness still wins). ``record()`` is the JSON-able account the
benchmark grades from (the harness puts it in ``HarnessResult.artifacts["tool_session"]``).
"""

from __future__ import annotations

import abc
from typing import Any, ClassVar

#: the key of the session's record in ``HarnessResult.artifacts``.
RECORD_KEY = "tool_session"


class ToolError(Exception):
    """A tool call the session refuses or that failed: its message goes back to the model as the tool result."""


class ToolSession(abc.ABC):
    """The tools, the conversation's user side and the record of one try (see the module doc)."""

    #: False: the model's tool calls are its answer and are not executed (e.g. BFCL's single-turn AST
    #: categories); the episode then ends after the first assistant turn unless ``next_user_message`` goes on.
    executes_tools: ClassVar[bool] = True
    #: characters of one tool result the model sees, as the benchmark poses it; None: the harness's default. A
    #: ``tool_output_limit`` the user sets on the harness overrides it.
    max_tool_output: int | None = None
    #: rounds of tool execution the benchmark allows (AgentDojo: 15); None: no limit of its own. A model turn
    #: after the last round ends the episode with its calls not executed (the harness's ``step_limit`` still
    #: applies when smaller).
    max_tool_rounds: int | None = None

    @abc.abstractmethod
    def tools(self) -> list[dict[str, Any]]:
        """The tools offered now, OpenAI chat shape: ``{"type": "function", "function": {"name", "description",
        "parameters"}}`` (may change between user turns)."""

    @abc.abstractmethod
    def initial_messages(self) -> list[dict[str, Any]]:
        """The conversation's start: an optional system message and the first user message (OpenAI chat shape)."""

    async def start(self) -> None:
        """Open the conversation before ``initial_messages`` is read, for a start that needs I/O (a simulated
        user's first message is a model call). Default: nothing."""
        return None  # nothing to open by default

    def finished(self) -> bool:
        """True once the episode is over by the session's own rules (a simulated user ended it, a step or error
        budget is spent): the harness makes no further model turn. Default: False."""
        return False

    def ends_turn(self) -> bool:
        """True after an assistant turn whose calls end the user's turn (BFCL: a step that does not decode): once
        its calls are answered, the harness asks ``next_user_message`` instead of the model. Default: False."""
        return False

    async def call(self, name: str, arguments: dict[str, Any]) -> str:
        """Execute one tool call; the text is the tool result the model sees. Raise ``ToolError`` for a call the
        model got wrong (unknown tool, bad arguments): its message is the result. Default: refuses every call."""
        raise ToolError(f"tool {name!r} is not available")

    async def on_assistant(self, message: dict[str, Any]) -> None:
        """Every assistant turn as it is appended (``content`` and ``tool_calls`` in OpenAI shape, arguments a
        JSON string), before its calls are executed. Default: nothing."""
        return None  # a hook with nothing to do by default

    async def next_user_message(self, messages: list[dict[str, Any]]) -> str | None:
        """The next user turn after an assistant turn without tool calls (or any turn when tools are not
        executed); None ends the episode. Default: None (one user turn)."""
        return None  # one user turn by default

    def record(self) -> dict[str, Any]:
        """What grading needs (msgspec/JSON-encodable), kept in the attempt's artifacts. Default: ``{}``."""
        return {}

    async def aclose(self) -> None:
        """Release what the session holds (a user-simulator client, a subprocess). Default: nothing."""
        return None  # nothing held by default


__all__ = ["RECORD_KEY", "ToolError", "ToolSession"]
