"""What analyzers read out of an attempt: actions (shell commands and tool calls), assistant texts, the patch."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Annotated, Any

import msgspec

from .._validate import MAX_COUNT
from ..records import AttemptRecord

#: a param counting repeats or branches: one is no repetition, so at least 2.
Repeats = Annotated[int, msgspec.Meta(ge=2, le=MAX_COUNT)]
EVIDENCE_CHARS = 200
MAX_EVIDENCE = 20
#: tool names that run a shell command (their ``command``/``cmd`` argument is the command).
_SHELL_TOOL = re.compile(r"bash|shell|exec|terminal|run_command|execute", re.IGNORECASE)
_COMMAND_KEYS = ("command", "cmd", "script")
PATH_KEYS = ("path", "file_path", "filename", "file", "target_file")
CONTENT_KEYS = ("file_text", "content", "new_str", "new_string", "text", "code")


def cap(text: str, limit: int = EVIDENCE_CHARS) -> str:
    """``text`` cut to ``limit`` characters (with an ellipsis)."""
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass
class Action:
    """One thing the agent did: a shell command or a (non-shell) tool call."""

    step: int
    kind: str  # "shell" | "tool"
    text: str  # the command, or "name(arguments)"
    tool: str | None = None
    args: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """Identity for repetition checks."""
        if self.kind == "shell":
            return " ".join(self.text.split())
        return f"{self.tool}:{json.dumps(self.args, sort_keys=True)}"


def parse_arguments(arguments: str) -> dict[str, Any]:
    """A tool call's JSON arguments as a dict (``{"_raw": text}`` when not a JSON object)."""
    try:
        value = json.loads(arguments) if arguments else {}
    except ValueError:
        return {"_raw": arguments}
    return value if isinstance(value, dict) else {"_raw": arguments}


def actions(attempt: AttemptRecord) -> list[Action]:
    """Every action of the attempt's trajectory, in order.

    A step's ``action`` (what the harness ran) wins over shell-tool calls of the same step, which would
    describe the same command again; other tool calls (file editors...) are kept."""
    out: list[Action] = []
    traj = attempt.trajectory
    if traj is None:
        return out
    for step in traj.steps:
        index = step.index
        if step.action:
            out.append(Action(index, "shell", step.action))
        for tc in step.tool_calls:
            args = parse_arguments(tc.arguments)
            command = next((args[k] for k in _COMMAND_KEYS if isinstance(args.get(k), str)), None)
            is_shell = bool(_SHELL_TOOL.search(tc.name)) and command is not None
            if is_shell:
                if not step.action:
                    out.append(Action(index, "shell", str(command), tc.name, args))
                continue
            out.append(Action(index, "tool", f"{tc.name}({tc.arguments})", tc.name, args))
    return out


def assistant_texts(attempt: AttemptRecord, *, reasoning: bool = True) -> Iterator[tuple[int | None, str, str]]:
    """(step index, field, text) of what the model wrote: each step's content (and reasoning), then the
    final answer when it is not just a copy of the last content."""
    traj = attempt.trajectory
    last = ""
    if traj is not None:
        for step in traj.steps:
            index = step.index
            if step.content:
                yield index, "content", step.content
                last = step.content
            if reasoning and step.reasoning:
                yield index, "reasoning", step.reasoning
    answer = attempt.final_answer or ""
    if answer.strip() and answer.strip() not in last:
        yield None, "final_answer", answer


def attempt_patch(attempt: AttemptRecord) -> str:
    """The attempt's patch: the graded one (``extra.model_patch``, SWE-bench) or the harness's."""
    for source in (attempt.extra.get("model_patch"), attempt.artifacts.get("patch")):
        if isinstance(source, str) and source.strip():
            return source
    return ""


def task_texts(value: Any, budget: int = 200_000) -> str:
    """The strings of a task's public input joined (bounded), e.g. to see which scripts the prompt uses."""
    parts: list[str] = []
    stack = [value]
    size = 0
    while stack and size < budget:
        item = stack.pop()
        if isinstance(item, str):
            parts.append(item[: budget - size])
            size += len(parts[-1])
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return "\n".join(parts)
