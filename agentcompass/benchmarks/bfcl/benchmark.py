"""The ``bfcl`` benchmark: the Berkeley Function Calling Leaderboard's single-turn AST and multi-turn categories.

The questions, possible answers, function docs and multi-turn API classes come from the ``bfcl-eval`` package
(``bfcl_package``: installed without its dependencies). The functions are offered through the model's native tool
calling (``tool_agent`` harness) as BFCL offers them to function-calling models (``bfcl_schema``). In the
single-turn categories the model's calls are its answer and are not executed; they are graded by our own
implementation of BFCL's AST checker (``bfcl_checker``). In the multi-turn ones the calls run against BFCL's
stateful APIs and the user's turns follow in order; grading re-executes them in fresh state against the ground
truth's (``bfcl_multi_turn``). The checker's verdict (``error_type``, message) is kept in ``extra["bfcl"]``.

The agentic categories (``memory_*`` needs embedding models, ``web_search_*`` a live search API) and the
non-scoring ``format_sensitivity`` are not offered. The summary adds BFCL's leaderboard groups to pass@k
(``bfcl_metrics``).
"""

from __future__ import annotations

import functools
import hashlib
import json
import random
from pathlib import Path
from typing import Any, ClassVar

import msgspec

from ..._errors import ConfigError, EvalError
from ..._validate import Attempts, Count, Seconds
from ...host_worker import WorkerPool
from ...interfaces import ComponentContext, EvalContext, EvalResult, PreparedTask, RunContext, TaskSpec
from ...tools import RECORD_KEY, ToolSession
from ..base import Benchmark
from .checker import check_answer
from .metrics import BFCLAccumulator
from .multi_turn import CALL_TIMEOUT_S, GRADE_TIMEOUT_S
from .package import BFCL_EVAL_VERSION, data_dir, ensure_bfcl_eval
from .schema import to_tools, with_language_hint

_WHERE = "benchmark bfcl"
PREFIX = "BFCL_v4"
SINGLE_TURN_CATEGORIES: tuple[str, ...] = (
    "simple_python", "simple_java", "simple_javascript", "multiple", "parallel", "parallel_multiple", "irrelevance",
    "live_simple", "live_multiple", "live_parallel", "live_parallel_multiple", "live_irrelevance", "live_relevance")
MULTI_TURN_CATEGORIES: tuple[str, ...] = (
    "multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context")
CATEGORIES: tuple[str, ...] = SINGLE_TURN_CATEGORIES + MULTI_TURN_CATEGORIES
#: the multi-turn API classes' function docs in the package's data.
FUNC_DOC_FILES: dict[str, str] = {
    "GorillaFileSystem": "gorilla_file_system.json", "MathAPI": "math_api.json", "MessageAPI": "message_api.json",
    "TwitterAPI": "posting_api.json", "TicketAPI": "ticket_api.json", "TradingBot": "trading_bot.json",
    "TravelAPI": "travel_booking.json", "VehicleControlAPI": "vehicle_control.json"}


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def is_multi_turn(category: str) -> bool:
    """Whether the category's questions run over several user turns against stateful APIs."""
    return category.startswith("multi_turn")


def has_possible_answers(category: str) -> bool:
    """Relevance and irrelevance categories have none: a call (or none) is the answer."""
    return "relevance" not in category


@functools.cache
def load_category(data: Path, category: str) -> tuple[tuple[dict[str, Any], Any], ...]:
    """(question entry, ground truth) of every question of ``category``, in the package's order. A multi-turn entry
    gets its ``function`` docs and its held-out ones (``missed_function``: turn -> docs), as BFCL prepares them."""
    entries = _jsonl(data / f"{PREFIX}_{category}.json")
    answers: list[Any] = [None] * len(entries)
    if has_possible_answers(category):
        answers = [a["ground_truth"] for a in _jsonl(data / "possible_answer" / f"{PREFIX}_{category}.json")]
    if is_multi_turn(category):
        for entry in entries:
            docs: list[dict[str, Any]] = []
            for name in entry["involved_classes"]:
                docs.extend(_jsonl(data / "multi_turn_func_doc" / FUNC_DOC_FILES[name]))
            held: dict[str, list[dict[str, Any]]] = {}
            for turn, names in (entry.get("missed_function") or {}).items():
                held[turn] = []
                for name in names:
                    index = next((i for i, d in enumerate(docs) if d["name"] == name), None)
                    if index is not None:
                        held[turn].append(docs.pop(index))
            entry["function"] = docs
            entry["missed_function"] = held
    return tuple(zip(entries, answers, strict=True))


class BFCLParams(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """``bfcl`` params: ``categories`` (default: all of ``CATEGORIES``), per category either the first ``limit``
    questions or a random ``sample`` of them (``seed``), or explicit ``sample_ids`` (BFCL's ids, e.g.
    ``simple_python_0``, ``multi_turn_base_3``; ``task_ids`` is its old name); ``k`` attempts per task;
    ``call_timeout_s``: seconds one multi-turn tool call may run before its worker process is killed and the
    question ends (default ``CALL_TIMEOUT_S``)."""

    categories: list[str] | None = None
    limit: Count | None = None
    sample: Count | None = None
    seed: int = 0
    sample_ids: list[str] | str | None = None
    task_ids: list[str] | None = None  # sample_ids' old name
    k: Attempts | None = None
    call_timeout_s: Seconds | None = None


class SingleTurnSession(ToolSession):
    """A single-turn question: the model's calls in its first answer are the answer (not executed)."""

    executes_tools: ClassVar[bool] = False

    def __init__(self, entry: dict[str, Any], category: str) -> None:
        self.entry = entry
        self._tools = to_tools(with_language_hint(entry["function"], category))
        self.answer: dict[str, Any] | None = None

    def tools(self) -> list[dict[str, Any]]:
        return self._tools

    def initial_messages(self) -> list[dict[str, Any]]:
        return [dict(m) for m in self.entry["question"][0]]

    async def on_assistant(self, message: dict[str, Any]) -> None:
        if self.answer is None:
            self.answer = {"content": message.get("content") or "",
                           "tool_calls": [[c["function"]["name"], c["function"]["arguments"]]
                                          for c in message.get("tool_calls") or []]}

    def record(self) -> dict[str, Any]:
        return {"answer": self.answer}


def model_answer(answer: dict[str, Any] | None) -> Any:
    """The answer as BFCL's function-calling handlers hand it to the checker: ``[{name: arguments_json}]`` when the
    model called tools, else its text."""
    if answer is None:
        return ""
    if answer.get("tool_calls"):
        return [{name: arguments} for name, arguments in answer["tool_calls"]]
    return answer.get("content") or ""


class BFCL(Benchmark):
    """Berkeley Function Calling Leaderboard (params: ``BFCLParams``); run it with the ``tool_agent`` harness."""

    name: ClassVar[str] = "bfcl"
    version: ClassVar[str] = "1"
    dimension: ClassVar[str] = "tool_use"
    Params: ClassVar[type[BFCLParams]] = BFCLParams
    params: BFCLParams
    selection_params: ClassVar[tuple[str, ...]] = ("categories", "limit", "sample", "seed", "sample_ids", "task_ids")

    def __init__(self, params: BFCLParams | dict[str, Any], ctx: ComponentContext) -> None:
        super().__init__(params, ctx)
        p = self.params
        if p.categories == []:
            raise ConfigError(f"{_WHERE}: 'categories' must not be empty (leave it out for all)",
                              field="benchmark.params.categories")
        # repeated names would run the same question twice under one task id: kept once, first place
        categories = list(dict.fromkeys(p.categories)) if p.categories is not None else list(CATEGORIES)
        bad = [c for c in categories if c not in CATEGORIES]
        if bad:
            raise ConfigError(f"{_WHERE}: unknown category {bad[0]!r} in 'categories'; "
                              f"allowed: {', '.join(CATEGORIES)}", field="benchmark.params.categories")
        if p.limit is not None and p.sample is not None:
            raise ConfigError(f"{_WHERE}: give 'limit' or 'sample', not both", field="benchmark.params.sample")
        self.categories = categories
        self.p = p
        #: seconds re-executing one multi-turn question for grading may take (an eval_error beyond), and checking a
        #: single-turn answer (graded incorrect beyond)
        self.grade_timeout_s = GRADE_TIMEOUT_S
        #: single-turn answers are checked in reused workers (the check is a pure function of its arguments)
        self.checkers = WorkerPool("bfcl grading")
        self.package = ensure_bfcl_eval(auto_install=ctx.auto_install_dependencies, field="benchmark",
                                        cancelled=ctx.cancelled)
        self.data = data_dir(self.package)
        # an unknown id fails here, before any run starts
        self._rows = self.select([(c, row) for c in self.categories for row in load_category(self.data, c)],
                                 lambda cr: str(cr[1][0]["id"]), scope=f"categories {', '.join(self.categories)}")
        self.source = {"package": "bfcl-eval", "version": BFCL_EVAL_VERSION, "categories": self.categories}

    def new_accumulator(self) -> BFCLAccumulator:
        """pass@k plus BFCL's per-category accuracy and leaderboard groups (``bfcl_metrics``)."""
        return BFCLAccumulator(self.k, {c: len(load_category(self.data, c)) for c in CATEGORIES})

    def load_tasks(self) -> list[TaskSpec]:
        """The selected questions, category by category in the package's order."""
        out: list[TaskSpec] = []
        for category in self.categories:
            rows = [row for c, row in self._rows if c == category]
            if self.p.sample is not None and self.p.sample < len(rows):
                seed = int(hashlib.sha256(f"{self.p.seed}:{category}".encode()).hexdigest()[:16], 16)
                picked = sorted(random.Random(seed).sample(range(len(rows)), self.p.sample))
                rows = [rows[i] for i in picked]
            elif self.p.limit is not None:
                rows = rows[:self.p.limit]
            out.extend(TaskSpec(task_id=entry["id"], category=category, input={"entry": entry}, ground_truth=answer)
                       for entry, answer in rows)
        return out

    def prepare(self, task: TaskSpec) -> PreparedTask:
        """The first user turn as the prompt (the tool session holds the whole conversation)."""
        first = task.input["entry"]["question"][0]
        text = "\n".join(str(m.get("content", "")) for m in first if m.get("role") == "user")
        return PreparedTask(task_id=task.task_id, prompt=text, metadata={"category": task.category})

    def tool_session(self, task: TaskSpec, ctx: RunContext) -> ToolSession | None:
        """The question's tools and turns."""
        entry = task.input["entry"]
        category = task.category or ""
        if is_multi_turn(category):
            from .multi_turn import MultiTurnSession
            return MultiTurnSession(entry, entry["function"], entry.get("missed_function") or {},
                                    call_timeout_s=self.p.call_timeout_s or CALL_TIMEOUT_S)
        return SingleTurnSession(entry, category)

    async def evaluate(self, ctx: EvalContext) -> EvalResult:
        """BFCL's verdict on the recorded calls (see the module doc)."""
        task = ctx.task
        category = task.category or ""
        record = ctx.result.artifacts.get(RECORD_KEY)
        if not isinstance(record, dict):
            return EvalResult(correct=False, score=0.0, extra={"bfcl": {
                "valid": False, "error_type": "no_record", "error": "the harness kept no tool session record "
                "(run bfcl with the tool_agent harness)"}})
        entry = task.input["entry"]
        if is_multi_turn(category):
            from .multi_turn import grade_multi_turn
            try:
                verdict = await grade_multi_turn(entry, record.get("turns") or [], task.ground_truth,
                                                 self.grade_timeout_s)
            except TimeoutError:
                raise EvalError(f"re-executing the model's calls for grading took over {self.grade_timeout_s:g}s",
                                extra={"bfcl": {"error_type": "grading_timeout"}}) from None
            if record.get("force_quit"):
                verdict["force_quit"] = True
        else:
            answer = model_answer(record.get("answer"))
            try:
                # in a killable process: the answer is the model's and the checker's converters are regexes
                verdict = await self.checkers.call(f"{check_answer.__module__}:check_answer", entry["function"],
                                                   answer, task.ground_truth, category,
                                                   timeout_s=self.grade_timeout_s)
            except TimeoutError:
                verdict = {"valid": False, "error_type": "ast_checker:timeout", "error": [
                    f"checking the answer took over {self.grade_timeout_s:g}s (the answer makes the checker run "
                    "away); it is graded incorrect"]}
            verdict = {**verdict, "answer": answer}
        valid = bool(verdict["valid"])
        return EvalResult(correct=valid, score=1.0 if valid else 0.0, extra={"bfcl": _jsonable(verdict)})

    async def aclose(self) -> None:
        """Stop the idle grading workers."""
        await self.checkers.aclose()


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=repr))


__all__ = ["BFCL", "CATEGORIES", "MULTI_TURN_CATEGORIES", "SINGLE_TURN_CATEGORIES", "BFCLParams", "load_category"]
