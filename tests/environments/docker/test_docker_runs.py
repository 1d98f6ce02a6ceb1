"""Whole evaluations on the docker provider: limits, pacing, timeouts, hygiene after kills and Ctrl-C."""

from __future__ import annotations

import base64
import ipaddress
import itertools
import json
import os
import signal
import socketserver
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

import agentcompass
from agentcompass.records import EnvOpened, ProgressEvent, TaskDetail

from ..conftest import containers_of, docker_cli, networks_of

REPO = Path(__file__).resolve().parents[3]
SAMPLE = ["files/hello_world", "files/append_line", "text/reverse_lines", "text/uppercase", "python/fizzbuzz",
          "text/sort_unique", "answer/count_lines", "files/mkdir_tree"]


class _Sampler:
    """Counts this run's live containers on the daemon, a few times a second."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            out = subprocess.run(["docker", "ps", "-q", "--filter", f"label=agentcompass.run_id={self.run_id}"],
                                 capture_output=True, text=True, timeout=30).stdout
            self.peak = max(self.peak, len(out.split()))
            self._stop.wait(0.1)

    def __enter__(self) -> _Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)


@pytest.mark.slow
def test_bundled_benchmark_runs_unchanged_on_docker_within_the_provider_limit(
        base_image: str, docker_run_id: str, tmp_path: Path) -> None:
    with _Sampler(docker_run_id) as sampler:
        out = agentcompass.run_evaluation(
            "shell_tasks", "shell_agent", "scripted", "docker", benchmark_params={"sample_ids": SAMPLE},
            task_concurrency=16, provider_limits={"docker": 4}, run_id=docker_run_id,
            results_dir=str(tmp_path / "docker"), progress="none")
    assert out.status == "completed" and out.counts.errors == 0, out.errors_by_kind
    assert 1 <= sampler.peak <= 4
    local = agentcompass.run_evaluation("shell_tasks", "shell_agent", "scripted", "local",
                                        benchmark_params={"sample_ids": SAMPLE}, results_dir=str(tmp_path / "local"),
                                        progress="none")
    assert out.metrics == local.metrics  # same grading in a container as on the host
    assert 0 < out.metrics["pass@1"] < 1
    assert containers_of(docker_run_id) == [] and networks_of(docker_run_id) == []


def test_env_open_qps_paces_container_opens(base_image: str, docker_run_id: str, tmp_path: Path) -> None:
    events: list[ProgressEvent] = []
    out = agentcompass.run_evaluation(
        "shell_tasks", "shell_agent", "scripted", "docker", benchmark_params={"sample_ids": SAMPLE[:5]},
        task_concurrency=8, env_open_qps=2.0, run_id=docker_run_id, results_dir=str(tmp_path),
        progress="none", on_progress=events.append)
    assert out.ok
    grants = sorted(e.granted_at for e in events if isinstance(e, EnvOpened))  # the pacer's decisions
    assert len(grants) >= 5 and grants[0] > 0  # an agent env per task, a verifier only where code is probed
    gaps = [b - a for a, b in itertools.pairwise(grants)]
    assert min(gaps) >= 0.5 * (1 - 1e-9), gaps  # 2 per second, never bunched


def test_a_command_ignoring_sigterm_is_killed_at_its_timeout_and_the_run_goes_on(
        base_image: str, docker_run_id: str, tmp_path: Path) -> None:
    script = [{"match": "Task: files/append_line\n",
               "turns": ["```bash\ntrap '' TERM; while true; do sleep 1; done\n```", "<submit></submit>"]}]
    t0 = time.monotonic()
    out = agentcompass.run_evaluation(
        "shell_tasks", "shell_agent", "scripted", "docker", harness_params={"command_timeout": 3},
        model_params={"script": script}, benchmark_params={"sample_ids": ["files/append_line", "files/hello_world"]},
        run_id=docker_run_id, results_dir=str(tmp_path), progress="none")
    assert time.monotonic() - t0 < 120
    assert out.status == "completed" and out.errors_by_kind == {"command_timeout": 1}
    assert out.run_dir is not None
    hung = msgspec.json.decode(next((out.run_dir / "details").glob("files_append*")).read_bytes(), type=TaskDetail)
    attempt = hung.attempts["1"]
    assert attempt.status == "completed" and attempt.error_kind == "command_timeout"
    assert attempt.trajectory is not None and attempt.trajectory.steps[0].exit_code == 124
    other = msgspec.json.decode(next((out.run_dir / "details").glob("files_hello*")).read_bytes(), type=TaskDetail)
    assert other.correct is True


def test_keep_environment_keeps_and_records_containers_until_cleanup(
        base_image: str, docker_run_id: str, tmp_path: Path) -> None:
    out = agentcompass.run_evaluation(
        "shell_tasks", "shell_agent", "scripted", "docker", benchmark_params={"sample_ids": ["python/fib"]},
        keep_environment=True, run_id=docker_run_id, results_dir=str(tmp_path), progress="none")
    assert out.ok and out.run_dir is not None
    detail = msgspec.json.decode(next((out.run_dir / "details").glob("*.json")).read_bytes(), type=TaskDetail)
    recorded = {e["id"] for e in detail.attempts["1"].meta["environments"] if e.get("kept")}
    assert len(recorded) == 2  # agent and verifier (python/fib runs the agent's code in a verifier)
    alive = set(containers_of(docker_run_id))
    assert recorded == alive
    env = dict(os.environ, PYTHONPATH=str(REPO))
    res = subprocess.run([sys.executable, "-m", "agentcompass.cli", "cleanup", "--run-id", docker_run_id, "--all"],
                         capture_output=True, text=True, timeout=120, env=env)
    assert res.returncode == 0, res.stderr
    assert containers_of(docker_run_id) == []


def _start_run(run_id: str, results: Path, seconds: int = 120) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.Popen(
        [sys.executable, "-m", "agentcompass.cli", "run", "shell_tasks", "tests.engine.components:SleepingHarness",
         "scripted", "--env", "docker", "--harness-params", f'{{"seconds": {seconds}}}', "--run-id", run_id,
         "--benchmark-params", '{"categories": ["files"]}', "--task-concurrency", "3", "--progress", "none",
         "--results-dir", str(results)], env=env, cwd=str(REPO), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
        # SIGINT as a terminal delivers it: a test runner started in the background inherits it ignored
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.default_int_handler))


def _wait_for_containers(run_id: str, n: int, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 120
    while len(containers_of(run_id)) < n:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "containers never appeared"
        time.sleep(0.3)


def test_after_a_sigkill_the_next_run_sweeps_what_the_dead_run_left(
        base_image: str, docker_run_id: str, tmp_path: Path) -> None:
    proc = _start_run(docker_run_id, tmp_path)
    _wait_for_containers(docker_run_id, 3, proc)
    proc.kill()  # a SIGKILL cleans nothing up...
    proc.wait(30)
    # (their presence is not checked here: a run starting in another test worker may sweep them first)
    out = agentcompass.run_evaluation(  # ...the next run's start-up sweep does
        "shell_tasks", "shell_agent", "scripted", "docker", benchmark_params={"sample_ids": ["files/hello_world"]},
        results_dir=str(tmp_path / "next"), progress="none")
    assert out.ok
    assert containers_of(docker_run_id) == [] and networks_of(docker_run_id) == []


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["ctrl_c", "sigterm"])
def test_ctrl_c_or_sigterm_removes_every_container_of_the_run(base_image: str, docker_run_id: str, tmp_path: Path,
                                                              sig: signal.Signals, code: int) -> None:
    proc = _start_run(docker_run_id, tmp_path)
    _wait_for_containers(docker_run_id, 3, proc)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == code, err
    assert containers_of(docker_run_id) == [] and networks_of(docker_run_id) == []
    run_dirs = list((tmp_path / "shell_tasks").rglob("run_info.json"))
    assert len(run_dirs) == 1 and '"status":"cancelled"' in run_dirs[0].read_text().replace(" ", "").replace("\n", "")


_PROBE_SCRIPT = r"""
import os, socket, sys, urllib.request
url = os.environ.get("AGENTCOMPASS_MODEL_BASE_URL")
try:
    model = urllib.request.urlopen(url + "/models", timeout=5).status if url else "unset"
except Exception as e:
    model = type(e).__name__
try:
    host = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3).recv(16).decode().strip()
except Exception as e:
    host = type(e).__name__
proxied = "unset"
proxy = os.environ.get("HTTPS_PROXY")
if proxy:  # the same host through the egress proxy (a CONNECT tunnel), as proxy-aware tools would go
    try:
        p_host, p_port = proxy.rsplit("/", 1)[-1].rsplit(":", 1)
        s = socket.create_connection((p_host, int(p_port)), timeout=3)
        s.sendall(f"CONNECT {sys.argv[1]}:{sys.argv[2]} HTTP/1.1\r\nHost: {sys.argv[1]}\r\n\r\n".encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = s.recv(1)
            if not chunk:
                break
            head += chunk
        status = head.split(b" ")[1].decode() if b" " in head else "none"
        proxied = s.recv(16).decode().strip() if status == "200" else status
    except Exception as e:
        proxied = type(e).__name__
print(f"model={model} host={host} proxied={proxied}")
"""


@pytest.fixture(scope="module")
def host_server() -> Iterator[tuple[str, int]]:
    """A banner server on 0.0.0.0 of this machine: (bridge gateway, port), as containers would reach it."""
    class Greet(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            self.request.sendall(b"OK\n")

    bridge = json.loads(docker_cli("network", "inspect", "bridge"))[0]["IPAM"]["Config"][0]
    gateway = bridge.get("Gateway") or str(next(ipaddress.ip_network(bridge["Subnet"]).hosts()))
    with socketserver.ThreadingTCPServer(("0.0.0.0", 0), Greet) as server:
        server.daemon_threads = True
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield gateway, server.server_address[1]
        finally:
            server.shutdown()


def _probe(policy: str | dict[str, object], url: str, host: tuple[str, int], run_id: str, results: Path) -> str:
    """What the agent reaches under ``run_network_policy=policy``: ``model=<status> host=<banner>``."""
    encoded = base64.b64encode(_PROBE_SCRIPT.encode()).decode()
    command = f"python3 -c \"import base64; exec(base64.b64decode('{encoded}'))\" {host[0]} {host[1]}"
    out = agentcompass.run_evaluation(
        "shell_tasks", "tests.engine.components:ProbeHarness", "scripted", "docker", model_base_url=url,
        harness_params={"command": command}, environment_params={"run_network_policy": policy},
        benchmark_params={"sample_ids": ["answer/count_lines"]}, run_id=run_id, results_dir=str(results),
        progress="none")
    assert out.ok, out.error
    assert out.run_dir is not None
    detail = msgspec.json.decode(next((out.run_dir / "details").glob("*.json")).read_bytes(), type=TaskDetail)
    answer = detail.attempts["1"].final_answer or ""
    assert answer.startswith("exit=0\n"), answer
    return answer.split("\n")[1]


@pytest.mark.parametrize(("policy", "reach_model", "reach_host", "proxied"), [
    ("public", True, True, "proxied=unset"),
    ("model", True, False, "proxied=unset"),
    ("none", False, False, "proxied=unset"),
    ("allowlist-host", True, False, "proxied=OK"),  # listed: only through the proxy, never directly
    ("allowlist-other", True, False, "proxied=403"),  # not listed: the proxy refuses it
])
def test_run_network_policy_decides_whether_the_agent_reaches_the_model_and_the_host(
        base_image: str, docker_run_id: str, tmp_path: Path, scripted_url: str, host_server: tuple[str, int],
        policy: str, reach_model: bool, reach_host: bool, proxied: str) -> None:
    spec: str | dict[str, object] = policy
    if policy.startswith("allowlist"):
        listed = f"{host_server[0]}:{host_server[1]}" if policy == "allowlist-host" else "192.0.2.1:80"
        spec = {"mode": "allowlist", "hosts": [listed]}
    model, host, via_proxy = _probe(spec, scripted_url, host_server, docker_run_id, tmp_path).split()
    assert (model == "model=200") is reach_model, (policy, model)
    assert (host == "host=OK") is reach_host, (policy, host)
    assert via_proxy == proxied, (policy, via_proxy)
    assert containers_of(docker_run_id) == [] and networks_of(docker_run_id) == []


def test_a_container_killed_mid_task_is_env_lost_and_retried(base_image: str, docker_run_id: str,
                                                             tmp_path: Path) -> None:
    out = agentcompass.run_evaluation(
        "shell_tasks", "tests.engine.components:SandboxBreakingHarness", "scripted", "docker", max_retries=1,
        harness_params={"breaks": "container"},
        benchmark_params={"sample_ids": ["files/hello_world"]}, run_id=docker_run_id, results_dir=str(tmp_path),
        progress="none")
    assert out.ok and out.metrics["pass@1"] == 1.0 and out.counts.retries == 1
    assert out.run_dir is not None
    d = msgspec.json.decode(next((out.run_dir / "details").glob("*.json")).read_bytes(), type=TaskDetail)
    assert [t.error_kind for t in d.attempts["1"].tries] == ["env_lost", None]
    assert containers_of(docker_run_id) == []


def test_timeout_seconds_on_docker_stops_within_seconds_and_removes_every_container(
        base_image: str, docker_run_id: str, tmp_path: Path) -> None:
    t0 = time.monotonic()
    result = agentcompass.launch({
        "requests": [{"benchmark": {"id": "shell_tasks", "params": {"sample_ids": SAMPLE[:4]}},
                      "harness": {"id": "tests.engine.components:SleepingHarness", "params": {"seconds": 120}},
                      "model": "scripted", "environment": "docker", "run_id": docker_run_id,
                      "results_dir": str(tmp_path), "task_concurrency": 4}],
        "timeout_seconds": 8, "progress": "none"})
    elapsed = time.monotonic() - t0
    out = result.outcomes[0]
    assert result.status == "timed_out" and out.status == "timed_out"
    assert elapsed < 90, elapsed  # hang guard: the harness would sleep 120 s
    assert out.run_dir is not None
    details = [msgspec.json.decode(p.read_bytes(), type=TaskDetail) for p in (out.run_dir / "details").glob("*.json")]
    assert len(details) == 4 and all(d.attempts["1"].error_kind == "run_timeout" for d in details)
    assert containers_of(docker_run_id) == [] and networks_of(docker_run_id) == []
