"""Per-task overhead of each harness over ``shell_agent``, on the same ``shell_tasks`` task, same model server.

Workload: one bundled ``shell_tasks`` task (``--task``, default ``files/hello_world``), repeated ``--repeat``
times (default 20) in one run at ``--concurrency`` (default 1: the cost of one task, not of a crowd),
each harness solving it with the scripted model server over HTTP (``agentcompass serve-scripted``, one per harness,
started with that harness's script ``benchmarks_perf/scripts/<harness>_shell_tasks.json``, else its test
script ``tests/harnesses/scripts/<harness>_shell_tasks.json``; ``shell_agent``
uses the bundled scripts) through the model gateway, in the ``local`` environment (``--env docker``: docker).

For each harness: the wall time of a run of one task (cold: an installed agent locates or installs its
program), of the run of ``repeat`` tasks, and the per-task time of that run (install amortised over
``repeat`` tasks); the overhead is that per-task time minus ``shell_agent``'s, and the ratio the two. Every
run is checked: all tasks completed and correct. A harness whose program or script is missing is reported as
skipped with the reason.

    .venv/bin/python benchmarks_perf/harness_overhead.py [--harness NAME ...] [--repeat N] [--env local|docker]

Prints a table, writes ``results/harness_overhead.json``, ends with a ``RESULT`` line.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import REPO, result_line, write_json

NAME = "harness_overhead"
SCRIPTS = REPO / "tests" / "harnesses" / "scripts"
OWN_SCRIPTS = REPO / "benchmarks_perf" / "scripts"
#: every harness measured by default, with the harness params each runs with here
HARNESSES: dict[str, dict[str, Any]] = {
    "shell_agent": {},
    "terminus": {},
    "claude_code": {},
    "codex": {"model": "gpt-5.5"},  # a Codex model family with its apply_patch tool (the script calls it)
    "openhands": {},
}
RUN_TIMEOUT_S = 1800.0
SERVER_START_S = 30.0
BASELINE = "shell_agent"


class ScriptedServer:
    """``agentcompass serve-scripted`` in a child process (stopped on exit)."""

    def __init__(self, script: Path | None) -> None:
        cmd = [str(Path(sys.executable).with_name("agentcompass")), "serve-scripted", "--port", "0"]
        if script is not None:
            cmd += ["--script-file", str(script)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.base_url = ""

    def __enter__(self) -> ScriptedServer:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + SERVER_START_S
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if line.startswith("http"):
                self.base_url = line.strip()
                return self
            if not line and self.proc.poll() is not None:
                break
        self.__exit__()
        raise RuntimeError("the scripted server did not start")

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


def script_for(harness: str) -> Path | None:
    """The harness's scripted conversation for ``shell_tasks`` (None: the bundled scripts, for shell_agent)."""
    if harness == BASELINE:
        return None
    for folder in (OWN_SCRIPTS, SCRIPTS):  # this script's own first (the tests' may script another task)
        path = folder / f"{harness}_shell_tasks.json"
        if path.exists():
            return path
    raise FileNotFoundError(f"no script {harness}_shell_tasks.json in {OWN_SCRIPTS} or {SCRIPTS}")


def run_once(harness: str, params: dict[str, Any], base_url: str, task: str, repeat: int, concurrency: int,
             env: str, data_dir: str | None) -> dict[str, Any]:
    """One run in this process; its wall time, checked complete and correct."""
    import agentcompass

    with tempfile.TemporaryDirectory(prefix="ac-perf-") as tmp:
        t0 = time.perf_counter()
        out = agentcompass.run_evaluation(
            "shell_tasks", harness, "scripted", env, benchmark_params={"sample_ids": task, "repeat": repeat},
            harness_params=params, model_base_url=base_url, model_api_key="perf", task_concurrency=concurrency,
            results_dir=tmp, data_dir=data_dir, progress="none", auto_install_dependencies=True)
        wall = time.perf_counter() - t0
    if out.status != "completed" or out.counts.correct != repeat:
        raise RuntimeError(f"{harness}: run did not complete cleanly: status={out.status} counts={out.counts} "
                           f"error={out.error} errors={out.errors_by_kind}")
    return {"tasks": repeat, "wall_s": round(wall, 3), "per_task_s": round(wall / repeat, 4)}


def measure(harness: str, args: argparse.Namespace, data_dir: str | None) -> dict[str, Any]:
    try:
        script = script_for(harness)
    except FileNotFoundError as exc:
        return {"skipped": str(exc)}
    with ScriptedServer(script) as server:
        try:
            cold = run_once(harness, HARNESSES.get(harness, {}), server.base_url, args.task, 1, 1, args.env,
                            data_dir)
            warm = run_once(harness, HARNESSES.get(harness, {}), server.base_url, args.task, args.repeat,
                            args.concurrency, args.env, data_dir)
        except Exception as exc:  # a harness that cannot run here is reported, the others still measured
            return {"skipped": re.sub(r"\s+", " ", str(exc))[:300]}
    return {"cold_one_task_s": cold["wall_s"], "run_s": warm["wall_s"], "per_task_s": warm["per_task_s"],
            "tasks": warm["tasks"]}


def main(args: argparse.Namespace) -> dict[str, Any]:
    names = args.harness or list(HARNESSES)
    if BASELINE not in names:
        names.insert(0, BASELINE)
    print(f"harness overhead: shell_tasks task {args.task!r} x{args.repeat}, concurrency {args.concurrency}, "
          f"environment {args.env}, scripted model server over HTTP (agents in a sandbox reach it through the gateway)")
    results: dict[str, dict[str, Any]] = {}
    # the default data_dir: the agents' programs and openhands' venv are cached there as a user's would be (the
    # first run of this script on a machine pays their install in the cold column)
    data_dir = args.data_dir
    for name in names:
        results[name] = measure(name, args, data_dir)
    base = results[BASELINE]
    if "skipped" in base:
        raise SystemExit(f"the baseline {BASELINE} could not run: {base['skipped']}")
    print(f"  {'harness':<14}{'1 task (cold)':>15}{'per task':>12}{'overhead':>12}{'ratio':>8}")
    for name, r in results.items():
        if "skipped" in r:
            print(f"  {name:<14}skipped: {r['skipped']}")
            continue
        r["overhead_s"] = round(r["per_task_s"] - base["per_task_s"], 4)
        r["ratio"] = round(r["per_task_s"] / base["per_task_s"], 2)
        print(f"  {name:<14}{r['cold_one_task_s']:>14.2f}s{r['per_task_s']:>11.3f}s{r['overhead_s']:>+11.3f}s"
              f"{r['ratio']:>7.2f}x")
    report = {"task": args.task, "repeat": args.repeat, "concurrency": args.concurrency, "env": args.env,
              "harnesses": results}
    path = write_json(NAME, report, args.results_dir)
    values: dict[str, Any] = {"env": args.env, "repeat": args.repeat}
    for name, r in results.items():
        values[f"{name}_per_task_s"] = r.get("per_task_s", "skipped")
        if name != BASELINE and "overhead_s" in r:
            values[f"{name}_overhead_s"] = r["overhead_s"]
    values["json"] = path
    print(result_line(NAME, values))
    return report


def cli() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--harness", action="append", help="measure this harness (repeatable; default: all)")
    parser.add_argument("--task", default="files/hello_world", help="the shell_tasks task id")
    parser.add_argument("--repeat", type=int, default=20, help="tasks in the measured run (install amortised)")
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--env", choices=["local", "docker"], default="local")
    parser.add_argument("--results-dir", type=Path, help="where the JSON goes (default: results/ here)")
    parser.add_argument("--data-dir", help="the runs' data_dir (default: AgentCompass's own)")
    args = parser.parse_args()
    os.environ.setdefault("AGENTCOMPASS_LOG_LEVEL", "WARNING")
    main(args)
    return 0


if __name__ == "__main__":
    sys.exit(cli())
