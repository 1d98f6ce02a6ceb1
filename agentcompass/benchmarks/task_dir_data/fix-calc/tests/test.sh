#!/bin/bash
# agentcompass-tests-marker: 6c1f0e2a fix-calc
mkdir -p /logs/verifier
cd /app && python3 - > /logs/verifier/reward.txt <<'PY' || echo 0 > /logs/verifier/reward.txt
"""Prints the share of cases parse_duration gets right (the reward)."""
import sys

sys.path.insert(0, "/app")
CASES = {"90s": 90, "2m": 120, "1h30m": 5400, "1h 5m 10s": 3910, "45": 45, "2h": 7200, "": 0, "10m5s": 605}


def main() -> None:
    try:
        from calc import parse_duration
    except Exception:
        print(0)
        return
    ok = 0
    for text, want in CASES.items():
        try:
            got = parse_duration(text)
            ok += type(got) is int and got == want
        except Exception:
            pass
    print(ok / len(CASES))


main()
PY
