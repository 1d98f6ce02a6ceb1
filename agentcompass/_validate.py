"""The shared value kinds every setting and component param uses: numbers (a real, finite number, not a bool,
not NaN, not an infinity, inside its allowed range), durations in seconds, sizes in bytes and environment
variable names, each refused with a ``ConfigError`` naming the field and what is allowed.

The msgspec field types (``Seconds``, ``Count``, ``Attempts``, ``Size``) are the same rules for a component's
``Params`` struct, so a param and an engine setting of one kind accept the same values.

NaN compares false with everything, so ``value <= 0`` lets it through and it surfaces much later as
``cannot convert float NaN to integer``; an infinity passes every "> 0" check and then overflows a timer or
a loop. Every numeric setting goes through ``check_number`` (or its two shorthands) so none can slip by.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Annotated, Any

import msgspec

from ._errors import ConfigError

#: the longest wait any timeout may ask for (30 days): anything longer is a typo, not a plan.
MAX_SECONDS = 30 * 86400.0
#: the largest count of anything (tasks, retries, steps...) unless a setting has its own tighter cap.
MAX_COUNT = 1_000_000
#: attempts per task (``k``): each one is a full agent run, so thousands are never meant.
MAX_K = 1000

#: a duration: a finite number of seconds > 0 and at most ``MAX_SECONDS`` (msgspec refuses NaN against any bound).
Seconds = Annotated[float, msgspec.Meta(gt=0, le=MAX_SECONDS)]
#: a count of anything: an integer in ``[1, MAX_COUNT]``.
Count = Annotated[int, msgspec.Meta(ge=1, le=MAX_COUNT)]
#: attempts per task (``k``) or copies of a task set: an integer in ``[1, MAX_K]``.
Attempts = Annotated[int, msgspec.Meta(ge=1, le=MAX_K)]


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


_SIZE_PATTERN = r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*$"
_SIZE_RE = re.compile(_SIZE_PATTERN, re.IGNORECASE)
#: a size: an int of bytes > 0 or a text like ``"512m"``, ``"2g"``, ``"1.5GiB"`` (read with ``size_bytes``).
Size = Annotated[int, msgspec.Meta(gt=0, description="an int of bytes > 0")] | Annotated[
    str, msgspec.Meta(pattern=f"(?i){_SIZE_PATTERN}", description="a size like '512m' or '2g' (units k, m, g, t)")]


def size_text(text: Any) -> int | None:
    """``"2g"``, ``"512m"``, ``"1.5GiB"`` -> bytes (powers of 1024; may be 0); None when ``text`` is not such a
    size. The callers say what is allowed (ints, zero) and name their field."""
    match = _SIZE_RE.match(text) if isinstance(text, str) else None
    if not match:
        return None
    return int(float(match.group(1)) * 1024 ** " kmgt".index(match.group(2).lower() or " "))


def size_bytes(value: int | str, field: str, *, label: str | None = None) -> int:
    """A ``Size`` (an int of bytes or a text like ``"2g"``) -> bytes > 0, else ``ConfigError`` naming ``field``."""
    size = value if isinstance(value, int) and not isinstance(value, bool) else size_text(value)
    if not size or size <= 0:
        text = f"{label} must be" if label else f"Invalid `{field}`: expected"
        raise ConfigError(f"{text} a size like '512m' or '2g' (units k, m, g, t) or a positive int of bytes, "
                          f"got {value!r}.", field=field)
    return size


_ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def env_vars(env: Any, field: str) -> dict[str, str]:
    """Environment variables for a command, as every provider accepts them: a mapping of names (letters, digits
    and ``_``, not starting with a digit) to str values without NUL; ``ConfigError`` naming ``field`` otherwise.

    Commands run through a shell, which silently drops a variable whose name is no identifier (``MY-VAR``):
    such a name is refused here rather than lost there."""
    if not isinstance(env, Mapping):
        raise ConfigError(f"{field}: expected a mapping of str to str, got {type(env).__name__}", field=field)
    out: dict[str, str] = {}
    for k, v in env.items():
        if not isinstance(k, str) or not _ENV_NAME_RE.fullmatch(k):
            raise ConfigError(f"{field}: invalid variable name {k!r} (letters, digits and '_', not starting with "
                              "a digit)", field=field)
        if not isinstance(v, str) or "\0" in v:
            raise ConfigError(f"{field}[{k!r}]: expected a str without NUL, got {v!r}", field=field)
        out[k] = v
    return out
