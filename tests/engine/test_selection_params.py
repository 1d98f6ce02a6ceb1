"""Reuse follows the params a benchmark declares as selecting tasks (``selection_params``), whatever their names."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Literal

import msgspec

import agentcompass
from agentcompass.benchmarks.shell_tasks.benchmark import ShellTasks, ShellTasksParams
from agentcompass.engine.identity import request_identity
from agentcompass.interfaces import ComponentContext

SUBSETS = {"answer": ["answer/fib_30", "answer/count_lines"], "files": ["files/hello_world"]}
BENCH = "tests.engine.test_selection_params:SubsetTasks"


class SubsetParams(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """``subset`` picks the tasks; ``salt`` changes what a task is (it is in the reuse identity)."""

    subset: Literal["answer", "files", "both"] = "answer"
    salt: str = ""


class SubsetTasks(ShellTasks):
    """Bundled shell tasks picked by a selection param named ``subset`` (no built-in uses that name)."""

    Params = SubsetParams  # type: ignore[assignment]
    selection_params: ClassVar[tuple[str, ...]] = ("subset",)

    def __init__(self, params: Any, ctx: ComponentContext) -> None:
        assert isinstance(params, SubsetParams), params  # the engine converted the dict before construction
        ids = [*SUBSETS["answer"], *SUBSETS["files"]] if params.subset == "both" else SUBSETS[params.subset]
        super().__init__(ShellTasksParams(sample_ids=ids), ctx)


def _identity(benchmark_params: dict[str, Any], selection: tuple[str, ...]) -> str:
    return request_identity(benchmark=BENCH, benchmark_params=benchmark_params, benchmark_version="2",
                            harness="shell_agent", harness_params={}, model="scripted", model_params={},
                            api_protocol="openai-chat", environment="local", environment_params={},
                            selection_params=selection)


def test_the_identity_leaves_out_the_declared_selection_params_only() -> None:
    declared = SubsetTasks.selection_params
    assert _identity({"subset": "answer"}, declared) == _identity({"subset": "both"}, declared)
    assert _identity({"subset": "answer"}, declared) != _identity({"subset": "answer", "salt": "x"}, declared)
    # the names hard-coded before the declaration would have put `subset` in the identity: nothing reused
    assert _identity({"subset": "answer"}, ("sample_ids", "limit")) != _identity({"subset": "both"},
                                                                                  ("sample_ids", "limit"))


def test_a_selection_param_with_a_new_name_reuses_finished_tasks(tmp_path: Path) -> None:
    common: dict[str, Any] = {"results_dir": str(tmp_path), "progress": "none"}
    first = agentcompass.run_evaluation(BENCH, "shell_agent", "scripted", benchmark_params={"subset": "answer"},
                                        run_id="first", **common)
    assert first.ok and first.counts.done == 2, first.error
    # the same request continued: every finished task is reused, none runs again
    again = agentcompass.run_evaluation(BENCH, "shell_agent", "scripted", benchmark_params={"subset": "answer"},
                                        run_id="first", reuse=True, **common)
    assert again.counts.reused == 2 and again.counts.done == 2 and again.metrics == first.metrics
    # a wider subset: the two finished tasks are reused, only the new one runs
    wider = agentcompass.run_evaluation(BENCH, "shell_agent", "scripted", benchmark_params={"subset": "both"},
                                        reuse_run_id="first", run_id="wider", **common)
    assert wider.counts.total == 3 and wider.counts.reused == 2 and wider.counts.done == 3
    # a param that is not a selection param changes the identity: nothing is reused
    salted = agentcompass.run_evaluation(BENCH, "shell_agent", "scripted",
                                         benchmark_params={"subset": "answer", "salt": "x"},
                                         reuse_run_id="first", run_id="salted", **common)
    assert salted.counts.reused == 0
    assert len(salted.reuse["rerun"]["identity_mismatch"]) == 2


def test_a_typo_in_a_declared_param_is_refused_before_anything_runs(tmp_path: Path) -> None:
    out = agentcompass.launch({"requests": [{"benchmark": {"id": BENCH, "params": {"subst": "both"}},
                                             "harness": "shell_agent", "model": "scripted",
                                             "results_dir": str(tmp_path)}], "progress": "none"}).outcomes[0]
    assert out.status == "failed" and out.error_field == "benchmark.params.subst"
    assert "Did you mean 'subset'?" in (out.error or "")
