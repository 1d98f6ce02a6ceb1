#!/bin/bash
# agentcompass-tests-marker: 6c1f0e2a fix-calc
# The agent's calc.py runs only in a child process, as nobody when we are root, with its own stdout: only this
# script (the parent) computes the share and writes the reward, last.
mkdir -p /logs/verifier
rm -f /logs/verifier/reward.txt /logs/verifier/reward.json
chmod 755 /logs /logs/verifier
reward=$(cd / && python3 -I - <<'PY'
"""Prints the share of cases parse_duration gets right (the reward)."""
import json
import os
import subprocess

CASES = {"90s": 90, "2m": 120, "1h30m": 5400, "1h 5m 10s": 3910, "45": 45, "2h": 7200, "": 0, "10m5s": 605}
# the child prints one JSON line per case after a marker it cannot know in advance
CHILD = r"""
import json, sys
marker, cases = sys.argv[1], json.loads(sys.argv[2])
sys.path.insert(0, "/app")
try:
    from calc import parse_duration
except BaseException:
    parse_duration = None
out = []
for text in cases:
    try:
        got = parse_duration(text)
        out.append(got if type(got) is int else None)
    except BaseException:
        out.append(None)
sys.stdout.write(marker + json.dumps(out) + "\n")
"""


def main() -> None:
    marker = os.urandom(16).hex()
    drop = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"] if os.getuid() == 0 else []
    try:
        proc = subprocess.run([*drop, "python3", "-I", "-c", CHILD, marker, json.dumps(list(CASES))],
                              capture_output=True, text=True, timeout=30, cwd="/tmp", stdin=subprocess.DEVNULL)
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(marker)]
        got = json.loads(lines[-1][len(marker):]) if proc.returncode == 0 and len(lines) == 1 else []
    except (subprocess.TimeoutExpired, ValueError, IndexError):
        got = []
    if not isinstance(got, list) or len(got) != len(CASES):
        got = [None] * len(CASES)
    ok = sum(type(g) is int and g == want for g, want in zip(got, CASES.values()))
    print(ok / len(CASES))


main()
PY
) || reward=0
echo "${reward:-0}" > /logs/verifier/reward.txt
