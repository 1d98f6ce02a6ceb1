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
import json
import math
import os
import posixpath
import re
import shlex
import tarfile
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, ClassVar

import msgspec

from ..._errors import AgentCompassError, ConfigError
from ..._validate import Attempts, Count, Seconds, check_number, seconds, size_bytes
from ...common.data_dir import default_data_dir
from ...common.dataset_source import DatasetSource
from ...common.text import truncate_middle
from ...environments._tar import SpooledArchive, archive_of
from ...interfaces import (
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
from ..base import Benchmark
from .files import (
    MAX_CONFIG_BYTES,
    MAX_INSTRUCTION_BYTES,
    MAX_SOLUTION_BYTES,
    check_tree,
    load_task_toml,
    read_text,
    read_tree,
    resolve,
    tree_archive,
    tree_digest,
)
from .source import TasksDownloadError, cache_dir, download, find_cached, redact, url_secrets

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
#: the most a task may ask for: more is a typo or a hostile folder, never a plan
MAX_CPUS = 1024.0
MAX_MEMORY_MB = float(1 << 20)
MAX_STORAGE_MB = float(1 << 24)
#: the largest reward.txt or reward.json read (the verifier's output is hostile: the agent's code may write it)
MAX_REWARD_BYTES = 1 << 20
_OUTPUT_CAP = 20_000
_TAG_BAD = re.compile(r"[^a-z0-9_.-]")
_WORKDIR = re.compile(r"^\s*WORKDIR\s+(\S+)\s*$", re.IGNORECASE | re.MULTILINE)
#: a plain absolute path: /name/name..., no variables, quotes or empty parts
_PLAIN_ABSOLUTE = re.compile(r"(/[A-Za-z0-9_.@+:~-]+)+/?")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_IMAGE_REF = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@-]{0,254}")


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


def _image_tag(task_id: str) -> str:
    tag = _TAG_BAD.sub("-", task_id.lower()).lstrip(".-") or "task"
    return tag[:100]


def _label(task_id: str, table: str, key: str) -> str:
    return f"task {task_id!r}: [{table}] {key} in task.toml"


def _number(task_id: str, table: str, key: str, value: Any, maximum: float) -> float:
    return float(check_number(value, f"task.toml [{table}] {key}", gt=0, le=maximum,
                              label=_label(task_id, table, key)))


def _timeout(task_id: str, table: str, value: Any, default: float) -> float:
    if value is None:
        return default
    return seconds(value, f"task.toml [{table}] timeout_sec", label=_label(task_id, table, "timeout_sec"))


def _resources(task_id: str, table: dict[str, Any]) -> Resources | None:
    """``[environment]``'s ``cpus`` and ``memory_mb`` (or Harbor's older ``memory = "2G"``); None when it names
    neither. (``storage_mb`` is kept in the task's metadata: a container's disk is capped by the provider's
    ``disk_limit``, which not every storage driver can enforce.)"""
    cpus = _number(task_id, "environment", "cpus", table["cpus"], MAX_CPUS) if "cpus" in table else None
    if "storage_mb" in table:
        _number(task_id, "environment", "storage_mb", table["storage_mb"], MAX_STORAGE_MB)
    memory: int | None = None
    if "memory_mb" in table:
        memory = int(_number(task_id, "environment", "memory_mb", table["memory_mb"], MAX_MEMORY_MB) * _MIB)
    elif "memory" in table:
        try:
            memory = size_bytes(table["memory"], "memory")
        except ConfigError:
            raise ValueError(f"task {task_id!r}: [environment] memory must be a size like '2G' or a positive int "
                             f"of bytes, got {table['memory']!r}") from None
        if memory > MAX_MEMORY_MB * _MIB:
            raise ValueError(f"{_label(task_id, 'environment', 'memory')} must be at most "
                             f"{int(MAX_MEMORY_MB) >> 10}G, got {table['memory']!r}")
    if memory is not None and memory < _MIN_MEMORY:
        raise ValueError(f"task {task_id!r}: [environment] memory must be at least 6 MiB (Docker's least), "
                         f"got {memory} bytes")
    return Resources(cpus=cpus, memory_bytes=memory) if cpus is not None or memory is not None else None


def _check_workdir(task_id: str, workdir: str) -> str:
    """The agent's directory (normalised): a plain absolute path (``//tests`` is ``/tests`` to the container
    but not to ``normpath``), and, as it is carried into the verifier, not ``/`` nor holding, being or under
    the folders the verifier owns (``/tests``, ``/logs``)."""
    parts = workdir.split("/")
    if workdir != "/" and (not _PLAIN_ABSOLUTE.fullmatch(workdir) or "." in parts or ".." in parts):
        raise ValueError(f"task {task_id!r}: environment/Dockerfile WORKDIR {workdir} is refused: the agent's "
                         f"working directory must be a plain absolute path (/name/name..., no empty, . or .. "
                         f"parts, no variables or quotes)")
    norm = posixpath.normpath(workdir)
    for owned in (TESTS_DIR, "/logs"):
        if norm == "/" or norm == owned or norm.startswith(owned + "/") or owned.startswith(norm + "/"):
            raise ValueError(f"task {task_id!r}: environment/Dockerfile WORKDIR {workdir} is refused: the agent's "
                             f"working directory may not be /, nor hold or sit under {TESTS_DIR} or /logs")
    return norm


def _verifier_env(task_id: str, value: Any) -> dict[str, str]:
    label = _label(task_id, "verifier", "env")
    if not isinstance(value, dict):
        raise ValueError(f"{label} must map names to strings")
    for name, text in value.items():
        if not _ENV_NAME.fullmatch(name):
            raise ValueError(f"{label}: {name!r} is not a variable name (letters, digits and _, not starting "
                             f"with a digit)")
        if not isinstance(text, str) or "\0" in text:
            raise ValueError(f"{label}: {name} must be a string without NUL characters")
    return dict(value)


def _has(root: Path, rel: str, task_id: str) -> bool:
    """Whether regular file ``root/rel`` exists; a link on the way leading outside ``root`` is refused."""
    return os.path.isfile(resolve(root, rel, task_id))


def read_task(root: Path, task_id: str) -> TaskFolder:
    """The task in folder ``root``; ValueError naming the task and what is wrong with it (a file linked out of
    the folder or over its cap, a ``task.toml`` field out of range)."""
    config = load_task_toml(root, task_id)
    tables = {k: config.get(k) or {} for k in ("metadata", "agent", "verifier", "environment")}
    for name, table in tables.items():
        if not isinstance(table, dict):
            raise ValueError(f"task {task_id!r}: [{name}] in task.toml is not a table")
    instruction = read_text(root, "instruction.md", task_id, MAX_INSTRUCTION_BYTES)
    if not _has(root, "tests/test.sh", task_id):
        raise ValueError(f"task {task_id!r}: no tests/test.sh")
    check_tree(root, "tests", task_id)
    if os.path.isdir(resolve(root, "solution", task_id)):
        check_tree(root, "solution", task_id, total_cap=MAX_SOLUTION_BYTES)  # what reference_solution reads
    workdir = DEFAULT_WORKDIR
    if _has(root, "environment/Dockerfile", task_id):
        found = _WORKDIR.findall(read_text(root, "environment/Dockerfile", task_id, MAX_CONFIG_BYTES))
        if found:
            workdir = found[-1]
        image = f"{IMAGE_REPOSITORY}:{_image_tag(task_id)}-{tree_digest(root, 'environment', task_id)[:12]}"
        recipe: ImageRecipe | None = ImageRecipe(context_dir=resolve(root, "environment", task_id))
    elif isinstance(tables["environment"].get("docker_image"), str):
        image, recipe = tables["environment"]["docker_image"], None
        if not _IMAGE_REF.fullmatch(image):
            raise ValueError(f"{_label(task_id, 'environment', 'docker_image')} must be an image reference "
                             f"(letters, digits and ._/:@-, at most 255), got {image[:100]!r}")
    else:
        raise ValueError(f"task {task_id!r}: neither environment/Dockerfile nor [environment] docker_image")
    workdir = _check_workdir(task_id, workdir)
    verifier_env = _verifier_env(task_id, tables["verifier"].get("env") or {})
    metadata = {k: v for k, v in tables["metadata"].items() if isinstance(v, str | int | float | bool | list)}
    needs = _resources(task_id, tables["environment"])
    for key in ("cpus", "memory_mb", "storage_mb"):
        if key in tables["environment"]:
            metadata[key] = tables["environment"][key]
    return TaskFolder(
        task_id=task_id, root=root, instruction=instruction, workdir=workdir, image=image, recipe=recipe,
        agent_timeout=_timeout(task_id, "agent", tables["agent"].get("timeout_sec"), DEFAULT_AGENT_TIMEOUT),
        verifier_timeout=_timeout(task_id, "verifier", tables["verifier"].get("timeout_sec"),
                                  DEFAULT_VERIFIER_TIMEOUT),
        verifier_env=verifier_env, metadata=metadata, resources=needs)


def find_tasks(root: Path) -> list[TaskFolder]:
    """Every task folder under ``root`` (a folder with ``instruction.md`` and ``task.toml``), by id; ``root``
    itself when it is one task. A folder reached twice (through a link) is listed once, under its first name
    (shallowest, then by name), so a link loop neither repeats tasks nor runs on."""
    def is_task(p: Path) -> bool:
        return (p / "instruction.md").is_file() and (p / "task.toml").is_file()

    def first_visit(p: Path) -> bool:
        try:
            st = p.stat()
        except OSError:  # a dangling link or a loop of links
            return False
        key = (st.st_dev, st.st_ino)
        if key in seen:
            return False
        seen.add(key)
        return True

    if is_task(root):
        return [read_task(root, root.name)]
    seen: set[tuple[int, int]] = set()
    first_visit(root)
    found: list[TaskFolder] = []
    level = [root]
    for _ in range(MAX_DEPTH):
        nxt: list[Path] = []
        for d in level:
            for child in sorted(d.iterdir()):
                if child.name.startswith(".") or not child.is_dir() or not first_visit(child):
                    continue
                if is_task(child):
                    found.append(read_task(child, child.relative_to(root).as_posix()))
                else:
                    nxt.append(child)
        level = nxt
    return sorted(found, key=lambda t: t.task_id)


def reward_of(text: str, json_text: str | None) -> float:
    """The reward of ``reward.txt`` (a number), else of ``reward.json`` (Harbor's object of named numbers: its
    ``reward``, else the mean of its numbers; other fields ignored; or a bare number); ValueError when there is
    none, it is outside [0, 1], or a file is over ``MAX_REWARD_BYTES`` or nested too deeply to read (what the
    verifier writes is hostile: the agent's code may run in it)."""
    for name, content in (("reward.txt", text), ("reward.json", json_text)):
        if content is not None and len(content) > MAX_REWARD_BYTES:
            raise ValueError(f"{name} is larger than {MAX_REWARD_BYTES} bytes, the cap")
    if text.strip():
        value = float(text.strip())
    elif json_text is not None:
        try:
            doc = json.loads(json_text)
        except RecursionError:
            raise ValueError("reward.json is nested too deeply to read") from None
        numbers = ({k: v for k, v in doc.items() if isinstance(v, int | float) and not isinstance(v, bool)}
                   if isinstance(doc, dict) else {})
        if isinstance(doc, int | float) and not isinstance(doc, bool):
            value = float(doc)
        elif "reward" in numbers:
            value = float(numbers["reward"])
        elif numbers:
            value = sum(numbers.values()) / len(numbers)
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
    params: TaskDirParams
    #: the params that pick tasks (changing them never changes what a task is).
    selection_params: ClassVar[tuple[str, ...]] = ("sample_ids", "limit")

    def __init__(self, params: TaskDirParams | dict[str, Any], ctx: ComponentContext) -> None:
        super().__init__(params, ctx)
        self.where = f"benchmark {self.name}"
        p = self.params
        self.p = p
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
        tasks = self.select(tasks)
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
        t = self.task(task.task_id)
        if not _has(t.root, "solution/solve.sh", t.task_id):
            return None
        files = read_tree(t.root, "solution", t.task_id)
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
        tests = await asyncio.to_thread(tree_archive, t.root, "tests", t.task_id)
        try:
            return await self._verify(ctx, t, workspace, tests)
        finally:
            tests.close()

    async def _verify(self, ctx: EvalContext, t: TaskFolder, workspace: SpooledArchive | None,
                      tests: SpooledArchive) -> EvalResult:
        timeout = self.p.eval_timeout or t.verifier_timeout
        read_error: str | None = None
        text = as_json = None
        async with ctx.open_verifier(workdir=t.workdir) as verifier:
            if workspace is not None:
                # the agent's directory replaces the image's: what it deleted or renamed stays gone
                wd = shlex.quote(t.workdir)
                await _root_sh(verifier, f"mkdir -p {wd} && find {wd} -mindepth 1 -delete", "empty the workdir")
                await verifier.put_archive(verifier.workdir, workspace.rewind())
            # fresh, after the workspace: nothing the agent left can stand in for the tests or their reward
            await _root_sh(verifier, f"rm -rf {TESTS_DIR} {REWARD_DIR} && mkdir -p {TESTS_DIR} {REWARD_DIR}",
                           f"make a fresh {TESTS_DIR} and {REWARD_DIR}")
            await verifier.put_archive(TESTS_DIR, tests.rewind())
            res = await verifier.exec(["bash", f"{TESTS_DIR}/test.sh"], cwd=verifier.workdir,
                                      env=dict(t.verifier_env), timeout=timeout)
            try:
                text = await read_reward_file(verifier, f"{REWARD_DIR}/reward.txt")
                as_json = await read_reward_file(verifier, f"{REWARD_DIR}/reward.json")
            except ValueError as exc:
                read_error = str(exc)
        extra: dict[str, Any] = {"test_exit_code": res.exit_code,
                                 "test_output": truncate_middle(res.output, _OUTPUT_CAP)}
        if res.timed_out or res.exit_code >= 128 or res.exit_code < 0:
            # the agent's code may run inside test.sh: it can write a reward and then hang or get itself killed
            extra["timed_out"] = bool(res.timed_out)
            extra["reward_error"] = (f"test.sh {'timed out' if res.timed_out else f'died (exit {res.exit_code})'}; "
                                     f"its reward files are not trusted")
            reward = 0.0
        elif read_error is not None:
            extra["reward_error"] = read_error
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


async def read_reward_file(env: Environment, path: str) -> str | None:
    """The text of reward file ``path`` in ``env`` (None when it is missing), taken through the environment's
    capped archive (on disk, never whole in memory); ValueError when it is over ``MAX_REWARD_BYTES`` or not a
    regular file."""
    try:
        archive = await archive_of(env, path)
    except FileNotFoundError:
        return None
    with archive:
        return await asyncio.to_thread(_reward_text, archive, posixpath.basename(path))


def _reward_text(archive: SpooledArchive, name: str) -> str:
    if any(s.name == name and s.reason == "file_limit" for s in archive.skipped):
        raise ValueError(f"{name} is larger than {MAX_REWARD_BYTES} bytes, the cap")
    with tarfile.open(fileobj=archive.rewind(), mode="r:") as tf:
        member = tf.next()
        if member is None or member.name != name or not member.isreg():
            raise ValueError(f"{name} is not a regular file")
        if member.size > MAX_REWARD_BYTES:
            raise ValueError(f"{name} is larger than {MAX_REWARD_BYTES} bytes, the cap")
        f = tf.extractfile(member)
        data = f.read(MAX_REWARD_BYTES) if f is not None else b""
    return data.decode("utf-8", "replace")


class BundledTaskDir(TaskDir):
    """The bundled self-written tasks (``task_dir/data``), built from the local base image: CI's check of the
    task-directory machinery and of the ``oracle`` harness."""

    name: ClassVar[str] = "task_dir_local"

    def locate(self) -> Path:
        root = Path(os.fspath(resources.files(__package__).joinpath("data")))  # type: ignore[call-overload]
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
