"""Built-in harnesses (agent loops): ``none``, ``openai_chat`` and ``shell_agent``.

Each harness module is imported lazily through the registry; a component declares its params as a msgspec
``Params`` struct (see ``agentcompass.params``). This package holds the text helpers the harnesses and the
benchmarks share and the small parameter checks the analyzers use.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .._errors import ConfigError
from .._validate import MAX_COUNT, count


def _field(where: str, key: str) -> str:
    # ``where`` is "<kind> <name>", e.g. "harness shell_agent"; the field is "<kind>.params.<key>".
    return f"{where.split()[0]}.params.{key}"


def check_param_keys(params: Mapping[str, Any], allowed: Iterable[str], where: str) -> None:
    """Raise ConfigError naming the first unknown key in ``params`` and the allowed keys.

    ``where`` names the component as "<kind> <name>", e.g. ``"harness shell_agent"``.
    """
    allowed_set = set(allowed)
    for key in params:
        if key not in allowed_set:
            names = ", ".join(sorted(allowed_set)) or "(none)"
            raise ConfigError(f"Unknown parameter {key!r} for {where}. Allowed parameters: {names}.",
                              field=_field(where, key))


def int_param(params: Mapping[str, Any], key: str, default: int, where: str, *, minimum: int = 1,
              maximum: int = MAX_COUNT) -> int:
    """An integer parameter in ``[minimum, maximum]`` (bools are rejected)."""
    return count(params.get(key, default), _field(where, key), minimum=minimum, maximum=maximum,
                 label=f"Parameter {key!r} of {where}")


def truncate_middle(text: str, limit: int) -> str:
    """Keep the head and the tail of ``text`` so the result has at most about ``limit`` characters."""
    if len(text) <= limit:
        return text
    half = max(limit // 2, 1)
    omitted = len(text) - 2 * half
    return f"{text[:half]}\n... [{omitted} characters omitted] ...\n{text[-half:]}"


def str_param(params: Mapping[str, Any], key: str, where: str) -> str | None:
    """An optional string parameter."""
    value = params.get(key)
    if value is not None and not isinstance(value, str):
        raise ConfigError(f"Parameter {key!r} of {where} must be a string, got {type(value).__name__}.",
                          field=_field(where, key))
    return value


def str_list_param(params: Mapping[str, Any], key: str, where: str) -> list[str] | None:
    """An optional list of strings (a single string is taken as a one-item list)."""
    value = params.get(key)
    if value is None:
        return None
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"Parameter {key!r} of {where} must be a list of strings, got {value!r}.",
                          field=_field(where, key))
    return list(value)
