#!/bin/bash
# agentcompass-tests-marker: 6c1f0e2a sales-report
mkdir -p /logs/verifier
expected="east,10.00
north,19.50
south,10.00
west,4.40"
got=$(tail -n +2 "$REPORT" 2>/dev/null)
header=$(head -n 1 "$REPORT" 2>/dev/null)
ok=0
while IFS= read -r row; do
  if grep -qxF "$row" <<<"$got"; then ok=$((ok + 1)); fi
done <<<"$expected"
if [ "$header" != "region,total" ]; then ok=0; fi
cd / && python3 -I -c "print($ok / 4)" > /logs/verifier/reward.txt
