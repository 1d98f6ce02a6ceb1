"""The size bound on tau2's ``calculate`` tool: arithmetic bombs are refused before tau2 evaluates them.

tau2's ``calculate`` checks the characters of the expression (digits, ``+ - * / ( ) .`` and spaces) and hands it
to ``eval``: ``9**9**9**9`` never returns and ``9**(9**7*3)`` computes a 14-million-digit number first. Here the
expression is walked once, in Python's evaluation order, with every integer kept to ``MAX_INT_BITS`` bits: a power
whose result would pass the bound is refused before it is computed, a product or sum is checked once made (its
operands are within the bound, so making it is cheap). An expression that passes evaluates within the same bound
in tau2's own code, whose answer (its result or its error text) the agent then gets unchanged. Refused as well:
an expression longer than ``MAX_EXPRESSION_CHARS`` and one that is not plain arithmetic on numbers (the allowed
characters also spell calls like ``(1)(2)``); tau2 would answer those with an error too.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from typing import Any

#: tau2's own character check: an expression with any other character is left to tau2, which refuses it.
ALLOWED_CHARS = frozenset("0123456789+-*/(). ")
#: the longest expression evaluated (a price calculation is a few dozen characters).
MAX_EXPRESSION_CHARS = 2_000
#: the largest integer (in bits) an expression may make; tau2 answers a float, which ends near 1,024 bits anyway.
MAX_INT_BITS = 1 << 16

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Pow: operator.pow}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}


class _Refused(Exception):
    pass


class _Raises(Exception):
    """Python raises here (division by zero, a float overflow): tau2's ``eval`` stops at the same point."""


def _too_large() -> _Refused:
    return _Refused(f"the expression's numbers grow too large to compute (integers of at most {MAX_INT_BITS} bits "
                    "are evaluated)")


def _apply(op: ast.operator, left: Any, right: Any) -> Any:
    if isinstance(op, ast.Pow) and isinstance(left, int) and isinstance(right, int) and right > 0 \
            and abs(left) > 1 and right * (abs(left).bit_length() - 1) > MAX_INT_BITS:
        raise _too_large()
    try:
        value = _BINARY[type(op)](left, right)
    except (ArithmeticError, ValueError):
        raise _Raises from None
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise _too_large()
    return value


def _evaluate(tree: ast.Expression) -> None:
    """Evaluate ``tree`` without recursion in Python's order, refusing what passes the bounds."""
    values: list[Any] = []
    # (node, its operands evaluated?) in post order
    stack: list[tuple[ast.AST, bool]] = [(tree.body, False)]
    while stack:
        node, ready = stack.pop()
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            values.append(node.value)
        elif isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            if not ready:
                stack += [(node, True), (node.right, False), (node.left, False)]
            else:
                right = values.pop()
                values.append(_apply(node.op, values.pop(), right))
        elif isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            if not ready:
                stack += [(node, True), (node.operand, False)]
            else:
                values.append(_UNARY[type(node.op)](values.pop()))
        else:
            raise _Refused("only numbers, + - * / // ** and parentheses are evaluated")


def calculate_refusal(expression: object) -> str | None:
    """Why ``calculate(expression)`` is refused, or None when tau2 may evaluate it (its work bounded, or it fails
    fast in tau2's own checks: not a string, a character tau2 refuses, not Python syntax)."""
    if not isinstance(expression, str) or not set(expression) <= ALLOWED_CHARS:
        return None
    if len(expression) > MAX_EXPRESSION_CHARS:
        return f"the expression is {len(expression)} characters long; at most {MAX_EXPRESSION_CHARS} are evaluated"
    try:
        tree = ast.parse(expression.lstrip(" "), mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None  # tau2's eval fails on the same text when compiling it, before computing anything
    try:
        _evaluate(tree)
    except _Refused as exc:
        return str(exc)
    except _Raises:
        return None
    return None


__all__ = ["ALLOWED_CHARS", "MAX_EXPRESSION_CHARS", "MAX_INT_BITS", "calculate_refusal"]
