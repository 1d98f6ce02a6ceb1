"""mini-swe-agent's own batch runner vs AgentCompass's ``mini_swe_agent`` harness, same tasks, docker.

Workload: N small shell tasks in ``agentcompass/base:debian-bookworm``, one container per task, each solved
by the same fixed 3-command script (write a file, list it, submit ``42``) under the same agent config
(mini-swe-agent's ``swebench_backticks``, text mode, step and cost limits off):
- mini-swe-agent: ``mini-extra swebench`` (its thread-pool batch runner, ``--workers`` = concurrency) on a
  local jsonl dataset, its ``DeterministicModel`` replaying the script, its docker environment (the
  docker CLI), containers labelled through ``environment.run_args``.
- AgentCompass: the ``mini_swe_agent`` harness (the same package's ``DefaultAgent``) with the scripted model
  replaying the same script in ```` ```mswea_bash_command ```` blocks, our docker provider, the same
  concurrency; tasks graded (answer ``42``).
Reported: wall time, tasks/s, containers still present (any state) right after each run returned, and how
long those took to go away (mini-swe-agent's runner returns while a background ``docker stop`` per container is
still running; at most a minute is watched, then the rest is force-removed and that time counted too). Both
runs are fresh child processes; wall time is the whole process, start-up included, as when either is started
from the command line. "Wall incl. removal" adds the time until the run's last container is gone: the figure
compared against the target (issue 15: at least 1.5x mini-swe-agent's wall time, same 16 tasks, containers
removed on both sides); the ratio without removal is printed too. What each side does is printed first.

    .venv/bin/python benchmarks_perf/vs_mini_swe_agent.py [--tasks N] [--concurrency C] [--skip-peer]

Prints a table, writes ``results/vs_mini_swe_agent.json``, ends with a ``RESULT`` line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from _common import (
    LABEL_RUN_ID,
    containers_with_label,
    emit_child_report,
    have_docker,
    remove_containers,
    result_line,
    run_child,
    target_line,
    write_json,
)

NAME = "vs_mini_swe_agent"
IMAGE = "agentcompass/base:debian-bookworm"
WORKDIR = "/workspace"
ANSWER = "42"
COMMANDS = ("echo hello > greeting.txt && cat greeting.txt", "ls -la && wc -c greeting.txt",
            f"echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && echo {ANSWER}")
RUN_TIMEOUT_S = 1800.0
#: issue 15's target: mini-swe-agent's wall time over ours, containers removed on both sides
TARGET = 1.5
#: how long to watch containers left after a run go away on their own before removing them.
GONE_WAIT_S = 60.0


def what_each_side_does(tasks: int, concurrency: int) -> dict[str, list[str]]:
    """What each side runs, step by step (printed before the numbers and kept in the JSON)."""
    return {
        "mini-swe-agent": [
            f"`python -m minisweagent.run.utilities.mini_extra swebench` on a local {tasks}-line jsonl dataset, "
            f"--workers {concurrency} (its thread pool), config swebench_backticks with its DeterministicModel "
            "replaying the script, step and cost limits off",
            f"per task: `docker run -d --rm --label ... -w {WORKDIR} {IMAGE} sleep 2h` (docker CLI); each command "
            f"`docker exec -w {WORKDIR} <id> bash -c <command>`; its trajectory and preds.json written",
            "per task at the end: a background `docker stop` (10 s grace: `sleep` ignores SIGTERM; --rm then "
            "removes the container) that the runner does not wait for",
        ],
        "agentcompass": [
            f"`agentcompass.run_evaluation(..., 'mini_swe_agent', 'scripted', 'docker', task_concurrency="
            f"{concurrency})` in a child process: the same package's DefaultAgent, the same config, the scripted "
            "model replaying the same script",
            f"per task: create + start one {IMAGE} container through the Docker API (init process, labels, limits), "
            "one `uname` exec (the agent's template variables), then one API exec per command; graded (answer 42); "
            "its detail and task log written",
            "per task at the end: the container force-removed before the task counts as done (the run returns "
            "with every container gone)",
        ],
    }


def reply(i: int) -> str:
    """Turn ``i`` of the script as a text-mode reply."""
    return f"THOUGHT: step {i + 1}.\n\n```mswea_bash_command\n{COMMANDS[i]}\n```"


def write_config(path: Path, run_id: str) -> Path:
    """mini-swe-agent's ``swebench_backticks`` config with the deterministic model and our labels."""
    import importlib.util

    import yaml

    # found without importing the package (its import prints a banner and reads a global config dir)
    spec = importlib.util.find_spec("minisweagent")
    assert spec is not None and spec.submodule_search_locations, "mini-swe-agent is not installed"
    builtin = Path(next(iter(spec.submodule_search_locations))) / "config" / "benchmarks"
    config: dict[str, Any] = yaml.safe_load((builtin / "swebench_backticks.yaml").read_text())
    config["agent"].update(step_limit=0, cost_limit=0)
    config["environment"].update(cwd=WORKDIR, environment_class="docker",
                                 run_args=["--rm", "--label", f"{LABEL_RUN_ID}={run_id}"])
    config["model"].update(model_class="deterministic", model_name="deterministic", cost_per_call=0.0, outputs=[
        {"role": "assistant", "content": reply(i), "extra": {"actions": [{"command": c}], "cost": 0.0}}
        for i, c in enumerate(COMMANDS)])
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


# ----------------------------------------------------------------------------- the two runs


def run_mini(tasks: int, concurrency: int, run_id: str, tmp: Path) -> dict[str, Any]:
    """mini-swe-agent's batch runner in a child process; wall time and its predictions checked."""
    config = write_config(tmp / "mini.yaml", run_id)
    data = tmp / "dataset"
    data.mkdir()
    with open(data / "test.jsonl", "w") as f:
        for i in range(tasks):
            f.write(json.dumps({"instance_id": f"perf__task-{i}", "image_name": IMAGE,
                                "problem_statement": f"perf-mock-task {i}: write greeting.txt, answer {ANSWER}."})
                    + "\n")
    out = tmp / "mini-out"
    env = dict(os.environ, HF_HOME=str(tmp / "hf"), HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1",
               MSWEA_SILENT_STARTUP="1", MSWEA_GLOBAL_CONFIG_DIR=str(tmp / "mswea"), TERM="dumb")
    cmd = [sys.executable, "-m", "minisweagent.run.utilities.mini_extra", "swebench", "--subset", str(data),
           "--split", "test", "-o", str(out), "-w", str(concurrency), "-c", str(config),
           "--environment-class", "docker"]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=RUN_TIMEOUT_S, cwd=str(tmp))
    wall = time.perf_counter() - t0
    preds = json.loads((out / "preds.json").read_text()) if (out / "preds.json").exists() else {}
    solved = sum(1 for p in preds.values() if (p.get("model_patch") or "").strip() == ANSWER)
    if proc.returncode != 0 or solved != tasks:
        raise RuntimeError(f"mini-swe-agent run failed (exit {proc.returncode}, {solved}/{tasks} solved):\n"
                           f"{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    from importlib.metadata import version

    return {"framework": f"mini-swe-agent {version('mini-swe-agent')}", "tasks": tasks, "concurrency": concurrency,
            "wall_s": round(wall, 3), "tasks_per_s": round(tasks / wall, 3), "solved": solved}


def ours_child(tasks: int, concurrency: int, run_id: str, config: str) -> dict[str, Any]:
    """AgentCompass in this process (a child run); the measurements."""
    import agentcompass
    from benchmarks_perf._components import BENCHMARK, MATCH

    script = {"bundled": False, "script": [{"match": MATCH, "turns": [reply(i) for i in range(len(COMMANDS))]}]}
    with tempfile.TemporaryDirectory(prefix="ac-perf-") as tmp:
        t0 = time.perf_counter()
        out = agentcompass.run_evaluation(
            BENCHMARK, "mini_swe_agent", "scripted", "docker", benchmark_params={"n": tasks},
            harness_params={"config": config, "mode": "text"}, environment_params={"image": IMAGE},
            model_params=script, task_concurrency=concurrency, results_dir=tmp, progress="none", run_id=run_id)
        wall = time.perf_counter() - t0
    if out.status != "completed" or out.counts.correct != tasks:
        raise SystemExit(f"run did not complete cleanly: status={out.status} counts={out.counts} "
                         f"error={out.error} errors={out.errors_by_kind}")
    return {"framework": f"agentcompass {agentcompass.__version__}", "tasks": tasks, "concurrency": concurrency,
            "wall_s": round(wall, 3), "tasks_per_s": round(tasks / wall, 3), "solved": out.counts.correct}


def run_ours(tasks: int, concurrency: int, run_id: str, tmp: Path) -> dict[str, Any]:
    config = write_config(tmp / "ours.yaml", run_id)
    t0 = time.perf_counter()
    report = run_child([sys.executable, __file__, "--child", "--tasks", str(tasks), "--concurrency",
                        str(concurrency), "--run-id", run_id, "--config", str(config)], timeout=RUN_TIMEOUT_S)
    wall = time.perf_counter() - t0
    report.update(engine_wall_s=report["wall_s"], wall_s=round(wall, 3), tasks_per_s=round(tasks / wall, 3))
    return report


def _counted(run: Any, name: str, tasks: int, concurrency: int, tmp: Path) -> dict[str, Any]:
    """Run, count the containers left right after, wait up to GONE_WAIT_S for them to go, remove the rest; the
    time until the last one was gone (force removal included) is added to the wall time as ``wall_removed_s``."""
    run_id = f"perf-{name}-{uuid.uuid4().hex[:8]}"
    gone_after: float | None = 0.0
    try:
        report: dict[str, Any] = run(tasks, concurrency, run_id, tmp)
    finally:
        t0 = time.monotonic()
        left = containers_with_label(LABEL_RUN_ID, run_id)
        while left and containers_with_label(LABEL_RUN_ID, run_id):
            if time.monotonic() - t0 > GONE_WAIT_S:
                gone_after = None
                break
            time.sleep(0.2)
        else:
            gone_after = round(time.monotonic() - t0, 1) if left else 0.0
        remove_containers(containers_with_label(LABEL_RUN_ID, run_id))
        removed_after = time.monotonic() - t0 if left else 0.0
    report["containers_left"] = len(left)
    report["containers_gone_after_s"] = gone_after
    report["removal_after_return_s"] = round(removed_after, 2)
    report["wall_removed_s"] = round(report["wall_s"] + removed_after, 3)
    return report


def _line(r: dict[str, Any]) -> str:
    gone = r["containers_gone_after_s"]
    later = "" if not r["containers_left"] else (
        f" (gone {gone:g}s later)" if gone is not None else f" (still there after {GONE_WAIT_S:g}s: removed)")
    return (f"  {r['framework']:<24} {r['tasks_per_s']:>7.2f} tasks/s  wall {r['wall_s']:>7.2f}s  "
            f"wall incl. removal {r['wall_removed_s']:>7.2f}s  containers left {r['containers_left']}{later}")


def main(args: argparse.Namespace) -> dict[str, Any]:
    from agentcompass.environments.docker.api import DEFAULT_BASE_IMAGE
    from agentcompass.environments.docker.images import build_base_image

    assert DEFAULT_BASE_IMAGE == IMAGE, DEFAULT_BASE_IMAGE
    asyncio.run(build_base_image(IMAGE))  # cached by tag after the first build
    print(f"{args.tasks} shell tasks x {len(COMMANDS)} commands, one {IMAGE} container each, concurrency "
          f"{args.concurrency}", flush=True)
    sides = what_each_side_does(args.tasks, args.concurrency)
    for side, steps in sides.items():
        print(f"  {side}:", *(f"    - {step}" for step in steps), sep="\n", flush=True)
    report: dict[str, Any] = {"tasks": args.tasks, "concurrency": args.concurrency, "commands": list(COMMANDS),
                              "what_each_side_does": sides}
    tmp = Path(tempfile.mkdtemp(prefix="ac-perf-mini-"))
    try:
        ours = report["agentcompass"] = _counted(run_ours, "ac", args.tasks, args.concurrency, tmp)
        print(_line(ours), flush=True)
        if not args.skip_peer:
            peer = report["mini_swe_agent"] = _counted(run_mini, "mini", args.tasks, args.concurrency, tmp)
            print(_line(peer), flush=True)
            report["speedup"] = round(peer["wall_removed_s"] / ours["wall_removed_s"], 2)
            report["speedup_without_removal"] = round(peer["wall_s"] / ours["wall_s"], 2)
            print(f"  -> AgentCompass {report['speedup']}x faster counting container removal on both sides "
                  f"({report['speedup_without_removal']}x on the wall times alone)", flush=True)
        print(target_line("mini-swe-agent's batch runner, wall time incl. container removal",
                          report.get("speedup"), TARGET), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return report


def cli() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=16)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--skip-peer", action="store_true", help="only AgentCompass")
    parser.add_argument("--results-dir", type=Path, help="where the JSON goes (default: results/ here)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--run-id", help=argparse.SUPPRESS)
    parser.add_argument("--config", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        emit_child_report(ours_child(args.tasks, args.concurrency, args.run_id, args.config))
        return 0
    if not have_docker():
        print("no Docker daemon here: nothing to measure", file=sys.stderr)
        return 2
    report = main(args)
    out = write_json(NAME, report, args.results_dir)
    peer = report.get("mini_swe_agent", {})
    print(result_line(NAME, {
        "tasks": args.tasks, "concurrency": args.concurrency,
        "ours_tasks_per_s": report["agentcompass"]["tasks_per_s"], "ours_wall_s": report["agentcompass"]["wall_s"],
        "ours_containers_left": report["agentcompass"]["containers_left"],
        "mini_tasks_per_s": peer.get("tasks_per_s"), "mini_wall_s": peer.get("wall_s"),
        "mini_containers_left": peer.get("containers_left"),
        "mini_containers_gone_after_s": peer.get("containers_gone_after_s"),
        "ours_wall_removed_s": report["agentcompass"]["wall_removed_s"], "mini_wall_removed_s": peer.get(
            "wall_removed_s"), "speedup": report.get("speedup"),
        "speedup_without_removal": report.get("speedup_without_removal"), "target": TARGET,
        "json": out}))
    return 0


if __name__ == "__main__":
    raise SystemExit(cli())
