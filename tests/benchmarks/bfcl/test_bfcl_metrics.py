"""BFCL's leaderboard groups against bfcl-eval's own aggregation: ``calculate_weighted_accuracy``,
``calculate_unweighted_accuracy`` and ``calculate_percentage_weighted_accuracy`` are taken from the installed
``eval_runner_helper.py`` (its module imports pandas and the model table, so the three functions' source is compiled
on its own) and combined as its ``generate_leaderboard_csv`` combines them."""

from __future__ import annotations

import ast
import random
from pathlib import Path
from typing import Any

import pytest

from agentcompass.benchmarks.bfcl.benchmark import CATEGORIES, load_category
from agentcompass.benchmarks.bfcl.metrics import leaderboard

from ..bfcl_helpers import bfcl_data


def _bfcl_aggregation() -> dict[str, Any]:
    path = bfcl_data().parent / "eval_checker" / "eval_runner_helper.py"
    tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    wanted = {"calculate_weighted_accuracy", "calculate_unweighted_accuracy", "calculate_percentage_weighted_accuracy"}
    module = ast.Module(body=[n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in wanted],
                        type_ignores=[])
    namespace: dict[str, Any] = {}
    exec(compile(module, str(path), "exec"), namespace)
    assert wanted <= set(namespace)
    return namespace


def _official(accuracy: dict[str, float], sizes: dict[str, int]) -> dict[str, float]:
    """generate_leaderboard_csv's arithmetic (every category run)."""
    f = _bfcl_aggregation()
    score = {c: {"accuracy": accuracy[c], "total_count": sizes[c], "display_accuracy": accuracy[c]}
             for c in accuracy}
    w, u, p = (f["calculate_weighted_accuracy"], f["calculate_unweighted_accuracy"],
               f["calculate_percentage_weighted_accuracy"])
    simple = u([score["simple_python"], score["simple_java"], score["simple_javascript"]])
    non_live = u([simple, score["multiple"], score["parallel"], score["parallel_multiple"]],
                 display_na_if_category_missing=False)
    live = w([score[c] for c in ("live_simple", "live_multiple", "live_parallel", "live_parallel_multiple")],
             display_na_if_category_missing=False)
    multi = u([score[c] for c in ("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param",
                                  "multi_turn_long_context")], display_na_if_category_missing=False)
    irrelevance = u([score["irrelevance"], score["live_irrelevance"]])
    agentic = {"accuracy": 0, "total_count": 0, "display_accuracy": "N/A"}  # not run
    overall = p([non_live, live, irrelevance, multi, agentic], [10, 10, 10, 30, 40],
                display_na_if_category_missing=False)
    offered = p([non_live, live, irrelevance, multi], [10, 10, 10, 30], display_na_if_category_missing=False)
    return {"bfcl_non_live": non_live["accuracy"], "bfcl_live": live["accuracy"],
            "bfcl_irrelevance": irrelevance["accuracy"], "bfcl_relevance": accuracy["live_relevance"],
            "bfcl_multi_turn": multi["accuracy"], "bfcl_overall": overall["accuracy"],
            "bfcl_overall_without_agentic": offered["accuracy"]}


@pytest.mark.parametrize("seed", range(5))
def test_groups_and_overall_match_bfcl_evals_aggregation(seed: int) -> None:
    data = bfcl_data()
    sizes = {c: len(load_category(data, c)) for c in CATEGORIES}
    rng = random.Random(seed)
    accuracy = {c: rng.random() for c in CATEGORIES}
    ours = leaderboard(accuracy, sizes)
    theirs = _official(accuracy, sizes)
    assert ours == pytest.approx(theirs)


def test_a_group_with_a_category_not_run_is_none() -> None:
    sizes = {c: 10 for c in CATEGORIES}
    accuracy = {c: 1.0 for c in CATEGORIES if c != "simple_java"}
    ours = leaderboard(accuracy, sizes)
    assert ours["bfcl_non_live"] is None and ours["bfcl_overall"] is None
    assert ours["bfcl_live"] == 1.0 and ours["bfcl_multi_turn"] == 1.0
