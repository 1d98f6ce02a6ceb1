#!/bin/bash
# agentcompass-solution-marker: 9d4b7a31 git-release
set -e
bash "$(dirname "$0")/release.sh" /app/project
