#!/bin/bash
# agentcompass-tests-marker: 6c1f0e2a word-stats
mkdir -p /logs/verifier
# -I and cd /: the agent's /app (the working directory) never reaches Python's import path
cd / && python3 -I - /app/stats.json > /logs/verifier/reward.json <<'PY' || echo '{"reward": 0}' > /logs/verifier/reward.json
"""Partial credit: a quarter of the reward per correct field of stats.json."""
import json
import sys

EXPECTED = {"lines": 4, "words": 27, "longest": "lighthouse", "top": "the"}
try:
    with open(sys.argv[1], encoding="utf-8") as f:
        got = json.load(f)
except (OSError, ValueError):
    got = {}
if not isinstance(got, dict):
    got = {}
passed = [k for k, v in EXPECTED.items() if got.get(k) == v]
print(json.dumps({"reward": len(passed) / len(EXPECTED), "passed": len(passed)}))
PY
cat /logs/verifier/reward.json
