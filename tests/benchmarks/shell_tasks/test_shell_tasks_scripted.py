"""The bundled scripted model against shell_tasks: through shell_agent and openai_chat over real HTTP."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import agentcompass.models
from agentcompass.benchmarks.shell_tasks.benchmark import ShellTasks, all_tasks
from agentcompass.harnesses.openai_chat import OpenAIChatHarness
from agentcompass.harnesses.shell_agent import ShellAgent
from agentcompass.interfaces import ComponentContext, ModelClient, RunContext, TaskSpec
from agentcompass.models.factory import create_model_client
from agentcompass.models.scripted.server import ScriptedServer
from agentcompass.specs import ModelSpec

from ..shell_tasks_helpers import LocalGrader

SCRIPT_FILE = Path(agentcompass.models.__file__).parent / "scripted" / "scripts" / "shell_tasks.json"
ENTRIES: list[dict[str, Any]] = json.loads(SCRIPT_FILE.read_text())
LOG = logging.getLogger("agentcompass.tests.benchmarks")


@pytest.fixture
async def bundled_model() -> AsyncIterator[ModelClient]:
    """The scripted model with only its bundled scripts, over real HTTP."""
    async with ScriptedServer({}) as server:
        assert server.base_url
        client = create_model_client(ModelSpec(id="scripted", base_url=server.base_url), max_connections=8,
                                     timeout=30)
        try:
            yield client
        finally:
            await client.aclose()


def expected_outcome(task_id: str) -> str:
    """correct / wrong / none, as the script file labels its entry for this task."""
    for e in ENTRIES:
        if e["match"] == f"Task: {task_id}\n":
            return "correct" if e["note"] == "correct" else "wrong"
    return "none"


def test_every_script_entry_matches_exactly_one_task_prompt() -> None:
    b = ShellTasks({}, ComponentContext())
    prompts = [b.prepare(t.public()).prompt for t in b.load_tasks()]
    for e in ENTRIES:
        assert sum(e["match"] in p for p in prompts) == 1, e["match"]


async def test_shell_agent_with_the_bundled_model_solves_40_to_90_percent(
        grader: LocalGrader, bundled_model: ModelClient) -> None:
    b = ShellTasks({}, ComponentContext())
    harness = ShellAgent({"step_limit": 6, "command_timeout": 20}, ComponentContext())

    async def attempt(task: TaskSpec) -> tuple[str, bool, str | None]:
        prepared = b.prepare(task.public())
        ctx = RunContext(request="test", run_id="test", task_id=task.task_id, attempt=1)
        async with grader.agent_env(task, prepared.files) as env:
            result = await harness.run(prepared, env, bundled_model, ctx, LOG)
            verdict = await grader.evaluate(b, task, result, env)
        return task.task_id, verdict.correct, result.trajectory.stop_reason

    results = await asyncio.gather(*(grader.bounded(attempt(t)) for t in b.load_tasks()))
    solved = {tid for tid, ok, _ in results if ok}
    assert all(stop == "submitted" for _, _, stop in results)
    # each scripted solution does what its label says: right ones pass, wrong ones and unscripted fail
    assert solved == {t.id for t in all_tasks() if expected_outcome(t.id) == "correct"}
    rate = len(solved) / len(results)
    assert 0.4 <= rate <= 0.9, rate
    assert any(expected_outcome(t.id) == "wrong" for t in all_tasks())
    assert any(expected_outcome(t.id) == "none" for t in all_tasks())


async def test_openai_chat_solves_the_scripted_answer_tasks_in_one_shot(
        grader: LocalGrader, bundled_model: ModelClient) -> None:
    b = ShellTasks({"categories": ["answer"]}, ComponentContext())
    harness = OpenAIChatHarness({}, ComponentContext())
    solved = set()
    for task in b.load_tasks():
        ctx = RunContext(request="test", run_id="test", task_id=task.task_id, attempt=1)
        result = await harness.run(b.prepare(task.public()), None, bundled_model, ctx, LOG)
        if (await grader.evaluate(b, task, result, None)).correct:
            solved.add(task.task_id)
    scripted_right = {t.id for t in all_tasks() if expected_outcome(t.id) == "correct"}
    assert solved == {t.id for t in all_tasks() if t.category == "answer"} & scripted_right
    assert grader.verifier_files == []
