"""agentcompass compare: metrics side by side and the tasks whose outcome differs, on real runs."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import ClassVar

import pytest

import agentcompass
from agentcompass import cli
from agentcompass._errors import ConfigError
from agentcompass.benchmarks.shell_tasks.benchmark import ShellTasks
from agentcompass.compare import compare_runs, write_text

from .results_runs import SAMPLE, make_runs


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    results = tmp_path_factory.mktemp("results")
    a, b = make_runs(results)
    c = agentcompass.run_evaluation("shell_tasks", "shell_agent", "scripted", run_id="c", progress="none",
                                    benchmark_params={"sample_ids": SAMPLE[:2], "k": 2}, results_dir=str(results))
    assert c.run_dir is not None
    return a, b, c.run_dir


def test_two_runs_show_metrics_categories_and_the_task_that_changed(runs: tuple[Path, Path, Path]) -> None:
    a, b, _ = runs
    cmp = compare_runs([a, b])
    assert [c.label for c in cmp.runs] == ["A", "B"] and [c.run_id for c in cmp.runs] == ["a", "b"]
    assert cmp.metrics["pass@2"] == [0.6, 0.4]  # b's hacked hello_world fails; sort_unique fails in both
    assert cmp.metrics["pass@2_ci"][0][0] < 0.6 < cmp.metrics["pass@2_ci"][0][1]
    assert cmp.by_category_metric == "pass@2" and cmp.by_category["files"][0]["value"] == 0.5
    assert [(d.task_id, d.outcomes) for d in cmp.differing] == [("files/hello_world", ["pass", "fail"])]
    assert cmp.tasks_compared == len(SAMPLE) and cmp.same == len(SAMPLE) - 1
    assert cmp.transitions == {"pass -> fail": 1}


def test_text_output_lists_runs_metrics_with_deltas_and_differing_tasks(runs: tuple[Path, Path, Path]) -> None:
    a, b, _ = runs
    buf = io.StringIO()
    write_text(compare_runs([a, b]), buf)
    text = buf.getvalue()
    pass_line = next(ln for ln in text.splitlines() if ln.startswith("pass@2 "))
    assert pass_line.split()[1] == "0.6000" and pass_line.endswith("-0.2000")
    assert "files/hello_world  pass  fail" in text and "pass -> fail: 1" in text
    assert "by category (pass@2)" in text


def test_a_run_compared_with_itself_has_no_differences(runs: tuple[Path, Path, Path]) -> None:
    a, _, _ = runs
    cmp = compare_runs([a, a])
    assert cmp.differing == [] and cmp.same == len(SAMPLE) and cmp.transitions == {}


def test_three_runs_and_tasks_missing_from_one(runs: tuple[Path, Path, Path]) -> None:
    cmp = compare_runs(list(runs))
    assert [c.label for c in cmp.runs] == ["A", "B", "C"]
    by_task = {d.task_id: d.outcomes for d in cmp.differing}
    assert by_task["answer/count_lines"] == ["pass", "pass", "missing"]
    assert by_task["files/hello_world"] == ["pass", "fail", "pass"]
    assert cmp.metrics["tasks"] == [5, 5, 2] and cmp.transitions == {}


def test_json_output_and_cli(runs: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    a, b, _ = runs
    assert cli.main(["compare", str(a), str(b), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["differing"] == [{"task_id": "files/hello_world", "outcomes": ["pass", "fail"]}]
    assert cli.main(["compare", str(a), str(b)]) == 0
    assert "files/hello_world" in capsys.readouterr().out
    assert cli.main(["compare", str(a)]) == 2
    assert "at least two" in capsys.readouterr().err


def test_a_path_that_is_not_a_run_is_a_config_error(runs: tuple[Path, Path, Path], tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a run directory"):
        compare_runs([runs[0], tmp_path])


class ProductivityShellTasks(ShellTasks):
    """The shell tasks, declared as measuring productivity: a second dimension for ``compare`` to group by."""

    dimension: ClassVar[str] = "productivity"


def test_runs_are_grouped_by_their_benchmarks_dimension(runs: tuple[Path, Path, Path], tmp_path: Path) -> None:
    a, b, _ = runs
    d = agentcompass.run_evaluation(f"{__name__}:ProductivityShellTasks", "shell_agent", "scripted", run_id="d",
                                    progress="none", benchmark_params={"sample_ids": SAMPLE[:2]},
                                    results_dir=str(tmp_path))
    assert d.run_dir is not None
    rate_d = d.metrics["pass@1"]
    cmp = compare_runs([a, b, d.run_dir])
    assert sorted(cmp.by_dimension) == ["coding", "productivity"]
    coding, productivity = cmp.by_dimension["coding"], cmp.by_dimension["productivity"]
    assert coding.runs == ["A", "B"] and coding.rates == [0.6, 0.4] and coding.mean == pytest.approx(0.5)
    assert productivity.runs == ["C"] and productivity.rates == [rate_d] and productivity.mean == rate_d
    out = io.StringIO()
    write_text(cmp, out)
    assert "by dimension" in out.getvalue() and "productivity  C" in out.getvalue()
