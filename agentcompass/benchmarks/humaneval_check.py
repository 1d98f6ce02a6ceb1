"""The HumanEval check runner, in two modes; stdlib only (it runs on whatever ``python3`` the verifier has).

``record`` runs in the verifier, in a process that also runs the agent's code: it executes the candidate
program, then the task's tests, and calls ``check`` with a wrapper of the candidate that writes down each call's
arguments and result as plain data (JSON with tagged types). It decides nothing: whatever the agent's code does
in that process (exit early, patch builtins, return an object equal to everything, forge the recording) yields
at most a list of claimed values.

``replay`` runs in a fresh process without any of the agent's code: it executes the task's own prompt and tests
and calls ``check`` with a stand-in that checks each call's arguments against the recording and returns the
recorded result, decoded into plain built-in values only. Its verdict is the grade, so a recording passes only
when the values in it are right.

Usage: ``python3 -I humaneval_check.py record SPEC_JSON REPORT_JSON`` (the spec: ``program``, ``test``,
``entry_point``), and ``python3 -I humaneval_check.py replay MARKER`` with the spec (``prompt``, ``test``,
``entry_point``, ``calls``, ``memory_bytes``) on stdin; replay prints one line ``MARKER <json verdict>``.
"""

from __future__ import annotations

import json
import os
import random
import sys
from typing import Any

#: the global random state the tests start from, in both modes (some tests draw unseeded inputs)
SEED = 20210707
MAX_DEPTH = 64
MAX_CALLS = 100_000
MAX_REPORT_CHARS = 8_000_000


class Unencodable(Exception):
    """A value that is not plain data."""


def encode(value: Any, depth: int = 0) -> Any:
    """``value`` as JSON with tagged types; subclasses of built-ins become the built-in (their methods are lost)."""
    if depth > MAX_DEPTH:
        raise Unencodable("nested too deeply")
    if value is None or isinstance(value, bool):
        return bool(value) if value is not None else None
    if isinstance(value, int):
        return {"i": hex(int(value))}  # hex: no digit limit on int <-> str
    if isinstance(value, float):
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


# ----------------------------------------------------------------------------- record (the agent's code runs here)


def record(spec_file: str, report_file: str) -> None:
    with open(spec_file, encoding="utf-8") as f:
        spec = json.load(f)
    calls: list[dict[str, Any]] = []
    state: dict[str, Any] = {"check": "not run"}

    def write_report() -> None:
        text = json.dumps({"calls": calls, **state})
        with open(report_file, "w", encoding="utf-8") as out:
            out.write(text)

    namespace: dict[str, Any] = {"__name__": "solution"}  # not __main__: a main block of the agent's stays idle
    try:
        exec(compile(spec["program"], "solution.py", "exec"), namespace)
        candidate = namespace[spec["entry_point"]]
        # The tests get their own globals, where the entry point's name is the recorder too (some call it by name);
        # the candidate's own globals are left alone, so its recursive calls are not recorded.
        tests = {**namespace, spec["entry_point"]: lambda *a, **kw: recorder(*a, **kw)}
        exec(compile(spec["test"], "test.py", "exec"), tests)
        check = tests["check"]
    except BaseException as exc:  # the agent's program may raise anything at import, SystemExit included
        state["check"] = f"the program failed: {type(exc).__name__}: {exc}"[:1000]
        write_report()
        return

    def recorder(*args: Any, **kwargs: Any) -> Any:
        if len(calls) >= MAX_CALLS:
            raise RuntimeError("too many calls")
        try:
            entry: dict[str, Any] = {"args": _encode_call(args, kwargs)}
        except Unencodable as exc:
            entry = {"args": None, "error": f"arguments not plain data: {exc}"}
        calls.append(entry)
        saved = random.getstate()  # the candidate's own draws must not shift the inputs the tests draw next
        try:
            result = candidate(*args, **kwargs)
        except BaseException as exc:
            entry["raised"] = f"{type(exc).__name__}: {exc}"[:500]
            raise
        finally:
            random.setstate(saved)
        try:
            entry["result"] = encode(result)
        except Unencodable as exc:
            entry["raised"] = f"the result is not plain data: {exc}"
        return result

    random.seed(SEED)
    try:
        check(recorder)
        state["check"] = "returned"
    except BaseException as exc:
        state["check"] = f"{type(exc).__name__}: {exc}"[:1000]
    write_report()


# ----------------------------------------------------------------------------- replay (none of the agent's code)


class CallMismatch(Exception):
    """The tests made a call the recording does not have."""


def replay(spec: dict[str, Any]) -> dict[str, Any]:
    try:
        recording = json.loads(spec["recording"])
    except (ValueError, RecursionError) as exc:
        return {"passed": False, "error": f"unreadable recording: {type(exc).__name__}: {exc}"[:1000]}
    calls = recording.get("calls") if type(recording) is dict else None
    if type(calls) is not list:
        return {"passed": False, "error": "the recording has no list of calls"}
    verdict = replay_calls(spec, calls)
    verdict["check"] = str(recording.get("check", ""))[:1000]  # how check ended where it was recorded
    return verdict


def replay_calls(spec: dict[str, Any], calls: list[Any]) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "prompt"}
    exec(compile(spec["prompt"], "prompt.py", "exec"), namespace)
    tests = {**namespace, spec["entry_point"]: lambda *a, **kw: stand_in(*a, **kw)}  # as in record
    exec(compile(spec["test"], "test.py", "exec"), tests)
    check = tests["check"]
    position = [0]

    def stand_in(*args: Any, **kwargs: Any) -> Any:
        i = position[0]
        position[0] += 1
        if i >= len(calls) or type(calls[i]) is not dict:
            raise CallMismatch(f"call {i + 1} was not recorded")
        entry = calls[i]
        try:
            wanted = _encode_call(args, kwargs)
        except Unencodable as exc:
            raise CallMismatch(f"call {i + 1} has arguments that are not plain data: {exc}") from None
        if entry.get("args") != wanted:
            raise CallMismatch(f"call {i + 1} was recorded with other arguments")
        if "raised" in entry:
            raise CallMismatch(f"call {i + 1} raised {str(entry['raised'])[:500]}")
        if "result" not in entry:
            raise CallMismatch(f"call {i + 1} has no result")
        try:
            return decode(entry["result"])
        except (ValueError, TypeError, OverflowError, RecursionError) as exc:
            raise CallMismatch(f"call {i + 1} has a result that is not plain data: {exc}") from None

    random.seed(SEED)
    try:
        check(stand_in)
    except AssertionError as exc:
        return {"passed": False, "calls": position[0], "error": f"a test failed at call {position[0]}"
                + (f": {exc}" if str(exc) else "")}
    except Exception as exc:
        return {"passed": False, "calls": position[0], "error": f"{type(exc).__name__}: {exc}"[:1000]}
    return {"passed": True, "calls": position[0]}


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
    if mode == "record":
        os.dup2(2, 1)  # what the agent's code prints goes to stderr: stdout carries nothing here
        record(sys.argv[2], sys.argv[3])
        return
    marker = sys.argv[2]
    spec = json.loads(sys.stdin.read())
    _limit_memory(int(spec.get("memory_bytes") or 0) or 2 << 30)
    try:
        verdict = replay(spec)
    except Exception as exc:
        verdict = {"passed": False, "error": f"replay failed: {type(exc).__name__}: {exc}"[:1000]}
    sys.stdout.write(marker + " " + json.dumps(verdict) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
