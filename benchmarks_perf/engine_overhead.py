"""Engine overhead: many 2-turn tasks with an instant model and an instant environment.

Each task runs the real ``shell_agent`` harness against the in-process scripted model (turn 1 runs
``echo hi``, turn 2 submits ``42``) in a no-op environment (``_components.NoopProvider``), is graded, and
its detail is written to disk -- so what is measured is the engine's own cost per task. Every measured run
is a fresh child process (clean peak RSS).

- in-process: N tasks (default 10,000; ``--large``: 100,000) at concurrency 1,000: tasks/s, wall and CPU
  microseconds per task, peak RSS, RSS at each tenth of the run (flat memory), time from the call (engine
  imported) to the first progress event; and the same N at concurrency 10: the peak-RSS difference / 990
  is the RSS per task in flight.
- per task vs the floor: the engine's wall time per task with its run directory on disk (the default temp
  dir) and on tmpfs (``/dev/shm``), each next to the floor measured in the same script run on the same file
  system: one atomic detail write (``write_atomic``, the same bytes as an engine detail) plus one progress line
  per task, in a loop (measured before and after the engine run; their mean). Target: within 1.5x.
  Next to it, the same work with no engine (the harness, the model, the grading, the detail and the progress
  line in a plain asyncio loop): its ratio to the floor is the least any engine can reach with this workload.
- HTTP: the same workload against ``agentcompass serve-scripted`` (a separate process): turns/s.
- import time: `python -c "import agentcompass"` (median of fresh interpreters, next to a bare one) and what
  ``-X importtime`` reports for ``agentcompass`` and ``agentcompass.api``.

    .venv/bin/python benchmarks_perf/engine_overhead.py [--tasks N | --large] [--concurrency C]

Prints a table, writes ``results/engine_overhead.json`` (``engine_overhead_100k.json`` with ``--large``) and
ends with a ``RESULT`` line.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from _common import (
    REPO,
    RssSampler,
    emit_child_report,
    peak_rss_mb,
    result_line,
    rss_mb,
    run_child,
    write_json,
)

NAME = "engine_overhead"
LOW_CONCURRENCY = 10
CHILD_TIMEOUT_S = 1800.0


# ----------------------------------------------------------------------------- child: one measured run


@contextlib.contextmanager
def scratch(prefix: str, where: str | None, keep: bool) -> Iterator[str]:
    """A fresh directory under ``where``; removed on exit unless ``keep`` (the parent removes the lot at the end:
    removing 10,000 files right before the next measured run makes ext4 skip past the freed inodes on each of
    that run's creates, which showed as 50-130 us of system time per file there)."""
    if keep:
        yield tempfile.mkdtemp(prefix=prefix, dir=where)
        return
    with tempfile.TemporaryDirectory(prefix=prefix, dir=where) as tmp:
        yield tmp


def child_run(tasks: int, concurrency: int, base_url: str | None, progress: str, gc_default: bool,
              where: str | None = None, sample_out: str | None = None, keep: bool = False) -> dict[str, Any]:
    """Run the workload once in this process (its run directory under ``where``); the measurements.
    ``sample_out``: where one of its details is copied (the floor writes the same bytes)."""
    import gc

    if gc_default:  # the engine before its GC relaxation: leave CPython's threshold as it is
        from agentcompass.engine import gc_tuning

        gc_tuning.RELAXED_GEN0 = gc.get_threshold()[0]
    gc_s = 0.0
    gc_started = 0.0

    def on_gc(phase: str, info: dict[str, int]) -> None:
        nonlocal gc_s, gc_started
        if phase == "start":
            gc_started = time.perf_counter()
        else:
            gc_s += time.perf_counter() - gc_started

    from agentcompass.api import run_evaluation
    from agentcompass.records import ProgressEvent, TaskFinished
    from benchmarks_perf._components import BENCHMARK, PROVIDER, SCRIPT

    marks = {max(1, tasks * i // 10) for i in range(1, 11)}
    rss_at: dict[int, float] = {}
    done = 0
    first_event: list[float] = []

    def on_progress(ev: ProgressEvent) -> None:
        nonlocal done
        if not first_event:
            first_event.append(time.perf_counter())
        if isinstance(ev, TaskFinished):
            done += 1
            if done in marks:
                rss_at[done] = round(rss_mb(), 1)

    model_kwargs: dict[str, Any] = {"model_params": SCRIPT}
    if base_url:
        model_kwargs = {"model_base_url": base_url, "model_api_key": "perf"}
    rss_before = rss_mb()
    gc.callbacks.append(on_gc)
    with scratch("ac-perf-", where, keep) as tmp, RssSampler() as sampler:
        cpu0 = os.times()
        t0 = time.perf_counter()
        out = run_evaluation(
            BENCHMARK, "shell_agent", "scripted", PROVIDER, benchmark_params={"n": tasks},
            task_concurrency=concurrency, results_dir=tmp, progress=progress, on_progress=on_progress,
            **model_kwargs)
        wall = time.perf_counter() - t0
        cpu1 = os.times()
        gc.callbacks.remove(on_gc)
        detail_files = list(os.scandir(Path(str(out.run_dir)) / "details")) if out.run_dir else []
        details = len(detail_files)
        run_files = sum(len(files) for _, _, files in os.walk(str(out.run_dir))) if out.run_dir else 0
        if sample_out and detail_files:
            Path(sample_out).write_bytes(Path(detail_files[0].path).read_bytes())
    cpu = (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)
    if out.status != "completed" or out.counts.done != tasks or out.counts.correct != tasks or details != tasks:
        raise SystemExit(f"run did not complete cleanly: status={out.status} counts={out.counts} "
                         f"details={details} error={out.error} errors={out.errors_by_kind}")
    return {"tasks": tasks, "concurrency": concurrency, "http": bool(base_url), "wall_s": round(wall, 3),
            "cpu_s": round(cpu, 3), "tasks_per_s": round(tasks / wall, 1), "turns_per_s": round(2 * tasks / wall, 1),
            "us_per_task": round(1e6 * wall / tasks, 1), "cpu_us_per_task": round(1e6 * cpu / tasks, 1),
            "gc_us_per_task": round(1e6 * gc_s / tasks, 1), "gc_default": gc_default,
            "run_files": run_files, "dir": where or tempfile.gettempdir(),
            "rss_before_mb": round(rss_before, 1), "peak_rss_mb": round(max(sampler.peak_mb, peak_rss_mb()), 1),
            "rss_at_done": {str(k): v for k, v in sorted(rss_at.items())},
            "first_event_ms": round(1e3 * (first_event[0] - t0), 1) if first_event else None}


def child_floor(tasks: int, where: str, sample: str, keep: bool = False) -> dict[str, Any]:
    """The floor of a task's own files: ``tasks`` times one atomic detail (the engine's ``write_atomic``, the
    bytes of a real detail) and one progress line (a real ``task_finished`` event, appended to a buffered
    progress.jsonl as the engine's event bus does), in a plain loop."""
    import msgspec

    from agentcompass.engine.run_dir import write_atomic
    from agentcompass.records import TaskFinished

    data = Path(sample).read_bytes()
    enc = msgspec.json.Encoder()
    with scratch("ac-perf-floor-", where, keep) as tmp:
        details = Path(tmp) / "details"
        details.mkdir()
        t0 = time.perf_counter()
        with open(Path(tmp) / "progress.jsonl", "ab") as progress:
            for i in range(tasks):
                write_atomic(details / f"mock-{i}.json", data)
                progress.write(enc.encode(TaskFinished(ts=time.time(), request="r", run_id="x",
                                                       task_id=f"mock-{i}", correct=True)) + b"\n")
        wall = time.perf_counter() - t0
    return {"tasks": tasks, "dir": where, "us_per_task": round(1e6 * wall / tasks, 1), "detail_bytes": len(data)}


def child_bare(tasks: int, concurrency: int, where: str, sample: str, keep: bool = False) -> dict[str, Any]:
    """The same work with no engine: each task's harness run (``shell_agent``, the in-process scripted model, the
    no-op environment), its grading, its detail (the bytes of a real one, ``write_atomic``) and its progress
    line, in a plain asyncio loop at ``concurrency`` -- no actors, events, logs, timeouts or accounting. What any
    engine running this workload costs at least."""
    import asyncio
    import logging
    import threading

    import msgspec

    from agentcompass.engine.run_dir import write_atomic
    from agentcompass.harnesses.shell_agent import ShellAgent
    from agentcompass.interfaces import ComponentContext, EvalContext, RunContext
    from agentcompass.models.factory import create_model_client
    from agentcompass.records import TaskFinished
    from agentcompass.specs import ModelSpec
    from benchmarks_perf._components import SCRIPT, MockTasks, NoopEnvironment

    ctx = ComponentContext(cancelled=threading.Event(), run_id="bare", request="default")
    bench = MockTasks({"n": tasks}, ctx)
    harness = ShellAgent({}, ctx)
    data = Path(sample).read_bytes()
    enc = msgspec.json.Encoder()
    log = logging.getLogger("bare")

    async def run(tmp: Path) -> float:
        model = create_model_client(ModelSpec(id="scripted", params=SCRIPT))
        gate = asyncio.Semaphore(concurrency)
        details = tmp / "details"
        details.mkdir()
        with open(tmp / "progress.jsonl", "ab") as progress:
            async def one(task: Any) -> None:
                async with gate:
                    prepared = bench.prepare(task)
                    run_ctx = RunContext(request="default", run_id="bare", task_id=task.task_id, attempt=1)
                    result = await harness.run(prepared, NoopEnvironment(task.task_id), model, run_ctx, log)
                    verdict = await bench.evaluate(EvalContext(task, prepared, result, {}, None, log))
                    if not verdict.correct:
                        raise SystemExit(f"bare loop: {task.task_id} not solved: {result}")
                    write_atomic(details / f"{task.task_id}.json", data)
                    progress.write(enc.encode(TaskFinished(ts=time.time(), request="default", run_id="bare",
                                                           task_id=task.task_id, correct=True)) + b"\n")

            t0 = time.perf_counter()
            await asyncio.gather(*(one(t) for t in bench.load_tasks()))
            wall = time.perf_counter() - t0
        await model.aclose()
        return wall

    with scratch("ac-perf-bare-", where, keep) as tmp:
        wall = asyncio.run(run(Path(tmp)))
    return {"tasks": tasks, "dir": where, "us_per_task": round(1e6 * wall / tasks, 1)}


# ----------------------------------------------------------------------------- parent


def _child(tasks: int, concurrency: int, base_url: str | None = None, gc_default: bool = False,
           where: str | None = None, sample_out: str | None = None, keep: bool = False) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", "--tasks", str(tasks), "--concurrency", str(concurrency)]
    if keep:
        cmd.append("--keep-scratch")
    if base_url:
        cmd += ["--base-url", base_url]
    if gc_default:
        cmd.append("--gc-default")
    if where:
        cmd += ["--dir", where]
    if sample_out:
        cmd += ["--sample-out", sample_out]
    return run_child(cmd, timeout=CHILD_TIMEOUT_S)


def _floor(tasks: int, where: str, sample: str) -> dict[str, Any]:
    return run_child([sys.executable, __file__, "--floor", "--tasks", str(tasks), "--dir", where, "--sample", sample,
                      "--keep-scratch"], timeout=CHILD_TIMEOUT_S)


def _bare(tasks: int, concurrency: int, where: str, sample: str) -> dict[str, Any]:
    return run_child([sys.executable, __file__, "--bare", "--tasks", str(tasks), "--concurrency", str(concurrency),
                      "--dir", where, "--sample", sample, "--keep-scratch"], timeout=CHILD_TIMEOUT_S)


def vs_floor(label: str, tasks: int, concurrency: int, where: str,
             sample: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The engine's run with its run directory on ``where``, and how its wall per task compares with the floor
    measured there just before and just after it; and, as the lower bound of that ratio for this workload, the
    same work in a plain loop with no engine (``child_bare``), run between the two floors too."""
    root = tempfile.mkdtemp(prefix="ac-perf-vs-floor-", dir=where)  # each run's files kept until all four ran
    try:
        before = _floor(tasks, root, sample)
        engine = _child(tasks, concurrency, where=root, keep=True)
        bare = _bare(tasks, concurrency, root, sample)
        after = _floor(tasks, root, sample)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    floor = (before["us_per_task"] + after["us_per_task"]) / 2
    ratio = engine["us_per_task"] / floor
    bare_ratio = bare["us_per_task"] / floor
    print(f"  vs floor    {label:<6} {where:<12} engine {engine['us_per_task']:>6.0f} us/task, floor {floor:>5.0f} "
          f"us (before {before['us_per_task']:.0f}, after {after['us_per_task']:.0f}): {ratio:.2f}x (target 1.5x); "
          f"{engine['run_files']} files for {tasks} tasks", flush=True)
    print(f"              {'':<6} {'':<12} no engine {bare['us_per_task']:>4.0f} us/task (the same harness, model, "
          f"grading, detail and progress line in a plain loop): {bare_ratio:.2f}x the floor, the least any engine "
          f"can reach with this workload; the engine's own share {engine['us_per_task'] - bare['us_per_task']:.0f} "
          "us/task", flush=True)
    return engine, {"dir": where, "engine_us_per_task": engine["us_per_task"], "floor_us_per_task": round(floor, 1),
                    "floor_before_us": before["us_per_task"], "floor_after_us": after["us_per_task"],
                    "ratio": round(ratio, 2), "bare_us_per_task": bare["us_per_task"],
                    "bare_ratio": round(bare_ratio, 2), "run_files": engine["run_files"],
                    "detail_bytes": before["detail_bytes"]}


def start_scripted_server(tmp: Path) -> tuple[subprocess.Popen[str], str]:
    """``agentcompass serve-scripted --port 0`` with the mock script (written in ``tmp``); (process, base_url)."""
    import json

    from agentcompass.models.scripted.server import spawn_server_process
    from benchmarks_perf._components import SCRIPT

    script = tmp / "mock.json"
    script.write_text(json.dumps(SCRIPT["script"]))
    return spawn_server_process("--script-file", str(script), env=dict(os.environ, PYTHONPATH=str(REPO)))


def import_times(repeats: int) -> dict[str, float]:
    """Median wall ms of fresh interpreters: bare, ``import agentcompass``, ``import agentcompass.api``
    (interleaved, so a burst of load on the machine hits all three alike)."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    codes = {"bare": "pass", "pkg": "import agentcompass", "api": "import agentcompass.api"}
    samples: dict[str, list[float]] = {k: [] for k in codes}
    for _ in range(repeats):
        for key, code in codes.items():
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=60)
            samples[key].append(1e3 * (time.perf_counter() - t0))
    bare, pkg, api = (round(statistics.median(samples[k]), 1) for k in codes)
    own: dict[str, list[float]] = {"agentcompass": [], "agentcompass.api": []}
    for _ in range(repeats):  # what -X importtime reports for the package itself (cumulative, ms)
        for module in own:
            err = subprocess.run([sys.executable, "-X", "importtime", "-c", f"import {module}"], check=True,
                                 env=env, timeout=60, capture_output=True, text=True).stderr
            line = next(x for x in err.splitlines() if x.rstrip().endswith(f"| {module}"))
            own[module].append(int(line.split("|")[1]) / 1e3)
    return {"importtime_agentcompass_ms": round(statistics.median(own["agentcompass"]), 1),
            "importtime_api_ms": round(statistics.median(own["agentcompass.api"]), 1),
            "python_startup_ms": bare, "import_agentcompass_ms": pkg,
            "import_agentcompass_net_ms": round(pkg - bare, 1), "import_api_ms": api,
            "import_api_net_ms": round(api - bare, 1)}


def main(tasks: int, concurrency: int, http_tasks: int, repeats: int, gc_compare: bool,
         tmpfs: str) -> dict[str, Any]:
    print(f"engine overhead: {tasks} tasks, 2 turns each, no-op environment", flush=True)
    runs: dict[str, dict[str, Any]] = {}
    floors: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="ac-perf-sample-") as sample_dir:
        sample = str(Path(sample_dir) / "detail.json")  # a real detail of this workload: what the floor writes
        _child(min(tasks, 100), min(concurrency, 100), sample_out=sample)
        runs["inproc"], floors["disk"] = vs_floor("disk", tasks, concurrency, tempfile.gettempdir(), sample)
        if Path(tmpfs).is_dir():
            runs["inproc_tmpfs"], floors["tmpfs"] = vs_floor("tmpfs", tasks, concurrency, tmpfs, sample)
    r = runs["inproc"]
    print(f"  in-process  c={concurrency:<5} {r['tasks_per_s']:>8.0f} tasks/s  {r['us_per_task']:>6.0f} us/task "
          f"(cpu {r['cpu_us_per_task']:.0f} us, gc {r['gc_us_per_task']:.0f} us)  peak RSS {r['peak_rss_mb']:.0f} MB"
          f"  first event {r['first_event_ms']} ms", flush=True)
    if gc_compare:
        runs["inproc_gc_default"] = g = _child(tasks, concurrency, gc_default=True)
        print(f"  ... with CPython's default GC threshold (the engine before its GC relaxation): "
              f"{g['tasks_per_s']:.0f} tasks/s, {g['us_per_task']:.0f} us/task (cpu {g['cpu_us_per_task']:.0f} us, "
              f"gc {g['gc_us_per_task']:.0f} us)", flush=True)
    runs["inproc_low"] = low = _child(tasks, LOW_CONCURRENCY)
    print(f"  in-process  c={LOW_CONCURRENCY:<5} {low['tasks_per_s']:>8.0f} tasks/s  peak RSS "
          f"{low['peak_rss_mb']:.0f} MB", flush=True)
    per_task_kb = 1e3 * (r["peak_rss_mb"] - low["peak_rss_mb"]) / (concurrency - LOW_CONCURRENCY)
    rss_marks = list(r["rss_at_done"].values())
    # flat memory: the most RSS grew after the first tenth of the tasks had finished
    growth = round(max(rss_marks) - rss_marks[0], 1) if len(rss_marks) > 1 else None
    with tempfile.TemporaryDirectory(prefix="ac-perf-script-") as tmp:
        proc, url = start_scripted_server(Path(tmp))
        try:
            runs["http"] = h = _child(http_tasks, concurrency, url)
        finally:
            from agentcompass.models.scripted.server import stop_process

            stop_process(proc)
    print(f"  HTTP        c={concurrency:<5} {h['turns_per_s']:>8.0f} turns/s  ({h['tasks_per_s']:.0f} tasks/s, "
          f"{http_tasks} tasks)", flush=True)
    imports = import_times(repeats)
    print(f"  python -c 'import agentcompass' {imports['import_agentcompass_ms']} ms (bare python "
          f"{imports['python_startup_ms']} ms); -X importtime: agentcompass {imports['importtime_agentcompass_ms']} "
          f"ms, agentcompass.api {imports['importtime_api_ms']} ms", flush=True)
    summary = {
        "tasks": tasks, "concurrency": concurrency, "tasks_per_s": r["tasks_per_s"], "us_per_task": r["us_per_task"],
        "cpu_us_per_task": r["cpu_us_per_task"], "gc_us_per_task": r["gc_us_per_task"],
        "gc_default_tasks_per_s": runs["inproc_gc_default"]["tasks_per_s"] if gc_compare else None,
        "gc_default_gc_us_per_task": runs["inproc_gc_default"]["gc_us_per_task"] if gc_compare else None,
        "peak_rss_mb": r["peak_rss_mb"],
        "rss_per_task_in_flight_kb": round(per_task_kb, 1), "rss_growth_mb": growth,
        "first_event_ms": r["first_event_ms"], "http_tasks": http_tasks, "http_turns_per_s": h["turns_per_s"],
        **{key.format(fs): floors[fs][field] if fs in floors else None for fs in ("disk", "tmpfs")
           for key, field in (("floor_{}_us", "floor_us_per_task"), ("engine_{}_us", "engine_us_per_task"),
                              ("ratio_{}", "ratio"), ("bare_{}_us", "bare_us_per_task"),
                              ("bare_ratio_{}", "bare_ratio"))},
        "vs_floor": floors,
        **imports}
    return {"summary": summary, "runs": runs}


def cli() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=10_000, help="tasks per run (default 10,000)")
    parser.add_argument("--large", action="store_true", help="100,000 tasks")
    parser.add_argument("--concurrency", type=int, default=1000)
    parser.add_argument("--http-tasks", type=int, help="tasks of the HTTP run (default: tasks / 5)")
    parser.add_argument("--import-repeats", type=int, default=15)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--base-url", help=argparse.SUPPRESS)
    parser.add_argument("--progress", default="none", help=argparse.SUPPRESS)
    parser.add_argument("--gc-default", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--floor", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--bare", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--keep-scratch", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--dir", help=argparse.SUPPRESS)
    parser.add_argument("--sample", help=argparse.SUPPRESS)
    parser.add_argument("--sample-out", help=argparse.SUPPRESS)
    parser.add_argument("--tmpfs", default="/dev/shm",
                        help="the tmpfs to compare on (default /dev/shm; skipped when missing)")
    parser.add_argument("--no-gc-compare", action="store_true",
                        help="skip the run with CPython's default GC threshold (the before/after of gc_tuning)")
    parser.add_argument("--results-dir", type=Path, help="where the JSON goes (default: results/ here)")
    args = parser.parse_args()
    tasks = 100_000 if args.large else args.tasks
    if args.child:
        emit_child_report(child_run(tasks, args.concurrency, args.base_url, args.progress, args.gc_default,
                                    args.dir, args.sample_out, args.keep_scratch))
        return 0
    if args.floor:
        emit_child_report(child_floor(tasks, args.dir, args.sample, args.keep_scratch))
        return 0
    if args.bare:
        emit_child_report(child_bare(tasks, min(args.concurrency, tasks), args.dir, args.sample, args.keep_scratch))
        return 0
    concurrency = min(args.concurrency, tasks)
    if concurrency <= LOW_CONCURRENCY:
        parser.error(f"--concurrency must be above {LOW_CONCURRENCY} (it is compared with that level)")
    report = main(tasks, concurrency, args.http_tasks or max(concurrency, tasks // 5), args.import_repeats,
                  not args.no_gc_compare, args.tmpfs)
    out = write_json(f"{NAME}_100k" if args.large else NAME, report, args.results_dir)
    s = report["summary"]
    print(result_line(NAME, {**{k: s[k] for k in (
        "tasks", "concurrency", "tasks_per_s", "us_per_task", "cpu_us_per_task", "gc_us_per_task",
        "gc_default_tasks_per_s", "gc_default_gc_us_per_task", "peak_rss_mb",
        "rss_per_task_in_flight_kb", "rss_growth_mb", "first_event_ms", "http_turns_per_s",
        "import_agentcompass_ms", "importtime_agentcompass_ms", "importtime_api_ms", "floor_disk_us",
        "engine_disk_us", "ratio_disk", "bare_ratio_disk", "floor_tmpfs_us", "engine_tmpfs_us", "ratio_tmpfs",
        "bare_tmpfs_us", "bare_ratio_tmpfs")}, "json": out}))
    return 0


if __name__ == "__main__":
    raise SystemExit(cli())
