"""Building attempts for analyzer tests: the records an agent run would have produced."""

from __future__ import annotations

import json
from typing import Any

from agentcompass.interfaces import ComponentContext, TaskSpec
from agentcompass.records import AttemptRecord, Step, ToolCall, Trajectory

CTX = ComponentContext(run_id="t", request="t")


def task(files: dict[str, str] | None = None, prompt: str = "Do the task.") -> TaskSpec:
    """A public task (no ground truth), shaped like shell_tasks' inputs."""
    return TaskSpec(task_id="cat/task", category="cat", input={"prompt": prompt, "files": files or {}})


def shell(*commands: str, final_answer: str | None = "", **attempt: Any) -> AttemptRecord:
    """An attempt whose steps ran these shell commands (as the shell_agent records them)."""
    steps = [Step(index=i, content=f"```bash\n{c}\n```", action=c, observation="<returncode>0</returncode>",
                  exit_code=0, finish_reason="stop") for i, c in enumerate(commands)]
    steps.append(Step(index=len(steps), content="<submit></submit>", finish_reason="stop"))
    return AttemptRecord(status="completed", final_answer=final_answer, trajectory=Trajectory(steps=steps),
                         **attempt)


def tool_call(name: str, **arguments: Any) -> ToolCall:
    return ToolCall(id="call_1", name=name, arguments=json.dumps(arguments))


def tools(*calls: ToolCall) -> AttemptRecord:
    """An attempt of one tool call per step (as a tool-calling agent records them)."""
    steps = [Step(index=i, content="", tool_calls=[c], observation="ok", finish_reason="tool_calls")
             for i, c in enumerate(calls)]
    steps.append(Step(index=len(steps), content="Done.", finish_reason="stop"))
    return AttemptRecord(status="completed", final_answer="Done.", trajectory=Trajectory(steps=steps))


def messages(*contents: str, reasoning: str | None = None, finish: str = "stop",
             final_answer: str | None = None) -> AttemptRecord:
    """An attempt of model messages only (as openai_chat records them)."""
    steps = [Step(index=i, content=c, finish_reason=finish) for i, c in enumerate(contents)]
    if reasoning is not None and steps:
        steps[-1].reasoning = reasoning
    answer = final_answer if final_answer is not None else (contents[-1] if contents else None)
    return AttemptRecord(status="completed", final_answer=answer, trajectory=Trajectory(steps=steps))
