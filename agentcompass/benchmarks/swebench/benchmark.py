"""The SWE-bench family: ``swebench`` (full), ``swebench_verified``, ``swebench_lite``, ``swebench_jsonl`` (any
file of SWE-bench-format instances) and ``swebench_local`` (bundled, offline instances whose images build here).

The agent works in the instance's image at ``/testbed`` (git history past the base commit removed first).
Grading follows the official harness: the agent's diff (taken from the container) is applied in a fresh
verifier container with the same fallbacks (git apply, then patch with fuzz), the eval script resets the test
files, applies the test patch and runs the repo's test command, and the log is parsed per framework into
FAIL_TO_PASS / PASS_TO_PASS results. The raw eval output and per-test results go to ``extra.eval_raw_data``.
Docker only: the instances need their images.

Rows may carry their own grading (newer SWE-bench releases, SWE-smith / SWE-Gym style data): ``eval_script``
(run instead of the generated script), ``test_cmd`` and ``log_parser``, and an image (``image``, else
``image_name``) used instead of the official image name.

Params: ``sample_ids``, ``limit``, ``k`` (attempts per task), ``avgk`` (attempts per task, with avg@k as the
headline metric), ``eval_timeout`` (seconds, default 1800), ``split`` (default ``test``), ``dataset_file``
(a path; overrides data_dir lookup), ``image_namespace`` (default ``swebench``), ``arch`` (default
``x86_64``), ``image_tag`` (default ``latest``), ``hide_history`` (default true), ``revision`` (the Hugging Face
dataset's branch, tag or commit; default ``main``), ``hub`` (default true: take the official dataset from the
Hugging Face Hub when it is not a file in data_dir; ``use_hf_cache`` is an old name for it), ``grading_version``
(the official swebench release whose log parsers and grading rules to follow: ``5.0.2``, the default, or
``4.1.0``).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, ClassVar

import msgspec

from ..._errors import ConfigError
from ..._validate import Attempts, Count, Seconds
from ...common.data_dir import default_data_dir
from ...common.dataset_source import DatasetSource
from ...common.text import truncate_middle
from ...dependencies import Requirement
from ...interfaces import (
    ComponentContext,
    Environment,
    EvalContext,
    EvalResult,
    HarnessResult,
    ImageRecipe,
    PreparedTask,
    TaskSpec,
)
from ...metrics import DefaultAccumulator
from ..base import Benchmark
from .dataset import load_instances
from .grading import grade, is_fail_only
from .grading_version import DEFAULT_GRADING_VERSION, check_grading_version
from .images import TESTBED, history_hygiene_script, official_image
from .test_specs import apply_patch_script, make_eval_script, own_eval_script

_PATCH_FILE = "/tmp/agentcompass_model.patch"
_EVAL_FILE = "/tmp/agentcompass_eval.sh"
_RAW_CAP = 200_000
_DIFF_FILE = re.compile(r"^diff --git a/(\S+) b/(\S+)", re.MULTILINE)
_TEST_PATH = re.compile(r"(^|/)(tests?|testing)(/|$)|(^|/)test_[^/]*\.py$|_tests?\.py$|(^|/)conftest\.py$")
#: the fields a row names its own image with, in order (newer SWE-bench releases; SWE-smith / SWE-Gym)
IMAGE_FIELDS = ("image", "image_name")
#: the fields of a row that say how to grade it, kept with the ground truth
_GRADING_FIELDS = ("test_cmd", "log_parser", "eval_script", "eval_type")


def changed_files(patch: str) -> list[str]:
    """Paths a unified git diff touches (the b/ side, or a/ for deletions)."""
    out: list[str] = []
    for a, b in _DIFF_FILE.findall(patch or ""):
        path = b if b != "/dev/null" else a
        if path not in out:
            out.append(path)
    return out


def is_test_path(path: str) -> bool:
    """Whether ``path`` looks like a test file or lives in a test directory."""
    return bool(_TEST_PATH.search(path))


def instance_image(instance: dict[str, Any]) -> str | None:
    """The image the row names itself (``image``, else ``image_name``), or None."""
    for field in IMAGE_FIELDS:
        value = instance.get(field)
        if value is None or value == "":
            continue
        if not isinstance(value, str) or value != value.strip() or " " in value:
            raise ConfigError(f"instance {instance.get('instance_id', '?')!r}: {field} must be an image "
                              f"name, got {value!r}", field=field)
        return value
    return None


def submitted_patch(ctx: EvalContext) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """The patch to grade (the collected one, else the harness's submission), the result's ``extra`` describing
    it, and the analysis flags (tests modified; tests only modified)."""
    patch = ctx.artifacts.get("patch")
    if patch is None:  # no agent environment (e.g. a harness that only answers): its submission
        patch = ctx.result.patch or ""
    files = changed_files(patch)
    analysis: dict[str, Any] = {}
    if any(is_test_path(f) for f in files):
        analysis["modified_tests"] = [f for f in files if is_test_path(f)][:50]
        if all(is_test_path(f) for f in files):
            analysis["suspected_reward_hacking"] = "the patch changes test files only"
    extra: dict[str, Any] = {"model_patch": truncate_middle(patch, 100_000), "changed_files": files[:200],
                             "patch_source": ctx.artifacts.get("patch_source", "harness")}
    if analysis:
        extra["flags"] = sorted(analysis)
    return patch, extra, analysis


def _instance_id(instance: dict[str, Any]) -> str:
    return str(instance["instance_id"])


class SWEBenchCommonParams(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """The params of every SWE-bench-family benchmark (see the module docstring). ``eval_timeout`` unset: the
    benchmark's default."""

    sample_ids: list[str] | str | None = None
    limit: Count | None = None
    k: Attempts | None = None
    avgk: Attempts | None = None
    eval_timeout: Seconds | None = None
    split: str | None = None
    dataset_file: str | None = None
    hide_history: bool = True
    hub: bool | None = None
    revision: str | None = None


class SWEBenchParams(SWEBenchCommonParams, frozen=True):
    """SWE-bench's params: the common ones and where the official images are (``use_hf_cache``: ``hub``'s
    old name)."""

    image_namespace: str | None = None
    arch: str | None = None
    image_tag: str | None = None
    use_hf_cache: bool | None = None
    grading_version: str | None = None


class SWEBench(Benchmark):
    """SWE-bench (full test split). Subclasses change the dataset name and where the images come from."""

    #: "2": graded as swebench 5.0.2 by default (``grading_version``; "1" graded close to 4.1.0), so results of
    #: version "1" runs are not reused
    version: ClassVar[str] = "2"
    name: ClassVar[str] = "swebench"
    grades_patch: ClassVar[bool] = True  # submitted_patch: the harness's patch when there is no agent environment
    rescorable: ClassVar[bool] = True  # the graded patch is in every attempt's record (extra.model_patch)
    #: the params a subclass accepts
    Params: ClassVar[type[SWEBenchCommonParams]] = SWEBenchParams
    params: SWEBenchCommonParams
    #: the params that pick instances (changing them never changes what an instance is).
    selection_params: ClassVar[tuple[str, ...]] = ("sample_ids", "limit")
    #: seconds the eval script may run when ``eval_timeout`` is not given
    default_eval_timeout: ClassVar[float] = 1800.0
    #: the Hub download (the ``swebench`` extra); optional: a dataset already in data_dir needs neither
    requirements: ClassVar[tuple[Requirement, ...]] = (
        Requirement("huggingface_hub>=1.1", "huggingface_hub", optional=True),
        Requirement("pyarrow>=14", "pyarrow", optional=True))

    def __init__(self, params: SWEBenchCommonParams | dict[str, Any], ctx: ComponentContext) -> None:
        super().__init__(params, ctx)
        where = f"benchmark {self.name}"
        p = self.params
        self.primary_metric = f"avg@{self.k}" if p.avgk is not None else f"pass@{self.k}"
        self.limit: int | None = p.limit
        self.eval_timeout = p.eval_timeout or self.default_eval_timeout
        self.split = p.split or "test"
        self.dataset_file = p.dataset_file or None
        self.namespace, self.arch, self.image_tag, hub = "swebench", "x86_64", "latest", p.hub
        self.grading_version = DEFAULT_GRADING_VERSION
        if isinstance(p, SWEBenchParams):
            self.grading_version = check_grading_version(p.grading_version, "benchmark.params.grading_version")
            self.namespace = "swebench" if p.image_namespace is None else p.image_namespace
            self.arch = p.arch or "x86_64"
            self.image_tag = p.image_tag or "latest"
            if p.hub is not None and p.use_hf_cache is not None:
                raise ConfigError(f"{where}: give hub or its old name use_hf_cache, not both",
                                  field="benchmark.params.hub")
            hub = p.use_hf_cache if p.use_hf_cache is not None else p.hub
        self.hub = True if hub is None else hub
        self.hide_history = p.hide_history
        self.revision = p.revision or None
        self.data_dir = ctx.data_dir
        self._report_download = ctx.report_download
        self._cancelled = ctx.cancelled
        if ctx.environment and ctx.environment != "docker":
            raise ConfigError(f"{where} runs in per-instance images: use environment 'docker' "
                              f"(got {ctx.environment!r}).", field="environment")
        # Fail fast (before any run directory exists) when the dataset is missing or an id is unknown.
        self._instances = self.select(self._load(), _instance_id)
        self._by_id = {inst["instance_id"]: inst for inst in self._instances}
        for inst in self._instances:  # a row's own grading and image are checked before any run starts
            own_eval_script(inst)
            is_fail_only(inst)
            instance_image(inst)

    def new_accumulator(self) -> DefaultAccumulator:
        """pass@k and avg@k; with ``avgk`` the headline (``primary``) is avg@k."""
        return DefaultAccumulator(self.k, self.primary_metric)

    def resolved_settings(self) -> dict[str, Any]:
        """The official swebench release the grading follows (the default when not given), for params.json."""
        return {"grading_version": self.grading_version}

    # ------------------------------------------------------------------ data

    def _load(self) -> list[dict[str, Any]]:
        rows, self.source = load_instances(self.name, self.data_dir, split=self.split, dataset_file=self.dataset_file,
                                           hub=self.hub, revision=self.revision, on_progress=self._on_download,
                                           cancelled=self._cancelled)
        return rows

    def _on_download(self, bytes_done: int, bytes_total: int) -> None:
        if self._report_download is not None:
            self._report_download(f"{self.name} dataset ({self.split})", bytes_done, bytes_total)

    def image_for(self, instance: dict[str, Any]) -> tuple[str, ImageRecipe | None]:
        """The instance's image, and how to build it when it is missing (None: pull it): the row's own
        image if it names one, else the official name."""
        own = instance_image(instance)
        if own is not None:
            return own, None
        return official_image(instance["instance_id"], self.namespace, self.arch, self.image_tag), None

    def load_tasks(self) -> list[TaskSpec]:
        """One task per selected instance; the gold patch, tests and test lists are ground truth."""
        out: list[TaskSpec] = []
        for inst in self._instances:
            truth = {k: inst[k] for k in ("patch", "test_patch", "FAIL_TO_PASS", "PASS_TO_PASS")}
            for k in _GRADING_FIELDS:
                if k in inst:
                    truth[k] = inst[k]
            out.append(TaskSpec(
                task_id=inst["instance_id"], category=inst["repo"],
                input={"problem_statement": inst["problem_statement"], "repo": inst["repo"],
                       "base_commit": inst["base_commit"], "version": str(inst.get("version", "")),
                       "hints_text": inst.get("hints_text") or ""},
                ground_truth=truth, metadata={"repo": inst["repo"], "version": str(inst.get("version", ""))}))
        return out if self.limit is None else out[:self.limit]

    def _instance(self, task_id: str) -> dict[str, Any]:
        return self._by_id[task_id]

    # ------------------------------------------------------------------ agent side

    def prepare(self, task: TaskSpec) -> PreparedTask:
        """The problem statement, in the instance's image at /testbed."""
        image, recipe = self.image_for(self._instance(task.task_id))
        return PreparedTask(task_id=task.task_id, prompt=task.input["problem_statement"], workdir=TESTBED,
                            image=image, image_recipe=recipe,
                            metadata={"repo": task.input["repo"], "base_commit": task.input["base_commit"],
                                      "instance_id": task.task_id, "benchmark": self.name})

    async def setup(self, task: PreparedTask, env: Environment) -> None:
        """Hide the repo's future: only the base commit and its ancestors stay reachable."""
        if not self.hide_history:
            return
        res = await env.exec(["bash", "-c", history_hygiene_script(task.metadata["base_commit"], env.workdir)],
                             timeout=600)
        if res.exit_code != 0:
            raise RuntimeError(f"git history hygiene failed (exit {res.exit_code}): {res.output[-2000:]}")

    async def collect(self, task: PreparedTask, env: Environment, result: HarnessResult) -> dict[str, Any]:
        """The patch to grade: the harness's submitted diff when it made one (as the official pipeline grades
        an agent's submission), else the container's change against the base commit (new files and commits
        included)."""
        if result.patch and result.patch.strip():
            return {"patch": result.patch, "patch_source": "harness"}
        base = task.metadata["base_commit"]
        script = (f"cd {env.workdir} && git add -A >/dev/null 2>&1 && "
                  f"git -c core.quotepath=off diff --cached --text --no-color --no-ext-diff {base}")
        res = await env.exec(["bash", "-c", script], timeout=300)
        if res.exit_code == 0 and not res.truncated:
            return {"patch": res.stdout, "patch_source": "container"}
        # No usable git state in the container: fall back to what the harness submitted.
        return {"patch": result.patch or "", "patch_source": "harness",
                "collect_error": f"git diff exited {res.exit_code}: {res.output[-500:]}"}

    # ------------------------------------------------------------------ grading

    def eval_script(self, instance: dict[str, Any], repo_dir: str) -> str:
        """The bash script that applies the test patch and runs the instance's tests in ``repo_dir``."""
        return make_eval_script(instance, repo_dir=repo_dir)

    async def evaluate(self, ctx: EvalContext) -> EvalResult:
        """Apply the patch in a fresh verifier container, run the eval script, grade the log."""
        inst = {**self._instance(ctx.task.task_id), **(ctx.task.ground_truth or {})}
        patch, extra, analysis = submitted_patch(ctx)
        if not patch.strip():
            extra["eval_raw_data"] = {"patch_applied": False, "reason": "empty patch", "resolved": False}
            return EvalResult(correct=False, score=0.0, extra=extra, analysis=analysis)
        async with ctx.open_verifier(workdir=TESTBED) as verifier:  # the task's image (and recipe)
            await verifier.write_file(_PATCH_FILE, patch)
            applied = await verifier.exec(["bash", "-c", apply_patch_script(_PATCH_FILE, repo_dir=verifier.workdir)],
                                          cwd=verifier.workdir, timeout=300)
            apply_log = applied.output
            eval_out = ""
            timed_out = False
            if applied.exit_code == 0:
                await verifier.write_file(_EVAL_FILE, self.eval_script(inst, verifier.workdir))
                res = await verifier.exec(["bash", _EVAL_FILE], cwd=verifier.workdir, timeout=self.eval_timeout)
                eval_out, timed_out = res.output, res.timed_out
        report = grade(inst, eval_out, apply_output=apply_log, timed_out=timed_out, version=self.grading_version)
        extra["eval_raw_data"] = {
            **msgspec.to_builtins(report), "timed_out": timed_out, "apply_output": truncate_middle(apply_log, 20_000),
            "test_output": truncate_middle(eval_out, _RAW_CAP)}
        return EvalResult(correct=report.resolved, score=1.0 if report.resolved else 0.0, extra=extra,
                          analysis=analysis)


class SWEBenchVerified(SWEBench):
    """SWE-bench Verified (500 human-validated instances)."""

    name: ClassVar[str] = "swebench_verified"


class SWEBenchLite(SWEBench):
    """SWE-bench Lite (300 instances)."""

    name: ClassVar[str] = "swebench_lite"


class SWEBenchJsonl(SWEBench):
    """Any file of SWE-bench-format instances: ``dataset_file`` (required) names it."""

    name: ClassVar[str] = "swebench_jsonl"
    requirements: ClassVar[tuple[Requirement, ...]] = ()  # the user's file: no download

    def _load(self) -> list[dict[str, Any]]:
        if not self.dataset_file:
            raise ConfigError("benchmark swebench_jsonl needs `dataset_file`: a JSONL/JSON/parquet file of "
                              "SWE-bench instances", field="benchmark.params.dataset_file")
        return super()._load()


class SWEBenchLocal(SWEBench):
    """The bundled offline instances (small real pure-Python projects); their images build here from
    recipes, with no registry."""

    name: ClassVar[str] = "swebench_local"
    requirements: ClassVar[tuple[Requirement, ...]] = ()  # bundled

    def __init__(self, params: SWEBenchCommonParams | dict[str, Any], ctx: ComponentContext) -> None:
        self._recipes: dict[str, tuple[str, ImageRecipe | None]] = {}
        super().__init__(params, ctx)

    def _load(self) -> list[dict[str, Any]]:
        from .local_instances import load_local_instances

        self.source = DatasetSource("bundled")
        return load_local_instances()

    def image_for(self, instance: dict[str, Any]) -> tuple[str, ImageRecipe | None]:
        """Hashing the recipe reads the repo tarball and the host's pytest: done once per instance."""
        iid = instance["instance_id"]
        if iid not in self._recipes:
            from .local_instances import recipe

            cache = Path(default_data_dir(self.data_dir)) / "swebench_local" / "contexts"
            image, context_dir = recipe(instance, cache)
            self._recipes[iid] = (image, ImageRecipe(context_dir=os.fspath(context_dir)))
        return self._recipes[iid]


__all__ = ["IMAGE_FIELDS", "SWEBench", "SWEBenchCommonParams", "SWEBenchJsonl", "SWEBenchLite", "SWEBenchLocal",
           "SWEBenchParams", "SWEBenchVerified", "changed_files", "instance_image", "is_test_path"]
