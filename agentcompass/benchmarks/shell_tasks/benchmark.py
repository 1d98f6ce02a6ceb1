"""The bundled ``shell_tasks`` benchmark: small real tasks solved in a shell workspace, no network needed.

Tasks live in ``data/<category>.json`` (categories ``files``, ``text``, ``python``,
``answer``). Each task has an ``id``, a ``prompt``, the initial workspace ``files`` and its ground truth:
declarative ``checks`` and/or an ``expected_answer``.

Grading never trusts anything the agent's code can produce. ``collect`` takes a tar of the agent's workspace;
``evaluate`` reads the file checks (contents, directories, modes) from that tar in the engine, where no agent
code runs. Checks that must run the agent's code (``calls`` of its Python functions, ``run`` of its programs)
go to a fresh verifier environment holding the workspace and a probe (``probe.py``) that is given
only the inputs: it reports the values and outputs it observed, and the engine compares them with the
expected values, which never leave the engine. The exit code of the agent's code is never the verdict, so
``os._exit(0)``, a replaced ``sys.exit`` or a forged report can at most claim values, and a claim is only a
pass when the values are right.
The workspace tar is streamed to disk under the environment's archive caps; files it left out are listed in
the attempt's ``extra.workspace_skipped``.
"""

from __future__ import annotations

import ast
import asyncio
import fnmatch
import functools
import io
import json
import posixpath
import re
import secrets
import tarfile
from collections.abc import Sequence
from importlib import resources
from typing import IO, Any, ClassVar, Literal, get_args

import msgspec

from ..._validate import Attempts, Count, Seconds
from ...common.text import truncate_middle
from ...environments._tar import SpooledArchive, archive_of, forget_members, tar_from_files
from ...interfaces import (
    ComponentContext,
    Environment,
    EvalContext,
    EvalResult,
    HarnessResult,
    PreparedTask,
    TaskSpec,
)
from ..base import Benchmark

_WHERE = "benchmark shell_tasks"
Category = Literal["files", "text", "python", "answer"]
CATEGORIES: tuple[str, ...] = get_args(Category)
#: where the probe and its inputs are written in the verifier's workdir (made fresh after the workspace).
TESTS_DIR = ".agentcompass_verify"
PROBE = "probe.py"
_OUTPUT_CAP = 4000
_FILE_CAP = 8 * 1024 * 1024
_MAX_FAILURES = 20
_SUBMIT = re.compile(r"<submit>(.*?)</submit>", re.DOTALL)


class _Check(msgspec.Struct, tag_field="kind", forbid_unknown_fields=True, frozen=True):
    """One declarative check; the expected values stay in the engine."""


class LinesCheck(_Check, tag="lines", frozen=True):
    """The file's lines (trailing newlines ignored; ``squeeze`` collapses runs of whitespace in each line)."""

    path: str
    lines: list[str]
    squeeze: bool = False


class ContentCheck(_Check, tag="content", frozen=True):
    """The file's exact content."""

    path: str
    text: str


class JsonCheck(_Check, tag="json", frozen=True):
    """The file parses as JSON equal to ``value``."""

    path: str
    value: Any


class ExistsCheck(_Check, tag="exists", frozen=True):
    """Each path is a file."""

    paths: list[str]


class DirsCheck(_Check, tag="dirs", frozen=True):
    """Each path is a directory."""

    paths: list[str]


class NoneMatchCheck(_Check, tag="none_match", frozen=True):
    """No file in the workspace has a name matching the glob ``pattern``."""

    pattern: str


class ExecutableCheck(_Check, tag="executable", frozen=True):
    """The file exists and its owner-execute bit is set."""

    path: str


class RunCheck(_Check, tag="run", frozen=True):
    """Each argv run in the verifier exits 0 and prints ``stdout[i]`` (trailing newlines ignored).
    ``{inputs}`` in an argument is the directory holding ``inputs`` (name -> content)."""

    runs: list[list[str]]
    stdout: list[str]
    inputs: dict[str, str] = {}


class CallsCheck(_Check, tag="calls", frozen=True):
    """Each ``[call, expect]``: ``call`` is ``function(literal, ...)`` on ``module``, imported from the
    workspace; its result (``bool()`` of it with ``as_bool``) must equal the Python literal ``expect``."""

    module: str
    calls: list[tuple[str, str]]
    as_bool: bool = False


Check = LinesCheck | ContentCheck | JsonCheck | ExistsCheck | DirsCheck | NoneMatchCheck | ExecutableCheck \
    | RunCheck | CallsCheck
_PROBED = (RunCheck, CallsCheck)


class TaskData(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """One task as stored in ``data``."""

    id: str
    prompt: str
    files: dict[str, str] = {}
    checks: list[Check] = []
    expected_answer: str | list[str] | None = None

    @property
    def category(self) -> str:
        return self.id.split("/", 1)[0]


def _parse_call(expr: str) -> tuple[str, list[Any]]:
    """``name(literal, ...)`` -> (name, args); ValueError for anything else."""
    node = ast.parse(expr, mode="eval").body
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name) or node.keywords:
        raise ValueError(f"{expr!r} is not a call of a name with positional literal arguments")
    return node.func.id, [ast.literal_eval(a) for a in node.args]


def _check_task(task: TaskData, category: str) -> None:
    if task.category != category:
        raise ValueError(f"shell_tasks: task {task.id!r} is stored in {category}.json")
    if not task.checks and task.expected_answer is None:
        raise ValueError(f"shell_tasks: task {task.id!r} has neither checks nor expected_answer")
    for check in task.checks:
        try:
            if isinstance(check, CallsCheck):
                for call, expect in check.calls:
                    _parse_call(call)
                    ast.literal_eval(expect)
            elif isinstance(check, RunCheck) and len(check.runs) != len(check.stdout):
                raise ValueError("runs and stdout differ in length")
        except (SyntaxError, ValueError) as exc:
            raise ValueError(f"shell_tasks: task {task.id!r} has a bad {check.__struct_config__.tag} check: "
                             f"{exc}") from exc


@functools.cache
def all_tasks() -> tuple[TaskData, ...]:
    """Every bundled task, in category then file order (read once per process)."""
    data_dir = resources.files(__package__).joinpath("data")
    out: list[TaskData] = []
    for category in CATEGORIES:
        raw = data_dir.joinpath(f"{category}.json").read_bytes()
        for task in msgspec.json.decode(raw, type=list[TaskData]):
            _check_task(task, category)
            out.append(task)
    ids = [t.id for t in out]
    if len(set(ids)) != len(ids):
        raise ValueError("shell_tasks: duplicate task ids in data")
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


def portable_workspace(src: IO[bytes], out: SpooledArchive) -> list[str]:
    """Copy the workspace tar ``src`` (read from its start, as a stream) into ``out`` without members that
    cannot be unpacked safely elsewhere: links that are absolute or climb out of the workspace (a venv's
    ``bin/python`` -> ``/usr/bin/python3``), devices and fifos. Returns the dropped names."""
    dropped: list[str] = []
    src.seek(0)
    with tarfile.open(fileobj=src, mode="r|*") as tar_in, \
            tarfile.open(fileobj=out.file, mode="w", format=tarfile.PAX_FORMAT) as dst:
        for member in tar_in:
            if member.issym():
                target = posixpath.normpath(posixpath.join(posixpath.dirname(member.name), member.linkname))
                unsafe = posixpath.isabs(member.linkname) or target == ".." or target.startswith("../")
            elif member.islnk():
                unsafe = posixpath.isabs(member.linkname) or ".." in member.linkname.split("/")
            else:
                unsafe = not (member.isfile() or member.isdir())
            if unsafe:
                if len(dropped) < 1000:
                    dropped.append(member.name)
                continue
            dst.addfile(member, tar_in.extractfile(member) if member.isfile() else None)
            forget_members(tar_in)
            forget_members(dst)
    out.size = out.file.tell()
    return dropped


async def _portable(raw: SpooledArchive) -> tuple[SpooledArchive, list[str]]:
    out = SpooledArchive(raw.dir)
    try:
        dropped = await asyncio.to_thread(portable_workspace, raw.file, out)
    except BaseException:
        out.close()
        raise
    out.skipped, out.skipped_count = raw.skipped, raw.skipped_count
    return out, dropped


class ShellTasksParams(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """``shell_tasks`` params: ``sample_ids`` (task ids), ``categories``, ``limit`` (after repeat), ``k``
    (attempts per task, default 1), ``repeat`` (copies of the set, ids suffixed ``#2``, ``#3``...; default 1),
    ``eval_timeout`` seconds for the verifier (default 60). A single id or category may be given as a string."""

    sample_ids: list[str] | str | None = None
    categories: list[Category] | Category | None = None
    limit: Count | None = None
    k: Attempts | None = None
    repeat: Attempts = 1
    eval_timeout: Seconds = 60.0


def _as_list(value: list[Any] | str | None) -> list[str] | None:
    return [value] if isinstance(value, str) else None if value is None else list(value)


class ShellTasks(Benchmark):
    """The bundled shell tasks benchmark (params: ``ShellTasksParams``)."""

    name: ClassVar[str] = "shell_tasks"
    version: ClassVar[str] = "2"
    Params: ClassVar[type[ShellTasksParams]] = ShellTasksParams
    params: ShellTasksParams
    #: the params that pick tasks (changing them never changes what a task is).
    selection_params: ClassVar[tuple[str, ...]] = ("sample_ids", "categories", "limit", "repeat")

    def __init__(self, params: ShellTasksParams | dict[str, Any], ctx: ComponentContext) -> None:
        super().__init__(params, ctx)
        p = self.params
        self.repeat = p.repeat
        self.limit: int | None = p.limit
        self.eval_timeout = p.eval_timeout
        self.categories = _as_list(p.categories)
        self.selected()  # an unknown id fails here, before any run starts

    def selected(self) -> list[TaskData]:
        """The base tasks picked by ``sample_ids`` and ``categories`` (before repeat and limit)."""
        tasks = self.select(all_tasks(), lambda t: t.id)
        if self.categories is not None:
            tasks = [t for t in tasks if t.category in self.categories]
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
                           "graded_by_tests": bool(t.checks)},
                    ground_truth={"checks": msgspec.to_builtins(t.checks), "expected_answer": t.expected_answer},
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
        """A tar of the agent's workspace (on disk, capped), taken before the engine closes the agent's
        environment. ``evaluate`` closes it."""
        if not task.metadata.get("graded_by_tests", True):
            return {}
        with await archive_of(env, env.workdir) as raw:
            workspace, dropped = await _portable(raw)
        return {"workspace": workspace, "dropped": dropped}

    async def evaluate(self, ctx: EvalContext) -> EvalResult:
        """Grade the answer against ``expected_answer`` and/or the checks against the agent's workspace."""
        workspace = ctx.artifacts.get("workspace")
        try:
            return await self._evaluate(ctx)
        finally:
            if isinstance(workspace, SpooledArchive):
                workspace.close()

    async def _evaluate(self, ctx: EvalContext) -> EvalResult:
        truth: dict[str, Any] = ctx.task.ground_truth or {}
        checks = msgspec.convert(truth.get("checks") or [], type=list[Check])
        expected = truth.get("expected_answer")
        correct = True
        extra: dict[str, Any] = {}
        if expected is not None:
            answer_ok = answer_matches(ctx.result.final_answer, expected)
            extra["answer"] = truncate_middle(extract_answer(ctx.result.final_answer).strip(), 500)
            extra["answer_correct"] = answer_ok
            correct = correct and answer_ok
        if checks:
            workspace = ctx.artifacts.get("workspace")
            spooled = workspace if isinstance(workspace, SpooledArchive) else None
            initial = b"" if spooled else tar_from_files(ctx.prepared.files)  # no agent environment (openai_chat)

            def tar() -> IO[bytes]:
                return spooled.rewind() if spooled else io.BytesIO(initial)

            # in a thread: a workspace of many members must not hold the event loop
            failures = await asyncio.to_thread(_file_failures, checks, tar())
            probed = [c for c in checks if isinstance(c, _PROBED)]
            if probed and not failures:
                failures, timed_out = await self._probe(ctx, tar(), probed)
                if timed_out:
                    extra["timed_out"] = True
            extra["failures"] = [truncate_middle(f, 500) for f in failures[:_MAX_FAILURES]]
            extra["output"] = truncate_middle("\n".join(f"FAIL: {f}" for f in extra["failures"]) or "ok", _OUTPUT_CAP)
            if ctx.artifacts.get("dropped"):
                extra["dropped_from_workspace"] = ctx.artifacts["dropped"][:20]
            if spooled and spooled.skipped_count:
                # over the environment's archive caps: listed (name, size, reason), not copied
                extra["workspace_skipped"] = spooled.skipped_report()
                extra["workspace_skipped_count"] = spooled.skipped_count
            correct = correct and not failures
        return EvalResult(correct=correct, score=1.0 if correct else 0.0, extra=extra)

    async def _probe(self, ctx: EvalContext, workspace: IO[bytes],
                     checks: list[RunCheck | CallsCheck]) -> tuple[list[str], bool]:
        """Run the probe on a copy of the workspace; the failures found comparing its report with the checks."""
        marker = f"AGENTCOMPASS-PROBE-{secrets.token_hex(16)}"
        spec = {"timeout": self.eval_timeout, "checks": [_probe_input(c) for c in checks]}
        async with ctx.open_verifier() as verifier:
            await verifier.put_archive(verifier.workdir, workspace)  # streamed from disk
            # The probe goes in last, into a directory made fresh, so nothing the agent left can shadow it.
            reset = await verifier.exec(["rm", "-rf", TESTS_DIR], cwd=verifier.workdir, timeout=60)
            if reset.exit_code != 0:
                return [f"could not prepare the verifier: {reset.output}"], False
            await verifier.write_file(posixpath.join(verifier.workdir, TESTS_DIR, PROBE), _probe_source())
            await verifier.write_file(posixpath.join(verifier.workdir, TESTS_DIR, "spec.json"), json.dumps(spec))
            res = await verifier.exec(["python3", "-I", f"{TESTS_DIR}/{PROBE}", f"{TESTS_DIR}/spec.json", marker],
                                      cwd=verifier.workdir, timeout=self.eval_timeout)
        ctx.log.debug("shell_tasks %s: probe exited %s", ctx.task.task_id, res.exit_code)
        if res.timed_out:
            return [f"the checks did not finish within eval_timeout={self.eval_timeout:g}s"], True
        reports = [line[len(marker) + 1:] for line in res.stdout.splitlines() if line.startswith(marker + " ")]
        if len(reports) != 1:
            return [f"no single report from the probe ({len(reports)} found); output: "
                    f"{truncate_middle(res.output, 1000)}"], False
        try:
            report = json.loads(reports[0])["checks"]
        except (ValueError, KeyError, TypeError) as exc:
            return [f"unreadable probe report: {exc}"], False
        if not isinstance(report, list) or len(report) != len(checks):
            return ["the probe report does not cover every check"], False
        failures: list[str] = []
        for check, observed in zip(checks, report, strict=True):
            failures += _probed_failures(check, observed if isinstance(observed, dict) else {})
        return failures, False


@functools.cache
def _probe_source() -> str:
    return resources.files(__package__).joinpath("probe.py").read_text(encoding="utf-8")


def _probe_input(check: RunCheck | CallsCheck) -> dict[str, Any]:
    """What the probe needs to run a check: the inputs, never the expected values."""
    if isinstance(check, CallsCheck):
        return {"kind": "calls", "module": check.module, "calls": [call for call, _ in check.calls],
                "as_bool": check.as_bool}
    return {"kind": "run", "runs": check.runs, "inputs": check.inputs}


def _results(observed: dict[str, Any], n: int) -> list[dict[str, Any]]:
    results = observed.get("results")
    if not isinstance(results, list):
        return [{}] * n
    return [r if isinstance(r, dict) else {} for r in results[:n]] + [{}] * max(0, n - len(results))


def _probed_failures(check: RunCheck | CallsCheck, observed: dict[str, Any]) -> list[str]:
    """Compare what the probe observed with the expected values; missing results count as failures."""
    if isinstance(check, CallsCheck):
        if observed.get("import_error"):
            return [f"import {check.module} failed: {observed['import_error']}"]
        out: list[str] = []
        for (call, expect), got in zip(check.calls, _results(observed, len(check.calls)), strict=True):
            if "repr" not in got:
                out.append(f"{call} raised {got.get('error', 'nothing was reported')}")
                continue
            try:
                value = ast.literal_eval(str(got["repr"]))
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                out.append(f"{call} returned {truncate_middle(str(got['repr']), 200)}, not a plain value")
                continue
            want = ast.literal_eval(expect)  # builtins only on both sides: == is plain value equality
            if value != want:
                out.append(f"{call} = {truncate_middle(repr(value), 200)}, expected {expect}")
        return out
    out = []
    for argv, want_out, got in zip(check.runs, check.stdout, _results(observed, len(check.runs)), strict=True):
        cmd = " ".join(argv)
        if got.get("timed_out"):
            out.append(f"{cmd} did not finish")
        elif got.get("exit_code") != 0:
            out.append(f"{cmd} exited {got.get('exit_code')}{': ' + got['error'] if 'error' in got else ''}")
        elif str(got.get("stdout", "")).rstrip("\n") != want_out:
            out.append(f"{cmd} printed {truncate_middle(str(got.get('stdout')), 200)!r}, expected {want_out!r}")
    return out


class _Workspace:
    """Read-only view of the workspace tar, for the checks the engine makes itself (no agent code runs)."""

    def __init__(self, tar: IO[bytes]) -> None:
        self._tar = tarfile.open(fileobj=tar, mode="r:*")
        self.members: dict[str, tarfile.TarInfo] = {}
        for m in self._tar.getmembers():
            name = posixpath.normpath(m.name)
            if name not in (".", "") and not name.startswith("../"):
                self.members[name] = m

    def read(self, path: str) -> bytes | None:
        m = self.members.get(posixpath.normpath(path))
        if m is None or not (m.isfile() or m.issym() or m.islnk()):
            return None
        try:
            f = self._tar.extractfile(m)
        except (KeyError, tarfile.TarError, RecursionError):  # a link to nothing, or a link loop
            return None
        return None if f is None else f.read(_FILE_CAP)

    def is_dir(self, path: str) -> bool:
        m = self.members.get(posixpath.normpath(path))
        return m is not None and m.isdir()


def _text(ws: _Workspace, path: str) -> str | None:
    data = ws.read(path)
    return None if data is None else data.decode("utf-8", "replace")


def _file_failures(checks: list[Check], tar: IO[bytes]) -> list[str]:
    """Failures of the checks read straight from the workspace tar."""
    ws = _Workspace(tar)
    out: list[str] = []
    for c in checks:
        if isinstance(c, LinesCheck):
            text = _text(ws, c.path)
            if text is None:
                out.append(f"{c.path} is missing")
                continue
            got = text.rstrip("\n").split("\n")
            if c.squeeze:
                got = [" ".join(line.split()) for line in got]
            if got != c.lines:
                out.append(f"{c.path} has lines {got[:50]!r}, expected {c.lines!r}")
        elif isinstance(c, ContentCheck):
            text = _text(ws, c.path)
            if text != c.text:
                out.append(f"{c.path} is missing" if text is None else f"{c.path} has the wrong content")
        elif isinstance(c, JsonCheck):
            text = _text(ws, c.path)
            try:
                value = json.loads(text) if text is not None else None
            except ValueError as exc:
                out.append(f"cannot read {c.path}: {exc}")
                continue
            if text is None or value != c.value:
                out.append(f"{c.path} is missing" if text is None else f"{c.path} is {value!r}")
        elif isinstance(c, ExistsCheck):
            out += [f"{p} is missing" for p in c.paths if ws.read(p) is None]
        elif isinstance(c, DirsCheck):
            out += [f"directory {p} is missing" for p in c.paths if not ws.is_dir(p)]
        elif isinstance(c, NoneMatchCheck):
            left = sorted(n for n, m in ws.members.items()
                          if not m.isdir() and fnmatch.fnmatchcase(posixpath.basename(n), c.pattern))
            if left:
                out.append(f"files matching {c.pattern} are left: {', '.join(left[:10])}")
        elif isinstance(c, ExecutableCheck):
            m = ws.members.get(posixpath.normpath(c.path))
            if m is None or not m.isfile():
                out.append(f"{c.path} is missing")
            elif not m.mode & 0o100:
                out.append(f"{c.path} is not executable")
    return out
