"""The ``terminus`` harness: a Terminus-style terminal agent (as used for Terminal-Bench).

The harness runs on the host and calls the model through the engine's ``ModelClient``; the model works a tmux
session inside the task's environment by keystrokes. Each reply is one JSON object (see ``_terminus_reply``):
its commands' keystrokes are typed into the terminal one by one, each followed by a wait of its ``duration``
(capped at ``max_duration_s``); then the new terminal output goes back to the model. A first
``"task_complete": true`` asks the model to confirm; a second ends the run. A reply that is not such an object
gets the parse error back (``parse_error_limit`` in a row end the run). The tmux server is killed at the end on
every path.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Annotated, Any, ClassVar

import msgspec

from ..._errors import EnvironmentError_
from ..._validate import MAX_COUNT, Count, Seconds
from ...common.error_kinds import ErrorKind
from ...interfaces import ComponentContext, Environment, HarnessResult, ModelClient, PreparedTask, RunContext
from ...records import Step, Usage
from .. import model_turn, truncate_middle
from ..base import Harness
from .reply import Reply, parse_reply
from .tmux_session import SessionGone, TmuxSession, is_key_names

DEFAULT_SYSTEM_PROMPT = """\
You are an AI assistant solving a task in a Linux terminal. You work a tmux session by sending keystrokes, \
and after each reply you see what the terminal printed.

Reply with exactly one JSON object and nothing else:
{
  "analysis": "what the terminal output tells you and what is still to be done",
  "plan": "what the commands below do and why",
  "commands": [
    {"keystrokes": "ls -la\\n", "duration": 0.1},
    {"keystrokes": "cd project\\n", "duration": 0.1}
  ],
  "task_complete": false
}

- "keystrokes" is typed into the terminal exactly as given: end a command with \\n to run it. A value made \
only of tmux key names (such as "C-c", "C-d", "Escape", "Up", "Tab", "Enter") presses those keys.
- "duration" is how many seconds to wait after the keystrokes before the terminal is read: 0.1 for quick \
commands such as ls or cat, a few seconds for builds and installs; waits are capped at {max_duration} seconds. \
If a command is still running when the terminal is read, you can send an empty command list and wait again.
- "commands" may be empty. Do not start interactive programs you cannot leave with keystrokes.
- Set "task_complete" to true when the task is done; you will be asked to confirm once, and the run ends \
when you confirm.
"""

PARSE_ERROR = """\
Your previous response could not be used: {problem}.
Reply with exactly one JSON object with the fields "analysis", "plan", "commands" (a list of \
{{"keystrokes": "...", "duration": seconds}}) and "task_complete" (true or false)."""

CONFIRM = """\
{terminal}

You marked the task as complete. Your work will then be graded and you cannot change it any more. If you \
are sure, reply again with "task_complete": true; otherwise continue working."""

SESSION_ENDED = "The terminal session ended (its shell exited): {detail}"


class TerminusParams(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """``terminus`` params (see ``Terminus``)."""

    step_limit: Count = 50
    max_duration_s: Seconds = 60.0
    cols: Annotated[int, msgspec.Meta(ge=20, le=1000)] = 160
    rows: Annotated[int, msgspec.Meta(ge=5, le=1000)] = 40
    history_limit: Annotated[int, msgspec.Meta(ge=100, le=MAX_COUNT)] = 10000
    observation_limit: Annotated[int, msgspec.Meta(ge=100, le=MAX_COUNT)] = 10000
    parse_error_limit: Count = 3
    system_prompt: str | None = None
    model_params: dict[str, Any] | None = None
    tmux_path: Annotated[str, msgspec.Meta(min_length=1)] = "tmux"


class Terminus(Harness):
    """The Terminus-style terminal agent.

    Params: ``step_limit`` model turns (50), ``max_duration_s`` cap of one command's wait (60), ``cols`` x
    ``rows`` of the terminal (160 x 40), ``history_limit`` scrollback lines (10000), ``observation_limit``
    characters of terminal output per turn (10000), ``parse_error_limit`` unusable replies in a row (3),
    ``system_prompt`` (override; ``{max_duration}`` is filled in), ``model_params`` (merged into every model
    call), ``tmux_path`` (the tmux program in the environment).
    Stop reasons: ``task_complete``, ``step_limit``, ``format_error_limit``, ``session_ended``.
    """

    name: ClassVar[str] = "terminus"
    evaluates: ClassVar[bool] = True
    needs_environment: ClassVar[bool] = True
    Params: ClassVar[type[TerminusParams]] = TerminusParams
    params: TerminusParams

    def __init__(self, params: TerminusParams | dict[str, Any], ctx: ComponentContext) -> None:
        super().__init__(params, ctx)
        template = self.params.system_prompt or DEFAULT_SYSTEM_PROMPT
        self.system_prompt = template.replace("{max_duration}", f"{self.params.max_duration_s:g}")
        self.model_params = dict(self.params.model_params or {})

    async def setup(self, task: PreparedTask, env: Environment, log: logging.Logger) -> None:
        """Fail early, with what to install, when the environment has no tmux (with auto_install_dependencies,
        install it with the environment's package manager first)."""
        await TmuxSession(env, tmux=self.params.tmux_path).check_installed(
            auto_install=self.ctx.auto_install_dependencies)

    async def run(self, task: PreparedTask, env: Environment | None, model: ModelClient,
                  ctx: RunContext, log: logging.Logger) -> HarnessResult:
        if env is None:
            raise EnvironmentError_("terminus needs an environment but got none")
        p = self.params
        session = TmuxSession(env, tmux=p.tmux_path, cols=p.cols, rows=p.rows, history_limit=p.history_limit)
        trajectory = ctx.trajectory  # steps land where the engine can still read them if it stops us
        trajectory.started_at = time.time()
        usage = Usage()
        result = HarnessResult(trajectory=trajectory, usage=usage,
                               artifacts={"terminus": {"tmux_socket": session.socket, "session": session.name}})
        stop_reason: str = ErrorKind.STEP_LIMIT
        try:
            await session.start()
            screen, _ = await session.read()
            messages: list[dict[str, Any]] = [
                {"role": "system", "content": self.system_prompt},
                {"role": "user", "content": f"{task.prompt}\n\nCurrent terminal screen:\n{screen}"},
            ]
            parse_errors = 0
            pending_completion = False
            for index in range(p.step_limit):
                step = await model_turn(model, messages, index, usage, self.model_params)
                trajectory.steps.append(step)
                reply = parse_reply(step.content or "")
                if reply.error is not None:
                    parse_errors += 1
                    step.observation = PARSE_ERROR.format(problem=reply.error)
                    log.info("step %d: parse error (%s)", index, reply.error)
                    if parse_errors >= p.parse_error_limit:
                        stop_reason = ErrorKind.FORMAT_ERROR_LIMIT
                        break
                    messages.append({"role": "user", "content": step.observation})
                    continue
                parse_errors = 0
                try:
                    terminal = await self._act(session, reply, step)
                except SessionGone as exc:
                    step.observation = SESSION_ENDED.format(detail=exc)
                    log.info("step %d: %s", index, step.observation)
                    stop_reason = "session_ended"
                    break
                log.info("step %d: %d command(s), task_complete=%s", index, len(reply.commands),
                         reply.task_complete)
                if reply.task_complete and pending_completion:
                    stop_reason = "task_complete"
                    break
                pending_completion = reply.task_complete
                messages.append({"role": "user",
                                 "content": CONFIRM.format(terminal=terminal) if reply.task_complete else terminal})
        finally:
            await session.kill()
        trajectory.finished_at = time.time()
        trajectory.stop_reason = stop_reason
        if stop_reason in (ErrorKind.STEP_LIMIT, ErrorKind.FORMAT_ERROR_LIMIT):  # a budget ran out: still graded
            result.error_kind = ErrorKind.of(stop_reason)
            result.error = (f"the agent used all {p.step_limit} steps without confirming task_complete"
                            if stop_reason == ErrorKind.STEP_LIMIT else
                            f"{p.parse_error_limit} replies in a row were not a usable JSON object")
        return result

    async def _act(self, session: TmuxSession, reply: Reply, step: Step) -> str:
        """Send the reply's commands, each followed by its wait; the terminal output for the model."""
        t0 = time.monotonic()
        typed: list[str] = []
        for command in reply.commands:
            await session.send(command.keystrokes)
            typed.append(f"<{command.keystrokes.strip()}>" if is_key_names(command.keystrokes)
                         else command.keystrokes)
            await asyncio.sleep(min(command.duration, self.params.max_duration_s))
        text, incremental = await session.read()
        step.exec_latency_s = time.monotonic() - t0
        step.action = "".join(typed) if typed else None
        heading = "New terminal output:" if incremental else "Current terminal screen:"
        step.observation = f"{heading}\n{truncate_middle(text, self.params.observation_limit)}"
        return step.observation


__all__ = ["DEFAULT_SYSTEM_PROMPT", "Terminus", "TerminusParams"]
