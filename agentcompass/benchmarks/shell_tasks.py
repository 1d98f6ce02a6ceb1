"""The bundled ``shell_tasks`` benchmark: small real tasks solved in a shell workspace, no network needed.

Tasks live in ``shell_tasks_data/<category>.json`` (categories ``files``, ``text``, ``python``,
``answer``). Each task has an ``id``, a ``prompt``, the initial workspace ``files`` and its ground truth:
verifier ``tests`` (file name -> content; ``test.sh`` is the entry point, run with POSIX ``sh``) and/or
an ``expected_answer``. The tests never enter the agent's environment: ``collect`` takes a tar of the
agent's workspace, and ``evaluate`` unpacks it in a fresh verifier environment and only then writes the
tests there.
"""

from __future__ import annotations

import functools
import io
import posixpath
import re
import tarfile
from collections.abc import Sequence
from importlib import resources
from typing import Any, ClassVar

import msgspec

from .._errors import ConfigError
from .._validate import MAX_K
from ..environments._tar import tar_from_files
from ..interfaces import (
    ComponentContext,
    Environment,
    EvalContext,
    EvalResult,
    HarnessResult,
    PreparedTask,
    TaskSpec,
)
from . import check_param_keys, float_param, int_param, str_list_param, truncate_middle

_WHERE = "benchmark shell_tasks"
_PARAMS = ("sample_ids", "categories", "limit", "k", "repeat", "eval_timeout")
CATEGORIES = ("files", "text", "python", "answer")
#: where the tests are written in the verifier's workdir; test.sh runs with that workdir as cwd.
TESTS_DIR = ".agentcompass_verify"
TEST_ENTRY = "test.sh"
_OUTPUT_CAP = 4000
_SUBMIT = re.compile(r"<submit>(.*?)</submit>", re.DOTALL)


class TaskData(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """One task as stored in ``shell_tasks_data``."""

    id: str
    prompt: str
    files: dict[str, str] = {}
    tests: dict[str, str] = {}
    expected_answer: str | list[str] | None = None

    @property
    def category(self) -> str:
        return self.id.split("/", 1)[0]


def _check_task(task: TaskData, category: str) -> None:
    if task.category != category:
        raise ValueError(f"shell_tasks: task {task.id!r} is stored in {category}.json")
    if not task.tests and task.expected_answer is None:
        raise ValueError(f"shell_tasks: task {task.id!r} has neither tests nor expected_answer")
    if task.tests and TEST_ENTRY not in task.tests:
        raise ValueError(f"shell_tasks: task {task.id!r} has tests but no {TEST_ENTRY}")


@functools.cache
def all_tasks() -> tuple[TaskData, ...]:
    """Every bundled task, in category then file order (read once per process)."""
    data_dir = resources.files(__package__).joinpath("shell_tasks_data")
    out: list[TaskData] = []
    for category in CATEGORIES:
        raw = data_dir.joinpath(f"{category}.json").read_bytes()
        for task in msgspec.json.decode(raw, type=list[TaskData]):
            _check_task(task, category)
            out.append(task)
    ids = [t.id for t in out]
    if len(set(ids)) != len(ids):
        raise ValueError("shell_tasks: duplicate task ids in shell_tasks_data")
    return tuple(out)


def extract_answer(final_answer: str | None) -> str:
    """The ``<submit>`` content of a final answer if present, else the whole answer."""
    text = final_answer or ""
    found = _SUBMIT.findall(text)
    return found[-1] if found else text


def normalize_answer(text: str) -> str:
    """Whitespace collapsed, case folded, one trailing period dropped."""
    return " ".join(text.split()).casefold().removesuffix(".").strip()


def answer_matches(final_answer: str | None, expected: str | Sequence[str]) -> bool:
    """Whether the (extracted, normalised) answer equals one of the expected answers."""
    options = [expected] if isinstance(expected, str) else list(expected)
    got = normalize_answer(extract_answer(final_answer))
    return any(got == normalize_answer(o) for o in options)


def portable_workspace(tar_bytes: bytes) -> tuple[bytes, list[str]]:
    """The workspace tar without members that cannot be unpacked safely elsewhere: links that are absolute
    or climb out of the workspace (a venv's ``bin/python`` -> ``/usr/bin/python3``), devices and fifos.
    Returns the new tar and the dropped names."""
    dropped: list[str] = []
    out = io.BytesIO()
    with tarfile.open(fileobj=io.BytesIO(tar_bytes), mode="r:*") as src, \
            tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as dst:
        for member in src:
            if member.issym():
                target = posixpath.normpath(posixpath.join(posixpath.dirname(member.name), member.linkname))
                unsafe = posixpath.isabs(member.linkname) or target == ".." or target.startswith("../")
            elif member.islnk():
                unsafe = posixpath.isabs(member.linkname) or ".." in member.linkname.split("/")
            else:
                unsafe = not (member.isfile() or member.isdir())
            if unsafe:
                dropped.append(member.name)
                continue
            dst.addfile(member, src.extractfile(member) if member.isfile() else None)
    return out.getvalue(), dropped


class ShellTasks:
    """The bundled shell tasks benchmark.

    Params: ``sample_ids`` (task ids), ``categories``, ``limit`` (after repeat), ``k`` (attempts per task,
    default 1), ``repeat`` (copies of the set, ids suffixed ``#2``, ``#3``...; default 1),
    ``eval_timeout`` seconds for the verifier (default 60).
    """

    version: ClassVar[str] = "1"

    def __init__(self, params: dict[str, Any], ctx: ComponentContext) -> None:
        check_param_keys(params, _PARAMS, _WHERE)
        self.k = int_param(params, "k", ctx.k or 1, _WHERE, maximum=MAX_K)
        self.repeat = int_param(params, "repeat", 1, _WHERE, maximum=MAX_K)
        self.limit: int | None = int_param(params, "limit", 1, _WHERE) if "limit" in params else None
        self.eval_timeout = float_param(params, "eval_timeout", 60.0, _WHERE)
        self.categories = str_list_param(params, "categories", _WHERE)
        self.sample_ids = str_list_param(params, "sample_ids", _WHERE)
        if self.categories is not None:
            bad = [c for c in self.categories if c not in CATEGORIES]
            if bad:
                raise ConfigError(f"Unknown category {bad[0]!r} in parameter 'categories' of {_WHERE}. "
                                  f"Allowed: {', '.join(CATEGORIES)}.", field="benchmark.params.categories")
        if self.sample_ids is not None:
            known = {t.id for t in all_tasks()}
            bad = [i for i in self.sample_ids if i not in known]
            if bad:
                some = ", ".join(t.id for t in all_tasks()[:6])
                raise ConfigError(f"Unknown task id {bad[0]!r} in parameter 'sample_ids' of {_WHERE}. "
                                  f"Valid ids look like: {some}, ... ({len(known)} in all).",
                                  field="benchmark.params.sample_ids")

    def selected(self) -> list[TaskData]:
        """The base tasks picked by ``sample_ids`` and ``categories`` (before repeat and limit)."""
        tasks = list(all_tasks())
        if self.categories is not None:
            tasks = [t for t in tasks if t.category in self.categories]
        if self.sample_ids is not None:
            wanted = set(self.sample_ids)
            tasks = [t for t in tasks if t.id in wanted]
        return tasks

    def load_tasks(self) -> list[TaskSpec]:
        """The selected tasks, repeated ``repeat`` times, cut to ``limit``."""
        base = self.selected()
        out: list[TaskSpec] = []
        for copy in range(1, self.repeat + 1):
            for t in base:
                task_id = t.id if copy == 1 else f"{t.id}#{copy}"
                out.append(TaskSpec(
                    task_id=task_id, category=t.category,
                    input={"base_id": t.id, "prompt": t.prompt, "files": dict(t.files),
                           "graded_by_tests": bool(t.tests)},
                    ground_truth={"tests": dict(t.tests), "expected_answer": t.expected_answer},
                    metadata={"base_id": t.id, "copy": copy}))
        return out if self.limit is None else out[:self.limit]

    def prepare(self, task: TaskSpec) -> PreparedTask:
        """The prompt (with a ``Task: <id>`` line and the workspace hint) and the initial files."""
        base_id = task.input["base_id"]
        files: dict[str, str] = task.input.get("files", {})
        hint = "Your workspace is the current directory"
        if files:
            hint += f"; it contains: {', '.join(sorted(files))}."
        else:
            hint += " (it starts empty)."
        prompt = f"Task: {base_id}\n\n{task.input['prompt']}\n\n{hint}\n"
        return PreparedTask(task_id=task.task_id, prompt=prompt, files=dict(files),
                            metadata={"category": task.category,
                                      "graded_by_tests": bool(task.input.get("graded_by_tests", True))})

    async def collect(self, task: PreparedTask, env: Environment, result: HarnessResult) -> dict[str, Any]:
        """A tar of the agent's workspace, taken before the engine closes the agent's environment."""
        if not task.metadata.get("graded_by_tests", True):
            return {}
        workspace, dropped = portable_workspace(await env.get_archive(env.workdir))
        return {"workspace": workspace, "dropped": dropped}

    async def evaluate(self, ctx: EvalContext) -> EvalResult:
        """Grade the answer against ``expected_answer`` and/or run the tests on a copy of the workspace."""
        truth: dict[str, Any] = ctx.task.ground_truth or {}
        tests: dict[str, str] = truth.get("tests") or {}
        expected = truth.get("expected_answer")
        correct = True
        extra: dict[str, Any] = {}
        if expected is not None:
            answer_ok = answer_matches(ctx.result.final_answer, expected)
            extra["answer"] = truncate_middle(extract_answer(ctx.result.final_answer).strip(), 500)
            extra["answer_correct"] = answer_ok
            correct = correct and answer_ok
        if tests:
            exit_code, output, timed_out = await self._run_tests(ctx, tests)
            extra.update(exit_code=exit_code, output=truncate_middle(output, _OUTPUT_CAP))
            if ctx.artifacts.get("dropped"):
                extra["dropped_from_workspace"] = ctx.artifacts["dropped"][:20]
            if timed_out:
                extra["timed_out"] = True
            correct = correct and exit_code == 0
        return EvalResult(correct=correct, score=1.0 if correct else 0.0, extra=extra)

    async def _run_tests(self, ctx: EvalContext, tests: dict[str, str]) -> tuple[int, str, bool]:
        workspace = ctx.artifacts.get("workspace")
        if not isinstance(workspace, bytes):  # no agent environment (e.g. openai_chat): the initial files
            workspace = tar_from_files(ctx.prepared.files)
        async with ctx.open_verifier() as verifier:
            await verifier.put_archive(verifier.workdir, workspace)
            # The tests go in last, into a directory made fresh, so nothing the agent left can shadow them.
            reset = await verifier.exec(["rm", "-rf", TESTS_DIR], cwd=verifier.workdir, timeout=60)
            if reset.exit_code != 0:
                return reset.exit_code, f"could not prepare the verifier: {reset.output}", False
            for name, content in tests.items():
                await verifier.write_file(posixpath.join(verifier.workdir, TESTS_DIR, name), content)
            res = await verifier.exec(["sh", f"{TESTS_DIR}/{TEST_ENTRY}"], cwd=verifier.workdir,
                                      timeout=self.eval_timeout)
        ctx.log.debug("shell_tasks %s: tests exited %s", ctx.task.task_id, res.exit_code)
        return res.exit_code, res.output, res.timed_out
