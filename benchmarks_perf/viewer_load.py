"""Viewer load time on a 10,000-task run: time until the run page's task table is rendered in Chromium.

Synthesises a run directory of real ``TaskDetail`` files (msgspec, small trajectories), starts
``agentcompass view`` in a subprocess, opens the run page in headless Chromium (system binary, Playwright)
and measures, from navigation to the first rendered table rows:

- cold: navigation right after the server printed its URL (includes building the task index from 10,000
  files: the browser is started first);
- warm: a reload (index already built).

Also prints the server's index build time, a sorted+filtered query's latency, and the server's RSS.

    PYTHONPATH=. .venv/bin/python benchmarks_perf/viewer_load.py [--tasks 10000] [--steps 3] [--keep DIR]

Ends with ``RESULT viewer_index_load_s=... `` (the cold time; target < 2 s, printed, not asserted).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from agentcompass.models.scripted.server import stop_process  # noqa: E402
from agentcompass.viewer.chromium import find_chromium  # noqa: E402
from tests.viewer.rundirs import make_detail, write_run  # noqa: E402

CATEGORIES = ("files", "text", "python", "answer", "swe")


def synthesise(run_dir: Path, n: int, steps: int) -> float:
    t0 = time.perf_counter()
    details = []
    for i in range(n):
        outcome = i % 10
        details.append(make_detail(
            f"{CATEGORIES[i % len(CATEGORIES)]}/task-{i:05d}", category=CATEGORIES[i % len(CATEGORIES)],
            correct=None if outcome == 9 else outcome < 6, status="run_error" if outcome == 9 else "completed",
            error_kind="agent_timeout" if outcome == 9 else None, error="timed out" if outcome == 9 else None,
            steps=1 + i % steps if steps else 0, tokens=200 + (i * 37) % 5000,
            analysis={"repeated_tool_calls": {"flagged": True}} if i % 97 == 0 else None,
            observation=f"output line for task {i}\n" * 3, action=f"cat file_{i}.txt"))
    write_run(run_dir, details, run_id=run_dir.name, benchmark="synthetic", harness="scripted_harness",
              model="scripted")
    return time.perf_counter() - t0


def rss_mb(pid: int) -> tuple[float, float]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        fields[key] = value.strip()
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=10_000)
    ap.add_argument("--steps", type=int, default=3, help="steps per trajectory (1..steps)")
    ap.add_argument("--keep", metavar="DIR", help="write the run here and keep it")
    args = ap.parse_args()

    chromium = find_chromium()
    if chromium is None:
        print("no Chromium found: apt-get install -y chromium (or set AGENTCOMPASS_CHROMIUM)", file=sys.stderr)
        return 2
    from playwright.sync_api import sync_playwright

    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="ac-viewer-load-"))
    run_dir = base / "synthetic" / "scripted_harness" / "scripted" / "load"
    if run_dir.exists():
        shutil.rmtree(run_dir)
    synth_s = synthesise(run_dir, args.tasks, args.steps)
    size_mb = sum(p.stat().st_size for p in (run_dir / "details").iterdir()) / 1e6
    print(f"synthesised {args.tasks} details ({size_mb:.1f} MB) in {synth_s:.1f}s under {run_dir}")

    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc: subprocess.Popen[str] | None = None
    try:
        with sync_playwright() as p:
            # The browser is up before the server starts, so the cold time includes building the index.
            browser = p.chromium.launch(executable_path=chromium, headless=True,
                                        args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
            try:
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                page.set_default_timeout(120_000)
                page.goto("about:blank")
                proc = subprocess.Popen([sys.executable, "-m", "agentcompass.cli", "view", str(run_dir), "--no-open"],
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
                assert proc.stdout is not None
                line = proc.stdout.readline()
                url = next((w for w in line.split() if w.startswith("http://")), None)
                if url is None:
                    print(f"viewer did not start: {line!r}", file=sys.stderr)
                    return 1
                ready = "#tasks[data-state=ready] tbody tr"
                t0 = time.perf_counter()
                page.goto(url + "#/run/.")
                page.wait_for_selector(ready)
                cold = time.perf_counter() - t0
                rows = page.locator("#tasks tbody tr").count()
                t0 = time.perf_counter()
                page.reload()
                page.wait_for_selector(ready)
                warm = time.perf_counter() - t0
            finally:
                browser.close()
        with urllib.request.urlopen(url + "api/run?run=.", timeout=60) as r:
            info = json.loads(r.read())["index"]
        t0 = time.perf_counter()
        with urllib.request.urlopen(url + "api/tasks?run=.&sort=tokens&desc=1&q=task-0&outcome=fail&limit=100",
                                    timeout=60) as r:
            matched = json.loads(r.read())["matched"]
        query_s = time.perf_counter() - t0
        rss, peak = rss_mb(proc.pid)
    finally:
        if proc is not None:
            stop_process(proc)
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)

    print(f"tasks in index: {info['rows']} (unreadable {len(info['unreadable'])}); rows rendered: {rows}")
    print(f"index build: {info['build_s']:.3f}s   cold page load to table: {cold:.3f}s   warm reload: {warm:.3f}s")
    print(f"sorted+filtered query ({matched} matches): {query_s * 1000:.1f} ms")
    print(f"server RSS: {rss:.1f} MB, peak {peak:.1f} MB")
    print(f"target: cold load < 2 s -> {'met' if cold < 2 else 'MISSED'}")
    print(f"RESULT viewer_index_load_s={cold:.3f} viewer_warm_load_s={warm:.3f} index_build_s={info['build_s']:.3f} "
          f"query_ms={query_s * 1000:.1f} server_rss_mb={rss:.1f} server_peak_rss_mb={peak:.1f} tasks={info['rows']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
