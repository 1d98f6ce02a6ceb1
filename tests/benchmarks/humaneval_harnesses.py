"""Test-only harnesses for ``humaneval`` that need no model: they hand in a known completion, loaded by dotted path.

``completion``: ``canonical`` (the dataset's own solution), ``empty`` (nothing), or ``given`` (``code`` for every
task). ``FileHarness`` writes it to ``solution.py`` in the agent's environment; ``AnswerHarness`` gives it as the
final answer and needs no environment.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar, Literal

import msgspec

from agentcompass.benchmarks.humaneval.benchmark import all_problems
from agentcompass.interfaces import (
    ComponentContext,
    Environment,
    Harness,
    HarnessResult,
    ModelClient,
    PreparedTask,
    RunContext,
)
from agentcompass.params import as_params


class CompletionParams(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """What to hand in."""

    completion: Literal["canonical", "empty", "given"] = "canonical"
    code: str = ""


def _canonical(task_id: str) -> str:
    return next(p.canonical_solution for p in all_problems() if p.task_id == task_id)


class FileHarness(Harness):
    """Writes the completed program (prompt + completion, or ``code`` as is) to ``solution.py``."""

    needs_environment: ClassVar[bool] = True
    Params: ClassVar[type[CompletionParams]] = CompletionParams

    def __init__(self, params: CompletionParams | dict[str, Any], ctx: ComponentContext) -> None:
        self.p = as_params(CompletionParams, params, "harness FileHarness")

    async def run(self, task: PreparedTask, env: Environment | None, model: ModelClient, ctx: RunContext,
                  log: logging.Logger) -> HarnessResult:
        assert env is not None
        if self.p.completion != "empty":
            content = (task.files["solution.py"] + _canonical(task.task_id) if self.p.completion == "canonical"
                       else self.p.code)
            await env.write_file(f"{env.workdir}/solution.py", content)
        return HarnessResult(final_answer="Done.")


class AnswerHarness(Harness):
    """Gives the completion (the canonical body, or ``code``) in a fenced block of its final answer."""

    needs_environment: ClassVar[bool] = False
    Params: ClassVar[type[CompletionParams]] = CompletionParams

    def __init__(self, params: CompletionParams | dict[str, Any], ctx: ComponentContext) -> None:
        self.p = as_params(CompletionParams, params, "harness AnswerHarness")

    async def run(self, task: PreparedTask, env: Environment | None, model: ModelClient, ctx: RunContext,
                  log: logging.Logger) -> HarnessResult:
        if self.p.completion == "empty":
            return HarnessResult(final_answer="")
        code = _canonical(task.task_id) if self.p.completion == "canonical" else self.p.code
        return HarnessResult(final_answer=f"Here it is:\n```python\n{code}```\n")
