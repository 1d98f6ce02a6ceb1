"""Checks of what the model wrote: ``empty_output``, ``truncated`` and ``mixed_language``."""

from __future__ import annotations

import re
from typing import Any, ClassVar, Literal

import msgspec

from .._validate import Count
from ..interfaces import ComponentContext, TaskSpec
from ..records import AttemptRecord
from ._common import MAX_EVIDENCE, assistant_texts, attempt_patch, cap, task_texts
from .base import Analyzer


class EmptyOutputParams(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """``empty_output`` takes no params."""


class EmptyOutput(Analyzer):
    """The attempt ended with nothing: the last model message has no content and no tool call (it may
    have reasoning only), or there are no steps and no final answer and no patch. An empty
    ``<submit></submit>`` after real work is not empty: its message has content."""

    name = "empty_output"
    Params: ClassVar[type[EmptyOutputParams]] = EmptyOutputParams

    def __init__(self, params: EmptyOutputParams | dict[str, Any], ctx: ComponentContext) -> None:
        super().__init__(params, ctx)

    def analyze(self, task: TaskSpec, attempt: AttemptRecord) -> dict[str, Any] | None:
        if attempt.status == "skipped":
            return None
        steps = attempt.trajectory.steps if attempt.trajectory is not None else []
        answer = (attempt.final_answer or "").strip()
        if not steps:
            if answer or attempt_patch(attempt) or attempt.status != "completed":
                return None  # an attempt that failed before the model spoke is an error, not an empty output
            return {"reason": "no steps, no final answer and no patch"}
        last = steps[-1]
        if (last.content or "").strip() or last.tool_calls or last.action:
            return None
        empty_steps = sum(1 for s in steps if not (s.content or "").strip() and not s.tool_calls and not s.action)
        return {"reason": "the last model message is empty", "step": last.index,
                "reasoning_only": bool((last.reasoning or "").strip()), "final_answer_empty": not answer,
                "empty_steps": empty_steps, "finish_reason": last.finish_reason}


class TruncationParams(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """``truncated`` params (see ``Truncation``); a single reason is taken as a one-item list."""

    finish_reasons: tuple[str, ...] | str = ("length", "max_tokens", "max_output_tokens")


class Truncation(Analyzer):
    """A model reply stopped at the token limit: ``finish_reason`` in ``finish_reasons`` (default
    ``length``, ``max_tokens``, ``max_output_tokens``) on any step; ``last_step`` says whether it was the
    final one (then the answer itself is cut)."""

    name = "truncated"
    Params: ClassVar[type[TruncationParams]] = TruncationParams
    params: TruncationParams

    def __init__(self, params: TruncationParams | dict[str, Any], ctx: ComponentContext) -> None:
        super().__init__(params, ctx)
        reasons = self.params.finish_reasons
        self.reasons = {reasons} if isinstance(reasons, str) else set(reasons or TruncationParams().finish_reasons)

    def analyze(self, task: TaskSpec, attempt: AttemptRecord) -> dict[str, Any] | None:
        steps = attempt.trajectory.steps if attempt.trajectory is not None else []
        hits = [s.index for s in steps if s.finish_reason in self.reasons]
        if not hits:
            return None
        return {"steps": hits[:MAX_EVIDENCE], "count": len(hits), "last_step": hits[-1] == steps[-1].index}


#: Unicode blocks of the scripts told apart (letters only; digits and punctuation are neutral).
SCRIPTS: dict[str, str] = {
    "latin": "A-Za-z\u00c0-\u024f",
    "cjk": "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff",
    "cyrillic": "\u0400-\u04ff",
    "greek": "\u0370-\u03ff",
    "arabic": "\u0600-\u06ff",
    "hebrew": "\u0590-\u05ff",
    "devanagari": "\u0900-\u097f",
    "thai": "\u0e00-\u0e7f",
}
#: a script name, as ``allowed_scripts`` takes it (the keys of ``SCRIPTS``, in their order).
Script = Literal["latin", "cjk", "cyrillic", "greek", "arabic", "hebrew", "devanagari", "thai"]
_CJK_WEIGHT = 3
_SCRIPT_RE = {name: re.compile(f"[{chars}]") for name, chars in SCRIPTS.items()}
_CODE = re.compile(r"```.*?(```|$)|`[^`\n]*`|https?://\S+|<[^>\n]{0,80}>", re.DOTALL)


def script_counts(text: str) -> dict[str, int]:
    """Letters of each script in ``text``."""
    return {name: n for name, rx in _SCRIPT_RE.items() if (n := len(rx.findall(text)))}


def script_runs(text: str, script: str, joiner: str) -> list[str]:
    """Runs of ``script`` letters, allowed to continue across ``joiner`` characters (spaces...)."""
    chars = SCRIPTS[script]
    rx = re.compile(f"[{chars}]+(?:[{joiner}]+[{chars}]+)*")
    return [m.group() for m in rx.finditer(text)]


class MixedLanguageParams(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """``mixed_language`` params (see ``MixedLanguage``); a single script is taken as a one-item list."""

    min_cjk_run: Count = 3
    min_alpha_run: Count = 6
    min_latin_words: Count = 8
    min_letters: Count = 20
    allowed_scripts: tuple[Script, ...] | Script = ()
    reasoning: bool = False


class MixedLanguage(Analyzer):
    """An answer in one script with runs of another: a mostly-English message with a CJK run of
    ``min_cjk_run`` characters (default 3) or a run of ``min_alpha_run`` letters (default 6) of Cyrillic,
    Greek, Arabic, ...; or a mostly non-Latin message with ``min_latin_words`` (default 8) consecutive
    Latin words (technical terms alone stay below that). Code blocks, inline code, URLs and tags are
    ignored, as is every script the task's own input uses (a translation task may mix) and those in
    ``allowed_scripts``. Checks the content of each step and the final answer (``reasoning: true`` adds
    the reasoning)."""

    name = "mixed_language"
    Params: ClassVar[type[MixedLanguageParams]] = MixedLanguageParams
    params: MixedLanguageParams

    def __init__(self, params: MixedLanguageParams | dict[str, Any], ctx: ComponentContext) -> None:
        super().__init__(params, ctx)
        p = self.params
        self.min_cjk = p.min_cjk_run
        self.min_alpha = p.min_alpha_run
        self.min_latin_words = p.min_latin_words
        self.min_letters = p.min_letters
        allowed = p.allowed_scripts
        self.allowed: set[str] = {allowed} if isinstance(allowed, str) else set(allowed)
        self.reasoning = p.reasoning

    def _runs(self, text: str, script: str) -> list[str]:
        if script == "cjk":
            runs = script_runs(text, "cjk", "\u3000-\u303f\uff00-\uffef")
            return [r for r in runs if len(_SCRIPT_RE["cjk"].findall(r)) >= self.min_cjk]
        if script == "latin":
            runs = script_runs(text, "latin", r"\s\d,.;:'()\-")
            return [r for r in runs if len(re.findall(r"[A-Za-z\u00c0-\u024f]+", r)) >= self.min_latin_words]
        runs = script_runs(text, script, r"\s")
        return [r for r in runs if len(_SCRIPT_RE[script].findall(r)) >= self.min_alpha]

    def analyze(self, task: TaskSpec, attempt: AttemptRecord) -> dict[str, Any] | None:
        allowed = self.allowed | {s for s, n in script_counts(task_texts(task.input)).items() if n >= 3}
        found: list[dict[str, Any]] = []
        for step, field, raw in assistant_texts(attempt, reasoning=self.reasoning):
            text = _CODE.sub(" ", raw)
            counts = script_counts(text)
            if sum(counts.values()) < self.min_letters or len(counts) < 2:
                continue
            # a CJK character carries about as much as three Latin letters
            dominant = max(counts, key=lambda s: counts[s] * (_CJK_WEIGHT if s == "cjk" else 1))
            for script in counts:
                if script == dominant or script in allowed:
                    continue
                runs = self._runs(text, script)
                if runs:
                    found.append({"step": step, "field": field, "dominant": dominant, "other": script,
                                  "sample": cap(max(runs, key=len), 80), "runs": len(runs)})
            if len(found) >= MAX_EVIDENCE:
                break
        if not found:
            return None
        return {"messages": found[:MAX_EVIDENCE], "scripts": sorted({f["other"] for f in found})}
