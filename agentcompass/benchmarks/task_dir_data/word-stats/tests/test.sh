#!/bin/bash
# agentcompass-tests-marker: 6c1f0e2a word-stats
mkdir -p /logs/verifier
python3 /tests/check_stats.py /app/stats.json > /logs/verifier/reward.json || echo '{"reward": 0}' > /logs/verifier/reward.json
cat /logs/verifier/reward.json
