"""One check for every number a user gives: a real, finite number (not a bool, not NaN, not an infinity)
inside its allowed range, or a ``ConfigError`` naming the field and the range.

NaN compares false with everything, so ``value <= 0`` lets it through and it surfaces much later as
``cannot convert float NaN to integer``; an infinity passes every "> 0" check and then overflows a timer or
a loop. Every numeric setting goes through ``check_number`` (or its two shorthands) so none can slip by.
"""

from __future__ import annotations

import math
import re
from typing import Any

from ._errors import ConfigError

#: the longest wait any timeout may ask for (30 days): anything longer is a typo, not a plan.
MAX_SECONDS = 30 * 86400.0
#: the largest count of anything (tasks, retries, steps...) unless a setting has its own tighter cap.
MAX_COUNT = 1_000_000
#: attempts per task (``k``): each one is a full agent run, so thousands are never meant.
MAX_K = 1000


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def _range_text(gt: float | None, ge: float | None, le: float | None) -> str:
    parts = []
    if gt is not None:
        parts.append(f"> {_num(gt)}")
    if ge is not None:
        parts.append(f">= {_num(ge)}")
    if le is not None:
        parts.append(f"<= {_num(le)}")
    return " and ".join(parts)


def check_number(value: Any, field: str, *, gt: float | None = None, ge: float | None = None,
                 le: float | None = None, integer: bool = False, what: str | None = None,
                 label: str | None = None) -> Any:
    """``value`` if it is a finite int/float (an int when ``integer``) within the bounds, else ``ConfigError``.

    ``field`` names the setting in the error (and is the error's ``field``); ``what`` overrides the noun
    ("a number of seconds"); ``label`` the subject of the message (default: the field in backticks).
    Returns the value unchanged (callers convert with ``float``/``int``)."""
    ok = (isinstance(value, int) if integer else isinstance(value, int | float)) and not isinstance(value, bool)
    if ok and isinstance(value, float) and not math.isfinite(value):
        ok = False
    if ok and ((gt is not None and not value > gt) or (ge is not None and not value >= ge)
               or (le is not None and not value <= le)):
        ok = False
    if not ok:
        noun = what or ("an integer" if integer else "a number")
        bounds = _range_text(gt, ge, le)
        allowed = f"{noun} {bounds}" if bounds else noun
        text = f"{label} must be {allowed}" if label else f"Invalid `{field}`: expected {allowed}"
        raise ConfigError(f"{text}, got {value!r}.", field=field)
    return value


def seconds(value: Any, field: str, *, maximum: float = MAX_SECONDS, label: str | None = None) -> float:
    """A timeout: a finite number of seconds > 0 and <= ``maximum``."""
    return float(check_number(value, field, gt=0, le=maximum, what="a number of seconds", label=label))


def count(value: Any, field: str, *, minimum: int = 1, maximum: int = MAX_COUNT, label: str | None = None) -> int:
    """A count: an integer in ``[minimum, maximum]``."""
    return int(check_number(value, field, ge=minimum, le=maximum, integer=True, label=label))


_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*$", re.IGNORECASE)


def size_text(text: Any) -> int | None:
    """``"2g"``, ``"512m"``, ``"1.5GiB"`` -> bytes (powers of 1024; may be 0); None when ``text`` is not such a
    size. The callers say what is allowed (ints, zero) and name their field."""
    match = _SIZE_RE.match(text) if isinstance(text, str) else None
    if not match:
        return None
    return int(float(match.group(1)) * 1024 ** " kmgt".index(match.group(2).lower() or " "))
