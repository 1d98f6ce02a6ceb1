"""The HumanEval check runner, in three modes; stdlib only (``run`` uses whatever ``python3`` the verifier has).

``plan`` runs on the engine's host with trusted code only: it executes the prompt with the dataset's canonical
solution, then the task's tests, and calls ``check`` with a recorder of the candidate that writes down each call's
arguments as plain data (JSON with tagged types). The arguments of HumanEval's calls never depend on the
candidate's results (where they would, the replay's lookup fails safely).

``run`` runs in the verifier, in a process that also runs the agent's code. It gets only the agent's program, the
entry point and the planned arguments, never the tests nor their expected values, calls the candidate once per
planned call and writes down each result as plain data. It decides nothing: whatever the agent's code does there
(exit early, patch builtins, return an object equal to everything, forge the report) yields at most a list of
claimed results.

``replay`` runs on the host in a fresh process without any of the agent's code: it executes the task's own prompt
and tests and calls ``check`` with a stand-in that answers each call with the agent's result for those arguments,
decoded into plain built-in values only (a call whose arguments were not planned fails). Its verdict is the grade,
so a report passes only when the values in it are right.

Usage: ``python3 -I humaneval_check.py run SPEC_JSON REPORT_JSON`` (the spec: ``program``, ``entry_point``,
``calls``; the spec file is removed before the program runs); ``python3 -I humaneval_check.py plan MARKER`` with
the spec (``program``, ``test``, ``entry_point``, ``memory_bytes``) on stdin, and ``python3 -I humaneval_check.py
replay MARKER`` with the spec (``prompt``, ``test``, ``entry_point``, ``calls``, ``report``, ``memory_bytes``)
on stdin; both print one line ``MARKER <json>``.
"""

from __future__ import annotations

import json
import numbers
import os
import random
import sys
from typing import Any

#: the global random state the tests start from, in ``plan`` and ``replay`` (some tests draw unseeded inputs)
SEED = 20210707
MAX_DEPTH = 64
MAX_CALLS = 100_000
#: a bigger report is replaced by one that says so (and grades 0)
MAX_REPORT_CHARS = 8_000_000


class Unencodable(Exception):
    """A value that is not plain data."""


def _numpy_bool(value: Any) -> bool:
    kind = type(value)
    return kind.__module__ == "numpy" and kind.__name__ in ("bool_", "bool")


def encode(value: Any, depth: int = 0) -> Any:
    """``value`` as JSON with tagged types; subclasses of built-ins become the built-in (their methods are lost),
    other numbers (``numbers.Integral``/``Real``, numpy's bool) the built-in they equal, as ``==`` in the
    official harness would take them."""
    if depth > MAX_DEPTH:
        raise Unencodable("nested too deeply")
    if value is None:
        return None
    if isinstance(value, bool) or _numpy_bool(value):
        return bool(value)
    if isinstance(value, int):
        return {"i": hex(int(value))}  # hex: no digit limit on int <-> str
    if isinstance(value, numbers.Integral):
        return {"i": hex(int(value))}
    if isinstance(value, float) or isinstance(value, numbers.Real):
        return {"f": float.__repr__(float(value))}
    if isinstance(value, str):
        return {"s": str.__str__(value)}
    if isinstance(value, bytes):
        return {"b": bytes(value).hex()}
    if isinstance(value, list):
        return {"l": [encode(v, depth + 1) for v in list.__iter__(value)]}
    if isinstance(value, tuple):
        return {"t": [encode(v, depth + 1) for v in tuple.__iter__(value)]}
    if isinstance(value, (set, frozenset)):
        # sorted: the iteration order of a set depends on the process's hash seed
        items = sorted((encode(v, depth + 1) for v in value), key=lambda e: json.dumps(e, sort_keys=True))
        return {"z" if isinstance(value, frozenset) else "e": items}
    if isinstance(value, dict):
        return {"d": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in dict.items(value)]}
    raise Unencodable(f"a {type(value).__name__}")


def decode(data: Any, depth: int = 0) -> Any:
    """The plain value of ``encode``'s output; ValueError for anything else."""
    if depth > MAX_DEPTH:
        raise ValueError("nested too deeply")
    if data is None or type(data) is bool:
        return data
    if type(data) is not dict or len(data) != 1:
        raise ValueError("not an encoded value")
    [(tag, raw)] = data.items()
    if tag in ("i", "f", "s", "b") and type(raw) is not str:
        raise ValueError(f"bad {tag!r} value")
    if tag == "i":
        return int(raw, 16)
    if tag == "f":
        return float(raw)
    if tag == "s":
        return raw
    if tag == "b":
        return bytes.fromhex(raw)
    if type(raw) is not list:
        raise ValueError(f"bad {tag!r} value")
    if tag == "d":
        out: dict[Any, Any] = {}
        for pair in raw:
            if type(pair) is not list or len(pair) != 2:
                raise ValueError("bad dict item")
            out[decode(pair[0], depth + 1)] = decode(pair[1], depth + 1)
        return out
    items = [decode(v, depth + 1) for v in raw]
    if tag == "l":
        return items
    if tag == "t":
        return tuple(items)
    if tag == "e":
        return set(items)
    if tag == "z":
        return frozenset(items)
    raise ValueError(f"unknown tag {tag!r}")


def _encode_call(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return encode([list(args), kwargs])


def _key(encoded_call: Any) -> str:
    return json.dumps(encoded_call, sort_keys=True)


# ----------------------------------------------------------------------------- plan (host; trusted code only)


def plan(spec: dict[str, Any]) -> dict[str, Any]:
    """The arguments of each call ``check`` makes of the canonical program, encoded."""
    namespace: dict[str, Any] = {"__name__": "solution"}
    exec(compile(spec["program"], "solution.py", "exec"), namespace)
    candidate = namespace[spec["entry_point"]]
    calls: list[Any] = []

    def recorder(*args: Any, **kwargs: Any) -> Any:
        if len(calls) >= MAX_CALLS:
            raise RuntimeError("too many calls")
        calls.append(_encode_call(args, kwargs))  # before the call: a candidate may change its arguments
        saved = random.getstate()  # the candidate's own draws must not shift the inputs the tests draw next
        try:
            return candidate(*args, **kwargs)
        finally:
            random.setstate(saved)

    # The tests get their own globals, where the entry point's name is the recorder too (some call it by name);
    # the candidate's own globals are left alone, so its recursive calls are not recorded.
    tests = {**namespace, spec["entry_point"]: lambda *a, **kw: recorder(*a, **kw)}
    exec(compile(spec["test"], "test.py", "exec"), tests)
    random.seed(SEED)
    tests["check"](recorder)
    return {"calls": calls}


# ----------------------------------------------------------------------------- run (verifier; the agent's code)


def run(spec_file: str, report_file: str) -> None:
    """Call the agent's candidate with each planned call's arguments and write the results to ``report_file``."""
    with open(spec_file, encoding="utf-8") as f:
        spec = json.load(f)
    os.unlink(spec_file)
    results: list[dict[str, Any]] = []
    state: dict[str, Any] = {"program": "not run"}

    def write_report() -> None:
        text = json.dumps({"results": results, **state})
        if len(text) > MAX_REPORT_CHARS:
            text = json.dumps({"results": None, "error": f"the results take {len(text)} characters as JSON, "
                                                         f"more than {MAX_REPORT_CHARS}"})
        with open(report_file, "w", encoding="utf-8") as out:
            out.write(text)

    calls = [decode(call) for call in spec["calls"]]  # before the agent's code runs: these are ours
    namespace: dict[str, Any] = {"__name__": "solution"}  # not __main__: a main block of the agent's stays idle
    try:
        exec(compile(spec["program"], "solution.py", "exec"), namespace)
        candidate = namespace[spec["entry_point"]]
    except BaseException as exc:  # the agent's program may raise anything at import, SystemExit included
        state["program"] = f"the program failed: {type(exc).__name__}: {exc}"[:1000]
        write_report()
        return
    state["program"] = "ran"
    for args, kwargs in calls:
        random.seed(SEED)
        try:
            result = candidate(*args, **kwargs)
        except BaseException as exc:
            results.append({"raised": f"{type(exc).__name__}: {exc}"[:500]})
            continue
        try:
            results.append({"result": encode(result)})
        except Exception as exc:  # Unencodable, or a number whose conversion raised
            results.append({"raised": f"the result is not plain data: {type(exc).__name__}: {exc}"[:500]})
    write_report()


# ----------------------------------------------------------------------------- replay (host; none of the agent's code)


class CallMismatch(Exception):
    """The tests made a call the report has no result for."""


def replay(spec: dict[str, Any]) -> dict[str, Any]:
    """The verdict of ``check`` run against the agent's results for the planned calls."""
    try:
        report = json.loads(spec["report"])
    except (ValueError, RecursionError) as exc:
        return {"passed": False, "error": f"unreadable report: {type(exc).__name__}: {exc}"[:1000]}
    if type(report) is not dict:
        return {"passed": False, "error": "the report is not an object"}
    verdict: dict[str, Any] = {"program": str(report.get("program", ""))[:1000]}  # how it ran in the verifier
    results = report.get("results")
    calls: list[Any] = spec["calls"]
    if type(results) is not list:
        error = report.get("error") if type(report.get("error")) is str else "the report has no list of results"
        return {**verdict, "passed": False, "error": str(error)[:1000]}
    if len(results) != len(calls):
        return {**verdict, "passed": False, "error": f"the report has {len(results)} results for {len(calls)} calls"}
    verdict["answered"] = sum(1 for r in results if type(r) is dict and "result" in r and "raised" not in r)
    return {**verdict, **replay_calls(spec, calls, results)}


def replay_calls(spec: dict[str, Any], calls: list[Any], results: list[Any]) -> dict[str, Any]:
    answers: dict[str, list[Any]] = {}
    for call, entry in zip(calls, results, strict=True):  # the host only (3.10+)
        answers.setdefault(_key(call), []).append(entry)
    namespace: dict[str, Any] = {"__name__": "prompt"}
    exec(compile(spec["prompt"], "prompt.py", "exec"), namespace)
    tests = {**namespace, spec["entry_point"]: lambda *a, **kw: stand_in(*a, **kw)}  # as in plan
    exec(compile(spec["test"], "test.py", "exec"), tests)
    check = tests["check"]
    made = [0]
    failed: list[str] = []  # the first failed call, even when the tests catch what it raised

    def fail(message: str) -> CallMismatch:
        if not failed:
            failed.append(message)
        return CallMismatch(message)

    def stand_in(*args: Any, **kwargs: Any) -> Any:
        made[0] += 1
        i = made[0]
        try:
            queue = answers.get(_key(_encode_call(args, kwargs)))
        except Unencodable as exc:
            raise fail(f"call {i} has arguments that are not plain data: {exc}") from None
        if not queue:
            raise fail(f"call {i} was not planned with these arguments")
        entry = queue.pop(0)
        if type(entry) is not dict:
            raise fail(f"call {i} has no result")
        if "raised" in entry:
            raise fail(f"call {i} raised {str(entry['raised'])[:500]}")
        if "result" not in entry:
            raise fail(f"call {i} has no result")
        try:
            return decode(entry["result"])
        except (ValueError, TypeError, OverflowError, RecursionError) as exc:
            raise fail(f"call {i} has a result that is not plain data: {exc}") from None

    random.seed(SEED)
    try:
        check(stand_in)
    except Exception as exc:
        if failed:
            return {"passed": False, "error": failed[0]}
        if isinstance(exc, AssertionError):
            return {"passed": False, "error": f"a test failed at call {made[0]}" + (f": {exc}" if str(exc) else "")}
        return {"passed": False, "error": f"{type(exc).__name__}: {exc}"[:1000]}
    if failed:
        return {"passed": False, "error": failed[0]}
    return {"passed": True}


def _limit_memory(limit: int) -> None:
    try:
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (ImportError, ValueError, OSError):  # not on this platform, or a lower limit already
        pass


def main() -> None:
    if hasattr(sys, "set_int_max_str_digits"):  # 3.11+: the tests may print big ints
        sys.set_int_max_str_digits(0)
    mode = sys.argv[1]
    if mode == "run":
        os.dup2(2, 1)  # what the agent's code prints goes to stderr: stdout carries nothing here
        run(sys.argv[2], sys.argv[3])
        return
    marker = sys.argv[2]
    spec = json.loads(sys.stdin.read())
    _limit_memory(int(spec.get("memory_bytes") or 0) or 2 << 30)
    out = sys.stdout
    sys.stdout = sys.stderr  # what the tests print stays off the line the engine reads
    try:
        answer = plan(spec) if mode == "plan" else replay(spec)
    except Exception as exc:
        answer = {"passed": False, "error": f"{mode} failed: {type(exc).__name__}: {exc}"[:1000]}
    out.write(marker + " " + json.dumps(answer) + "\n")
    out.flush()


if __name__ == "__main__":
    main()
