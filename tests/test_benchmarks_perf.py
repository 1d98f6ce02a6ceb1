"""Smoke tests of the performance scripts: each runs in a tiny mode and ends with a parseable RESULT line.

No timing is asserted (the numbers depend on the machine); what is checked is that every run completed
the work it reports, that its JSON matches its RESULT line, and that no container was left behind. The
peers (Inspect AI's virtualenv, mini-swe-agent) are skipped when they are not installed; ours always runs.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PERF = REPO / "benchmarks_perf"
sys.path.insert(0, str(PERF))

from _common import parse_result_line  # noqa: E402

HAVE_DOCKER = os.path.exists("/var/run/docker.sock")
HAVE_INSPECT = (PERF / ".venv-inspect" / "bin" / "python").exists()
HAVE_MINI = importlib.util.find_spec("minisweagent") is not None


def run_script(script: str, *args: str, timeout: float = 900) -> tuple[str, dict[str, str]]:
    """Run ``benchmarks_perf/<script>`` and return (stdout, parsed RESULT values)."""
    proc = subprocess.run([sys.executable, str(PERF / script), *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO)
    assert proc.returncode == 0, f"{script} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    last = proc.stdout.strip().splitlines()[-1]
    name, values = parse_result_line(last)
    assert name == script.removesuffix(".py")
    return proc.stdout, values


def test_gateway_measures_direct_and_through_the_gateway_and_holds_streams(tmp_path: Path) -> None:
    out, values = run_script("gateway.py", "--tiny", "--results-dir", str(tmp_path), timeout=300)
    assert values["failed_calls"] == "0" and values["streams_cut"] == "0" and values["streams"] == "20"
    assert float(values["throughput_ratio"]) > 0 and float(values["kb_per_stream"]) >= 0
    report = json.loads(Path(values["json"]).read_text())
    assert {(r["level"], r["body"]) for r in report["rows"]} == {(1, "json"), (1, "sse"), (4, "json"), (4, "sse")}
    for row in report["rows"]:  # each side made every call it was given
        assert all(row[side]["calls"] == 20 for side in ("direct", "gateway", "gateway_envelope"))
    assert "target added p50 <= 1 ms" in out and "target <= 100 KB RSS per held stream" in out


def test_engine_overhead_runs_every_task_and_reports_throughput_memory_and_import_time(tmp_path: Path) -> None:
    _, values = run_script("engine_overhead.py", "--tasks", "200", "--concurrency", "50", "--http-tasks", "100",
                           "--import-repeats", "2", "--results-dir", str(tmp_path))
    assert values["tasks"] == "200" and values["concurrency"] == "50"
    for key in ("tasks_per_s", "us_per_task", "peak_rss_mb", "http_turns_per_s", "import_agentcompass_ms",
                "first_event_ms"):
        assert float(values[key]) > 0, key
    report = json.loads(Path(values["json"]).read_text())
    assert Path(values["json"]).parent == tmp_path
    runs = report["runs"]
    # each child run checked its own run: every task completed, correct, with its detail on disk
    assert runs["inproc"]["tasks"] == runs["inproc_low"]["tasks"] == 200
    assert runs["inproc_low"]["concurrency"] == 10
    assert runs["http"]["http"] is True and runs["http"]["tasks"] == 100
    assert len(runs["inproc"]["rss_at_done"]) == 10
    # one file per task (its detail) besides the run's own six files
    assert runs["inproc"]["run_files"] == 200 + len(["params", "run_info", "progress", "summary", "run.log", ".lock"])
    assert float(values["floor_disk_us"]) > 0 and float(values["ratio_disk"]) > 0
    # the same work with no engine, next to the floor: what any engine's ratio is bounded by
    disk = report["summary"]["vs_floor"]["disk"]
    assert disk["bare_us_per_task"] > 0
    assert disk["bare_ratio"] == pytest.approx(disk["bare_us_per_task"] / disk["floor_us_per_task"], rel=0.05)
    assert float(values["bare_ratio_disk"]) == disk["bare_ratio"]
    assert report["machine"]["cores"] == os.cpu_count()


@pytest.mark.docker_images("busybox")
def test_vs_inspect_compares_the_mock_workload_and_leaves_no_container(tmp_path: Path) -> None:
    args = ["--samples", "40", "--concurrency", "10", "--docker-samples", "2", "--docker-concurrency", "2",
            "--results-dir", str(tmp_path)]
    if not HAVE_INSPECT:
        args.append("--skip-peer")
    if not HAVE_DOCKER:
        args.append("--skip-docker")
    _, values = run_script("vs_inspect.py", *args)
    assert float(values["ours_samples_per_s"]) > 0 and float(values["ours_peak_rss_mb"]) > 0
    if HAVE_INSPECT:
        assert float(values["inspect_samples_per_s"]) > 0
        assert float(values["speedup"]) == pytest.approx(
            float(values["ours_samples_per_s"]) / float(values["inspect_samples_per_s"]), rel=0.02)
    if HAVE_DOCKER:
        assert float(values["docker_ours_samples_per_s"]) > 0
        assert values["docker_ours_containers_left"] == "0"
        # the daemon alone at the same concurrency, and how close ours runs to it
        assert float(values["docker_daemon_samples_per_s"]) > 0
        assert float(values["docker_ours_of_daemon"]) == pytest.approx(
            float(values["docker_ours_samples_per_s"]) / float(values["docker_daemon_samples_per_s"]), rel=0.02)
        assert json.loads(Path(values["json"]).read_text())["docker"]["daemon"]["containers_left"] == 0
        if HAVE_INSPECT:
            assert float(values["docker_daemon_ceiling"]) == pytest.approx(
                float(values["docker_daemon_samples_per_s"]) / float(values["docker_inspect_samples_per_s"]),
                rel=0.02)
    report = json.loads(Path(values["json"]).read_text())
    assert report["mock"]["agentcompass"]["samples"] == 40
    assert values["target"] == "30" and values["docker_target"] == "5"
    if HAVE_INSPECT:  # every limit of Inspect's at our concurrency (max_subprocesses defaults to the CPU count)
        limits = ("max_samples", "max_connections", "max_subprocesses", "max_sandboxes")
        assert {k: report["mock"]["inspect"]["settings"][k] for k in limits} == dict.fromkeys(limits, 10)
        if HAVE_DOCKER:
            assert {k: report["docker"]["inspect"]["settings"][k] for k in limits} == dict.fromkeys(limits, 2)


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_DOCKER, reason="no Docker daemon")
@pytest.mark.docker_images("base")
def test_vs_mini_swe_agent_runs_both_batch_runners_and_counts_leftover_containers(tmp_path: Path) -> None:
    args = ["--tasks", "2", "--concurrency", "2", "--results-dir", str(tmp_path)]
    if not HAVE_MINI:
        args.append("--skip-peer")
    _, values = run_script("vs_mini_swe_agent.py", *args, timeout=1800)
    assert float(values["ours_tasks_per_s"]) > 0
    assert values["ours_containers_left"] == "0"
    if HAVE_MINI:
        assert float(values["mini_tasks_per_s"]) > 0
        assert int(values["mini_containers_left"]) >= 0  # counted (then removed), whatever it was
    report = json.loads(Path(values["json"]).read_text())
    assert report["agentcompass"]["solved"] == 2
    assert values["target"] == "1.5" and set(report["what_each_side_does"]) == {"mini-swe-agent", "agentcompass"}
    # ours returns with its containers gone, so nothing is added to its wall time
    assert values["ours_wall_removed_s"] == values["ours_wall_s"]
    if HAVE_MINI:
        assert float(values["mini_wall_removed_s"]) >= float(values["mini_wall_s"])
        assert float(values["speedup"]) == pytest.approx(
            float(values["mini_wall_removed_s"]) / float(values["ours_wall_removed_s"]), rel=0.02)


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_DOCKER and not os.environ.get("CI"), reason="no Docker daemon")
@pytest.mark.docker_images("busybox")
def test_docker_lifecycle_measures_ours_against_raw_aiodocker_per_level_and_leaves_no_container(
        tmp_path: Path) -> None:
    _, values = run_script("docker_lifecycle.py", "--levels", "1,2", "--per-level", "4",
                           "--results-dir", str(tmp_path), timeout=600)
    for level in (1, 2):
        ours, raw, ratio = (float(values[f"c{level}_{k}"]) for k in ("ours", "raw", "ratio"))
        assert ours > 0 and raw > 0
        assert ratio == pytest.approx(ours / raw, abs=0.02)
    assert values["containers_left"] == "0"
    report = json.loads(Path(values["json"]).read_text())
    assert [r["concurrency"] for r in report["rows"]] == [1, 2]
    assert all(r["lifecycles"] == 4 for r in report["rows"])


@pytest.mark.docker_images("busybox")
@pytest.mark.skipif(not HAVE_DOCKER, reason="no Docker daemon")
def test_image_pull_compares_the_provider_with_docker_pull_from_one_registry(tmp_path: Path) -> None:
    if not os.access("/usr/bin/docker-registry", os.X_OK):
        if os.environ.get("CI"):
            pytest.fail("/usr/bin/docker-registry is missing; CI installs docker-registry (.ci/run)")
        pytest.skip("/usr/bin/docker-registry is missing: apt-get install docker-registry")
    _, values = run_script("image_pull.py", "--size-mb", "8", "--layers", "2", "--reps", "1",
                           "--results-dir", str(tmp_path), timeout=600)
    assert int(values["bytes"]) >= 8 << 20 and values["reps"] == "1" and values["images_left"] == "0"
    assert float(values["ratio"]) == pytest.approx(float(values["ours_mb_s"]) / float(values["cli_mb_s"]), rel=0.02)
    report = json.loads(Path(values["json"]).read_text())
    assert sorted(p["who"] for p in report["pulls"]) == ["cli", "ours"]


def test_harness_overhead_reports_each_harness_against_shell_agent(tmp_path: Path) -> None:
    _, values = run_script("harness_overhead.py", "--harness", "terminus", "--repeat", "2", "--results-dir",
                           str(tmp_path), "--data-dir", str(tmp_path / "data"))
    report = json.loads(Path(values["json"]).read_text())
    runs = report["harnesses"]
    assert set(runs) == {"shell_agent", "terminus"} and report["repeat"] == 2
    for name in ("shell_agent", "terminus"):  # each run checked complete and correct by the script itself
        assert "skipped" not in runs[name], runs[name]
        assert runs[name]["tasks"] == 2 and runs[name]["per_task_s"] > 0
    assert float(values["terminus_overhead_s"]) == pytest.approx(runs["terminus"]["overhead_s"], rel=1e-3)


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_DOCKER, reason="no Docker daemon")
@pytest.mark.docker_images("base")
def test_scale_out_runs_one_node_and_two_and_reports_the_hop_and_the_coordinator_cpu(tmp_path: Path) -> None:
    # the smallest run that still puts work on both nodes (two slots each) and has a median hop: the RESULT line's
    # shape is what is checked, and the Ray group's tests run one after another on one worker
    _, values = run_script("scale_out.py", "--tasks", "4", "--concurrency", "4", "--hop-tasks", "2",
                           "--results-dir", str(tmp_path))
    for key in ("one_node_tasks_per_s", "two_nodes_tasks_per_s", "call_rtt_ms", "coordinator_cpu_ms_per_attempt"):
        assert float(values[key]) > 0, key
    report = json.loads(Path(values["json"]).read_text())
    assert report["one_node"]["tasks"] == report["two_nodes"]["tasks"] == 4
    assert report["one_node"]["errors"] == report["two_nodes"]["errors"] == 0
    assert float(values["hop_ms_per_attempt"]) == pytest.approx(
        report["hop_ray"]["attempt_ms_median"] - report["hop_docker"]["attempt_ms_median"], abs=0.2, rel=1e-3)
