"""What one step may put into a detail file: each text field of a trajectory step (and an attempt's final
answer) is cut to ``STEP_TEXT_LIMIT`` characters, head and tail kept around a visible marker, so a model or
a command that produced hundreds of MB cannot make a detail file that large."""

from __future__ import annotations

from ..common.text import truncate_middle
from ..records import TaskDetail

#: characters kept of one step's content / reasoning / action / observation / tool-call arguments.
STEP_TEXT_LIMIT = 1 << 20


def _clip(text: str | None) -> str | None:
    return text if text is None or len(text) <= STEP_TEXT_LIMIT else truncate_middle(text, STEP_TEXT_LIMIT)


def clip_detail(detail: TaskDetail) -> TaskDetail:
    """``detail`` with every over-long step text cut (in place; returned for chaining)."""
    for attempt in detail.attempts.values():
        attempt.final_answer = _clip(attempt.final_answer)
        if attempt.trajectory is None:
            continue
        for step in attempt.trajectory.steps:
            step.content = _clip(step.content)
            step.reasoning = _clip(step.reasoning)
            step.action = _clip(step.action)
            step.observation = _clip(step.observation)
            for call in step.tool_calls:
                call.arguments = _clip(call.arguments) or ""
    return detail
