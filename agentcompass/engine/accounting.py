"""Accounting: a request's counters, usage, errors by kind and metrics, from the details it commits; and the
status those numbers give the request in the end."""

from __future__ import annotations

from typing import Any

from ..analyzers import ERRORS_KEY, flag_names
from ..common.error_kinds import ErrorKind
from ..interfaces import MetricsAccumulator, TaskSpec
from ..records import AttemptRecord, RequestCounts, RunStatus, TaskDetail, Usage


def task_detail(task: TaskSpec, identity: str, attempts: dict[int, AttemptRecord], k: int) -> TaskDetail:
    """A task's detail from its ``k`` attempts: solved if any graded attempt was correct, the mean score."""
    ordered = {str(i): attempts[i] for i in sorted(attempts)}
    graded = [(i, a) for i, a in sorted(attempts.items()) if a.correct is not None]
    solved_at = next((i for i, a in graded if a.correct), None)
    scores = [a.score for _, a in graded if a.score is not None]
    return TaskDetail(
        task_id=task.task_id, category=task.category, k=k, attempts=ordered,
        correct=(solved_at is not None) if graded else None,
        score=sum(scores) / len(scores) if scores else None,
        attempts_tried=sum(1 for a in attempts.values() if a.status != "skipped"),
        solved_at=solved_at, identity=identity)


class RequestAccount:
    """What a request's committed details add up to. Owned by its RequestActor."""

    def __init__(self) -> None:
        self.counts = RequestCounts()
        self.errors_by_kind: dict[str, int] = {}
        self.usage = Usage()
        self.analysis_counts: dict[str, int] = {}
        #: the benchmark's metrics accumulator (set once the benchmark is built)
        self.accumulator: MetricsAccumulator | None = None
        self._attempts_counted = 0  # attempts that ran (not skipped), for "did anything reach a result"
        self._first_error: str | None = None
        self._first_engine_error: str | None = None
        #: node -> [attempts, tries, first start, last finish] (providers that say which node ran an attempt)
        self._nodes: dict[str, list[float]] = {}

    def add(self, detail: TaskDetail) -> None:
        """Count one committed (or reused) task detail."""
        self.counts.done += 1
        if detail.correct:
            self.counts.correct += 1
        for a in detail.attempts.values():
            if a.status == "skipped":
                self.counts.skipped += 1
            else:
                self._attempts_counted += 1
                if a.status != "completed":
                    self.counts.errors += 1
                    if self._first_error is None:
                        self._first_error = f"{detail.task_id}: {a.error or a.error_kind or a.status}"
                if a.error_kind == ErrorKind.ENGINE_ERROR:
                    self.counts.engine_errors += 1
                    self._first_engine_error = self._first_engine_error or f"{detail.task_id}: {a.error}"
            if a.status != "skipped":
                self._count_node(a)
            if a.error_kind:
                self.errors_by_kind[a.error_kind] = self.errors_by_kind.get(a.error_kind, 0) + 1
            u = a.meta.get("usage")
            if u:
                self.usage.add(Usage(**u))
            if a.analysis:
                self._count_analysis(a.analysis)
        if self.accumulator is not None:
            self.accumulator.add(detail)

    def _count_node(self, a: AttemptRecord) -> None:
        envs = a.meta.get("environments") or []
        node = next((e.get("node") for e in envs if isinstance(e, dict) and e.get("node")), None)
        if node is None:
            return
        start = float(a.meta.get("started_at") or 0.0)
        end = start + float(a.meta.get("duration_s") or 0.0)
        row = self._nodes.setdefault(str(node), [0, 0, start, end])
        row[0] += 1
        row[1] += len(a.tries)
        row[2], row[3] = min(row[2], start), max(row[3], end)

    def node_summary(self) -> dict[str, dict[str, Any]]:
        """Per node that ran attempts: ``attempts``, ``tries``, ``attempts_per_s`` (for summary.json)."""
        out: dict[str, dict[str, Any]] = {}
        for node, (attempts, tries, start, end) in sorted(self._nodes.items()):
            span = end - start
            out[node] = {"attempts": int(attempts), "tries": int(tries),
                         "attempts_per_s": round(attempts / span, 3) if span > 0 else None}
        return out

    def _count_analysis(self, analysis: dict[str, Any]) -> None:
        for flag in flag_names(analysis):
            self.analysis_counts[flag] = self.analysis_counts.get(flag, 0) + 1
        if analysis.get(ERRORS_KEY):
            self.analysis_counts[ERRORS_KEY] = self.analysis_counts.get(ERRORS_KEY, 0) + 1

    def verdict(self, status: RunStatus, err_text: str | None) -> tuple[RunStatus, str | None]:
        """The request's status and error once its numbers are in: a completed run where nothing reached a
        result, or where an attempt hit an engine error, is failed."""
        if status == "completed" and self._attempts_counted and self.counts.errors == self._attempts_counted:
            # Nothing ran to a result (a dead endpoint, a bad key, a harness that always crashes): a failure,
            # not a score of 0. The metrics and every detail are still written.
            kinds = ", ".join(f"{k} x{n}" for k, n in sorted(self.errors_by_kind.items()))
            status = "failed"
            err_text = err_text or (f"every attempt failed ({kinds}); first: {(self._first_error or '')[:500]}")
        if status == "completed" and self.counts.engine_errors:
            # A bug in the code running the attempts (e.g. a broken install): their 0s are not the agent's score.
            n = self.counts.engine_errors
            status = "failed"
            err_text = (f"{n} attempt{'s' if n > 1 else ''} ended with an engine error (a bug in the code running "
                        f"the attempt, not the agent's result); first: {(self._first_engine_error or '')[:500]}")
        return status, err_text
