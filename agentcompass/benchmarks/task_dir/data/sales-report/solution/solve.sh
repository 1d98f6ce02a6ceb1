#!/bin/bash
# agentcompass-solution-marker: 9d4b7a31 sales-report
cd /app
{ echo "region,total"
  tail -n +2 sales.csv | awk -F, '{t[$1] += $3} END {for (r in t) printf "%s,%.2f\n", r, t[r]}' | sort
} > report.csv
