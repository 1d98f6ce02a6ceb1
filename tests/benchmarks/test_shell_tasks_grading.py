"""Every shell task is gradable both ways: its reference solution passes, the untouched workspace fails;
and the ground truth never enters the agent's environment."""

from __future__ import annotations

import asyncio
import io
import json
import tarfile
from pathlib import Path

import msgspec
import pytest

from agentcompass.benchmarks.shell_tasks import TESTS_DIR, ShellTasks, all_tasks, answer_matches
from agentcompass.interfaces import ComponentContext, Environment, HarnessResult, TaskSpec

from .shell_tasks_helpers import LocalGrader

REFERENCE = json.loads((Path(__file__).parent / "reference_solutions.json").read_text())


def bench(**params: object) -> ShellTasks:
    return ShellTasks(dict(params), ComponentContext())


def submitted(answer: str | None) -> HarnessResult:
    return HarnessResult(final_answer=None if answer is None else f"<submit>{answer}</submit>")


async def workspace_files(env: Environment) -> dict[str, bytes]:
    """Every regular file in the environment's workdir (relative name -> content)."""
    data = await env.get_archive(env.workdir)
    out: dict[str, bytes] = {}
    with tarfile.open(fileobj=io.BytesIO(data)) as tf:
        for m in tf.getmembers():
            f = tf.extractfile(m) if m.isfile() else None
            if f is not None:
                out[m.name] = f.read()
    return out


def test_the_set_has_30_to_40_tasks_in_four_categories() -> None:
    tasks = all_tasks()
    assert 30 <= len(tasks) <= 40
    assert {t.category for t in tasks} == {"files", "text", "python", "answer"}
    assert len({t.id for t in tasks}) == len(tasks)


def test_reference_solutions_cover_every_task() -> None:
    assert set(REFERENCE) == {t.id for t in all_tasks()}


async def test_every_reference_solution_passes(grader: LocalGrader) -> None:
    b = bench()

    async def solve(task: TaskSpec) -> tuple[str, bool, dict]:
        ref = REFERENCE[task.task_id]
        prepared = b.prepare(task.public())
        async with grader.agent_env(task, prepared.files) as env:
            if "command" in ref:
                res = await env.exec(ref["command"], timeout=30)
                assert res.exit_code == 0, (task.task_id, res.output)
            verdict = await grader.evaluate(b, task, submitted(ref.get("answer")), env)
        return task.task_id, verdict.correct, verdict.extra

    results = await asyncio.gather(*(grader.bounded(solve(t)) for t in b.load_tasks()))
    failed = {tid: extra for tid, ok, extra in results if not ok}
    assert not failed
    assert len(results) == len(all_tasks())


async def test_every_task_fails_on_the_untouched_workspace(grader: LocalGrader) -> None:
    b = bench()

    async def attempt(task: TaskSpec) -> tuple[str, bool, float | None]:
        prepared = b.prepare(task.public())
        async with grader.agent_env(task, prepared.files) as env:
            verdict = await grader.evaluate(b, task, HarnessResult(final_answer="<submit></submit>"), env)
        return task.task_id, verdict.correct, verdict.score

    results = await asyncio.gather(*(grader.bounded(attempt(t)) for t in b.load_tasks()))
    assert [tid for tid, ok, _ in results if ok] == []
    assert {score for _, _, score in results} == {0.0}


async def test_the_agent_environment_never_contains_the_tests(grader: LocalGrader) -> None:
    b = bench()

    async def check(task: TaskSpec) -> None:
        tests: dict[str, str] = task.ground_truth["tests"]
        prepared = b.prepare(task.public())
        encoded = msgspec.json.encode(prepared).decode()
        assert all(content not in encoded for content in tests.values()), task.task_id
        async with grader.agent_env(task, prepared.files) as env:
            ref = REFERENCE[task.task_id]
            if "command" in ref:
                await env.exec(ref["command"], timeout=30)
            await grader.evaluate(b, task, submitted(ref.get("answer")), env)
            # after grading too: the tests were written into the verifier only
            files = await workspace_files(env)
        names = {Path(n).name for n in files}
        assert not any(n.startswith(TESTS_DIR) for n in files), task.task_id
        assert not names & {Path(n).name for n in tests}, task.task_id
        for content in tests.values():
            assert all(content.encode() not in data for data in files.values()), task.task_id

    await asyncio.gather(*(grader.bounded(check(t)) for t in b.load_tasks()))
    # the verifiers were opened empty: the tests were written after the agent's workspace
    assert grader.verifier_files and all(f == {} for f in grader.verifier_files)


async def test_agent_files_named_like_the_tests_cannot_replace_them(grader: LocalGrader) -> None:
    b = bench(sample_ids=["files/hello_world", "python/fib"])
    fake_pass = "echo ok\nexit 0\n"
    for task in b.load_tasks():
        async with grader.agent_env(task, {}) as env:
            await env.write_file(f"{TESTS_DIR}/test.sh", fake_pass)
            await env.write_file(f"{TESTS_DIR}/check.py", "print('ok')\n")
            await env.write_file("test.sh", fake_pass)
            verdict = await grader.evaluate(b, task, HarnessResult(final_answer=""), env)
        assert verdict.correct is False, task.task_id
        assert verdict.extra["exit_code"] != 0


async def test_links_out_of_the_workspace_are_dropped_and_the_rest_is_graded(grader: LocalGrader) -> None:
    b = bench(sample_ids=["files/hello_world"])
    [task] = b.load_tasks()
    async with grader.agent_env(task, {}) as env:
        res = await env.exec("printf 'Hello, World!\\n' > hello.txt && mkdir -p venv/bin && "
                             "ln -s /usr/bin/python3 venv/bin/python && ln -s ../../.. venv/up && "
                             "ln -s hello.txt inside.txt", timeout=10)
        assert res.exit_code == 0, res.output
        verdict = await grader.evaluate(b, task, HarnessResult(final_answer=""), env)
    assert verdict.correct is True
    assert sorted(verdict.extra["dropped_from_workspace"]) == ["venv/bin/python", "venv/up"]


async def test_a_hanging_test_run_is_cut_by_eval_timeout(grader: LocalGrader) -> None:
    b = bench(sample_ids=["python/fib"], eval_timeout=1)
    [task] = b.load_tasks()
    async with grader.agent_env(task, {"fib.py": "import time\ntime.sleep(60)\n"}) as env:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        verdict = await grader.evaluate(b, task, HarnessResult(), env)
        assert loop.time() - t0 < 15
    assert verdict.correct is False
    assert verdict.extra["timed_out"] is True


async def test_without_an_agent_environment_the_initial_files_are_graded(grader: LocalGrader) -> None:
    b = bench(sample_ids=["files/config_edit", "answer/sum_range"])
    by_id = {t.task_id: t for t in b.load_tasks()}
    verdict = await grader.evaluate(b, by_id["files/config_edit"], HarnessResult(final_answer="done"), None)
    assert verdict.correct is False
    assert "config.ini has lines" in verdict.extra["output"]

    opened_before = len(grader.verifier_files)
    verdict = await grader.evaluate(b, by_id["answer/sum_range"], HarnessResult(final_answer="31375"), None)
    assert verdict.correct is True and verdict.score == 1.0
    assert len(grader.verifier_files) == opened_before  # an answer-only task needs no verifier


@pytest.mark.parametrize(("answer", "ok"), [
    ("<submit>137</submit>", True),
    ("<submit> 137 \n</submit>", True),
    ("137", True),
    ("  137.\n", True),
    ("I counted them.\n<submit>137</submit>", True),
    ("The file has 137 lines.", False),
    ("<submit>138</submit>", False),
    ("", False),
    (None, False),
])
def test_answer_check_extracts_submit_and_normalises_whitespace(answer: str | None, ok: bool) -> None:
    assert answer_matches(answer, "137") is ok


def test_answer_check_accepts_any_listed_answer_case_insensitively() -> None:
    assert answer_matches("<submit>Forty Two</submit>", ["42", "forty two"])
    assert not answer_matches("<submit>41</submit>", ["42", "forty two"])
