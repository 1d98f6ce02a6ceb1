"""Task-directory benchmarks (the Harbor / Terminal-Bench 2.0 task format): ``task_dir`` (any folder of such
tasks), ``terminal_bench`` (Terminal-Bench 2.0) and ``skillsbench`` (SkillsBench), and the bundled CI tasks.

A task is a folder holding ``instruction.md`` (the prompt), ``task.toml`` (``[metadata]``, ``[agent]
timeout_sec``, ``[verifier] timeout_sec`` and ``env``, ``[environment]`` resources and an optional
``docker_image``), ``environment/`` (the image's Docker build context, with its ``Dockerfile``), ``tests/``
(``test.sh``, which writes a reward in [0, 1] to ``/logs/verifier/reward.txt`` or ``reward.json``) and
``solution/`` (``solve.sh``, the reference solution). Task ids are the folders' paths under the root.

The agent works in the task's image (built here from ``environment/``; no registry needed) in the Dockerfile's
``WORKDIR``. Neither ``tests/`` nor ``solution/`` ever enters the agent's environment: ``collect`` takes a tar of
the agent's working directory, and ``evaluate`` runs ``tests/test.sh`` in a fresh verifier container of the same
image holding that directory (its original content removed first) and a fresh ``/tests`` and ``/logs/verifier``.
The reward is the score; the attempt is correct at reward 1. A reward left by a ``test.sh`` that timed out or
died by a signal is not trusted (score 0), and a workspace the archive caps cut short is not graded.
The solution is given only to a harness declaring ``oracle = True`` (``reference_solution``).

Params: ``path`` (the folder of tasks; ``task_dir`` also looks in ``<data_dir>/task_dir``), ``sample_ids``,
``limit``, ``k``, ``eval_timeout`` (seconds; default each task's ``[verifier] timeout_sec``); the downloading
kinds add ``url`` (the dataset's tarball), ``download`` (default true).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import os
import posixpath
import re
import shlex
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, ClassVar

import msgspec

from .._errors import AgentCompassError, ConfigError
from .._validate import Attempts, Count, Seconds, size_bytes
from ..environments._tar import SpooledArchive, archive_of, make_tar
from ..interfaces import (
    ComponentContext,
    Environment,
    EvalContext,
    EvalResult,
    HarnessResult,
    ImageRecipe,
    PreparedTask,
    ReferenceSolution,
    Resources,
    TaskSpec,
)
from ..params import as_params
from ..swebench.dataset import DatasetSource, default_data_dir
from . import truncate_middle
from .base import Benchmark
from .task_dir_source import TasksDownloadError, cache_dir, download, find_cached, redact, url_secrets

IMAGE_REPOSITORY = "agentcompass/task-dir"
DEFAULT_WORKDIR = "/app"
TESTS_DIR = "/tests"
REWARD_DIR = "/logs/verifier"
DEFAULT_AGENT_TIMEOUT = 1800.0
DEFAULT_VERIFIER_TIMEOUT = 600.0
#: how deep under the root task folders are looked for (Terminal-Bench keeps them at the top, SkillsBench in tasks/)
MAX_DEPTH = 3
_MIB = 1 << 20
_MIN_MEMORY = 6 * _MIB
_OUTPUT_CAP = 20_000
_TAG_BAD = re.compile(r"[^a-z0-9_.-]")
_WORKDIR = re.compile(r"^\s*WORKDIR\s+(\S+)\s*$", re.IGNORECASE | re.MULTILINE)


@dataclass(frozen=True)
class TaskFolder:
    """One task folder, read and checked."""

    task_id: str
    root: Path
    instruction: str
    workdir: str
    image: str
    recipe: ImageRecipe | None
    agent_timeout: float
    verifier_timeout: float
    verifier_env: dict[str, str] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    resources: Resources | None = None

    @property
    def category(self) -> str | None:
        value = self.metadata.get("category")
        return str(value) if value else None


def _digest(folder: Path) -> str:
    """A content hash of every file under ``folder`` (paths, contents, executable bits)."""
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            h.update(p.relative_to(folder).as_posix().encode() + b"\0")
            h.update(b"x" if os.access(p, os.X_OK) else b"-")
            h.update(hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()


def _image_tag(task_id: str) -> str:
    tag = _TAG_BAD.sub("-", task_id.lower()).lstrip(".-") or "task"
    return tag[:100]


def _number(value: Any, default: float, what: str) -> float:
    if value is None:
        return default
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{what} must be a positive number, got {value!r}")
    return float(value)


def _resources(task_id: str, table: dict[str, Any]) -> Resources | None:
    """``[environment]``'s ``cpus`` and ``memory_mb`` (or Harbor's older ``memory = "2G"``); None when it names
    neither. (``storage_mb`` is kept in the task's metadata: a container's disk is capped by the provider's
    ``disk_limit``, which not every storage driver can enforce.)"""
    cpus = _number(table["cpus"], 0.0, f"task {task_id!r}: [environment] cpus") if "cpus" in table else None
    memory: int | None = None
    if "memory_mb" in table:
        memory = int(_number(table["memory_mb"], 0.0, f"task {task_id!r}: [environment] memory_mb") * _MIB)
    elif "memory" in table:
        try:
            memory = size_bytes(table["memory"], "memory")
        except ConfigError:
            raise ValueError(f"task {task_id!r}: [environment] memory must be a size like '2G' or a positive int "
                             f"of bytes, got {table['memory']!r}") from None
    if memory is not None and memory < _MIN_MEMORY:
        raise ValueError(f"task {task_id!r}: [environment] memory must be at least 6 MiB (Docker's least), "
                         f"got {memory} bytes")
    return Resources(cpus=cpus, memory_bytes=memory) if cpus is not None or memory is not None else None


def _check_workdir(task_id: str, workdir: str) -> None:
    """The agent's directory is carried into the verifier: it may not be ``/`` nor hold, be or sit under the
    folders the verifier owns (``/tests``, ``/logs``)."""
    norm = posixpath.normpath(workdir)
    for owned in (TESTS_DIR, "/logs"):
        if norm == "/" or norm == owned or norm.startswith(owned + "/") or owned.startswith(norm.rstrip("/") + "/"):
            raise ValueError(f"task {task_id!r}: WORKDIR {workdir} is refused: the agent's working directory may "
                             f"not be /, nor hold or sit under {TESTS_DIR} or /logs")


def read_task(root: Path, task_id: str) -> TaskFolder:
    """The task in folder ``root``; ValueError naming what is wrong with it."""
    try:
        config = tomllib.loads((root / "task.toml").read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"task {task_id!r}: cannot read task.toml ({exc})") from None
    tables = {k: config.get(k) or {} for k in ("metadata", "agent", "verifier", "environment")}
    for name, table in tables.items():
        if not isinstance(table, dict):
            raise ValueError(f"task {task_id!r}: [{name}] in task.toml is not a table")
    if not (root / "tests" / "test.sh").is_file():
        raise ValueError(f"task {task_id!r}: no tests/test.sh")
    env_dir = root / "environment"
    dockerfile = env_dir / "Dockerfile"
    workdir = DEFAULT_WORKDIR
    if dockerfile.is_file():
        found = _WORKDIR.findall(dockerfile.read_text(encoding="utf-8", errors="replace"))
        if found and found[-1].startswith("/"):
            workdir = found[-1]
        image = f"{IMAGE_REPOSITORY}:{_image_tag(task_id)}-{_digest(env_dir)[:12]}"
        recipe: ImageRecipe | None = ImageRecipe(context_dir=os.fspath(env_dir))
    elif isinstance(tables["environment"].get("docker_image"), str):
        image, recipe = tables["environment"]["docker_image"], None
    else:
        raise ValueError(f"task {task_id!r}: neither environment/Dockerfile nor [environment] docker_image")
    _check_workdir(task_id, workdir)
    verifier_env = tables["verifier"].get("env") or {}
    if not isinstance(verifier_env, dict) or not all(isinstance(v, str) for v in verifier_env.values()):
        raise ValueError(f"task {task_id!r}: [verifier] env must map names to strings")
    metadata = {k: v for k, v in tables["metadata"].items() if isinstance(v, str | int | float | bool | list)}
    needs = _resources(task_id, tables["environment"])
    for key in ("cpus", "memory_mb", "storage_mb"):
        if key in tables["environment"]:
            metadata[key] = tables["environment"][key]
    return TaskFolder(
        task_id=task_id, root=root, instruction=(root / "instruction.md").read_text(encoding="utf-8"),
        workdir=workdir, image=image, recipe=recipe,
        agent_timeout=_number(tables["agent"].get("timeout_sec"), DEFAULT_AGENT_TIMEOUT, "[agent] timeout_sec"),
        verifier_timeout=_number(tables["verifier"].get("timeout_sec"), DEFAULT_VERIFIER_TIMEOUT,
                                 "[verifier] timeout_sec"),
        verifier_env=dict(verifier_env), metadata=metadata, resources=needs)


def find_tasks(root: Path) -> list[TaskFolder]:
    """Every task folder under ``root`` (a folder with ``instruction.md`` and ``task.toml``), by id; ``root``
    itself when it is one task."""
    def is_task(p: Path) -> bool:
        return (p / "instruction.md").is_file() and (p / "task.toml").is_file()

    if is_task(root):
        return [read_task(root, root.name)]
    found: list[TaskFolder] = []
    level = [root]
    for _ in range(MAX_DEPTH):
        nxt: list[Path] = []
        for d in level:
            for child in sorted(d.iterdir()):
                if not child.is_dir() or child.name.startswith("."):
                    continue
                if is_task(child):
                    found.append(read_task(child, child.relative_to(root).as_posix()))
                else:
                    nxt.append(child)
        level = nxt
    return sorted(found, key=lambda t: t.task_id)


def reward_of(text: str, json_text: str | None) -> float:
    """The reward of ``reward.txt`` (a number), else of ``reward.json`` (its ``reward``, else the mean of its
    numbers); ValueError when there is none or it is outside [0, 1]."""
    if text.strip():
        value = float(text.strip())
    elif json_text is not None:
        doc = json.loads(json_text)
        if isinstance(doc, int | float):
            value = float(doc)
        elif isinstance(doc, dict) and isinstance(doc.get("reward"), int | float):
            value = float(doc["reward"])
        elif isinstance(doc, dict) and doc and all(isinstance(v, int | float) for v in doc.values()):
            value = sum(doc.values()) / len(doc)
        else:
            raise ValueError("reward.json holds no number")
    else:
        raise ValueError("the tests wrote no reward")
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise ValueError(f"the reward {value!r} is outside [0, 1]")
    return value


class TaskDirParams(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """``task_dir`` params (see the module docstring)."""

    path: str | None = None
    sample_ids: list[str] | str | None = None
    limit: Count | None = None
    k: Attempts | None = None
    eval_timeout: Seconds | None = None


class DownloadedTaskDirParams(TaskDirParams, frozen=True):
    """The params of a benchmark whose tasks can be downloaded: ``url`` (its tarball; default the public
    dataset's) and ``download`` (default true)."""

    url: str | None = None
    download: bool = True


class TaskDir(Benchmark):
    """Any folder of Harbor-format tasks (params: ``TaskDirParams``)."""

    name: ClassVar[str] = "task_dir"
    version: ClassVar[str] = "1"
    dimension: ClassVar[str] = "coding"
    Params: ClassVar[type[TaskDirParams]] = TaskDirParams
    #: the params that pick tasks (changing them never changes what a task is).
    selection_params: ClassVar[tuple[str, ...]] = ("sample_ids", "limit")

    def __init__(self, params: TaskDirParams | dict[str, Any], ctx: ComponentContext) -> None:
        self.where = f"benchmark {self.name}"
        p = as_params(self.Params, params, self.where)
        self.p = p
        self.k = p.k or ctx.k or 1
        self.data_dir = default_data_dir(ctx.data_dir)
        self._report_download = ctx.report_download
        self._cancelled = ctx.cancelled
        if ctx.environment and ctx.environment != "docker":
            raise ConfigError(f"{self.where} runs each task in its own image: use environment 'docker' "
                              f"(got {ctx.environment!r}).", field="environment")
        root = self.locate()
        try:
            tasks = find_tasks(root)
        except ValueError as exc:
            raise ConfigError(f"{self.where}: {exc}", field="benchmark.params.path") from None
        if not tasks:
            raise ConfigError(f"{self.where}: no task folders (instruction.md and task.toml) under {root}",
                              field="benchmark.params.path")
        self._tasks = {t.task_id: t for t in tasks}
        ids = [p.sample_ids] if isinstance(p.sample_ids, str) else p.sample_ids
        if ids is not None:
            bad = [i for i in ids if i not in self._tasks]
            if bad:
                raise ConfigError(f"Unknown task id {bad[0]!r} in parameter 'sample_ids' of {self.where}. Known: "
                                  f"{', '.join(list(self._tasks)[:8])} ({len(self._tasks)} in all).",
                                  field="benchmark.params.sample_ids")
            tasks = [t for t in tasks if t.task_id in set(ids)]
        self._selected = tasks if p.limit is None else tasks[:p.limit]

    # ------------------------------------------------------------------ data

    def locate(self) -> Path:
        """The folder holding the tasks: ``path``, else ``<data_dir>/task_dir``."""
        if self.p.path:
            return self._user_path(self.p.path)
        default = self.data_dir / "task_dir"
        if default.is_dir():
            self.source = DatasetSource("directory", path=os.fspath(default))
            return default
        raise ConfigError(f"{self.where} needs a folder of tasks: give `path`, or put the task folders in "
                          f"{default}", field="benchmark.params.path")

    def _user_path(self, path: str) -> Path:
        root = Path(path).expanduser()
        if not root.is_dir():
            raise ConfigError(f"{self.where}: path {path!r} is not a directory", field="benchmark.params.path")
        self.source = DatasetSource("directory", path=os.fspath(root.resolve()))
        return root

    def task(self, task_id: str) -> TaskFolder:
        """The folder of task ``task_id``."""
        return self._tasks[task_id]

    def load_tasks(self) -> list[TaskSpec]:
        """One task per selected folder; what grades it stays in the folder."""
        return [TaskSpec(task_id=t.task_id, category=t.category, input={"instruction": t.instruction},
                         ground_truth={"tests": "tests/test.sh"}, metadata=dict(t.metadata))
                for t in self._selected]

    # ------------------------------------------------------------------ agent side

    def prepare(self, task: TaskSpec) -> PreparedTask:
        """The instruction, in the task's image at its working directory (nothing of tests/ or solution/)."""
        t = self.task(task.task_id)
        return PreparedTask(task_id=t.task_id, prompt=t.instruction, workdir=t.workdir, image=t.image,
                            image_recipe=t.recipe, agent_timeout_s=t.agent_timeout, resources=t.resources,
                            metadata={"benchmark": self.name,
                                      **({"category": t.category} if t.category else {})})

    def reference_solution(self, task: TaskSpec) -> ReferenceSolution | None:
        """``solution/`` (its files, then ``bash solve.sh``), for the oracle harness only."""
        folder = self.task(task.task_id).root / "solution"
        if not (folder / "solve.sh").is_file():
            return None
        files = {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}
        return ReferenceSolution(files=files, command=["bash", "/solution/solve.sh"], directory="/solution",
                                 timeout_s=self.task(task.task_id).agent_timeout)

    async def collect(self, task: PreparedTask, env: Environment, result: HarnessResult) -> dict[str, Any]:
        """A tar of the agent's working directory (on disk, capped); ``evaluate`` closes it."""
        return {"workspace": await archive_of(env, env.workdir)}

    # ------------------------------------------------------------------ grading

    async def evaluate(self, ctx: EvalContext) -> EvalResult:
        """Run ``tests/test.sh`` in a fresh verifier holding the agent's working directory; its reward."""
        workspace = ctx.artifacts.get("workspace")
        try:
            return await self._evaluate(ctx, workspace if isinstance(workspace, SpooledArchive) else None)
        finally:
            if isinstance(workspace, SpooledArchive):
                workspace.close()

    async def _evaluate(self, ctx: EvalContext, workspace: SpooledArchive | None) -> EvalResult:
        t = self.task(ctx.task.task_id)
        if workspace is not None and workspace.skipped_count:
            # graded, the skipped files would be the image's originals: not the agent's work
            raise WorkspaceTruncated(f"the agent's working directory {t.workdir} was not taken whole, so it is not "
                                     f"graded: {workspace.skipped_report()}")
        tests = await asyncio.to_thread(make_tar, t.root / "tests")
        timeout = self.p.eval_timeout or t.verifier_timeout
        async with ctx.open_verifier(workdir=t.workdir) as verifier:
            if workspace is not None:
                # the agent's directory replaces the image's: what it deleted or renamed stays gone
                wd = shlex.quote(t.workdir)
                await _root_sh(verifier, f"mkdir -p {wd} && find {wd} -mindepth 1 -delete", "empty the workdir")
                await verifier.put_archive(verifier.workdir, workspace.rewind())
            # fresh, after the workspace: nothing the agent left can stand in for the tests or their reward
            await _root_sh(verifier, f"rm -rf {TESTS_DIR} {REWARD_DIR} && mkdir -p {TESTS_DIR} {REWARD_DIR}",
                           f"make a fresh {TESTS_DIR} and {REWARD_DIR}")
            await verifier.put_archive(TESTS_DIR, tests)
            res = await verifier.exec(["bash", f"{TESTS_DIR}/test.sh"], cwd=verifier.workdir,
                                      env=dict(t.verifier_env), timeout=timeout)
            text = await _read_optional(verifier, f"{REWARD_DIR}/reward.txt")
            as_json = await _read_optional(verifier, f"{REWARD_DIR}/reward.json")
        extra: dict[str, Any] = {"test_exit_code": res.exit_code,
                                 "test_output": truncate_middle(res.output, _OUTPUT_CAP)}
        if res.timed_out or res.exit_code >= 128 or res.exit_code < 0:
            # the agent's code may run inside test.sh: it can write a reward and then hang or get itself killed
            extra["timed_out"] = bool(res.timed_out)
            extra["reward_error"] = (f"test.sh {'timed out' if res.timed_out else f'died (exit {res.exit_code})'}; "
                                     f"its reward files are not trusted")
            reward = 0.0
        else:
            try:
                reward = reward_of(text or "", as_json)
            except ValueError as exc:
                extra["reward_error"] = str(exc)
                reward = 0.0
        extra["reward"] = reward
        return EvalResult(correct=reward >= 1.0, score=reward, extra=extra)


class WorkspaceTruncated(AgentCompassError):
    """The agent's working directory could not be taken whole (archive caps): it is not graded."""


async def _root_sh(env: Environment, script: str, what: str) -> None:
    res = await env.exec(["sh", "-c", script], cwd="/", timeout=120)
    if res.exit_code != 0:
        raise RuntimeError(f"cannot {what} in the verifier (exit {res.exit_code}): {res.output[-500:]}")


async def _read_optional(env: Environment, path: str) -> str | None:
    try:
        return (await env.read_file(path)).decode("utf-8", "replace")
    except (FileNotFoundError, IsADirectoryError):
        return None


class BundledTaskDir(TaskDir):
    """The bundled self-written tasks (``task_dir_data``), built from the local base image: CI's check of the
    task-directory machinery and of the ``oracle`` harness."""

    name: ClassVar[str] = "task_dir_local"

    def locate(self) -> Path:
        root = Path(os.fspath(resources.files(__package__).joinpath("task_dir_data")))  # type: ignore[call-overload]
        if self.p.path:
            return self._user_path(self.p.path)
        self.source = DatasetSource("bundled")
        return root


class DownloadedTaskDir(TaskDir):
    """A public dataset of task folders: ``path`` (a copy or a git checkout), else the cached download under
    ``data_dir``, else downloaded from ``url`` (default ``default_url``) when ``download`` is on."""

    Params: ClassVar[type[TaskDirParams]] = DownloadedTaskDirParams
    #: the dataset's repository (for messages)
    repository: ClassVar[str] = ""
    #: the tarball the tasks are downloaded from by default
    default_url: ClassVar[str] = ""

    def locate(self) -> Path:
        p = self.p
        assert isinstance(p, DownloadedTaskDirParams)
        if p.path:
            return self._user_path(p.path)
        url = p.url or self.default_url
        if not url.startswith(("https://", "http://")):
            raise ConfigError(f"{self.where}: url {redact(url)!r} must be an http(s) URL",
                              field="benchmark.params.url")
        folder = cache_dir(self.data_dir, self.name, url)
        hint = (f"Give `path` (a copy or a git checkout of {self.repository}: `git clone "
                f"https://github.com/{self.repository}`), or put its task folders in {folder}")
        manifest = find_cached(folder, url)
        if manifest is None and folder.is_dir() and any(folder.iterdir()):  # task folders put there by hand
            self.source = DatasetSource("directory", path=os.fspath(folder))
            return folder
        if manifest is None:
            if not p.download:
                raise ConfigError(f"{self.where}: no local copy of its tasks and downloading is off "
                                  f"(download: false). {hint}.", field="benchmark.params.path")
            try:
                manifest = download(url, folder, on_progress=self._on_download, cancelled=self._cancelled)
            except TasksDownloadError as exc:
                raise ConfigError(f"{self.where}: no local copy of its tasks, and {exc}. {hint}, or run "
                                  f"where {redact(url)} can be reached.", field="benchmark.params.path") from None
        self.source = DatasetSource("download", path=os.fspath(folder), repo=redact(url), commit=manifest.sha256)
        return folder

    def secrets(self) -> tuple[str, ...]:
        """The credentials and query of ``url``: masked wherever the engine writes."""
        p = self.p
        return url_secrets(p.url) if isinstance(p, DownloadedTaskDirParams) and p.url else ()

    def _on_download(self, done: int, total: int) -> None:
        if self._report_download is not None:
            self._report_download(f"{self.name} tasks", done, total)


class TerminalBench(DownloadedTaskDir):
    """Terminal-Bench 2.0 (89 tasks in Harbor format, from laude-institute/terminal-bench-2)."""

    name: ClassVar[str] = "terminal_bench"
    repository: ClassVar[str] = "laude-institute/terminal-bench-2"
    default_url: ClassVar[str] = "https://codeload.github.com/laude-institute/terminal-bench-2/tar.gz/main"


class SkillsBench(DownloadedTaskDir):
    """SkillsBench (Harbor-format tasks under ``tasks/``, from benchflow-ai/skillsbench)."""

    name: ClassVar[str] = "skillsbench"
    dimension: ClassVar[str] = "productivity"
    repository: ClassVar[str] = "benchflow-ai/skillsbench"
    default_url: ClassVar[str] = "https://codeload.github.com/benchflow-ai/skillsbench/tar.gz/main"


__all__ = ["BundledTaskDir", "DownloadedTaskDir", "SkillsBench", "TaskDir", "TaskDirParams", "TaskFolder",
           "TerminalBench", "find_tasks", "read_task", "reward_of"]
