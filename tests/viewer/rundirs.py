"""Writing run directories in the real on-disk format (records Structs, atomic writes) for viewer tests.

Also used by benchmarks_perf/viewer_load.py to synthesise a 10,000-task run.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import msgspec

from agentcompass.engine.run_dir import safe_name, write_atomic
from agentcompass.records import (
    AttemptRecord,
    RequestCounts,
    RunInfo,
    RunPaths,
    Step,
    Summary,
    TaskDetail,
    Trajectory,
    TryRecord,
    Usage,
)

_enc = msgspec.json.Encoder()


def make_detail(task_id: str, *, category: str = "alpha", correct: bool | None = True, steps: int = 2,
                status: str = "completed", error_kind: str | None = None, error: str | None = None,
                analysis: dict[str, Any] | None = None, observation: str = "ok\n", action: str = "echo ok",
                content: str = "I will run a command.", patch: str | None = None, tokens: int = 100,
                extra: dict[str, Any] | None = None, k: int = 1) -> TaskDetail:
    """A TaskDetail with ``k`` attempts of ``steps`` steps each (the last step submits)."""
    t0 = 1_700_000_000.0
    attempts: dict[str, AttemptRecord] = {}
    for n in range(1, k + 1):
        traj = Trajectory(started_at=t0, finished_at=t0 + steps * 0.5, stop_reason="submitted", steps=[
            Step(index=i, content=content if i < steps - 1 else "Done.\n<submit></submit>",
                 action=action if i < steps - 1 else None, observation=observation if i < steps - 1 else None,
                 exit_code=0 if i < steps - 1 else None, prompt_tokens=tokens // 2, completion_tokens=10,
                 model_latency_s=0.25, exec_latency_s=0.1 if i < steps - 1 else None, finish_reason="stop",
                 started_at=t0 + i * 0.5)
            for i in range(steps)])
        usage = Usage(prompt_tokens=tokens - 10, completion_tokens=10, total_tokens=tokens, calls=steps)
        attempts[str(n)] = AttemptRecord(
            status=status, correct=correct, score=None if correct is None else float(correct), error=error,  # type: ignore[arg-type]
            error_kind=error_kind, final_answer="", artifacts={"patch": patch} if patch else {},
            extra=extra if extra is not None else {"exit_code": 0 if correct else 1, "output": "verifier says hi\n"},
            meta={"agent_s": 0.4, "verify_s": 0.2, "usage": msgspec.to_builtins(usage), "duration_s": 0.6},
            analysis=analysis or {}, trajectory=traj,
            tries=[TryRecord(try_no=1, status=status, started_at=t0, finished_at=t0 + 0.6,  # type: ignore[arg-type]
                             error=error, error_kind=error_kind, usage=usage)])
    graded = [a for a in attempts.values() if a.correct is not None]
    return TaskDetail(task_id=task_id, k=k, attempts=attempts, category=category,
                      correct=any(a.correct for a in graded) if graded else None,
                      score=sum(a.score or 0.0 for a in graded) / len(graded) if graded else None,
                      attempts_tried=k, solved_at=1 if correct else None, identity="0" * 32)


def write_detail(run_dir: Path, detail: TaskDetail) -> Path:
    """Commit one detail the way the engine does (tmp file + rename)."""
    path = run_dir / "details" / f"{safe_name(detail.task_id)}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, _enc.encode(detail))
    return path


def write_run(run_dir: Path, details: list[TaskDetail], *, status: str = "completed", pid: int | None = None,
              benchmark: str = "synthetic", harness: str = "scripted_harness", model: str = "scripted",
              run_id: str | None = None, summary: bool = True, params: dict[str, Any] | None = None,
              progress: list[bytes] | None = None) -> Path:
    """A whole run directory: params, run_info, details, progress.jsonl and (when ``summary``) summary.json."""
    run_id = run_id or run_dir.name
    (run_dir / "details").mkdir(parents=True, exist_ok=True)
    (run_dir / "logs" / "tasks").mkdir(parents=True, exist_ok=True)
    for d in details:
        write_detail(run_dir, d)
    solved = sum(1 for d in details if d.correct)
    errors = sum(1 for d in details if d.correct is None)
    counts = RequestCounts(total=len(details), done=len(details), correct=solved, errors=errors)
    metrics = {"tasks": len(details), "solved": solved, "pass_rate": solved / len(details) if details else 0.0}
    paths = RunPaths(run_dir=str(run_dir), params=str(run_dir / "params.json"),
                     run_info=str(run_dir / "run_info.json"), progress=str(run_dir / "progress.jsonl"),
                     details_dir=str(run_dir / "details"), summary=str(run_dir / "summary.json"),
                     log=str(run_dir / "logs" / "run.log"))
    now = time.time()
    info = RunInfo(run_id=run_id, request=f"{benchmark}/{harness}/{model}", status=status,  # type: ignore[arg-type]
                   benchmark=benchmark, harness=harness, model=model, environment="local", started_at=now - 5,
                   paths=paths, counts=counts, updated_at=now, metrics=metrics if status != "running" else {},
                   pid=pid)
    write_atomic(run_dir / "run_info.json", _enc.encode(info))
    write_atomic(run_dir / "params.json", _enc.encode(params or {"run_id": run_id, "spec": {}}))
    if summary:
        write_summary(run_dir, details, status=status, run_id=run_id, benchmark=benchmark, harness=harness,
                      model=model)
    with open(run_dir / "progress.jsonl", "ab") as f:
        for line in progress or []:
            f.write(line)
    return run_dir


def write_summary(run_dir: Path, details: list[TaskDetail], *, status: str, run_id: str, benchmark: str,
                  harness: str, model: str) -> None:
    solved = sum(1 for d in details if d.correct)
    by_cat: dict[str, dict[str, Any]] = {}
    for d in details:
        c = by_cat.setdefault(d.category or "", {"tasks": 0, "solved": 0})
        c["tasks"] += 1
        c["solved"] += bool(d.correct)
    for c in by_cat.values():
        c["pass_rate"] = c["solved"] / c["tasks"]
    s = Summary(run_id=run_id, benchmark=benchmark, harness=harness, model=model, environment="local",
                status=status, metrics={"tasks": len(details), "solved": solved,  # type: ignore[arg-type]
                                        "pass_rate": solved / len(details) if details else 0.0},
                by_category=by_cat, counts=RequestCounts(total=len(details), done=len(details), correct=solved))
    write_atomic(run_dir / "summary.json", _enc.encode(s))


def event(kind: str, **fields: Any) -> bytes:
    """One progress.jsonl line."""
    return msgspec.json.encode({"event": kind, "ts": time.time(), "request": "synthetic", **fields}) + b"\n"
