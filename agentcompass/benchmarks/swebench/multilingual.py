"""``swebench_multilingual``: SWE-bench Multilingual (300 instances of 42 repos in C, C++, Go, Java, JavaScript,
TypeScript, PHP, Ruby and Rust), graded as the official harness grades it.

Everything but the per-instance specs is the SWE-bench benchmark's (``swebench.py``): the official images
(``swebench/sweb.eval.x86_64.<id>`` with ``__`` as ``_1776_``), the Hub download or a file in ``data_dir``,
the agent's diff applied in a fresh verifier container. The eval script and the test commands come from the
non-Python specs table (``benchmarks/swebench/multilingual_specs.py``), the log parser from the repo (or the row's
``log_parser``). Tasks carry their ``language`` in the metadata.

Params: those of ``swebench`` plus ``local`` (default false): the bundled offline instances (a Go library
from Debian's packages) whose images build here from recipes, instead of the official dataset.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, ClassVar

from ..._errors import ConfigError
from ...common.data_dir import default_data_dir
from ...common.dataset_source import DatasetSource
from ...dependencies import Requirement
from ...interfaces import ComponentContext, ImageRecipe, TaskSpec
from ..base import Benchmark
from . import multilingual_specs as ml
from .benchmark import SWEBench, SWEBenchCommonParams, SWEBenchParams
from .log_parsers import get_parser_name
from .test_specs import get_repo_spec, own_eval_script


def _official_parser(repo: str) -> str | None:
    try:
        return get_parser_name(repo)
    except ConfigError:
        return None


class SWEBenchMultilingualParams(SWEBenchParams, frozen=True):
    """SWE-bench's params plus ``local``: the bundled offline instances instead of the official dataset."""

    local: bool = False


class SWEBenchMultilingual(SWEBench):
    """SWE-bench Multilingual (test split), or with ``local`` the bundled instances that build here."""

    name: ClassVar[str] = "swebench_multilingual"
    Params: ClassVar[type[SWEBenchCommonParams]] = SWEBenchMultilingualParams
    params: SWEBenchMultilingualParams
    requirements: ClassVar[tuple[Requirement, ...]] = SWEBench.requirements

    def __init__(self, params: SWEBenchCommonParams | dict[str, Any], ctx: ComponentContext) -> None:
        Benchmark.__init__(self, params, ctx)  # the params, before SWEBench's constructor loads the dataset
        p = self.params
        self.local = p.local
        if self.local and p.dataset_file:
            raise ConfigError(f"benchmark {self.name}: give local or dataset_file, not both",
                              field="benchmark.params.local")
        self._recipes: dict[str, tuple[str, ImageRecipe | None]] = {}
        super().__init__(p, ctx)
        for inst in self._instances:  # fail fast: every selected instance can be run and graded
            self._check(inst)

    # ------------------------------------------------------------------ data

    def _load(self) -> list[dict[str, Any]]:
        if self.local:
            from .multilingual_local import load_local_instances

            self.source = DatasetSource("bundled")
            rows = load_local_instances()
        else:
            rows = super()._load()
        out = []
        for row in rows:
            row = dict(row)
            repo = str(row["repo"])
            if not row.get("log_parser"):
                name = _official_parser(repo) or (ml.repo_info(repo).parser if ml.is_multilingual(repo) else None)
                if name:
                    row["log_parser"] = name
            out.append(row)
        return out

    def _check(self, inst: dict[str, Any]) -> None:
        repo, iid = str(inst["repo"]), inst["instance_id"]
        where = f"benchmark {self.name}: instance {iid!r} ({repo})"
        try:
            get_parser_name(repo, inst.get("log_parser"))
            if not inst.get("test_cmd") and self._non_python(inst):
                ml.version_spec(repo, str(inst.get("version", "")))
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}", field=exc.field) from None

    @staticmethod
    def _non_python(inst: dict[str, Any]) -> bool:
        repo = str(inst["repo"])
        return ml.is_multilingual(repo) or get_repo_spec(repo) is None

    @staticmethod
    def language(inst: dict[str, Any]) -> str:
        """The instance's language: its own ``language`` field, else its repo's."""
        repo = str(inst["repo"])
        if inst.get("language"):
            return str(inst["language"])
        if ml.is_multilingual(repo):
            return ml.repo_info(repo).language
        return "Python" if get_repo_spec(repo) is not None else ""

    def load_tasks(self) -> list[TaskSpec]:
        """The SWE-bench tasks, with the language in their metadata and input."""
        tasks = super().load_tasks()
        for task in tasks:
            language = self.language(self._instance(task.task_id))
            task.metadata = {**task.metadata, "language": language}
            task.input = {**task.input, "language": language}
        return tasks

    def image_for(self, instance: dict[str, Any]) -> tuple[str, ImageRecipe | None]:
        """The official image; with ``local``, the bundled instance's image and its recipe (hashed once)."""
        if not self.local:
            return super().image_for(instance)
        iid = instance["instance_id"]
        if iid not in self._recipes:
            from .multilingual_local import recipe

            cache = Path(default_data_dir(self.data_dir)) / "swebench_multilingual_local" / "contexts"
            image, context_dir = recipe(instance, cache)
            self._recipes[iid] = (image, ImageRecipe(context_dir=os.fspath(context_dir)))
        return self._recipes[iid]

    # ------------------------------------------------------------------ grading

    def eval_script(self, instance: dict[str, Any], repo_dir: str) -> str:
        """The row's own ``eval_script`` if it has one; else the non-Python eval script (official specs
        table); a Python repo's rows keep the Python one."""
        own = own_eval_script(instance, repo_dir=repo_dir)
        if own is not None:
            return own
        if self._non_python(instance):
            return ml.make_eval_script(instance, repo_dir=repo_dir)
        return super().eval_script(instance, repo_dir)


__all__ = ["SWEBenchMultilingual"]
