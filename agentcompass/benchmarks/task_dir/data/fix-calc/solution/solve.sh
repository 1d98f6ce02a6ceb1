#!/bin/bash
# agentcompass-solution-marker: 9d4b7a31 fix-calc
cat > /app/calc.py <<'PY'
import re

UNITS = {"h": 3600, "m": 60, "s": 1}


def parse_duration(text):
    """Seconds in a duration such as "1h30m", "90s" or "45"."""
    text = text.strip()
    if text.isdigit():
        return int(text)
    total = 0
    for amount, unit in re.findall(r"(\d+)\s*([hms])", text):
        total += int(amount) * UNITS[unit]
    return total
PY
