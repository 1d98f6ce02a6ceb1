"""Judge-graded question answering: the base class of benchmarks whose tasks are a question and a reference
answer (or rubric), graded by an LLM judge.

A subclass loads its items (``load_items``: ``QAItem``s), says how the agent sees a question (``render``), which
grader judges each item (``grader_for``: the benchmark's judge prompt and verdict parsing, ``judge.py``), and
optionally a deterministic ``match`` (a multiple-choice letter, an exact answer) used without a judge.

Grading (param ``grading``): ``judge`` asks ``judge_model`` (a ``ModelEndpoint`` separate from the model under
test; its key is a secret); ``match`` uses the benchmark's deterministic match; ``auto`` (default) the judge when
``judge_model`` is given, else the match when the benchmark has one, else a ConfigError naming ``judge_model``. A
judge other than the built-in ``scripted`` model needs ``judge_model.base_url``: without it the benchmark is
refused when it is built (a ConfigError naming that field), before any agent runs.
Each verdict is in the attempt's ``extra``: ``grade`` (correct / incorrect / not_attempted), ``points`` (rubrics),
and ``scoring`` (the method; for the judge its prompt, model, queue and call time, usage and raw reply). A judge
reply without a verdict is read leniently, then re-asked (``judge_reasks``); a judge without a usable verdict ends
the attempt as ``eval_error`` with that record (``JudgeError``; ``error_kind`` ``judge_unparsable``,
``judge_timeout``, ``judge_auth`` or ``judge_unavailable``), never as a wrong answer. After the judge refused its
key, later attempts stop before the agent runs (``prepare`` refuses them), so a bad judge key does not spend the
agent's budget on every task.

Timing: ``judge_timeout`` bounds each judge call from when it is sent; the wait for a judge slot does not count
against it. Both fit in the attempt's ``verify_timeout``: a ``judge_timeout`` longer than it is clamped to it (less
a margin, so the record of a call that ran out is kept), and recorded in ``resolved_settings``.

Harnesses: ``openai_chat`` (one call: the question is the prompt) or ``tool_agent`` (the question through the
benchmark's tool session; with ``tools: ["web_search", "fetch_url"]`` and ``search`` settings the agent can search
the web, ``tools_search.py``). The answer graded is the agent's final answer.
"""

from __future__ import annotations

import abc
import hashlib
import re
import string
from typing import Annotated, Any, ClassVar, Literal

import msgspec

from ..._errors import ConfigError
from ..._validate import Attempts, Count, Seconds
from ...common.text import truncate_middle
from ...interfaces import ComponentContext, EvalContext, EvalResult, PreparedTask, RunContext, TaskSpec
from ...models.endpoint import ModelEndpoint
from ...models.factory import is_scripted
from ...specs import ModelSpec
from ...tools import ToolSession
from ...tools_search import SearchSettings, ToolName, WebToolSession
from ..base import Benchmark
from .judge import Grader, Judge, Verdict, check_template
from .metrics import QAAccumulator

Grading = Literal["auto", "judge", "match"]
#: kinds of item: a short free-form answer, a multiple-choice letter, an exact-match answer, a rubric
ItemKind = Literal["short", "multiple_choice", "exact", "rubric"]


class QAItem(msgspec.Struct, frozen=True, omit_defaults=True):
    """One question: ``question`` as the judge sees it (choices included), ``prompt`` what the agent sees when it
    differs (the question with answer-format instructions), ``answer`` the reference (a rubric for ``rubric``
    items), ``letter`` the right choice of a multiple-choice item."""

    id: str
    question: str
    answer: str
    prompt: str | None = None
    kind: ItemKind = "short"
    category: str | None = None
    letter: str | None = None
    metadata: dict[str, Any] = {}


class JudgedQAParams(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """Params of every judge-graded QA benchmark: ``sample_ids`` (ids or one id), ``limit``, ``k`` (attempts per
    task), ``judge_model`` (``{id, base_url, api_key or api_key_env, api_protocol, params, max_concurrency,
    timeout_s}``),
    ``judge_timeout`` (seconds one judge call may take from when it is sent, retries included; default 180),
    ``judge_reasks`` (re-asks of a judge whose reply has no verdict; default 1), ``record_judge_prompt`` (the
    filled judge prompt in the record; default true unless the benchmark's answers are encrypted at rest),
    ``judge_prompt`` (replaces the benchmark's judge prompt: ``{question}``, ``{reference}``, ``{response}``, or
    simple-evals' names for them; one text when the selected items share one grader, else ``{item kind: text}``),
    ``grading`` (``auto``,
    ``judge`` or ``match``), ``tools`` (``web_search``, ``fetch_url``: offered through ``tool_agent``),
    ``search`` (the search provider's settings), ``system_prompt`` (for ``tool_agent``)."""

    sample_ids: list[str] | str | None = None
    limit: Count | None = None
    k: Attempts | None = None
    judge_model: ModelEndpoint | None = None
    judge_timeout: Seconds = 180.0
    judge_reasks: Annotated[int, msgspec.Meta(ge=0, le=5)] = 1
    record_judge_prompt: bool | None = None
    judge_prompt: str | dict[ItemKind, str] | None = None
    grading: Grading = "auto"
    tools: list[ToolName] = []
    search: SearchSettings | None = None
    system_prompt: str | None = None


_MC_LINE = re.compile(r"(?i:answer)\s*[:\uff1a]\s*(.*)")
_MC_ALONE = re.compile(r"^\W*\(?([A-J])\)?\W*$")


def choice_letter(response: str, letters: str = "ABCDEFGHIJ") -> str | None:
    """The letter of a multiple-choice answer: on the last ``Answer:`` line, the first capital letter of
    ``letters`` standing alone ("Answer: I think it is B" is B for A-D; "answer: a" is no letter); else a reply
    that is only such a letter."""
    for rest in reversed(_MC_LINE.findall(response)):
        found = re.findall(rf"(?<![A-Za-z])([{letters}])(?![A-Za-z])", rest)
        if found:
            return str(found[0])
    m = _MC_ALONE.match(response.strip())
    return m[1] if m and m[1] in letters else None


def normalize(text: str) -> str:
    """Lower case, no punctuation, no articles, single spaces (for exact-match answers)."""
    text = text.lower().translate(str.maketrans("", "", string.punctuation))
    return " ".join(w for w in text.split() if w not in {"a", "an", "the"})


_FINAL = re.compile(r"(?im)^\W*(?:exact\s+answer|final\s+answer|answer)\s*[:\uff1a]\s*(.+)$")


def final_answer_text(response: str) -> str:
    """The text after the last ``Answer:`` / ``Exact Answer:`` / ``Final Answer:`` line, else the response."""
    found = _FINAL.findall(response)
    return str(found[-1]).strip() if found else response.strip()


def _item_id(item: QAItem) -> str:
    return item.id


class JudgedQA(Benchmark):
    """The judge-graded QA family (see the module doc). Subclasses implement ``load_items`` and ``grader_for``."""

    Params: ClassVar[type[JudgedQAParams]] = JudgedQAParams
    rescorable: ClassVar[bool] = True  # graded from the recorded final answer alone
    params: JudgedQAParams
    #: the params that pick tasks (changing them never changes what a task is).
    selection_params: ClassVar[tuple[str, ...]] = ("sample_ids", "limit")
    #: whether ``match`` grades without a judge (the ``auto`` fallback)
    has_match: ClassVar[bool] = False
    #: whether ``auto`` without a judge falls back to ``match`` (False: the match is not the benchmark's own
    #: grading, so it is used only when asked for by name, ``grading: match``)
    match_in_auto: ClassVar[bool] = True
    #: the letters a multiple-choice answer may be
    choice_letters: ClassVar[str] = "ABCDEFGHIJ"
    #: the default of ``record_judge_prompt`` (False: the answers must not reach the run directory in plain text)
    records_judge_prompt: ClassVar[bool] = True

    def __init__(self, params: JudgedQAParams | dict[str, Any], ctx: ComponentContext) -> None:
        super().__init__(params, ctx)
        where = self.where
        p = self.params
        self.p = p
        self.data_dir = ctx.data_dir
        prompts = p.judge_prompt if isinstance(p.judge_prompt, dict) else {}
        for kind, text in prompts.items():
            check_template(text, f"benchmark.params.judge_prompt.{kind}")
        if isinstance(p.judge_prompt, str):
            check_template(p.judge_prompt, "benchmark.params.judge_prompt")
        self.grading = self._grading(p)
        self.record_prompt = self.records_judge_prompt if p.record_judge_prompt is None else p.record_judge_prompt
        #: seconds of each attempt's verify_timeout the judge may use (a margin kept for writing its record)
        self.judge_budget: float | None = None
        self.judge_clamped = False
        judge_timeout = p.judge_timeout
        if ctx.verify_timeout is not None:
            self.judge_budget = ctx.verify_timeout - min(5.0, ctx.verify_timeout * 0.1)
            if judge_timeout > self.judge_budget:
                judge_timeout, self.judge_clamped = self.judge_budget, True
        self.judge = (Judge(p.judge_model, judge_timeout, reasks=p.judge_reasks)
                      if self.grading == "judge" and p.judge_model else None)
        if self.judge is not None and self.judge_clamped:
            self.judge.timeout_label = (f"judge_timeout={p.judge_timeout:g}s, clamped to {judge_timeout:g}s to fit "
                                        f"verify_timeout={ctx.verify_timeout:g}s")
        self.tools: tuple[str, ...] = tuple(dict.fromkeys(p.tools))
        if self.tools and p.search is None and "web_search" in self.tools:
            raise ConfigError(f"{where}: tools has web_search, so search (the provider: {{provider, base_url, "
                              "api_key}}) must be given", field="benchmark.params.search")
        if p.search is not None and not self.tools:
            raise ConfigError(f"{where}: search is given but tools is empty, so it would not be used: add "
                              "\"web_search\" (and \"fetch_url\") to tools, or leave search out",
                              field="benchmark.params.search")
        if p.search is not None:
            p.search.check(needs_api="web_search" in self.tools)
        if p.judge_model is not None:
            p.judge_model.key("benchmark.params.judge_model.api_key_env")
            self._check_judge_url(p.judge_model)
        items = self.load_items()
        ids = [i.id for i in items]
        if len(set(ids)) != len(ids):
            raise ConfigError(f"{where}: the dataset has duplicate ids", field="data_dir")
        items = self.select(items, _item_id)
        self.items = items if p.limit is None else items[:p.limit]
        if isinstance(p.judge_prompt, str) and self.grading == "judge":
            graders = {self.grader_for(k).name: k for k in sorted({i.kind for i in self.items})}
            if len(graders) > 1:
                raise ConfigError(f"{where}: the selected items are graded by {len(graders)} graders "
                                  f"({', '.join(graders)}), so one judge_prompt text cannot serve them: give "
                                  f"{{item kind: text}} for the kinds {', '.join(graders.values())}",
                                  field="benchmark.params.judge_prompt")
        if self.grading == "match" and any(i.kind == "rubric" for i in self.items):
            raise ConfigError(f"{where}: rubric items are graded by a judge only: give judge_model",
                              field="benchmark.params.judge_model")

    def _check_judge_url(self, judge: ModelEndpoint) -> None:
        """A ConfigError naming ``judge_model.base_url`` when the judge needs one (any model but the built-in
        ``scripted``) and has none: refused here, before any agent runs, not at the first grade."""
        if self.grading == "judge" and not judge.base_url and not is_scripted(ModelSpec(id=judge.id)):
            raise ConfigError(f"{self.where}: judge_model {judge.id!r} needs base_url (e.g. "
                              "http://127.0.0.1:8000/v1); only the built-in 'scripted' judge runs without one",
                              field="benchmark.params.judge_model.base_url")

    @property
    def where(self) -> str:
        """``benchmark <name>``, for errors."""
        return f"benchmark {self.name}"

    def _grading(self, p: JudgedQAParams) -> str:
        """``judge`` or ``match`` for these params (see the module doc); a ConfigError when neither can grade."""
        if p.grading == "judge" or (p.grading == "auto" and p.judge_model is not None):
            if p.judge_model is None:
                raise ConfigError(f"{self.where}: grading 'judge' needs judge_model ({{id, base_url, api_key, "
                                  "api_protocol}})", field="benchmark.params.judge_model")
            return "judge"
        if not self.has_match:
            raise ConfigError(f"{self.where} is graded by an LLM judge: give judge_model ({{id, base_url, api_key, "
                              "api_protocol}}); it has no deterministic match", field="benchmark.params.judge_model")
        if p.grading == "auto" and not self.match_in_auto:
            raise ConfigError(f"{self.where} is graded by an LLM judge: give judge_model ({{id, base_url, api_key, "
                              "api_protocol}}), or grading: 'match' for a normalized exact match (not the "
                              "benchmark's own grading: its numbers are not comparable)",
                              field="benchmark.params.judge_model")
        return "match"

    # ------------------------------------------------------------------ what a subclass provides

    @abc.abstractmethod
    def load_items(self) -> list[QAItem]:
        """Every item of the dataset, in its order (called once, by the constructor)."""

    @abc.abstractmethod
    def grader_for(self, kind: str) -> Grader:
        """The judge's grader for items of ``kind`` (``self.p.judge_prompt`` replaces its template)."""

    def match(self, truth: dict[str, Any], response: str) -> Verdict:
        """The deterministic verdict (only called when ``has_match``): a multiple-choice letter, else a
        normalized exact match of the final answer."""
        if truth.get("letter"):
            got = choice_letter(response, self.choice_letters)
            if got is None:
                return Verdict(grade="not_attempted", score=0.0)
            ok = got == truth["letter"]
        else:
            answer = final_answer_text(response)
            if not answer:
                return Verdict(grade="not_attempted", score=0.0)
            ok = normalize(answer) == normalize(str(truth["answer"]))
        return Verdict(grade="correct" if ok else "incorrect", score=1.0 if ok else 0.0)

    def system_prompt(self) -> str | None:
        """The system message of the tool session (``system_prompt`` param by default)."""
        return self.p.system_prompt

    # ------------------------------------------------------------------ the Benchmark hooks

    def load_tasks(self) -> list[TaskSpec]:
        """One task per selected item; the reference answer is ground truth only."""
        return [TaskSpec(task_id=i.id, category=i.category,
                         input={"question": i.question, "prompt": i.prompt or i.question, "kind": i.kind},
                         ground_truth={"answer": i.answer, "kind": i.kind, "letter": i.letter},
                         metadata=dict(i.metadata))
                for i in self.items]

    def prepare(self, task: TaskSpec) -> PreparedTask:
        """The question is the prompt (no files, no environment needed). Refused once the judge refused its key:
        the agent's run could not be graded."""
        if self.judge is not None and self.judge.auth_failure is not None:
            raise ConfigError(f"{self.where}: not running {task.task_id}: the judge {self.judge.endpoint.id} refused "
                              f"its key ({self.judge.auth_failure}); fix judge_model.api_key",
                              field="benchmark.params.judge_model.api_key")
        return PreparedTask(task_id=task.task_id, prompt=task.input["prompt"],
                            metadata={"kind": task.input.get("kind", "short")})

    def tool_session(self, task: TaskSpec, ctx: RunContext) -> ToolSession | None:
        """The question (and the web tools, when configured) for ``tool_agent``."""
        messages: list[dict[str, Any]] = []
        system = self.system_prompt()
        if system:
            messages.append({"role": "system", "content": system})
        messages.append({"role": "user", "content": task.input["prompt"]})
        return WebToolSession(messages, self.tools, self.p.search)

    def _grader(self, kind: str) -> Grader:
        grader = self.grader_for(kind)
        custom = self.p.judge_prompt
        text = custom.get(kind) if isinstance(custom, dict) else custom  # type: ignore[call-overload]
        if text is not None:
            grader.prompt_template = text
        return grader

    async def evaluate(self, ctx: EvalContext) -> EvalResult:
        """The judge's verdict (or the deterministic match) on the final answer; JudgeError without one."""
        truth: dict[str, Any] = ctx.task.ground_truth or {}
        response = ctx.result.final_answer or ""
        extra: dict[str, Any] = {}
        if self.judge is None:
            verdict = self.match(truth, response)
            extra["scoring"] = {"method": "match", "response": truncate_middle(response, 2000)}
        else:
            kind = str(truth.get("kind") or "short")
            verdict, extra["scoring"] = await self.judge.grade(
                self._grader(kind), ctx.task.input["question"], str(truth.get("answer", "")), response,
                budget_s=self.judge_budget, record_prompt=self.record_prompt, partial=ctx.partial_extra)
        extra["grade"] = verdict.grade
        if verdict.points is not None:
            extra["points"] = verdict.points
        if verdict.confidence is not None:
            extra["confidence"] = verdict.confidence
        return EvalResult(correct=verdict.grade == "correct", score=verdict.score, extra=extra)

    def new_accumulator(self) -> QAAccumulator:
        """pass@k, avg@k and the grade counts (accuracy, not-attempted rate, correct given attempted, F-score)."""
        return QAAccumulator(self.k)

    def resolved_settings(self) -> dict[str, Any]:
        """How the run is graded."""
        out: dict[str, Any] = {"grading": self.grading, "tasks": len(self.items)}
        if self.grading == "match" and not self.match_in_auto:
            out["grading_is_official"] = False
        if self.judge is not None:
            out["judge_model"] = self.judge.endpoint.id
            custom = self.p.judge_prompt
            out["judge_prompt"] = "agentcompass-v1" if custom is None else "custom"
            if custom is not None:
                out["judge_prompt_sha256"] = hashlib.sha256(msgspec.json.encode(custom)).hexdigest()
            out["judge_timeout"] = self.judge.timeout_s
            if self.judge_clamped:
                out["judge_timeout_clamped_to_verify_timeout"] = True
        return out

    def secrets(self) -> tuple[str, ...]:
        """The judge's and the search provider's keys."""
        out: tuple[str, ...] = ()
        if self.p.judge_model is not None:
            out += self.p.judge_model.secrets()
        if self.p.search is not None:
            out += self.p.search.secrets()
        return out


__all__ = ["JudgedQA", "JudgedQAParams", "QAItem", "choice_letter", "final_answer_text", "normalize"]
