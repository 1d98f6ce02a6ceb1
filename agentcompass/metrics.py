"""Default metrics: pass@k, avg@k, mean score, by category, computed incrementally."""

from __future__ import annotations

from typing import Any

from .records import TaskDetail


class _Tally:
    __slots__ = ("attempts", "correct_attempts", "graded_tasks", "score_n", "score_sum", "solved", "tasks")

    def __init__(self) -> None:
        self.tasks = 0
        self.graded_tasks = 0
        self.solved = 0
        self.attempts = 0
        self.correct_attempts = 0
        self.score_sum = 0.0
        self.score_n = 0

    def add(self, detail: TaskDetail) -> None:
        self.tasks += 1
        # Ungraded (errored) attempts count as failures in pass@k and avg@k alike: k is what was asked for.
        self.attempts += detail.k
        graded = [a for a in detail.attempts.values() if a.correct is not None]
        if not graded:
            return
        self.graded_tasks += 1
        if any(a.correct for a in graded):
            self.solved += 1
        self.correct_attempts += sum(1 for a in graded if a.correct)
        for a in graded:
            if a.score is not None:
                self.score_sum += a.score
                self.score_n += 1

    def result(self, k: int, primary: str | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "tasks": self.tasks,
            "graded_tasks": self.graded_tasks,
            f"pass@{k}": self.solved / self.tasks if self.tasks else 0.0,
            f"avg@{k}": self.correct_attempts / self.attempts if self.attempts else 0.0,
            "solved": self.solved,
        }
        out["pass_rate"] = out[f"pass@{k}"]
        if primary:  # the headline metric the benchmark asked for (e.g. avg@k)
            out["primary_metric"] = primary
            out["primary"] = out[primary]
        if self.score_n:
            out["mean_score"] = self.score_sum / self.score_n
        return out


class DefaultAccumulator:
    """pass@k (a task counts when any of its k attempts is correct), avg@k and mean score."""

    def __init__(self, k: int = 1, primary: str | None = None) -> None:
        self.k = k
        self.primary = primary
        self._all = _Tally()
        self._by_category: dict[str, _Tally] = {}

    def add(self, detail: TaskDetail) -> None:
        if all(a.status == "skipped" for a in detail.attempts.values()):
            return
        self._all.add(detail)
        if detail.category:
            self._by_category.setdefault(detail.category, _Tally()).add(detail)

    def result(self) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        return (self._all.result(self.k, self.primary),
                {c: t.result(self.k, self.primary) for c, t in sorted(self._by_category.items())})
