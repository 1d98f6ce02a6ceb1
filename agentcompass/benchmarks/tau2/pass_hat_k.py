"""tau2's pass^k: the chance that k tries of a task, drawn from its n, all succeed (C(c, k) / C(n, k) with c
successes, averaged over tasks; arXiv 2406.12045), for k = 1..n, with tau2's average reward, on top of the
default metrics. An attempt that ended in error counts as a failure with reward 0 (k is what was asked for)."""

from __future__ import annotations

import math
from typing import Any

from ...metrics import DefaultAccumulator
from ...records import TaskDetail


class _Sums:
    __slots__ = ("attempts", "pass_hat", "reward_sum", "tasks")

    def __init__(self, k: int) -> None:
        self.tasks = 0
        self.attempts = 0
        self.reward_sum = 0.0
        self.pass_hat = [0.0] * k

    def add(self, detail: TaskDetail) -> None:
        n = max(detail.k, 1)
        successes = sum(1 for a in detail.attempts.values() if a.correct)
        self.tasks += 1
        self.attempts += n
        self.reward_sum += sum(a.score or 0.0 for a in detail.attempts.values() if a.correct is not None)
        for j in range(1, len(self.pass_hat) + 1):
            if j <= n:
                self.pass_hat[j - 1] += math.comb(successes, j) / math.comb(n, j)

    def metrics(self) -> dict[str, Any]:
        if not self.tasks:  # nothing was asked to be graded (e.g. harness none): no rate, rather than a 0
            return {}
        out: dict[str, Any] = {"avg_reward": self.reward_sum / self.attempts if self.attempts else 0.0}
        for j, total in enumerate(self.pass_hat, 1):
            out[f"pass^{j}"] = total / self.tasks
        return out


class PassHatK:
    """The default accumulator plus ``pass^1``..``pass^k`` and ``avg_reward``, overall and by domain."""

    def __init__(self, k: int) -> None:
        self.k = max(k, 1)
        self._default = DefaultAccumulator(self.k)
        self._all = _Sums(self.k)
        self._by: dict[str, _Sums] = {}

    def add(self, detail: TaskDetail) -> None:
        self._default.add(detail)
        if all(a.status == "skipped" for a in detail.attempts.values()):
            return
        self._all.add(detail)
        if detail.category:
            self._by.setdefault(detail.category, _Sums(self.k)).add(detail)

    def result(self) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        metrics, by = self._default.result()
        metrics.update(self._all.metrics())
        for cat, sums in self._by.items():
            by.setdefault(cat, {}).update(sums.metrics())
        return metrics, by


__all__ = ["PassHatK"]
