"""BFCL's multi-turn categories: the stateful APIs the model works against, its session and our state checker.

Each question names the API classes it involves (a file system, a trading bot, a travel agency...) and their
starting state; the classes themselves come from the ``bfcl-eval`` package. The session runs the model's calls
live against one set of instances and feeds the user turns in order (a ``miss_func`` question's held-out
functions are offered at their turn with BFCL's "I have updated some more functions" message); more than 20
steps with calls in one turn force-quit the question, as BFCL's inference does.

Grading re-executes, as BFCL's checker does, in fresh instances: after each turn whose ground truth has calls, the
model's instances must equal the ground truth's on every public attribute, and every result the ground truth's
calls of that turn produced must be among the results of all the model's calls so far (as a multiset, any
order); a turn whose ground truth is empty is not checked; a question the model did not take through all turns
fails as force-terminated; a step whose arguments do not decode is dropped, as BFCL drops it.

Live, a step any of whose calls does not decode (broken JSON, ``""``, arguments that are not an object) executes
nothing and ends the turn, as BFCL's inference does; with ``parallel_tool_calls`` off only the calls the harness
executed are recorded, so grading replays exactly what ran. Arguments longer than ``MAX_ARGUMENT_CHARS`` or nested
deeper than ``tool_json.MAX_DEPTH`` do not decode either (the model is told which bound). Every call runs guarded
(``ApiState.execute``): integer powers and precisions above a cap are refused as an error result, the Decimal and
mpmath precision a call sets is restored after it, any exception (formatting a result included) is an error result
the model sees, as in BFCL.

The API instances live in a ``HostWorker`` process of the session, never on the event loop: a call that runs past
``call_timeout_s`` (``CALL_TIMEOUT_S`` unless the ``call_timeout_s`` param says) gets the process killed, the model an
error result, and the question ends there. Grading re-executes in a fresh worker under ``GRADE_TIMEOUT_S``.
"""

from __future__ import annotations

import ast
import copy
import decimal
import importlib
import inspect
import json
import math
import threading
from typing import Any, ClassVar

from ...host_worker import HostWorker, WorkerError, run_in_worker
from ...tool_json import loads_bounded
from ...tools import ToolError, ToolSession
from .schema import to_tools, with_language_hint

#: steps with calls in one turn before BFCL force-quits the question.
MAX_STEPS_PER_TURN = 20
ADDITIONAL_FUNCTIONS_PROMPT = "I have updated some more functions you can choose from. What about now?"
_BACKEND = "bfcl_eval.eval_checker.multi_turn_eval.func_source_code"
#: the API classes of the multi-turn categories and their modules in bfcl-eval.
API_MODULES: dict[str, str] = {
    "GorillaFileSystem": f"{_BACKEND}.gorilla_file_system", "MathAPI": f"{_BACKEND}.math_api",
    "MessageAPI": f"{_BACKEND}.message_api", "TwitterAPI": f"{_BACKEND}.posting_api",
    "TicketAPI": f"{_BACKEND}.ticket_api", "TradingBot": f"{_BACKEND}.trading_bot",
    "TravelAPI": f"{_BACKEND}.travel_booking", "VehicleControlAPI": f"{_BACKEND}.vehicle_control"}
STATELESS = ("MathAPI",)
#: names BFCL's executor refuses to call.
_REFUSED = ("kill", "exit", "quit", "remove", "unlink", "popen", "Popen", "run")
#: caps on what a call may make the host compute (ours, not BFCL's: its data never comes near them).
MAX_POWER_BITS = 1_000_000
MAX_PRECISION = 10_000
MAX_RESULT_CHARS = 1_000_000
#: characters of one call's arguments decoded at most (the tool_agent harness's cap on arguments it executes).
MAX_ARGUMENT_CHARS = 256 * 1024
#: seconds one live call may take before the session gives up on the question.
CALL_TIMEOUT_S = 30.0
#: seconds re-executing one question for grading may take (an eval_error beyond).
GRADE_TIMEOUT_S = 120.0
#: mpmath's precision is one process-wide setting: calls into MathAPI take turns and restore it.
_MATH_LOCK = threading.Lock()


def _guard(name: str, kwargs: dict[str, Any]) -> None:
    """Refuse a call whose arguments would make the host compute without bound (raises ValueError)."""
    if name == "power":
        base, exponent = kwargs.get("base"), kwargs.get("exponent")
        if isinstance(base, int) and isinstance(exponent, int) and exponent > 0 and \
                exponent * math.log2(abs(base) + 2) > MAX_POWER_BITS:
            raise ValueError(f"the result of power({base}, {exponent}) would exceed {MAX_POWER_BITS} bits")
    places = kwargs.get("decimal_places")
    if name == "round_number" and isinstance(places, int) and abs(places) > MAX_PRECISION:
        # round(an int, -n) computes 10**n
        raise ValueError(f"decimal_places {places} is beyond +-{MAX_PRECISION}")
    precision = kwargs.get("precision")
    if name in ("square_root", "logarithm") and isinstance(precision, (int, float)) and \
            abs(precision) > MAX_PRECISION:
        raise ValueError(f"precision {precision} is above {MAX_PRECISION}")


def is_long_context(task_id: str) -> bool:
    """Whether the question loads its APIs with BFCL's long-context padding."""
    category = task_id.rsplit("_", 1)[0]
    return "long_context" in category or "composite" in category


class ApiState:
    """One set of API instances for a question, loaded with its starting state."""

    def __init__(self, initial_config: dict[str, Any], classes: list[str], long_context: bool) -> None:
        self.instances: dict[str, Any] = {}
        self.methods: dict[str, Any] = {}
        self.math_methods: set[str] = set()
        for name in classes:
            if name not in API_MODULES:
                raise ValueError(f"unknown BFCL API class {name!r}")
            instance = getattr(importlib.import_module(API_MODULES[name]), name)()
            if name not in STATELESS:
                instance._load_scenario(copy.deepcopy(initial_config.get(name, {})), long_context=long_context)
            self.instances[name] = instance
            for method, bound in inspect.getmembers(instance, predicate=inspect.ismethod):
                if not method.startswith("_"):
                    self.methods[method] = bound
                    if name == "MathAPI":
                        self.math_methods.add(method)

    def execute(self, name: str, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None) -> str:
        """Call one method (guarded, see the module doc); its result as BFCL turns it into text (errors included)."""
        kwargs = kwargs or {}
        try:
            if name in _REFUSED:
                raise Exception(f"Function call {name} is not allowed.")
            if name not in self.methods:
                raise NameError(f"name {name!r} is not defined")
            _guard(name, kwargs)
            if name in self.math_methods:
                import mpmath
                with _MATH_LOCK, decimal.localcontext(), mpmath.workdps(mpmath.mp.dps):
                    text = _as_text(self.methods[name](*args, **kwargs))
            else:
                with decimal.localcontext():
                    text = _as_text(self.methods[name](*args, **kwargs))
            if len(text) > MAX_RESULT_CHARS:
                raise ValueError(f"the result is longer than {MAX_RESULT_CHARS} characters")
            return text
        except Exception as exc:  # the model's call failing is a result it sees, as in BFCL
            return f"Error during execution: {exc}"

    def public_state(self, class_name: str) -> dict[str, Any]:
        """The attributes the state check compares."""
        return {k: v for k, v in vars(self.instances[class_name]).items() if not k.startswith("_")}


def _as_text(result: Any) -> str:
    """A result as BFCL's executor formats it (inside its ``try``: a failure here is an error result)."""
    if type(result) is str:
        return result
    if type(result) is dict:
        try:
            return json.dumps(result)
        except (TypeError, ValueError):
            return str(result)
    return str(result)


def parse_call(text: str) -> tuple[str, tuple[Any, ...], dict[str, Any]]:
    """A ground-truth call ``name(arg, key=value)`` (literal arguments) as (name, args, kwargs)."""
    node = ast.parse(text.strip(), mode="eval").body
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise ValueError(f"not a call: {text!r}")
    return (node.func.id, tuple(ast.literal_eval(a) for a in node.args),
            {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg is not None})


def _decode_step(step: list[list[str]]) -> list[tuple[str, dict[str, Any]]]:
    """One step's calls decoded; ValueError naming the first call whose arguments are not a JSON object (or
    break the size and depth bounds)."""
    calls = []
    for name, raw in step:
        args = loads_bounded(raw, what=f"the arguments of {name}", max_chars=MAX_ARGUMENT_CHARS)
        if not isinstance(args, dict):
            raise ValueError(f"the arguments of {name} are not a JSON object")
        calls.append((name, args))
    return calls


def _decoded_steps(turn: list[list[list[str]]]) -> list[list[tuple[str, dict[str, Any]]]]:
    """The turn's steps as BFCL decodes them: a step whose arguments are not a JSON object is dropped."""
    out = []
    for step in turn:
        try:
            calls = _decode_step(step)
        except ValueError:
            continue
        if calls:
            out.append(calls)
    return out


def _unordered_subset(expected: list[str], got: list[str]) -> list[str]:
    pool = list(got)
    missing = []
    for item in expected:
        try:
            pool.remove(item)
        except ValueError:
            missing.append(item)
    return missing


def check_multi_turn(entry: dict[str, Any], turns: list[list[list[list[str]]]],
                     ground_truth: list[list[str]]) -> dict[str, Any]:
    """The verdict on the model's calls (per turn, per step, ``[name, arguments_json]``) against the ground truth."""
    if len(turns) != len(ground_truth):
        return {"valid": False, "error_type": "multi_turn:force_terminated",
                "error_message": f"Model was force-terminated during inference phase. The length of the model result "
                                 f"turns ({len(turns)}) does not match the length of the ground truth turns "
                                 f"({len(ground_truth)})."}
    long_context = is_long_context(entry["id"])
    config, classes = entry.get("initial_config", {}), entry["involved_classes"]
    model = ApiState(config, classes, long_context)
    truth = ApiState(config, classes, long_context)
    all_model_results: list[str] = []
    for index, (turn, expected) in enumerate(zip(turns, ground_truth, strict=True)):
        steps = _decoded_steps(turn)
        for step in steps:
            all_model_results.extend(model.execute(name, (), args) for name, args in step)
        expected_results = [truth.execute(*parse_call(call)) for call in expected]
        if not expected:
            continue
        if not steps:
            return {"valid": False, "error_type": "multi_turn:empty_turn_model_response",
                    "error_message": f"Model response list is empty for turn {index}"}
        for class_name in truth.instances:
            want, have = truth.public_state(class_name), model.instances[class_name]
            differences = {k: {"model": getattr(have, k), "ground_truth": v} for k, v in want.items()
                           if getattr(have, k) != v}
            if differences:
                return {"valid": False, "error_type": "multi_turn:instance_state_mismatch",
                        "error_message": f"Model instance for {class_name} does not match the state with ground "
                                         "truth instance.", "differences": _jsonable(differences)}
        missing = _unordered_subset(expected_results, all_model_results)
        if missing:
            return {"valid": False, "error_type": "multi_turn:execution_response_mismatch",
                    "error_message": f"Model response execution results so far does not contain all the ground "
                                     f"truth response execution results for turn {index}.", "missing_items": missing}
    return {"valid": True}


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


class MultiTurnSession(ToolSession):
    """One multi-turn question: tools over live API instances, user turns in order (see the module doc)."""

    executes_tools: ClassVar[bool] = True

    def __init__(self, entry: dict[str, Any], functions: list[dict[str, Any]],
                 held_out: dict[str, list[dict[str, Any]]], call_timeout_s: float = CALL_TIMEOUT_S) -> None:
        self.entry = entry
        self.functions = with_language_hint(functions, entry["id"])
        self._tools: list[dict[str, Any]] | None = None
        self.held_out = held_out  # BFCL offers held-out docs as they are (no hint)
        #: the process holding the question's API instances (started by the first call)
        self.worker = HostWorker(f"bfcl {entry['id']}")
        self._opened = False
        self.turn = 0
        self.turns: list[list[list[list[str]]]] = [[]]
        self.steps_in_turn = 0
        self.force_quit = False
        self.timed_out = False
        self._pending: list[list[str]] = []  # the current step's calls, recorded as they are executed
        self._step: list[list[str]] | None = None
        self._rejected = False  # the current step does not decode: nothing runs, the turn ends
        self._why_rejected = ""
        #: seconds one call may take before the question ends
        self.call_timeout_s = call_timeout_s

    def tools(self) -> list[dict[str, Any]]:
        if self._tools is None:
            self._tools = to_tools(self.functions)
        return self._tools

    def initial_messages(self) -> list[dict[str, Any]]:
        return [dict(m) for m in self.entry["question"][0]]

    async def on_assistant(self, message: dict[str, Any]) -> None:
        calls = message.get("tool_calls") or []
        self._pending, self._step, self._rejected = [], None, False
        if not calls or self.finished():
            return
        raw = [[c["function"]["name"], c["function"]["arguments"]] for c in calls]
        try:
            _decode_step(raw)
        except ValueError as exc:
            # as BFCL's inference: a step that does not decode runs nothing and ends the turn; it is kept as sent
            # (grading drops it as BFCL's checker does)
            self._rejected = True
            self._why_rejected = str(exc)
            self.turns[-1].append(raw)
            return
        self._pending = raw
        self._step = []
        self.turns[-1].append(self._step)
        self.steps_in_turn += 1
        if self.steps_in_turn > MAX_STEPS_PER_TURN:
            self.force_quit = True  # this step still runs, as BFCL's 21st does; no model turn follows

    def finished(self) -> bool:
        return self.force_quit or self.timed_out

    def ends_turn(self) -> bool:
        return self._rejected

    async def call(self, name: str, arguments: dict[str, Any]) -> str:
        if self._rejected:
            raise ToolError(f"the step's arguments are not all JSON objects ({self._why_rejected}): nothing of it "
                            "was executed")
        if self.timed_out or self._step is None or len(self._step) >= len(self._pending):
            raise ToolError("no further calls are executed in this question")
        expected = self._pending[len(self._step)]
        if expected[0] != name:
            raise ToolError(f"call {name!r} is not the next call of this step")
        self._step.append(expected)  # what ran is what grading replays
        try:
            if not self._opened:
                await self.worker.call(f"{__name__}:worker_open", self.entry.get("initial_config", {}),
                                       self.entry["involved_classes"], is_long_context(self.entry["id"]),
                                       timeout_s=self.call_timeout_s)
                self._opened = True
            result = await self.worker.call(f"{__name__}:worker_execute", name, arguments,
                                            timeout_s=self.call_timeout_s)
        except TimeoutError:
            self.timed_out = True  # the worker was killed with the question's state: nothing more runs
            raise ToolError(f"the call took over {self.call_timeout_s:g}s; the question ends here") from None
        except WorkerError as exc:
            self.timed_out = True
            raise ToolError(f"the call failed ({exc}); the question ends here") from None
        return str(result)

    async def next_user_message(self, messages: list[dict[str, Any]]) -> str | None:
        if self.force_quit or self.turn + 1 >= len(self.entry["question"]):
            return None
        self.turn += 1
        self.turns.append([])
        self.steps_in_turn = 0
        if str(self.turn) in self.held_out:
            self.functions = self.functions + copy.deepcopy(self.held_out[str(self.turn)])
            self._tools = None
            return ADDITIONAL_FUNCTIONS_PROMPT
        return "\n".join(str(m.get("content", "")) for m in self.entry["question"][self.turn])

    def record(self) -> dict[str, Any]:
        out: dict[str, Any] = {"turns": self.turns, "force_quit": self.force_quit}
        if self.timed_out:
            out["timed_out"] = True
        return out

    async def aclose(self) -> None:
        await self.worker.aclose()


#: the API instances of the session whose worker process this is (see ``worker_open``).
_WORKER_STATE: list[ApiState] = []


def worker_open(initial_config: dict[str, Any], classes: list[str], long_context: bool) -> None:
    """In a session's worker process: load the question's API instances."""
    _WORKER_STATE[:] = [ApiState(initial_config, classes, long_context)]


def worker_execute(name: str, kwargs: dict[str, Any]) -> str:
    """In a session's worker process: one guarded call (``ApiState.execute``)."""
    return _WORKER_STATE[0].execute(name, (), kwargs)


async def grade_multi_turn(entry: dict[str, Any], turns: list[list[list[list[str]]]],
                           ground_truth: list[list[str]], timeout_s: float = GRADE_TIMEOUT_S) -> dict[str, Any]:
    """``check_multi_turn`` in a worker process under a deadline (TimeoutError beyond it; the process is killed)."""
    verdict = await run_in_worker(f"{__name__}:check_multi_turn", entry, turns, ground_truth, timeout_s=timeout_s,
                                  name=f"bfcl grading {entry.get('id')}")
    if not isinstance(verdict, dict):
        raise WorkerError("the grading worker answered something that is not a verdict")
    return verdict


__all__ = ["API_MODULES", "ApiState", "MultiTurnSession", "check_multi_turn", "grade_multi_turn", "parse_call"]
