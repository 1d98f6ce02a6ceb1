"""Shared helpers of the performance scripts: RESULT lines, JSON reports, RSS sampling, child runs, venvs.

Standard library only: the peer scripts import it from their own virtualenvs (Inspect AI's) too.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
RESULTS_DIR = HERE / "results"
#: a child run prints exactly one line starting with this, followed by its JSON report.
CHILD_PREFIX = "CHILD "
#: the label every container a benchmark starts carries (value: that benchmark's run id).
LABEL_RUN_ID = "agentcompass.run_id"

if str(REPO) not in sys.path:  # so `benchmarks_perf._components:...` resolves as a dotted component path
    sys.path.insert(0, str(REPO))


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1e6 else f"{value:.0f}"
    return str(value).replace(" ", "_")


def result_line(name: str, values: dict[str, Any]) -> str:
    """``RESULT <name> key=value ...``: one line a script can split on spaces and ``=``."""
    parts = " ".join(f"{k}={_fmt(v)}" for k, v in values.items() if v is not None)
    return f"RESULT {name} {parts}"


def target_line(what: str, ratio: float | None, target: float) -> str:
    """``target >= 30x <what>: measured 12.3x (not met)``: a target of issue 15 next to the ratio measured now."""
    measured = "not measured" if ratio is None else f"measured {ratio:g}x ({'met' if ratio >= target else 'NOT met'})"
    return f"  target >= {target:g}x {what}: {measured}"


def settings_line(label: str, settings: dict[str, Any]) -> str:
    """``  settings <label>: key=value, ...``: what one side ran with, printed next to its numbers."""
    return f"  settings {label}: " + ", ".join(f"{k}={v}" for k, v in settings.items())


def parse_result_line(line: str) -> tuple[str, dict[str, str]]:
    """The inverse of ``result_line`` (values stay strings)."""
    words = line.split()
    if len(words) < 2 or words[0] != "RESULT":
        raise ValueError(f"not a RESULT line: {line!r}")
    return words[1], dict(w.split("=", 1) for w in words[2:] if "=" in w)


def write_json(name: str, report: dict[str, Any], results_dir: Path | None = None) -> Path:
    """Write ``report`` (plus the machine it ran on) to ``results/<name>.json``; the path."""
    out_dir = results_dir or RESULTS_DIR
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.json"
    full = {"benchmark": name, "at": time.strftime("%Y-%m-%dT%H:%M:%S"), "machine": machine_info(), **report}
    path.write_text(json.dumps(full, indent=2) + "\n")
    return path


def machine_info() -> dict[str, Any]:
    """CPU model, cores, memory, OS, Python: what a table of numbers must name."""
    cpu = platform.processor() or "?"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {"cpu": cpu, "cores": os.cpu_count(), "memory_gib": round(mem_gib, 1),
            "os": f"{platform.system()} {platform.release()}", "python": platform.python_version(),
            "load_avg_1m": round(os.getloadavg()[0], 2)}


# ----------------------------------------------------------------------------- memory


def rss_mb() -> float:
    """Resident set size of this process now, MB (1e6 bytes)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, MB (Linux reports ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e6


class RssSampler:
    """Samples this process's RSS every ``interval`` seconds in a daemon thread; ``peak_mb`` and ``series``."""

    def __init__(self, interval: float = 0.05) -> None:
        self.interval = interval
        self.peak_mb = 0.0
        self.series: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="rss-sampler")
        self._t0 = time.monotonic()

    def _run(self) -> None:
        while not self._stop.is_set():
            mb = rss_mb()
            self.peak_mb = max(self.peak_mb, mb)
            self.series.append((round(time.monotonic() - self._t0, 3), round(mb, 1)))
            self._stop.wait(self.interval)

    def __enter__(self) -> RssSampler:
        self._t0 = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        self.peak_mb = max(self.peak_mb, rss_mb())


# ----------------------------------------------------------------------------- child processes


def emit_child_report(report: dict[str, Any]) -> None:
    """Print a child run's report (the parent reads it with ``run_child``)."""
    print(CHILD_PREFIX + json.dumps(report), flush=True)


def run_child(cmd: Sequence[str], *, timeout: float, env: dict[str, str] | None = None,
              cwd: Path | None = None) -> dict[str, Any]:
    """Run ``cmd`` (a child run), bounded in time; its report. The child's stderr is shown on failure."""
    full_env = dict(os.environ, **(env or {}))
    full_env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), full_env.get("PYTHONPATH", "")) if p)
    try:
        proc = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout, env=full_env,
                              cwd=str(cwd or REPO))
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(f"child run timed out after {timeout:g}s: {' '.join(cmd)}") from exc
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(CHILD_PREFIX):
            report: dict[str, Any] = json.loads(line[len(CHILD_PREFIX):])
            return report
    raise RuntimeError(f"child run failed (exit {proc.returncode}): {' '.join(cmd)}\n"
                       f"stdout tail: {proc.stdout[-2000:]}\nstderr tail: {proc.stderr[-4000:]}")


def ensure_venv(path: Path, requirements: Sequence[str], *, check_module: str, timeout: float = 1200.0) -> Path:
    """A virtualenv at ``path`` with ``requirements`` installed (created on first use); its python."""
    python = path / "bin" / "python"
    if python.exists() and subprocess.run([str(python), "-c", f"import {check_module}"], capture_output=True,
                                          timeout=120).returncode == 0:
        return python
    print(f"creating {path} with {' '.join(requirements)} (first use; a few minutes)...", file=sys.stderr,
          flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, timeout=300)
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *requirements],
                   check=True, timeout=timeout)
    return python


# ----------------------------------------------------------------------------- docker


def docker_cli(*args: str, timeout: float = 60.0) -> str:
    """Run the docker CLI (observation and clean-up only); its stdout."""
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout,
                          check=True).stdout


def have_docker() -> bool:
    return os.path.exists("/var/run/docker.sock") and shutil.which("docker") is not None


def containers_with_label(label: str, value: str | None = None) -> list[str]:
    """Ids of every container (any state) carrying ``label`` (``=value`` when given)."""
    flt = f"label={label}={value}" if value is not None else f"label={label}"
    return docker_cli("ps", "-aq", "--no-trunc", "--filter", flt).split()


def all_container_ids() -> set[str]:
    """Every container on the daemon now, any state."""
    return set(docker_cli("ps", "-aq", "--no-trunc").split())


def remove_containers(ids: Sequence[str]) -> None:
    """Force-remove ``ids`` (leftovers of a run, after they were counted)."""
    for i in range(0, len(ids), 50):
        subprocess.run(["docker", "rm", "-f", "-v", *ids[i:i + 50]], capture_output=True, timeout=120)
