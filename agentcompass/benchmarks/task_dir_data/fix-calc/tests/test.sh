#!/bin/bash
# agentcompass-tests-marker: 6c1f0e2a fix-calc
mkdir -p /logs/verifier
cd /app && python3 /tests/check_calc.py > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt
