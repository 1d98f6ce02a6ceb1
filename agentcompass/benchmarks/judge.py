"""An LLM judge for question-answering benchmarks: the grading prompt, the verdict parsing, the call.

A ``Grader`` is one benchmark's grading contract: a prompt template (``{question}``, ``{reference}`` and
``{response}`` are filled in) and a parser of the judge's reply into a ``Verdict``:

- ``LetterGrader`` (SimpleQA, SealQA): the judge answers ``A`` (correct), ``B`` (incorrect) or ``C`` (not
  attempted);
- ``YesNoGrader`` (BrowseComp, HLE): the judge extracts the response's final answer and ends with
  ``correct: yes`` or ``correct: no``; an extracted answer of ``None`` with ``no`` is ``not_attempted``;
- ``VerdictGrader`` (FrontierScience olympiad): ``VERDICT: CORRECT`` / ``VERDICT: INCORRECT``;
- ``RubricGrader`` (FrontierScience research): ``VERDICT: <points>`` out of the rubric's total; the score is the
  fraction of points and the answer counts as correct at ``threshold`` points (7 of 10, as the paper does).

The templates are written for AgentCompass after the benchmarks' published graders (the same reply format); a
benchmark's ``judge_prompt`` param replaces one with the official text.

``Judge`` makes the call: the ``judge_model`` endpoint is a model of its own (``ModelEndpoint``), retried and
rate-limited like the model under test (one adaptive limiter per benchmark), each call bounded by ``timeout_s``.
A reply that does not parse, a call that fails after its retries, or no reply in time raise ``JudgeError`` — the
attempt ends as ``eval_error`` (never as a wrong answer) with the call and the raw verdict in its ``extra``.
"""

from __future__ import annotations

import abc
import asyncio
import math
import re
import time
from typing import Any, ClassVar

import msgspec

from .._errors import ConfigError, EvalError, ModelError
from ..models.adaptive import AdaptiveLimiter
from ..models.endpoint import ModelEndpoint, open_endpoint
from ..models.retry import RetryingModelClient
from . import truncate_middle

GRADES: tuple[str, ...] = ("correct", "incorrect", "not_attempted")
PLACEHOLDERS: tuple[str, ...] = ("{question}", "{reference}", "{response}")
#: characters of the judge's prompt and reply kept in the attempt's record
_PROMPT_CHARS = 20_000
_RAW_CHARS = 20_000


class Verdict(msgspec.Struct, frozen=True, omit_defaults=True):
    """One graded answer: ``grade`` (one of ``GRADES``), ``score`` in [0, 1], rubric ``points`` when graded so."""

    grade: str
    score: float
    points: float | None = None


class JudgeError(EvalError):
    """The judge gave no usable verdict (garbage, an error after its retries, or no reply in time). ``extra``
    (the call and its raw reply) is kept in the attempt's record."""

    def __init__(self, message: str, extra: dict[str, Any]) -> None:
        super().__init__(message, extra=extra)


class Grader(abc.ABC):
    """A benchmark's judge prompt and the parser of the judge's reply."""

    #: short name, recorded with each verdict
    name: ClassVar[str] = ""
    #: what a usable reply looks like (for the error when one does not)
    expects: ClassVar[str] = ""
    #: the default prompt, with ``{question}``, ``{reference}`` and ``{response}``
    template: ClassVar[str] = ""

    def __init__(self, template: str | None = None) -> None:
        self.prompt_template = template or self.template

    def prompt(self, question: str, reference: str, response: str) -> str:
        """The judge's prompt (plain replacement: braces in the texts stay as they are)."""
        out = self.prompt_template
        # the response last: a response quoting a placeholder must not pull the reference into the prompt
        for key, value in (("{question}", question), ("{reference}", reference), ("{response}", response)):
            out = out.replace(key, value)
        return out

    @abc.abstractmethod
    def parse(self, raw: str) -> Verdict | None:
        """The verdict in the judge's reply, None when it has none (the attempt is then an ``eval_error``)."""


def check_template(template: str, field: str) -> str:
    """``template`` when it has every placeholder, else a ConfigError naming ``field``."""
    missing = [p for p in PLACEHOLDERS if p not in template]
    if missing:
        raise ConfigError(f"{field} must contain {', '.join(PLACEHOLDERS)} (missing {', '.join(missing)})",
                          field=field)
    return template


_LETTER_TEMPLATE = """You grade answers to factual questions. Compare the predicted answer with the gold target and \
decide whether it is CORRECT, INCORRECT or NOT_ATTEMPTED.

- CORRECT: the predicted answer contains the gold target's meaning (capitalisation, punctuation, word order and \
extra context do not matter; a number must match to the gold target's precision) and contradicts nothing in it.
- INCORRECT: the predicted answer states something that contradicts the gold target, or hedges between \
several answers of which one is wrong.
- NOT_ATTEMPTED: the predicted answer gives no answer to the question (e.g. "I don't know", a refusal, a \
request for more information) and contradicts nothing in the gold target.

Question: {question}
Gold target: {reference}
Predicted answer: {response}

Grade the predicted answer as one of:
A: CORRECT
B: INCORRECT
C: NOT_ATTEMPTED

Reply with the letter "A", "B" or "C" only, nothing else."""

_LETTER = re.compile(r"^\W*(?:(?i:grade|answer)\W*)?([ABC])\b")  # the letter upper case: "a lot..." is no grade
_LETTER_WORD = re.compile(r"^\W*(NOT[_ ]ATTEMPTED|INCORRECT|CORRECT)\b", re.IGNORECASE)


class LetterGrader(Grader):
    """SimpleQA's contract: A (correct), B (incorrect), C (not attempted)."""

    name = "letter"
    expects = 'the letter "A", "B" or "C"'
    template = _LETTER_TEMPLATE

    def parse(self, raw: str) -> Verdict | None:
        text = raw.strip()
        m = _LETTER.match(text)
        if m:
            grade = {"A": "correct", "B": "incorrect", "C": "not_attempted"}[m[1]]
        elif (w := _LETTER_WORD.match(text)) is not None:
            grade = w[1].lower().replace(" ", "_")
        else:
            return None
        return Verdict(grade=grade, score=1.0 if grade == "correct" else 0.0)


_YES_NO_TEMPLATE = """Judge whether the response below answers the question correctly, using the precise and \
unambiguous correct answer given.

[question]: {question}

[response]: {response}

[correct_answer]: {reference}

Reply in exactly this format:

extracted_final_answer: the final exact answer taken from the response, or None if it gives none.

reasoning: why the extracted final answer does or does not match the correct answer, looking only at \
meaningful differences (no new solution, no argument about the question). A numerical answer within a small \
margin of the correct one matches.

correct: yes if the extracted final answer matches the correct answer, no otherwise.

confidence: the confidence score the response states (0% to 100%), or 100 if it states none."""

_CORRECT_YES_NO = re.compile(r"^\W*correct\W*:\W*(yes|no)\b", re.IGNORECASE | re.MULTILINE)
_EXTRACTED = re.compile(r"^\W*extracted_final_answer\W*:\s*(.*)$", re.IGNORECASE | re.MULTILINE)


class YesNoGrader(Grader):
    """BrowseComp's and HLE's contract: ``extracted_final_answer: ...`` and ``correct: yes|no``."""

    name = "yes_no"
    expects = 'a line "correct: yes" or "correct: no"'
    template = _YES_NO_TEMPLATE

    def parse(self, raw: str) -> Verdict | None:
        found = _CORRECT_YES_NO.findall(raw)
        if not found:
            return None
        if found[-1].lower() == "yes":
            return Verdict(grade="correct", score=1.0)
        extracted = _EXTRACTED.findall(raw)
        none = bool(extracted) and extracted[-1].strip().strip("*`'\". ").lower() in {"none", ""}
        return Verdict(grade="not_attempted" if none else "incorrect", score=0.0)


_VERDICT_TEMPLATE = """Grade an attempted answer to a science olympiad problem against its reference answer. Be \
strict but fair. The reference answer is a number or expression (LaTeX), a chemical formula, a compound name, or \
the name of an entity or method.

The attempted answer is correct when it matches the reference answer or is equivalent to it (an equivalent \
algebraic expression, a number equal to the reference after rounding to one decimal place, another name of \
the same compound, the same quantity in other units). Otherwise it is incorrect.

***

The problem: {question}

***

The reference answer: {reference}

***

The attempted answer: {response}

***

Think step by step about whether the attempted answer matches the reference answer. Then write \
"VERDICT: CORRECT" or "VERDICT: INCORRECT" as the last line of your reply, with nothing else on it."""

_VERDICT = re.compile(r"VERDICT\W*:\W*(INCORRECT|CORRECT)\b", re.IGNORECASE)


class VerdictGrader(Grader):
    """FrontierScience olympiad's contract: the last ``VERDICT: CORRECT|INCORRECT``."""

    name = "verdict"
    expects = 'a line "VERDICT: CORRECT" or "VERDICT: INCORRECT"'
    template = _VERDICT_TEMPLATE

    def parse(self, raw: str) -> Verdict | None:
        found = _VERDICT.findall(raw)
        if not found:
            return None
        correct = found[-1].upper() == "CORRECT"
        return Verdict(grade="correct" if correct else "incorrect", score=1.0 if correct else 0.0)


_RUBRIC_TEMPLATE = """You are grading a science exam answer against a rubric worth {max_points} points in total. \
Grade strictly but fairly, and only against the rubric: treat the rubric as the gold standard even where you \
would disagree with it. Points may be fractional where the rubric allows it.

***

The problem: {question}

***

The rubric: {reference}

***

The attempted answer: {response}

***

Go through the rubric item by item and explain how many points the attempted answer earns on each. Then add \
them up and write "VERDICT: <total points>" as the last line of your reply, with nothing else on it (for \
example "VERDICT: 2.5" or "VERDICT: 8")."""

_POINTS = re.compile(r"VERDICT\W*:[\s*_`]*(-?\d+(?:\.\d+)?)")


class RubricGrader(Grader):
    """FrontierScience research's contract: ``VERDICT: <points>`` of ``max_points``; correct at ``threshold``."""

    name = "rubric"
    expects = 'a line "VERDICT: <points>" with points between 0 and the rubric total'
    template = _RUBRIC_TEMPLATE

    def __init__(self, template: str | None = None, *, max_points: float = 10.0, threshold: float = 7.0) -> None:
        super().__init__(template)
        self.max_points = max_points
        self.threshold = threshold
        self.prompt_template = self.prompt_template.replace("{max_points}", f"{max_points:g}")

    def parse(self, raw: str) -> Verdict | None:
        found = _POINTS.findall(raw)
        if not found:
            return None
        points = float(found[-1])
        if not math.isfinite(points) or points < 0 or points > self.max_points:
            return None  # out of the rubric's range: not a grade we can trust
        grade = "correct" if points >= self.threshold else "incorrect"
        return Verdict(grade=grade, score=points / self.max_points, points=points)


class Judge:
    """Calls ``endpoint`` with a grader's prompt and parses the verdict (see the module doc)."""

    def __init__(self, endpoint: ModelEndpoint, timeout_s: float) -> None:
        self.endpoint = endpoint
        self.timeout_s = timeout_s
        self._limiter: AdaptiveLimiter | None = None

    def _client(self) -> Any:
        client = open_endpoint(self.endpoint)
        if isinstance(client, RetryingModelClient) and client.limiter is not None:
            # one limit for all of this benchmark's judge calls (each call has its own short-lived client)
            if self._limiter is None:
                self._limiter = client.limiter
            client.limiter = self._limiter
        return client

    async def grade(self, grader: Grader, question: str, reference: str,
                    response: str) -> tuple[Verdict, dict[str, Any]]:
        """(the verdict, the call's record for ``extra["scoring"]``); JudgeError when there is no usable verdict."""
        ep = self.endpoint
        prompt = grader.prompt(question, reference, response)
        call: dict[str, Any] = {"method": "judge", "grader": grader.name, "model": ep.id,
                                "api_protocol": ep.api_protocol, "prompt": truncate_middle(prompt, _PROMPT_CHARS)}
        if ep.base_url:
            call["base_url"] = ep.base_url
        client = self._client()
        started = time.monotonic()
        try:
            async with asyncio.timeout(self.timeout_s):
                resp = await client.complete([{"role": "user", "content": prompt}])
        except TimeoutError:
            call.update(latency_s=round(time.monotonic() - started, 6), raw_verdict=None,
                        error=f"no reply within judge_timeout={self.timeout_s:g}s")
            raise JudgeError(f"the judge {ep.id} gave no verdict within judge_timeout={self.timeout_s:g}s",
                             {"scoring": call}) from None
        except ModelError as exc:
            call.update(latency_s=round(time.monotonic() - started, 6), raw_verdict=None,
                        error=f"{exc.kind}: {exc}")
            raise JudgeError(f"the judge {ep.id} failed: {exc.kind}: {exc}", {"scoring": call}) from None
        finally:
            await client.aclose()
        raw = resp.content or ""
        call.update(latency_s=round(resp.latency_s or (time.monotonic() - started), 6),
                    usage=msgspec.to_builtins(resp.usage), raw_verdict=truncate_middle(raw, _RAW_CHARS))
        verdict = grader.parse(raw)
        if verdict is None:
            call["error"] = f"no verdict in the reply: expected {grader.expects}"
            raise JudgeError(f"the judge {ep.id} replied without a usable verdict (expected {grader.expects}): "
                             f"{truncate_middle(raw, 300)!r}", {"scoring": call})
        call["grade"] = verdict.grade
        return verdict, call


__all__ = ["GRADES", "Grader", "Judge", "JudgeError", "LetterGrader", "RubricGrader", "Verdict", "VerdictGrader",
           "YesNoGrader", "check_template"]
