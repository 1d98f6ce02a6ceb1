#!/bin/bash
# agentcompass-solution-marker: 9d4b7a31 word-stats
python3 - <<'PY'
import collections, json
text = open("/app/poem.txt", encoding="utf-8").read()
words = text.split()
clean = [w.lower().strip(".,;:!?") for w in words]
longest = max(clean, key=len)
counts = collections.Counter(clean)
top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
json.dump({"lines": len(text.splitlines()), "words": len(words), "longest": longest, "top": top},
          open("/app/stats.json", "w"))
PY
