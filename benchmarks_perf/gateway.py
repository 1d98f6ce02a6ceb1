"""Model gateway: what the engine's gateway adds to a model call, against the same calls made directly.

Every Claude Code, Codex and OpenHands token passes the gateway (agentcompass/models/gateway/server.py). Three
processes: the upstream (``agentcompass serve-scripted``, its bundled fallback reply), the gateway (a child of
this script: the engine's ``Gateway`` with one upstream and one grant, its limiter opened to the level's
concurrency as the engine's would be with ``max_concurrency`` set), and this script, the client (aiohttp, one
connection per concurrent caller, uvloop where installed).

- For each concurrency level (default 1, 100, 1000) and body (JSON, SSE): the same number of chat completions
  directly to the upstream and through the gateway, keyed by the route token (envelope off) and by a signed
  envelope (on): per-call latency p50 and p99, calls/s. "Added" is the gateway's minus direct's, in the run.
- Streams held: ``--streams`` SSE calls at once through the gateway to an upstream that answers after
  ``--hold-s``: the gateway's RSS over its idle RSS, per open stream, and how many streams ended cleanly
  (``data: [DONE]``).

Targets (issue 30): added p50 <= 1 ms and p99 <= 5 ms at c=100; throughput through the gateway >= 0.9x direct
at c=1000; 1,000 SSE streams held with <= 100 KB RSS each, none cut.

    .venv/bin/python benchmarks_perf/gateway.py [--levels 1,100,1000] [--calls N] [--streams N] [--tiny]

Prints a table and the targets, writes ``results/gateway.json`` and ends with a ``RESULT`` line.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _common import REPO, result_line, settings_line, write_json

NAME = "gateway"
BODY = {"model": "scripted", "messages": [{"role": "user", "content": "gateway benchmark ping"}]}


# ----------------------------------------------------------------------------- child: the gateway


async def _serve_gateway(upstream: str, limit: int) -> None:
    from agentcompass.models.adaptive import AdaptiveLimiter
    from agentcompass.models.gateway.envelope import AttemptKey, EnvelopeSigner
    from agentcompass.models.gateway.server import Gateway, Upstream
    from agentcompass.models.retry import RetryPolicy

    gw = Gateway(EnvelopeSigner(), max_connections=max(4096, 2 * limit), max_calls_per_grant=max(64, limit))
    url = await gw.start()
    gw.add_upstream(Upstream(request="bench", model_id="scripted", base_url=upstream, api_key=None,
                             api_protocol="openai-chat", limiter=AdaptiveLimiter("bench", limit, initial=limit),
                             policy=RetryPolicy(retries=0), timeout_s=120.0))
    token = gw.open_grant(AttemptKey("bench", "t", 1, 1)).token
    envelope = gw.open_grant(AttemptKey("bench", "t", 2, 1), run_id="bench", envelope_ttl_s=3600).envelope
    print(json.dumps({"url": url, "token": token, "envelope": envelope}), flush=True)
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.read)  # until the parent closes our stdin
    await gw.aclose()


def _spawn_gateway(upstream: str, limit: int) -> tuple[subprocess.Popen[str], dict[str, str]]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p))
    proc = subprocess.Popen([sys.executable, __file__, "--serve-gateway", upstream, "--limit", str(limit)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("{"):
        proc.kill()
        raise RuntimeError(f"the gateway did not start: {line!r}")
    return proc, json.loads(line)


def _stop(proc: subprocess.Popen[str]) -> None:
    with contextlib.suppress(OSError):
        if proc.stdin is not None:
            proc.stdin.close()
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


def _rss_kb(pid: int) -> float:
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1024


# ----------------------------------------------------------------------------- the client


async def _call(session: Any, url: str, key: str | None, stream: bool) -> tuple[float, bool]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    start = time.perf_counter()
    async with session.post(url, json={**BODY, "stream": stream}, headers=headers) as resp:
        data = await resp.read()
    ok = resp.status == 200 and (b"data: [DONE]" in data if stream else data.startswith(b"{"))
    return time.perf_counter() - start, ok


async def measure(url: str, key: str | None, *, level: int, calls: int, stream: bool) -> dict[str, Any]:
    """``calls`` completions at ``level`` concurrent callers: latency percentiles (ms), calls/s, failures."""
    import aiohttp

    lat: list[float] = []
    failed = 0
    todo = iter(range(calls))
    timeout = aiohttp.ClientTimeout(total=300)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=level, force_close=False),
                                     timeout=timeout) as session:
        async def worker() -> None:
            nonlocal failed
            for _ in todo:
                took, ok = await _call(session, url, key, stream)
                lat.append(took)
                failed += not ok

        await asyncio.gather(*(_call(session, url, key, stream) for _ in range(min(level, 8))))  # warm-up
        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(level)))
        wall = time.perf_counter() - start
    lat.sort()
    return {"calls": calls, "failed": failed, "calls_per_s": round(calls / wall, 1),
            "p50_ms": round(1000 * statistics.median(lat), 3),
            "p99_ms": round(1000 * lat[min(len(lat) - 1, int(0.99 * len(lat)))], 3)}


async def hold_streams(url: str, key: str, pid: int, streams: int) -> dict[str, Any]:
    """``streams`` SSE calls at once through the gateway (process ``pid``); its RSS over idle, per stream."""
    import aiohttp

    idle = _rss_kb(pid)
    peak = idle
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=streams),
                                     timeout=aiohttp.ClientTimeout(total=600)) as session:
        tasks = [asyncio.ensure_future(_call(session, url, key, True)) for _ in range(streams)]
        while not all(t.done() for t in tasks):
            peak = max(peak, _rss_kb(pid))
            await asyncio.sleep(0.05)
        results = [t.result() for t in tasks]
    clean = sum(ok for _, ok in results)
    return {"streams": streams, "clean": clean, "cut": streams - clean, "idle_rss_kb": round(idle),
            "peak_rss_kb": round(peak), "kb_per_stream": round((peak - idle) / streams, 1)}


# ----------------------------------------------------------------------------- main


async def run(levels: list[int], calls: int, streams: int, hold_s: float) -> dict[str, Any]:
    from agentcompass.models.scripted.server import spawn_server_process, stop_process

    up, up_url = spawn_server_process()
    gw, info = _spawn_gateway(up_url, max([*levels, streams]))
    rows: list[dict[str, Any]] = []
    try:
        for level in levels:
            n = max(calls, 4 * level)
            for body, stream in (("json", False), ("sse", True)):
                sides = {"direct": await measure(f"{up_url}/chat/completions", None, level=level, calls=n,
                                                 stream=stream),
                         "gateway": await measure(f"{info['url']}/v1/chat/completions", info["token"],
                                                  level=level, calls=n, stream=stream),
                         "gateway_envelope": await measure(f"{info['url']}/v1/chat/completions",
                                                           info["envelope"], level=level, calls=n, stream=stream)}
                rows.append({"level": level, "body": body, **sides})
                print(f"c={level:<5} {body:<4} " + "  ".join(
                    f"{side}: p50 {r['p50_ms']:.2f} p99 {r['p99_ms']:.2f} ms {r['calls_per_s']:.0f}/s"
                    f"{' FAILED ' + str(r['failed']) if r['failed'] else ''}" for side, r in sides.items()),
                    flush=True)
    finally:
        _stop(gw)
        stop_process(up)
    slow, slow_url = spawn_server_process("--latency", str(hold_s))
    gw2, info2 = _spawn_gateway(slow_url, streams)
    try:
        held = await hold_streams(f"{info2['url']}/v1/chat/completions", info2["token"], gw2.pid, streams)
    finally:
        _stop(gw2)
        stop_process(slow)
    print(f"{streams} SSE streams held {hold_s:g}s: {held['kb_per_stream']} KB RSS each in the gateway, "
          f"{held['cut']} cut", flush=True)
    return {"levels": levels, "rows": rows, "streams": held}


def _pick(rows: list[dict[str, Any]], level: int, body: str) -> dict[str, Any] | None:
    return next((r for r in rows if r["level"] == level and r["body"] == body), None)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--levels", default="1,100,1000", help="concurrency levels (comma-separated)")
    ap.add_argument("--calls", type=int, default=2000, help="calls per level and side (at least 4 x the level)")
    ap.add_argument("--streams", type=int, default=1000, help="SSE streams held at once")
    ap.add_argument("--hold-s", type=float, default=3.0, help="how long the upstream holds each stream")
    ap.add_argument("--tiny", action="store_true", help="levels 1,4, 20 calls, 20 streams (a smoke test)")
    ap.add_argument("--results-dir", type=Path, default=None)
    ap.add_argument("--serve-gateway", metavar="UPSTREAM", help=argparse.SUPPRESS)
    ap.add_argument("--limit", type=int, default=1000, help=argparse.SUPPRESS)
    args = ap.parse_args()
    try:
        import uvloop
    except ImportError:
        uvloop = None
    runner = uvloop.run if uvloop is not None else asyncio.run
    if args.serve_gateway:
        runner(_serve_gateway(args.serve_gateway, args.limit))
        return 0
    levels = [1, 4] if args.tiny else [int(x) for x in args.levels.split(",")]
    calls, streams = (20, 20) if args.tiny else (args.calls, args.streams)
    hold_s = 1.0 if args.tiny else args.hold_s
    print(settings_line("client", {"library": "aiohttp", "loop": "uvloop" if uvloop else "asyncio",
                                   "connections": "one per caller"}))
    print(settings_line("gateway", {"limiter": "opened to the level", "retries": 0, "process": "its own"}))
    report = asyncio.run(run(levels, calls, streams, hold_s)) if uvloop is None else uvloop.run(
        run(levels, calls, streams, hold_s))
    rows = report["rows"]
    mid = _pick(rows, 100, "json") or _pick(rows, levels[-1], "json")
    top = _pick(rows, 1000, "json") or _pick(rows, levels[-1], "json")
    assert mid is not None and top is not None
    added_p50 = round(mid["gateway"]["p50_ms"] - mid["direct"]["p50_ms"], 3)
    added_p99 = round(mid["gateway"]["p99_ms"] - mid["direct"]["p99_ms"], 3)
    ratio = round(top["gateway"]["calls_per_s"] / top["direct"]["calls_per_s"], 3)
    held = report["streams"]
    print(f"  target added p50 <= 1 ms at c={mid['level']}: measured {added_p50} ms "
          f"({'met' if added_p50 <= 1 else 'NOT met'})")
    print(f"  target added p99 <= 5 ms at c={mid['level']}: measured {added_p99} ms "
          f"({'met' if added_p99 <= 5 else 'NOT met'})")
    print(f"  target >= 0.9x direct throughput at c={top['level']}: measured {ratio}x "
          f"({'met' if ratio >= 0.9 else 'NOT met'})")
    print(f"  target <= 100 KB RSS per held stream, none cut ({held['streams']} streams): measured "
          f"{held['kb_per_stream']} KB, {held['cut']} cut "
          f"({'met' if held['kb_per_stream'] <= 100 and held['cut'] == 0 else 'NOT met'})")
    failed = sum(r[side]["failed"] for r in rows for side in ("direct", "gateway", "gateway_envelope"))
    path = write_json(NAME, {**report, "added_p50_ms": added_p50, "added_p99_ms": added_p99,
                             "throughput_ratio": ratio}, args.results_dir)
    print(result_line(NAME, {"added_p50_ms": added_p50, "added_p99_ms": added_p99, "mid_level": mid["level"],
                             "throughput_ratio": ratio, "top_level": top["level"],
                             "kb_per_stream": held["kb_per_stream"], "streams": held["streams"],
                             "streams_cut": held["cut"], "failed_calls": failed, "json": str(path)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
