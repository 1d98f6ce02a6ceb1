"""Default metrics: pass@k, avg@k, mean score, by category, computed incrementally, with 95% intervals.

``pass@k_ci`` is the Wilson score interval of solved/tasks. ``avg@k_ci`` is a Wilson interval on the
attempt-level rate with the sample size cut to its effective size: the k attempts of one task are not
independent, so n_eff = tasks * p(1-p) / var(per-task rate), kept between tasks and tasks*k (the design
effect of cluster sampling). With k=1 both are the plain Wilson interval.
"""

from __future__ import annotations

import math
from typing import Any

from .records import TaskDetail

Z95 = 1.959963984540054


def wilson_interval(successes: float, n: float, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a proportion (``successes`` out of ``n``); (0, 1) when n is 0."""
    if n <= 0:
        return 0.0, 1.0
    p = successes / n
    z2 = z * z
    denom = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def clustered_wilson_interval(rate_sum: float, rate_sq_sum: float, tasks: int, k: int,
                              z: float = Z95) -> tuple[float, float]:
    """Wilson interval for avg@k from per-task rates r_i (sum and sum of squares over ``tasks`` tasks of k
    attempts): the attempt count is replaced by the effective sample size under within-task correlation."""
    if tasks <= 0:
        return 0.0, 1.0
    p = rate_sum / tasks
    n_max = tasks * max(k, 1)
    var_between = max(0.0, rate_sq_sum / tasks - p * p)  # population variance of the per-task rates
    if var_between <= 0.0:
        n_eff = float(n_max)
    else:
        n_eff = min(float(n_max), max(float(tasks), tasks * p * (1 - p) / var_between))
    return wilson_interval(p * n_eff, n_eff, z)


def _ci(bounds: tuple[float, float]) -> list[float]:
    return [round(bounds[0], 4), round(bounds[1], 4)]


class _Tally:
    __slots__ = ("attempts", "correct_attempts", "graded_tasks", "k_max", "rate_sq_sum", "rate_sum", "score_n",
                 "score_sum", "solved", "tasks")

    def __init__(self) -> None:
        self.tasks = 0
        self.graded_tasks = 0
        self.solved = 0
        self.attempts = 0
        self.correct_attempts = 0
        self.score_sum = 0.0
        self.score_n = 0
        self.rate_sum = 0.0  # per-task fraction of correct attempts, for the avg@k interval
        self.rate_sq_sum = 0.0
        self.k_max = 1

    def add(self, detail: TaskDetail) -> None:
        self.tasks += 1
        # Ungraded (errored) attempts count as failures in pass@k and avg@k alike: k is what was asked for.
        self.attempts += detail.k
        self.k_max = max(self.k_max, detail.k)
        graded = [a for a in detail.attempts.values() if a.correct is not None]
        if not graded:
            return
        self.graded_tasks += 1
        if any(a.correct for a in graded):
            self.solved += 1
        correct = sum(1 for a in graded if a.correct)
        self.correct_attempts += correct
        rate = correct / max(detail.k, 1)
        self.rate_sum += rate
        self.rate_sq_sum += rate * rate
        for a in graded:
            if a.score is not None:
                self.score_sum += a.score
                self.score_n += 1

    def result(self, k: int, primary: str | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {"tasks": self.tasks, "graded_tasks": self.graded_tasks}
        if not self.tasks:  # nothing was asked to be graded (e.g. harness none): no rate, rather than a 0
            out["solved"] = 0
            if primary:  # the name of the headline, which has no value yet
                out["primary_metric"] = primary
            return out
        out[f"pass@{k}"] = self.solved / self.tasks
        out[f"avg@{k}"] = self.correct_attempts / self.attempts if self.attempts else 0.0
        out["solved"] = self.solved
        out[f"pass@{k}_ci"] = _ci(wilson_interval(self.solved, self.tasks))
        out[f"avg@{k}_ci"] = _ci(clustered_wilson_interval(self.rate_sum, self.rate_sq_sum, self.tasks,
                                                           self.k_max))
        out["pass_rate"] = out[f"pass@{k}"]
        if primary:  # the headline metric the benchmark asked for (e.g. avg@k)
            out["primary_metric"] = primary
            out["primary"] = out[primary]
            if f"{primary}_ci" in out:
                out["primary_ci"] = out[f"{primary}_ci"]
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
