"""tau2's official reward for a recorded try, computed by tau2's own evaluator.

The session's record is rebuilt into tau2's ``SimulationRun`` and graded with ``evaluate_simulation`` and
``EvaluationType.ALL``, as tau2's ``run`` does: the database check replays the agent's recorded tool calls on a
fresh environment (each result must come out as recorded) and the task's golden actions on another, then
compares the two databases' hashes; the communicate check looks for each required string in the agent's
messages; the action checks look for each golden call among the agent's calls. The reward is the product of the
checks in the task's ``reward_basis`` (tau2's default, and every airline and retail task's: DB and COMMUNICATE).
NL assertions are never part of those tasks' reward basis, so the official reward does not evaluate them; they
are reported as not evaluated. A conversation that did not end by the user's stop signal is scored 0, as tau2
scores a simulation that ended prematurely.
"""

from __future__ import annotations

import uuid
from typing import Any

from .domain import tau2

#: how a try ended when tau2's rules did not end it (the harness's step limit, the agent timeout): tau2's name
#: for a simulation that ran out of budget.
NOT_ENDED = "max_steps"


def _messages(record: dict[str, Any]) -> list[Any]:
    m = tau2().message
    out: list[Any] = []
    for d in record.get("messages") or []:
        role = d.get("role")
        if role == "assistant":
            calls = d.get("tool_calls")
            out.append(m.AssistantMessage(role="assistant", content=d.get("content"), tool_calls=[
                m.ToolCall(id=c["id"], name=c["name"], arguments=c["arguments"], requestor="assistant")
                for c in calls] if calls else None))
        elif role == "user":
            out.append(m.UserMessage(role="user", content=d.get("content")))
        elif role == "tool":
            out.append(m.ToolMessage(id=d["id"], role="tool", content=d.get("content"),
                                     requestor=d.get("requestor", "assistant"), error=bool(d.get("error"))))
        else:
            raise ValueError(f"the tau2 record has a message of role {role!r}")
    return out


def grade(task: dict[str, Any], record: dict[str, Any]) -> dict[str, Any]:
    """tau2's ``RewardInfo`` (as JSON) for ``record`` of ``task`` (tau2's task JSON, with its evaluation criteria).
    Blocking (it replays the calls): run it in a thread."""
    t = tau2()
    task_obj = t.tasks.Task.model_validate(task)
    termination = record.get("termination_reason") or NOT_ENDED
    sim = t.simulation.SimulationRun(id=str(uuid.uuid4()), task_id=task_obj.id, start_time="", end_time="",
                                     duration=0.0, termination_reason=termination, messages=_messages(record))
    info = t.evaluate_simulation(simulation=sim, task=task_obj, evaluation_type=t.EvaluationType.ALL,
                                 solo_mode=False, domain=record["domain"])
    out: dict[str, Any] = info.model_dump(mode="json")
    criteria = task.get("evaluation_criteria") or {}
    # (a task whose reward basis had NL assertions would have made tau2's evaluator raise above: no judge here)
    out["nl_assertions_status"] = "not_evaluated: not in the task's reward basis" if criteria.get("nl_assertions") \
        else "none"
    return out


__all__ = ["NOT_ENDED", "grade"]
