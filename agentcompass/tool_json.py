"""JSON that arrives in a tool call from outside (a model's tool-call arguments, a search API's answer), read with
its size and nesting bounded.

``json.loads`` of ``"[" * 5000`` raises ``RecursionError``, which callers catching ``ValueError`` do not expect,
and a document just under the interpreter's limit makes later walks (``repr``, ``==``, ``copy.deepcopy``, msgspec
encoding) fail the same way further on. So a document longer than ``max_chars`` is refused unread, one too deep for
the parser is refused, and a parsed one nested deeper than ``max_depth`` (counted without recursion) is refused too:
always as ``JSONBoundError``, a ``ValueError`` whose message names what was read and the bound it broke.
"""

from __future__ import annotations

import json
from typing import Any

#: nesting levels (arrays and objects) a tool's JSON may have; BFCL's, tau2's and AgentDojo's tools need a few.
MAX_DEPTH = 64


class JSONBoundError(ValueError):
    """JSON refused: not valid, longer than allowed or nested too deeply (the message says which)."""


def nesting_depth(value: Any, limit: int) -> int:
    """The nesting depth of a parsed JSON value (a scalar is 0, ``[]`` is 1), counted without recursion and
    stopping as soon as it passes ``limit`` (then ``limit + 1`` is returned)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        depth += 1
        if depth > limit:
            return limit + 1
        deepest = max(deepest, depth)
        stack.extend((child, depth) for child in children)
    return deepest


def loads_bounded(text: str | bytes, *, what: str, max_chars: int, max_depth: int = MAX_DEPTH) -> Any:
    """``text`` parsed as JSON (``json.loads`` semantics); ``JSONBoundError`` naming ``what`` when it is longer
    than ``max_chars``, not valid JSON, or nested deeper than ``max_depth``."""
    if len(text) > max_chars:
        raise JSONBoundError(f"{what} is {len(text)} characters long; at most {max_chars} are accepted")
    try:
        value = json.loads(text)
    except RecursionError:
        raise JSONBoundError(f"{what} is nested deeper than {max_depth} levels") from None
    except ValueError as exc:  # JSONDecodeError, and bytes that are not UTF-8
        raise JSONBoundError(f"{what} is not valid JSON: {exc}") from None
    if nesting_depth(value, max_depth) > max_depth:
        raise JSONBoundError(f"{what} is nested deeper than {max_depth} levels")
    return value


__all__ = ["MAX_DEPTH", "JSONBoundError", "loads_bounded", "nesting_depth"]
