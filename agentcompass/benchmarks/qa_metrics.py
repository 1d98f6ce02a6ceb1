"""Metrics of judge-graded QA: correct / incorrect / not attempted, as SimpleQA reports them.

On top of the default pass@k and avg@k: per attempt grade counts, ``accuracy`` (correct of graded),
``not_attempted_rate``, ``correct_given_attempted`` (correct of correct + incorrect) and SimpleQA's ``f_score``
(the harmonic mean of the two), and ``eval_errors`` (attempts the judge could not grade: counted apart, never
as wrong answers), overall and per category.
"""

from __future__ import annotations

from typing import Any

from ..metrics import DefaultAccumulator
from ..records import TaskDetail


class _Counts:
    __slots__ = ("correct", "eval_errors", "incorrect", "not_attempted")

    def __init__(self) -> None:
        self.correct = self.incorrect = self.not_attempted = self.eval_errors = 0

    def add(self, detail: TaskDetail) -> None:
        for a in detail.attempts.values():
            if a.status == "eval_error":
                self.eval_errors += 1
                continue
            grade = a.extra.get("grade") if a.correct is not None else None
            if grade == "correct":
                self.correct += 1
            elif grade == "incorrect":
                self.incorrect += 1
            elif grade == "not_attempted":
                self.not_attempted += 1

    def metrics(self) -> dict[str, Any]:
        graded = self.correct + self.incorrect + self.not_attempted
        attempted = self.correct + self.incorrect
        accuracy = self.correct / graded if graded else 0.0
        given = self.correct / attempted if attempted else 0.0
        return {"correct": self.correct, "incorrect": self.incorrect, "not_attempted": self.not_attempted,
                "eval_errors": self.eval_errors, "accuracy": accuracy,
                "not_attempted_rate": self.not_attempted / graded if graded else 0.0,
                "correct_given_attempted": given,
                "f_score": 2 * accuracy * given / (accuracy + given) if accuracy + given else 0.0}


class QAAccumulator:
    """The default metrics plus the grade counts (see the module doc)."""

    def __init__(self, k: int = 1) -> None:
        self._default = DefaultAccumulator(k)
        self._all = _Counts()
        self._by_category: dict[str, _Counts] = {}

    def add(self, detail: TaskDetail) -> None:
        if all(a.status == "skipped" for a in detail.attempts.values()):
            return
        self._default.add(detail)
        self._all.add(detail)
        if detail.category:
            self._by_category.setdefault(detail.category, _Counts()).add(detail)

    def result(self) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        metrics, cats = self._default.result()
        metrics.update(self._all.metrics())
        for name, counts in self._by_category.items():
            cats.setdefault(name, {}).update(counts.metrics())
        return metrics, cats


__all__ = ["QAAccumulator"]
