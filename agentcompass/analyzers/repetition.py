"""Loops: ``repeated_tool_calls`` (the same action again and again) and ``repetitive_output`` (a message
that repeats one block of text many times in a row, as a model stuck in a generation loop does)."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, ClassVar

import msgspec

from .._validate import Count
from ..interfaces import ComponentContext, TaskSpec
from ..records import AttemptRecord
from ._common import MAX_EVIDENCE, Repeats, actions, assistant_texts, cap
from .base import Analyzer

_TOKEN = re.compile(r"\w+|[^\w\s]")
_WORD = re.compile(r"\w")
#: the tail of a message that is searched (loops run until the token limit, so they end a message).
MAX_TOKENS_SCANNED = 50_000


class RepeatedToolCallsParams(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """``repeated_tool_calls`` params (see ``RepeatedToolCalls``)."""

    consecutive: Repeats = 3
    total: Repeats = 6


class RepeatedToolCalls(Analyzer):
    """The same action (shell command, or tool name + arguments) at least ``consecutive`` times in a row
    (default 3) or ``total`` times in the attempt (default 6). Whitespace differences do not count as
    different; steps without an action are skipped when counting "in a row"."""

    name = "repeated_tool_calls"
    Params: ClassVar[type[RepeatedToolCallsParams]] = RepeatedToolCallsParams
    params: RepeatedToolCallsParams

    def __init__(self, params: RepeatedToolCallsParams | dict[str, Any], ctx: ComponentContext) -> None:
        super().__init__(params, ctx)
        p = self.params
        self.consecutive = p.consecutive
        self.total = p.total

    def analyze(self, task: TaskSpec, attempt: AttemptRecord) -> dict[str, Any] | None:
        acts = actions(attempt)
        if not acts:
            return None
        totals = Counter(a.key for a in acts)
        best_run: dict[str, int] = {}
        first_step: dict[str, int] = {}
        run, prev = 0, None
        for a in acts:
            run = run + 1 if a.key == prev else 1
            prev = a.key
            best_run[a.key] = max(best_run.get(a.key, 0), run)
            first_step.setdefault(a.key, a.step)
        texts: dict[str, str] = {}
        for a in acts:
            texts.setdefault(a.key, a.text)
        keys = [key for key, n in totals.most_common() if best_run[key] >= self.consecutive or n >= self.total]
        if not keys:
            return None
        repeated = [{"action": cap(texts[key]), "max_consecutive": best_run[key], "total": totals[key],
                     "first_step": first_step[key]} for key in keys[:MAX_EVIDENCE]]
        return {"repeated": repeated, "max_consecutive": max(best_run[key] for key in keys),
                "max_total": max(totals[key] for key in keys)}


def longest_tandem_repeat(text: str, max_period: int, min_repeats: int) -> tuple[str, int, int] | None:
    """(block, repeats, characters covered) of the longest run of one block of 1..max_period tokens
    repeated back to back at least ``min_repeats`` times, or None. Blocks without a word character
    (``=====``, table rules) are ignored."""
    matches = list(_TOKEN.finditer(text))[-MAX_TOKENS_SCANNED:]
    toks = [m.group() for m in matches]
    n = len(toks)
    best: tuple[str, int, int] | None = None
    for period in range(1, min(max_period, n // min_repeats) + 1):
        eq = bytes(a == b for a, b in zip(toks, toks[period:], strict=False))
        need = period * (min_repeats - 1)
        for run in re.finditer(rb"\x01{%d,}" % need, eq):
            start = run.start()
            block_toks = toks[start:start + period]
            if not any(_WORD.search(t) for t in block_toks):
                continue
            repeats = (run.end() - start) // period + 1
            end_tok = start + repeats * period - 1
            chars = matches[end_tok].end() - matches[start].start()
            if best is None or chars > best[2]:
                block = text[matches[start].start():matches[start + period - 1].end()]
                best = (block, repeats, chars)
    return best


class RepetitiveOutputParams(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """``repetitive_output`` params (see ``RepetitiveOutput``)."""

    max_period: Count = 64
    min_repeats: Repeats = 8
    min_chars: Count = 160


class RepetitiveOutput(Analyzer):
    """An assistant message (content, reasoning or final answer) in which one block of up to
    ``max_period`` tokens (default 64; a token is a word or a punctuation mark) repeats back to back at
    least ``min_repeats`` times (default 8) over at least ``min_chars`` characters (default 160)."""

    name = "repetitive_output"
    Params: ClassVar[type[RepetitiveOutputParams]] = RepetitiveOutputParams
    params: RepetitiveOutputParams

    def __init__(self, params: RepetitiveOutputParams | dict[str, Any], ctx: ComponentContext) -> None:
        super().__init__(params, ctx)
        p = self.params
        self.max_period = p.max_period
        self.min_repeats = p.min_repeats
        self.min_chars = p.min_chars

    def analyze(self, task: TaskSpec, attempt: AttemptRecord) -> dict[str, Any] | None:
        found: list[dict[str, Any]] = []
        for step, field, text in assistant_texts(attempt):
            if len(text) < self.min_chars:
                continue
            hit = longest_tandem_repeat(text, self.max_period, self.min_repeats)
            if hit is not None and hit[2] >= self.min_chars:
                found.append({"step": step, "field": field, "block": cap(hit[0], 120), "repeats": hit[1],
                              "chars": hit[2]})
                if len(found) >= MAX_EVIDENCE:
                    break
        if not found:
            return None
        return {"messages": found, "max_repeats": max(f["repeats"] for f in found)}
