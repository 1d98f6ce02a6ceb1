#!/bin/bash
# agentcompass-tests-marker: 6c1f0e2a hello-file
mkdir -p /logs/verifier
if [ "$(cat /app/greeting.txt 2>/dev/null)" = "Hello, AgentCompass!" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
