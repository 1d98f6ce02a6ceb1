#!/bin/bash
# agentcompass-tests-marker: 6c1f0e2a git-release
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
cd /app/project || exit 0
git config --global --add safe.directory /app/project
# the repository is the agent's: none of its config may run a program (hooks, fsmonitor, pagers)
git() { command git -c core.hooksPath=/dev/null -c core.fsmonitor=false -c core.pager=cat --no-pager "$@"; }
[ "$(git log -1 --format=%s v1.0.0 2>/dev/null)" = "initial import" ] || exit 0
[ "$(git rev-list --count v1.0.0)" = 1 ] || exit 0
files=$(git ls-tree -r --name-only v1.0.0 | sort | tr '\n' ' ')
[ "$files" = "README.md src/main.sh " ] || exit 0
echo 1 > /logs/verifier/reward.txt
