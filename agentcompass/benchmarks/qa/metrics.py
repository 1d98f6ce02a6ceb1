"""Metrics of judge-graded QA: correct / incorrect / not attempted, as SimpleQA reports them.

On top of the default pass@k and avg@k: per attempt grade counts, ``graded`` and ``ungraded`` (run errors and
eval errors: attempts without a grade), ``accuracy`` (correct of all attempts asked for, as simple-evals divides by
all examples: an ungraded attempt is not correct; equal to avg@k), ``accuracy_of_graded`` (correct of graded),
``not_attempted_rate`` (of all attempts), ``correct_given_attempted`` (correct of correct + incorrect) and
SimpleQA's ``f_score`` (the harmonic mean of accuracy and correct_given_attempted), ``eval_errors`` (attempts the
judge could not grade), and ``calibration_error`` (HLE's, when the judge extracted confidences), overall and per
category.
"""

from __future__ import annotations

from typing import Any

from ...metrics import DefaultAccumulator
from ...records import TaskDetail


def calibration_error(pairs: list[tuple[float, bool]], beta: int = 100) -> float:
    """HLE's RMS calibration error: the (confidence %, correct) pairs sorted by confidence, in bins of ``beta``
    (the last bin takes the rest), each bin's squared gap between mean confidence and accuracy weighted by its
    size. Unlike HLE's script every bin is counted (it leaves out the last) and fewer than ``beta`` pairs make
    one bin."""
    if not pairs:
        return 0.0
    ordered = sorted(pairs)
    n = len(ordered)
    cuts = list(range(0, n, beta))
    if len(cuts) > 1 and n - cuts[-1] < beta:
        cuts.pop()  # the remainder joins the last full bin
    total = 0.0
    for i, lo in enumerate(cuts):
        hi = cuts[i + 1] if i + 1 < len(cuts) else n
        part = ordered[lo:hi]
        conf = sum(c for c, _ in part) / len(part) / 100.0
        acc = sum(1 for _, ok in part if ok) / len(part)
        total += len(part) / n * (conf - acc) ** 2
    return total ** 0.5


class _Counts:
    __slots__ = ("asked", "confidences", "correct", "eval_errors", "incorrect", "not_attempted")

    def __init__(self) -> None:
        self.asked = self.correct = self.incorrect = self.not_attempted = self.eval_errors = 0
        self.confidences: list[tuple[float, bool]] = []

    def add(self, detail: TaskDetail) -> None:
        self.asked += detail.k  # what was asked: an attempt that never ran or was never graded is not correct
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
            else:
                continue
            conf = a.extra.get("confidence")
            if isinstance(conf, (int, float)):
                self.confidences.append((float(conf), grade == "correct"))

    def metrics(self) -> dict[str, Any]:
        graded = self.correct + self.incorrect + self.not_attempted
        out: dict[str, Any] = {
            "correct": self.correct, "incorrect": self.incorrect, "not_attempted": self.not_attempted,
            "graded": graded, "ungraded": self.asked - graded, "eval_errors": self.eval_errors}
        if not self.asked:  # nothing was asked to be graded (e.g. harness none): no rate, rather than a 0
            return out
        attempted = self.correct + self.incorrect
        accuracy = self.correct / self.asked
        given = self.correct / attempted if attempted else 0.0
        out |= {
            "accuracy": accuracy, "accuracy_of_graded": self.correct / graded if graded else 0.0,
            "not_attempted_rate": self.not_attempted / self.asked,
            "correct_given_attempted": given,
            "f_score": 2 * accuracy * given / (accuracy + given) if accuracy + given else 0.0}
        if self.confidences:
            out["calibration_error"] = calibration_error(self.confidences)
        return out


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


__all__ = ["QAAccumulator", "calibration_error"]
