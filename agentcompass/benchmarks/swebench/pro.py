"""``swebench_pro``: SWE-bench Pro (public set, ``ScaleAI/SWE-bench_Pro``), graded as its official evaluator
(``swe_bench_pro_eval.py`` of scaleapi/SWE-bench_Pro-os) does.

The agent works at ``/app`` in the instance's image (``jefzda/sweap-images:<dockerhub_tag>``) on the issue,
its requirements and its new interfaces. Grading, in two fresh verifier containers of that image:

1. the run container: the image's ``ENV`` re-exported, ``/app`` reset to the base commit, the agent's patch
   (binary hunks dropped) applied with ``git apply -v``, the last line of ``before_repo_set_cmd`` run, then
   the instance's ``run_script.sh`` on the selected test files, stdout and stderr to two log files;
2. the parser container, which never ran the agent's code: the instance's ``parser.py`` reads those two logs
   and writes its result json to a fresh path. (The official evaluator runs the parser in the run container
   and reads ``/workspace/output.json`` even when the parser failed, so code from the patch could leave a
   result there or change the parser or the interpreter; here it cannot.)

Resolved: every FAIL_TO_PASS and PASS_TO_PASS name has status ``PASSED`` in the result json.
``extra.eval_raw_data`` holds {completed, resolved, timed_out, returncode, tests, fail_to_pass, pass_to_pass}
and the logs. Docker only.

Params: those of ``swebench`` except the image naming ones, plus ``image_repository`` (default
``jefzda/sweap-images``), ``scripts_dir`` (a folder with the repository's ``run_scripts/`` and
``dockerfiles/``; default: downloaded into ``<data_dir>/swebench_pro/scripts/<commit>/``), ``scripts_commit``
(the repository commit to download), ``scripts_url`` (the tarball to download instead of GitHub's),
``scripts_download`` (default true) and ``eval_timeout`` (seconds for the run step; default 3600, the
official sandbox's limit).
"""

from __future__ import annotations

import re
import uuid
from typing import Any, ClassVar

from ..._errors import ConfigError
from ...common.data_dir import default_data_dir
from ...common.text import truncate_middle
from ...interfaces import (
    ComponentContext,
    Environment,
    EvalContext,
    EvalResult,
    ImageRecipe,
    PreparedTask,
    TaskSpec,
)
from ..base import Benchmark
from .benchmark import SWEBench, SWEBenchCommonParams, submitted_patch
from .dataset import load_instances
from .pro_grading import grade, report_dict
from .pro_instances import (
    APP_DIR,
    DEFAULT_IMAGE_REPOSITORY,
    REQUIRED_FIELDS,
    WORKSPACE,
    entry_script,
    env_exports,
    image_name,
    normalize_pro_instance,
    problem_statement,
    strip_binary_hunks,
)
from .pro_scripts import DEFAULT_COMMIT, ScriptsSource, locate

#: seconds the parser may take on the two logs
PARSER_TIMEOUT = 600.0
_LOG_CAP = 200_000
_COMMIT = re.compile(r"[0-9a-f]{7,40}")


class SWEBenchProParams(SWEBenchCommonParams, frozen=True):
    """SWE-bench Pro's params: the common SWE-bench ones (no image naming) and where the images and the run
    scripts come from (see the module docstring)."""

    image_repository: str | None = None
    scripts_dir: str | None = None
    scripts_commit: str | None = None
    scripts_url: str | None = None
    scripts_download: bool = True


class SWEBenchPro(SWEBench):
    """SWE-bench Pro (public set): per-instance images, run scripts and parsers."""

    version: ClassVar[str] = "1"  # its own grading (the Pro run scripts and parsers): no grading_version
    name: ClassVar[str] = "swebench_pro"
    Params: ClassVar[type[SWEBenchCommonParams]] = SWEBenchProParams
    params: SWEBenchProParams
    default_eval_timeout: ClassVar[float] = 3600.0

    def resolved_settings(self) -> dict[str, Any]:
        """Nothing beyond the params (SWE-bench Pro is graded by its own scripts, not by a swebench release)."""
        return {}

    def __init__(self, params: SWEBenchCommonParams | dict[str, Any], ctx: ComponentContext) -> None:
        where = f"benchmark {self.name}"
        Benchmark.__init__(self, params, ctx)  # the params, before SWEBench's constructor loads the dataset
        p = self.params
        self.image_repository = p.image_repository or DEFAULT_IMAGE_REPOSITORY
        self.scripts_commit = p.scripts_commit or DEFAULT_COMMIT
        if not _COMMIT.fullmatch(self.scripts_commit):
            raise ConfigError(f"{where}: scripts_commit must be a commit hash (7 to 40 lower-case hex digits), got "
                              f"{self.scripts_commit!r}", field="benchmark.params.scripts_commit")
        self.scripts_url = p.scripts_url or None
        if self.scripts_url is not None and not self.scripts_url.startswith(("http://", "https://")):
            raise ConfigError(f"{where}: scripts_url must be an http:// or https:// URL, got {self.scripts_url!r}",
                              field="benchmark.params.scripts_url")
        self.scripts_download = p.scripts_download
        user_dir = p.scripts_dir or None
        super().__init__(p, ctx)  # loads and selects the instances
        self.scripts: ScriptsSource = locate(
            default_data_dir(self.data_dir), user_dir=user_dir, commit=self.scripts_commit, url=self.scripts_url,
            allow_download=self.scripts_download, on_progress=self._on_scripts_download, cancelled=self._cancelled)
        ids = [i["instance_id"] for i in self._instances]
        missing = self.scripts.missing(ids if self.limit is None else ids[:self.limit])
        if missing:
            raise ConfigError(f"{where}: no run_script.sh and parser.py for {len(missing)} instance(s), e.g. "
                              f"{missing[0]!r}, in {self.scripts.run_scripts}", field="benchmark.params.scripts_dir")

    def _on_scripts_download(self, bytes_done: int, bytes_total: int) -> None:
        if self._report_download is not None:
            self._report_download(f"{self.name} run scripts", bytes_done, bytes_total)

    def _load(self) -> list[dict[str, Any]]:
        rows, self.source = load_instances(self.name, self.data_dir, split=self.split, dataset_file=self.dataset_file,
                                           hub=self.hub, revision=self.revision, on_progress=self._on_download,
                                           cancelled=self._cancelled, normalize=normalize_pro_instance,
                                           columns=REQUIRED_FIELDS)
        return rows

    def image_for(self, instance: dict[str, Any]) -> tuple[str, ImageRecipe | None]:
        """``<image_repository>:<dockerhub_tag>``; pulled, never built."""
        return image_name(instance, self.image_repository), None

    def load_tasks(self) -> list[TaskSpec]:
        """One task per selected instance; the gold patch and the test lists are ground truth."""
        out: list[TaskSpec] = []
        for inst in self._instances:
            truth = {k: inst[k] for k in ("patch", "test_patch", "fail_to_pass", "pass_to_pass")}
            lang = str(inst.get("repo_language") or "")
            out.append(TaskSpec(
                task_id=inst["instance_id"], category=inst["repo"],
                input={"problem_statement": problem_statement(inst), "repo": inst["repo"],
                       "base_commit": inst["base_commit"], "repo_language": lang},
                ground_truth=truth, metadata={"repo": inst["repo"], "repo_language": lang}))
        return out if self.limit is None else out[:self.limit]

    def prepare(self, task: TaskSpec) -> PreparedTask:
        """The issue with its requirements and interfaces, in the instance's image at /app."""
        image, recipe = self.image_for(self._instance(task.task_id))
        return PreparedTask(task_id=task.task_id, prompt=task.input["problem_statement"], workdir=APP_DIR,
                            image=image, image_recipe=recipe,
                            metadata={"repo": task.input["repo"], "base_commit": task.input["base_commit"],
                                      "instance_id": task.task_id, "benchmark": self.name})

    async def evaluate(self, ctx: EvalContext) -> EvalResult:
        """Run the instance's tests on the patched repo, parse their logs in a pristine container, grade."""
        inst = self._instance(ctx.task.task_id)
        patch, extra, analysis = submitted_patch(ctx)
        scripts = self.scripts.scripts(inst["instance_id"])
        dockerfiles = (scripts.base_dockerfile or inst.get("base_dockerfile") or "",
                       scripts.instance_dockerfile or inst.get("instance_dockerfile") or "")
        script = entry_script(inst, env_exports(dockerfiles))
        raw: dict[str, Any] = {}

        # 1. the run container: the agent's patch and the tests (the patch's code runs here)
        async with ctx.open_verifier(workdir=APP_DIR) as run_env:
            await run_env.write_file(f"{WORKSPACE}/patch.diff", strip_binary_hunks(patch))
            await run_env.write_file(f"{WORKSPACE}/run_script.sh", scripts.run_script)
            await run_env.write_file(f"{WORKSPACE}/entryscript.sh", script)
            run = await run_env.exec(["bash", f"{WORKSPACE}/entryscript.sh"], cwd=APP_DIR, timeout=self.eval_timeout)
            raw["entry_output"] = truncate_middle(run.output, 20_000)
            stdout = stderr = b""
            if not run.timed_out:
                stdout, stderr, why = await _read_logs(run_env)
                if why:
                    raw["log_error"] = why

        # 2. the parser container: a fresh one of the same image, so nothing the patch did can touch the
        #    parser, the interpreter or the result file; the result path is new and unguessable
        output: bytes | None = None
        if not run.timed_out and "log_error" not in raw:
            async with ctx.open_verifier(workdir=APP_DIR) as parse_env:
                output, parsed = await _parse(parse_env, scripts.parser, stdout, stderr)
            raw["parser_returncode"] = parsed.exit_code
            raw["parser_output"] = truncate_middle(parsed.output, 20_000)
            if parsed.timed_out:
                raw["parser_timed_out"] = True
                output = None

        report = grade(output, inst["fail_to_pass"], inst["pass_to_pass"], timed_out=run.timed_out,
                       returncode=None if run.timed_out else run.exit_code)
        extra["eval_raw_data"] = {
            **report_dict(report), **raw,
            "stdout": truncate_middle(stdout.decode("utf-8", "replace"), _LOG_CAP),
            "stderr": truncate_middle(stderr.decode("utf-8", "replace"), _LOG_CAP // 4)}
        return EvalResult(correct=report.resolved, score=1.0 if report.resolved else 0.0, extra=extra,
                          analysis=analysis)


async def _read_logs(env: Environment) -> tuple[bytes, bytes, str | None]:
    """The run script's stdout and stderr logs (empty when missing); the reason when they cannot be read."""
    out: list[bytes] = []
    for name in ("stdout.log", "stderr.log"):
        try:
            out.append(await env.read_file(f"{WORKSPACE}/{name}"))
        except FileNotFoundError:
            out.append(b"")
        except OSError as exc:  # over the provider's file cap
            return b"", b"", f"{name}: {exc}"
    return out[0], out[1], None


async def _parse(env: Environment, parser: str, stdout: bytes, stderr: bytes) -> tuple[bytes | None, Any]:
    """Run ``parser`` on the logs in ``env``; (the result json or None, the parser's ExecResult)."""
    work = f"/tmp/agentcompass-pro-{uuid.uuid4().hex}"
    await env.write_file(f"{work}/parser.py", parser)
    await env.write_file(f"{work}/stdout.log", stdout)
    await env.write_file(f"{work}/stderr.log", stderr)
    result_path = f"{work}/result-{uuid.uuid4().hex}.json"
    res = await env.exec(["python", f"{work}/parser.py", f"{work}/stdout.log", f"{work}/stderr.log", result_path],
                         cwd=APP_DIR, timeout=PARSER_TIMEOUT)
    try:
        return await env.read_file(result_path), res
    except FileNotFoundError:
        return None, res


__all__ = ["PARSER_TIMEOUT", "SWEBenchPro"]
