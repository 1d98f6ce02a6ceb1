import re

UNITS = {"h": 60, "m": 60, "s": 1}


def parse_duration(text):
    """Seconds in a duration such as "1h30m", "90s" or "45"."""
    total = 0.0
    for amount, unit in re.findall(r"(\d+)([hms])", text):
        total += int(amount) * UNITS[unit]
    return total
