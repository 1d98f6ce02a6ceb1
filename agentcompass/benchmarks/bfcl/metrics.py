"""The ``bfcl`` benchmark's metrics: the engine's pass@k / avg@k, plus the groups of BFCL's leaderboard table.

Per category the accuracy is the share of attempts graded correct (errors count as wrong; with ``k`` 1 it is the
category's pass@1). The groups are computed as bfcl-eval's ``generate_leaderboard_csv`` does:

- ``bfcl_non_live``: the unweighted mean of mean(simple_python, simple_java, simple_javascript), multiple,
  parallel and parallel_multiple;
- ``bfcl_live``: the mean of live_simple, live_multiple, live_parallel and live_parallel_multiple weighted by
  each category's number of questions in the dataset (so a ``sample`` or ``limit`` does not reweight it);
- ``bfcl_irrelevance``: mean(irrelevance, live_irrelevance); ``bfcl_relevance``: live_relevance (shown by BFCL,
  not part of its overall);
- ``bfcl_multi_turn``: the unweighted mean of the four multi-turn categories;
- ``bfcl_overall``: BFCL's 10/10/10/30/40 weighting of non-live, live, irrelevance, multi-turn and agentic with
  agentic at 0 (the agentic categories are not offered: what the leaderboard shows for a model without an
  agentic run), and ``bfcl_overall_without_agentic``: the same four groups renormalised (10/10/10/30 over 60).

A group is None when not all its categories ran; an overall is None when one of its groups is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...metrics import DefaultAccumulator
from ...records import TaskDetail

NON_LIVE_SIMPLE = ("simple_python", "simple_java", "simple_javascript")
NON_LIVE_OTHERS = ("multiple", "parallel", "parallel_multiple")
LIVE = ("live_simple", "live_multiple", "live_parallel", "live_parallel_multiple")
IRRELEVANCE = ("irrelevance", "live_irrelevance")
MULTI_TURN = ("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context")
#: BFCL's weights of non-live, live, irrelevance, multi-turn and agentic in its overall accuracy.
OVERALL_WEIGHTS = (10, 10, 10, 30, 40)


def _mean(values: list[float | None]) -> float | None:
    if any(v is None for v in values):
        return None
    return sum(v for v in values if v is not None) / len(values)


def leaderboard(accuracy: Mapping[str, float], sizes: Mapping[str, int]) -> dict[str, float | None]:
    """BFCL's group and overall accuracies from per-category ``accuracy`` (the categories run) and the dataset
    ``sizes`` of the live categories (see the module doc)."""
    acc: dict[str, float | None] = {c: accuracy.get(c) for c in
                                    NON_LIVE_SIMPLE + NON_LIVE_OTHERS + LIVE + IRRELEVANCE + MULTI_TURN}
    non_live = _mean([_mean([acc[c] for c in NON_LIVE_SIMPLE]), *(acc[c] for c in NON_LIVE_OTHERS)])
    live: float | None = None
    if all(acc[c] is not None for c in LIVE):
        total = sum(sizes[c] for c in LIVE)
        live = sum((acc[c] or 0.0) * sizes[c] for c in LIVE) / total if total else None
    irrelevance = _mean([acc[c] for c in IRRELEVANCE])
    multi_turn = _mean([acc[c] for c in MULTI_TURN])
    groups = [non_live, live, irrelevance, multi_turn]
    overall = overall_offered = None
    if all(g is not None for g in groups):
        parts = sum((g or 0.0) * w for g, w in zip(groups, OVERALL_WEIGHTS, strict=False))
        overall = parts / sum(OVERALL_WEIGHTS)
        overall_offered = parts / sum(OVERALL_WEIGHTS[:4])
    return {"bfcl_non_live": non_live, "bfcl_live": live, "bfcl_irrelevance": irrelevance,
            "bfcl_relevance": accuracy.get("live_relevance"), "bfcl_multi_turn": multi_turn,
            "bfcl_overall": overall, "bfcl_overall_without_agentic": overall_offered}


class BFCLAccumulator:
    """pass@k / avg@k (``DefaultAccumulator``) with BFCL's per-category ``accuracy`` and leaderboard groups (see
    the module doc). ``sizes``: each category's number of questions in the dataset."""

    def __init__(self, k: int, sizes: Mapping[str, int]) -> None:
        self._default = DefaultAccumulator(k)
        self._sizes = dict(sizes)
        self._attempts: dict[str, int] = {}
        self._correct: dict[str, int] = {}

    def add(self, detail: TaskDetail) -> None:
        self._default.add(detail)
        if not detail.category or all(a.status == "skipped" for a in detail.attempts.values()):
            return
        self._attempts[detail.category] = self._attempts.get(detail.category, 0) + detail.k
        self._correct[detail.category] = self._correct.get(detail.category, 0) + sum(
            1 for a in detail.attempts.values() if a.correct)

    def result(self) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        metrics, by_category = self._default.result()
        accuracy = {c: self._correct[c] / n for c, n in self._attempts.items() if n}
        for category, value in accuracy.items():
            by_category.setdefault(category, {})["accuracy"] = value
        metrics.update(leaderboard(accuracy, self._sizes))
        metrics["bfcl_overall_note"] = ("BFCL weights 10/10/10/30/40 (non-live, live, irrelevance, multi-turn, "
                                        "agentic); agentic is not offered: bfcl_overall counts it as 0, "
                                        "bfcl_overall_without_agentic renormalises over the other four")
        return metrics, by_category


__all__ = ["OVERALL_WEIGHTS", "BFCLAccumulator", "leaderboard"]
