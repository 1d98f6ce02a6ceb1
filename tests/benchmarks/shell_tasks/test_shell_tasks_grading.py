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

from agentcompass.benchmarks.shell_tasks.benchmark import TESTS_DIR, ShellTasks, TaskData, all_tasks, answer_matches
from agentcompass.benchmarks.shell_tasks.benchmark import _check_task as check_task
from agentcompass.interfaces import ComponentContext, Environment, HarnessResult, TaskSpec

from ..shell_tasks_helpers import LocalGrader

REFERENCE = json.loads((Path(__file__).parent.parent / "reference_solutions.json").read_text())


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


def _expected_values(task: TaskSpec) -> list[str]:
    """The ground truth's expected values as text (literals, lines, stdout), at least 4 characters long."""
    out: list[str] = []
    for check in task.ground_truth["checks"]:
        out += [expect for _, expect in check.get("calls", [])]
        out += check.get("lines", []) + check.get("stdout", [])
        out += [check["text"]] if "text" in check else []
        out += [json.dumps(check["value"])] if "value" in check else []
    return [v for v in out if len(v) >= 4]


async def test_the_expected_values_never_enter_the_agent_or_the_verifier(grader: LocalGrader) -> None:
    b = bench(categories=["files", "text", "python"])

    async def check(task: TaskSpec) -> None:
        prepared = b.prepare(task.public())
        assert task.public().ground_truth is None
        async with grader.agent_env(task, prepared.files) as env:
            await env.exec(REFERENCE[task.task_id]["command"], timeout=30)
            before = len(grader.verifier_archives)
            verdict = await grader.evaluate(b, task, submitted(None), env)
            files = await workspace_files(env)
        assert verdict.correct, (task.task_id, verdict.extra)
        assert not any(n.startswith(TESTS_DIR) for n in files), task.task_id
        probed = [c for c in task.ground_truth["checks"] if c["kind"] in ("calls", "run")]
        assert len(grader.verifier_archives) == before + (1 if probed else 0), task.task_id
        if not probed:
            return
        verifier = {n: v for n, v in tarfile_members(grader.verifier_archives[-1]).items()
                    if n.startswith(TESTS_DIR)}
        assert sorted(verifier) == [f"{TESTS_DIR}/probe.py", f"{TESTS_DIR}/spec.json"], task.task_id
        for check in probed:  # the verifier holds the inputs only
            inputs = json.dumps([check.get("calls"), check.get("runs"), check.get("inputs")])
            for value in _expected_values(task):
                if value not in inputs and value.encode() not in verifier[f"{TESTS_DIR}/probe.py"]:
                    assert value.encode() not in verifier[f"{TESTS_DIR}/spec.json"], (task.task_id, value)

    for t in b.load_tasks():  # one at a time: the verifier archives are matched to their task by order
        await check(t)
    # the verifiers were opened empty: the probe was written after the agent's workspace
    assert grader.verifier_files and all(f == {} for f in grader.verifier_files)


def tarfile_members(data: bytes) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    with tarfile.open(fileobj=io.BytesIO(data)) as tf:
        for m in tf.getmembers():
            f = tf.extractfile(m) if m.isfile() else None
            if f is not None:
                out[m.name.removeprefix("./")] = f.read()
    return out


async def test_agent_files_named_like_the_probe_cannot_replace_it(grader: LocalGrader) -> None:
    b = bench(sample_ids=["python/fib", "python/cli_script"])
    fake = "print('ok')\n"
    for task in b.load_tasks():
        async with grader.agent_env(task, {}) as env:
            await env.write_file(f"{TESTS_DIR}/probe.py", fake)
            await env.write_file(f"{TESTS_DIR}/spec.json", '{"timeout": 1, "checks": []}')
            await env.write_file(f"{TESTS_DIR}/test.sh", "echo ok\nexit 0\n")
            verdict = await grader.evaluate(b, task, HarnessResult(final_answer=""), env)
        assert verdict.correct is False, task.task_id
        assert verdict.extra["failures"], task.task_id


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


@pytest.mark.parametrize(("check", "message"), [
    ({"kind": "calls", "module": "m", "calls": [["f(x)", "1"]]}, "malformed node"),
    ({"kind": "calls", "module": "m", "calls": [["os.system('id')", "1"]]}, "not a call of a name"),
    ({"kind": "calls", "module": "m", "calls": [["f(1)", "g()"]]}, "malformed node"),
    ({"kind": "run", "runs": [["./a"]], "stdout": []}, "differ in length"),
])
def test_bad_checks_in_the_task_data_are_refused_when_it_loads(check: dict[str, object], message: str) -> None:
    task = msgspec.convert({"id": "python/x", "prompt": "p", "checks": [check]}, type=TaskData)
    with pytest.raises(ValueError, match=message):
        check_task(task, "python")


async def test_an_honest_module_that_prints_and_imports_a_sibling_when_called_passes(grader: LocalGrader) -> None:
    b = bench(sample_ids=["python/fib"])
    [task] = b.load_tasks()
    files = {"fib.py": "import sys\nprint('loading fib')\nprint('AGENTCOMPASS-PROBE-x {}', file=sys.stderr)\n\n"
                       "def fib(n):\n    from fibcore import fib_iter\n    print('fib', n)\n"
                       "    return fib_iter(n)\n",
             "fibcore.py": "def fib_iter(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n"
                           "    return a\n"}
    async with grader.agent_env(task, files) as env:
        verdict = await grader.evaluate(b, task, HarnessResult(final_answer=""), env)
    assert verdict.correct is True, verdict.extra


def test_a_symlink_loop_in_the_workspace_is_graded_missing_not_an_error() -> None:
    from agentcompass.benchmarks.shell_tasks.benchmark import _Workspace

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for name, target in (("a", "b"), ("b", "a")):
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tf.addfile(info)
    buf.seek(0)
    assert _Workspace(buf).read("a") is None
