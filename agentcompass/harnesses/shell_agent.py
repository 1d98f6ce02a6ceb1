"""The ``shell_agent`` harness: a small native multi-turn agent that acts through shell commands.

Protocol (told to the model in the system prompt): a reply holds exactly one ```bash block, which runs in
the workspace; its result comes back as ``<returncode>N</returncode>\\n<output>\\n...\\n</output>``.
``<submit>ANSWER</submit>`` ends the run (a command in the same reply runs first). Agent-level problems
(format errors, step limit) are recorded as stop reasons; model and environment failures propagate so the
engine can classify and retry them.
"""

from __future__ import annotations

import logging
import re
import time
from typing import Annotated, Any, ClassVar

import msgspec

from .._errors import EnvironmentError_
from .._validate import MAX_COUNT, Count, Seconds
from ..common.error_kinds import ErrorKind
from ..interfaces import ComponentContext, Environment, HarnessResult, ModelClient, PreparedTask, RunContext
from ..records import Usage
from . import model_turn, truncate_middle
from .base import Harness

TIMEOUT_EXIT_CODE = 124
FORMAT_ERROR_LIMIT = 3

_BASH_BLOCK = re.compile(r"```(?:bash|sh)[ \t]*\r?\n(.*?)```", re.DOTALL)
_SUBMIT = re.compile(r"<submit>(.*?)</submit>", re.DOTALL)

DEFAULT_SYSTEM_PROMPT = """\
You are an autonomous agent solving a task by running shell commands in a workspace.

Each reply must contain exactly ONE shell command (it may be several lines or use && and pipes) in a \
fenced block:

```bash
your command here
```

The command runs in the workspace directory (a fresh shell each time, so `cd` does not persist). \
You then get its result as:
<returncode>N</returncode>
<output>
...
</output>

Do not run interactive programs (editors, pagers) or commands that never end; long outputs are truncated.
When the task is done, reply with <submit>FINAL ANSWER</submit>. The content may be empty when the \
task only asks you to change files. If a reply contains both a bash block and <submit>, the command runs \
first and then the run ends.
"""

FORMAT_ERROR = """\
Format error: {problem}. Reply with exactly one ```bash fenced block holding the command to run, \
or with <submit>FINAL ANSWER</submit> to finish."""


class ParsedReply:
    """What a model reply asks for: a command, a submission, or neither (a format error)."""

    def __init__(self, content: str) -> None:
        blocks = _BASH_BLOCK.findall(content)
        submits = _SUBMIT.findall(content)
        self.submit: str | None = submits[0].strip() if submits else None
        self.command: str | None = None
        self.problem: str | None = None
        if len(blocks) > 1:
            self.problem = f"found {len(blocks)} bash blocks, expected exactly one"
        elif blocks:
            self.command = blocks[0].strip()
            if not self.command and self.submit is None:
                self.problem = "the bash block is empty"
        elif self.submit is None:
            self.problem = "found no ```bash block and no <submit>"


class ShellAgentParams(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """``shell_agent`` params (see ``ShellAgent``)."""

    step_limit: Count = 30
    command_timeout: Seconds = 60.0
    observation_limit: Annotated[int, msgspec.Meta(ge=100, le=MAX_COUNT)] = 10000
    system_prompt: str | None = None
    model_params: dict[str, Any] | None = None


class ShellAgent(Harness):
    """The native multi-turn shell agent.

    Params: ``step_limit`` (30), ``command_timeout`` seconds (60), ``observation_limit`` characters
    (10000), ``system_prompt`` (override), ``model_params`` (dict merged into every model call).
    Stop reasons: ``submitted``, ``step_limit``, ``format_error_limit``.
    """

    name: ClassVar[str] = "shell_agent"
    evaluates: ClassVar[bool] = True
    needs_environment: ClassVar[bool] = True
    Params: ClassVar[type[ShellAgentParams]] = ShellAgentParams
    params: ShellAgentParams

    def __init__(self, params: ShellAgentParams | dict[str, Any], ctx: ComponentContext) -> None:
        super().__init__(params, ctx)
        p = self.params
        self.step_limit = p.step_limit
        self.command_timeout = p.command_timeout
        self.observation_limit = p.observation_limit
        self.system_prompt = p.system_prompt or DEFAULT_SYSTEM_PROMPT
        self.model_params = dict(p.model_params or {})

    async def run(self, task: PreparedTask, env: Environment | None, model: ModelClient,
                  ctx: RunContext, log: logging.Logger) -> HarnessResult:
        if env is None:
            raise EnvironmentError_("shell_agent needs an environment but got none")
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": self.system_prompt},
            {"role": "user", "content": task.prompt},
        ]
        trajectory = ctx.trajectory  # steps land where the engine can still read them if it stops us
        trajectory.started_at = time.time()
        usage = Usage()
        final_answer: str | None = None
        stop_reason = "step_limit"
        format_errors = 0
        timeouts: list[str] = []
        for index in range(self.step_limit):
            step = await model_turn(model, messages, index, usage, self.model_params)
            trajectory.steps.append(step)
            content = step.content or ""
            reply = ParsedReply(content)
            if reply.problem is not None:
                format_errors += 1
                step.observation = FORMAT_ERROR.format(problem=reply.problem)
                log.info("step %d: format error (%s)", index, reply.problem)
                if format_errors >= FORMAT_ERROR_LIMIT:
                    stop_reason = "format_error_limit"
                    break
                messages.append({"role": "user", "content": step.observation})
                continue
            format_errors = 0
            if reply.command:
                step.action = reply.command
                step.observation, step.exit_code, step.exec_latency_s = await self._execute(
                    env, reply.command)
                log.info("step %d: exit %s after %.2fs: %s", index, step.exit_code, step.exec_latency_s,
                         reply.command[:200])
                if step.exit_code == TIMEOUT_EXIT_CODE and "<timeout>" in step.observation:
                    timeouts.append(reply.command[:200])
                if reply.submit is None:
                    messages.append({"role": "user", "content": step.observation})
            if reply.submit is not None:
                final_answer = reply.submit
                stop_reason = "submitted"
                break
        trajectory.finished_at = time.time()
        trajectory.stop_reason = stop_reason
        result = HarnessResult(final_answer=final_answer, trajectory=trajectory, usage=usage)
        if timeouts:  # recorded (the attempt is still graded): the agent ran something that never ended
            result.error_kind = ErrorKind.COMMAND_TIMEOUT
            result.error = (f"{len(timeouts)} command(s) killed at the {self.command_timeout:g}s command_timeout, "
                            f"first: {timeouts[0]}")
        return result

    async def _execute(self, env: Environment, command: str) -> tuple[str, int, float]:
        """Run one command; return (observation, exit code, seconds)."""
        t0 = time.monotonic()
        res = await env.exec(command, timeout=self.command_timeout, cwd=env.workdir)
        elapsed = time.monotonic() - t0
        output = truncate_middle(res.output, self.observation_limit)
        observation = f"<returncode>{res.exit_code}</returncode>\n<output>\n{output}\n</output>"
        if res.timed_out:
            observation += (f"\n<timeout>The command timed out after {self.command_timeout:g} seconds and "
                            "was killed. Avoid long-running or interactive commands.</timeout>")
        return observation, res.exit_code, elapsed
