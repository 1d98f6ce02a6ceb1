"""One try of a tau2 task as a ``ToolSession``: the domain's tools over a fresh copy of its database, and a user
simulator on a second model endpoint, following tau2's orchestrator.

The conversation starts as tau2's does: the agent's fixed greeting, to which the simulated user answers first.
The agent's tool calls run against the session's own ``Environment`` (tau2's tool code, its error texts); a text
answer goes to the user simulator, which sees only the agent's text messages (roles flipped, as tau2 does) under
tau2's user-simulator prompt with the task's scenario. The user ends the episode with tau2's stop signals
(``###STOP###``, ``###TRANSFER###``, ``###OUT-OF-SCOPE###``). tau2's budgets apply as its orchestrator counts
them: every message is a step (a turn's tool results are one), checked whenever the next message is not for the
environment; ``max_steps`` and ``max_errors`` (failed tool calls) end the episode early, which tau2 scores 0.

Hostile calls are the agent's mistakes, answered with an error it sees and kept out of the graded conversation
(tau2's grader replays every call in it): arguments that are no JSON object, too long or nested deeper than
``tool_json.MAX_DEPTH`` (listed in the record's ``rejected_tool_calls``), and a ``calculate`` whose arithmetic
would pass its size bound (``tau2_calculate``; counted as a failed call, as tau2 counts its errors). Every call
runs in a worker thread under ``tool_timeout_s`` (``tool_calls.run_tool_call``); a call past it is answered with
an error and ends the conversation as ``agent_error`` (scored 0), since its thread may still change the database.

``record()`` is the trajectory in tau2's message shape (assistant, user and tool messages with tool-call ids and
results), the termination reason and the counters: grading rebuilds tau2's ``SimulationRun`` from it.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ...interfaces import ModelClient
from ...models.adaptive import AdaptiveLimiter
from ...models.endpoint import ModelEndpoint, open_endpoint
from ...models.retry import RetryingModelClient
from ...tool_calls import DEFAULT_TOOL_TIMEOUT_S, ToolCallTimeout, run_tool_call
from ...tool_json import JSONBoundError, loads_bounded
from ...tools import ToolError, ToolSession
from .calculate import calculate_refusal
from .domain import is_user_stop, new_environment, tau2, tool_schemas, user_system_prompt

#: the user simulator's sampling, as tau2 runs it (``DEFAULT_LLM_ARGS_USER``) unless the endpoint's params say.
USER_DEFAULTS: dict[str, Any] = {"temperature": 0.0}
#: characters of a call's arguments the session parses (the harness refuses longer ones first).
MAX_ARGUMENT_CHARS = 256 * 1024
#: characters of a rejected call's raw arguments kept in the record.
MAX_REJECTED_CHARS = 1_000


class UserSimulatorError(RuntimeError):
    """The user simulator gave no usable turn (tau2 stops such a simulation with an error too)."""


class Tau2Session(ToolSession):
    """The tools and the simulated user of one try (see the module doc)."""

    def __init__(self, *, domain: str, task_id: str, scenario: str, initial_state: dict[str, Any] | None,
                 user_model: ModelEndpoint, system_prompt: str, max_steps: int, max_errors: int,
                 user_limiter: AdaptiveLimiter | None = None,
                 tool_timeout_s: float = DEFAULT_TOOL_TIMEOUT_S) -> None:
        self.domain = domain
        self.task_id = task_id
        self.scenario = scenario
        self.initial_state = initial_state
        self.user_model = user_model
        self.system_prompt = system_prompt
        self.max_steps = max_steps
        self.max_errors = max_errors
        self.user_limiter = user_limiter
        self.tool_timeout_s = tool_timeout_s
        self.tool_timeouts = 0
        self.messages: list[dict[str, Any]] = []  # tau2's trajectory
        self.termination: str | None = None
        self.steps = 0
        self.tool_errors = 0
        self.user_calls = 0
        self.rejected: list[dict[str, Any]] = []  # calls refused before reaching the environment
        self._env: Any = None
        self._client: ModelClient | None = None
        self._user_history: list[dict[str, Any]] = []
        self._first_user = ""
        self._pending: list[dict[str, Any]] = []  # the current turn's calls not executed yet
        self._executed: set[str] = set()
        self._env_step_open = False

    # -- the conversation --------------------------------------------------------------------------------------

    async def start(self) -> None:
        """A fresh environment, then tau2's greeting and the simulated user's first message."""
        self._env = await asyncio.to_thread(self._open_environment)
        client = open_endpoint(self.user_model)
        if self.user_limiter is not None and isinstance(client, RetryingModelClient):
            client.limiter = self.user_limiter  # one concurrency limit for the endpoint across every try
        self._client = client
        greeting = tau2().first_agent_message
        self.messages.append({"role": "assistant", "content": greeting})
        self._user_history = [{"role": "system", "content": user_system_prompt(self.scenario)}]
        self._first_user = await self._user_turn(greeting)

    def _open_environment(self) -> Any:
        env = new_environment(self.domain)
        state = self.initial_state or {}
        data, actions = state.get("initialization_data"), state.get("initialization_actions")
        if data or actions:
            t = tau2().tasks
            env.set_state(initialization_data=t.InitializationData.model_validate(data) if data else None,
                          initialization_actions=[t.EnvFunctionCall.model_validate(a) for a in actions or []] or None,
                          message_history=[])
        return env

    def tools(self) -> list[dict[str, Any]]:
        """The domain's agent tools (tau2's definitions)."""
        return [dict(t) for t in tool_schemas(self.domain)]

    def initial_messages(self) -> list[dict[str, Any]]:
        """tau2's agent system prompt (instructions and policy), its greeting and the user's first message."""
        return [{"role": "system", "content": self.system_prompt},
                {"role": "assistant", "content": tau2().first_agent_message},
                {"role": "user", "content": self._first_user}]

    def finished(self) -> bool:
        """Whether the user ended the conversation or a budget ran out."""
        self._close_env_step()
        return self.termination is not None

    async def on_assistant(self, message: dict[str, Any]) -> None:
        """Record the agent's turn; its text goes to the user, its calls to the environment."""
        self._close_env_step()
        if self.termination is not None:
            return
        calls = []
        for c in message.get("tool_calls") or []:
            fn = c.get("function") or {}
            raw = str(fn.get("arguments") or "{}")
            try:
                args = loads_bounded(raw, what="the arguments text", max_chars=MAX_ARGUMENT_CHARS)
            except JSONBoundError as exc:
                args, reason = None, str(exc)
            else:
                reason = "the arguments are not a JSON object"
            if isinstance(args, dict):
                calls.append({"id": str(c.get("id") or ""), "name": str(fn.get("name") or ""), "arguments": args})
            else:
                self._reject(c.get("id"), fn.get("name"), raw, reason)
        content = message.get("content") or None
        self.messages.append({"role": "assistant", "content": content, "tool_calls": calls or None})
        self.steps += 1
        self._pending = list(calls)
        self._env_step_open = bool(calls)
        if not calls:
            self._check_limits()

    async def call(self, name: str, arguments: dict[str, Any]) -> str:
        """Run one call of the current turn in the environment; the text is tau2's tool message."""
        if self.termination is not None:
            raise ToolError("the conversation has ended")
        index = next((i for i, c in enumerate(self._pending) if c["name"] == name and c["arguments"] == arguments),
                     None)
        if index is None:
            raise ToolError(f"no call of {name!r} with these arguments in this turn")
        pending = self._pending.pop(index)
        tool_call = tau2().message.ToolCall(id=pending["id"], name=name, arguments=arguments, requestor="assistant")
        try:
            result = await run_tool_call(self._respond, tool_call, timeout_s=self.tool_timeout_s,
                                         what=f"the call of {name}")
        except ToolCallTimeout:
            # its thread may still change the database: nothing more runs against it, the conversation ends
            self.tool_errors += 1
            self.tool_timeouts += 1
            self.termination = "agent_error"
            self._reject(pending["id"], name, arguments, "past its deadline")
            raise
        if isinstance(result, str):  # refused before tau2 evaluated it: kept out of the graded conversation
            self.tool_errors += 1
            self._reject(pending["id"], name, arguments, result)
            if not self._pending:
                self._close_env_step()
            raise ToolError(result)
        self.messages.append({"role": "tool", "id": pending["id"], "content": result.content,
                              "requestor": "assistant", "error": bool(result.error)})
        self._executed.add(pending["id"])
        if result.error:
            self.tool_errors += 1
        if not self._pending:
            self._close_env_step()
        return str(result.content)

    def _respond(self, tool_call: Any) -> Any:
        """tau2's answer to ``tool_call`` (its ``ToolMessage``), or the reason it is refused (run in a thread)."""
        if tool_call.name == "calculate":
            refusal = calculate_refusal(tool_call.arguments.get("expression"))
            if refusal is not None:
                return f"calculate refused: {refusal}"
        return self._env.get_response(tool_call)

    def _reject(self, call_id: Any, name: Any, arguments: Any, reason: str) -> None:
        text = arguments if isinstance(arguments, str) else repr(arguments)
        self.rejected.append({"id": call_id, "name": name, "arguments": text[:MAX_REJECTED_CHARS], "reason": reason})

    async def next_user_message(self, messages: list[dict[str, Any]]) -> str | None:
        """The simulated user's answer to the agent's last text message; None once the episode is over."""
        if self.finished():
            return None
        last = self.messages[-1] if self.messages else {}
        text = last.get("content") if last.get("role") == "assistant" else None
        if not text or not str(text).strip():
            # tau2 refuses an agent message with neither text nor tool calls: the simulation ends in error
            self.termination = "agent_error"
            return None
        reply = await self._user_turn(str(text))
        return None if self.termination is not None else reply

    async def _user_turn(self, agent_text: str) -> str:
        assert self._client is not None
        self._user_history.append({"role": "user", "content": agent_text})
        params = {k: v for k, v in USER_DEFAULTS.items() if k not in self.user_model.params}
        resp = await self._client.complete(list(self._user_history), **params)
        self.user_calls += 1
        text = resp.content or ""
        if not text.strip():
            raise UserSimulatorError(f"the user simulator ({self.user_model.id}) returned an empty message")
        self._user_history.append({"role": "assistant", "content": text})
        self.messages.append({"role": "user", "content": text})
        self.steps += 1
        if is_user_stop(text):
            self.termination = "user_stop"
        self._check_limits()
        return text

    def _close_env_step(self) -> None:
        # the turn's tool results are one step of tau2's, after which the budgets are checked; calls the harness
        # did not execute never reached the environment and are left out of the trajectory (see record)
        if self._env_step_open:
            self._env_step_open = False
            self._pending = []
            self.steps += 1
            self._check_limits()

    def _check_limits(self) -> None:
        if self.termination == "agent_error":
            return  # ended by a call past its deadline: the budgets do not re-label it
        if self.steps >= self.max_steps:
            self.termination = "max_steps"
        if self.tool_errors >= self.max_errors:
            self.termination = "too_many_errors"

    # -- the account ---------------------------------------------------------------------------------------------

    def record(self) -> dict[str, Any]:
        """The trajectory in tau2's message shape and how it ended (None: not ended by tau2's rules)."""
        out = []
        for m in self.messages:
            if m["role"] == "assistant" and m.get("tool_calls"):
                calls = [c for c in m["tool_calls"] if c["id"] in self._executed]
                m = {**m, "tool_calls": calls or None}
                if not calls and not m.get("content"):
                    continue
            out.append(m)
        return {"domain": self.domain, "task_id": self.task_id, "messages": out, "termination_reason": self.termination,
                "steps": self.steps, "tool_errors": self.tool_errors, "tool_timeouts": self.tool_timeouts,
                "user_calls": self.user_calls,
                "rejected_tool_calls": list(self.rejected)}

    async def aclose(self) -> None:
        """Close the user simulator's client."""
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()


__all__ = ["USER_DEFAULTS", "Tau2Session", "UserSimulatorError"]
