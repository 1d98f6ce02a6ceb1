"""The ``terminus`` harness's reply format: one JSON object of analysis, plan, commands and task_complete.

    {"analysis": "...", "plan": "...",
     "commands": [{"keystrokes": "ls -la\\n", "duration": 0.5}],
     "task_complete": false}

The object may be wrapped in prose or a ```json fence (the first ``{`` that starts a JSON object is taken).
``commands`` is required (it may be empty); ``duration`` defaults to 1 second; ``analysis`` and ``plan`` are
optional text; ``task_complete`` is a boolean (``"true"``/``"false"`` strings are accepted).
"""

from __future__ import annotations

import json
import math
from typing import Any

import msgspec

DEFAULT_DURATION_S = 1.0


class Command(msgspec.Struct, frozen=True):
    """Keystrokes to send, then seconds to wait before reading the screen."""

    keystrokes: str
    duration: float


class Reply(msgspec.Struct, frozen=True):
    """A parsed reply: the commands and task_complete, or ``error`` (what is wrong, for the model)."""

    commands: list[Command] = []
    task_complete: bool = False
    analysis: str = ""
    plan: str = ""
    error: str | None = None


def _first_object(text: str) -> dict[str, Any] | None:
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            value, _ = decoder.raw_decode(text, start)
        except ValueError:
            value = None
        if isinstance(value, dict):
            return value
        start = text.find("{", start + 1)
    return None


def parse_reply(text: str) -> Reply:
    """Parse a model reply; never raises (a bad reply is a ``Reply`` with ``error``)."""
    obj = _first_object(text)
    if obj is None:
        return Reply(error="no JSON object found in the response")
    commands = obj.get("commands")
    if not isinstance(commands, list):
        return Reply(error='the "commands" field is missing or is not a list')
    parsed: list[Command] = []
    for i, c in enumerate(commands):
        if not isinstance(c, dict) or not isinstance(c.get("keystrokes"), str):
            return Reply(error=f'commands[{i}] is not an object with a "keystrokes" string')
        duration = c.get("duration", DEFAULT_DURATION_S)
        if isinstance(duration, bool) or not isinstance(duration, int | float) or not math.isfinite(duration):
            return Reply(error=f'commands[{i}].duration is not a number of seconds')
        parsed.append(Command(c["keystrokes"], max(0.0, float(duration))))
    done = obj.get("task_complete", False)
    if isinstance(done, str) and done.strip().lower() in ("true", "false"):
        done = done.strip().lower() == "true"
    if not isinstance(done, bool):
        return Reply(error='"task_complete" is not true or false')
    analysis, plan = obj.get("analysis", ""), obj.get("plan", "")
    return Reply(parsed, done, analysis if isinstance(analysis, str) else json.dumps(analysis),
                 plan if isinstance(plan, str) else json.dumps(plan))


__all__ = ["Command", "Reply", "parse_reply"]
