"""Systematic wrong answers for the bfcl tests: reference answers with a wrong value, a missing or extra parameter,
an extra or missing call, a wrong type, calls in another order, another function, text instead of calls, broken
JSON; and for multi-turn scripts the same inside a turn's calls."""

from __future__ import annotations

import copy
import json
import random
from typing import Any

#: arguments that are not a JSON object or not JSON at all (what the format checks must catch).
FORMAT_KINDS = ("bad_json", "non_object_args", "empty_args", "one_of_two_broken")
SINGLE_KINDS = ("wrong_value", "drop_param", "extra_param", "extra_call", "drop_call", "wrong_type", "swap_order",
                "rename", "text", "restyle", "none", *FORMAT_KINDS)
MULTI_KINDS = ("wrong_value", "drop_call", "extra_call", "swap_order", "wrong_type", "skip_step", "none",
               *FORMAT_KINDS)
NON_OBJECTS = ("[1]", "null", "1", '"x"', "true")


def wrong_value(value: Any, rng: random.Random) -> Any:
    """A value of the same type that differs."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + rng.choice([1, -1, 7])
    if isinstance(value, float):
        return value + 1.5
    if isinstance(value, str):
        return value + rng.choice(["x", " extra", "2"]) if value else "x"
    if isinstance(value, list):
        return value[:-1] if value else [1]
    if isinstance(value, dict):
        return {**value, "unexpected_key": 1} if rng.random() < 0.5 else {}
    return "x"


def restyle(value: Any) -> Any:
    """Strings (also inside lists and dicts) in upper case with a space and a dash added."""
    if isinstance(value, str):
        return f" {value.upper()}-"
    if isinstance(value, list):
        return [restyle(v) for v in value]
    if isinstance(value, dict):
        return {k: restyle(v) for k, v in value.items()}
    return value


def wrong_type(value: Any) -> Any:
    """The value as another type (a number as a string, a string as a number...)."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return 42
    if isinstance(value, list):
        return json.dumps(value)
    return [value]


def _args(call: dict[str, Any]) -> dict[str, Any]:
    return json.loads(call["arguments"])


def _set_args(call: dict[str, Any], args: dict[str, Any]) -> None:
    call["arguments"] = json.dumps(args)


def _mutate_calls(calls: list[dict[str, Any]], kind: str, rng: random.Random, other_name: str) -> Any:
    """The calls after one mutation (a string: text instead of calls)."""
    calls = copy.deepcopy(calls)
    target = rng.randrange(len(calls))
    args = _args(calls[target])
    if kind == "wrong_value" and args:
        key = rng.choice(sorted(args))
        args[key] = wrong_value(args[key], rng)
    elif kind == "wrong_type" and args:
        key = rng.choice(sorted(args))
        args[key] = wrong_type(args[key])
    elif kind == "restyle" and args:  # BFCL forgives case, spaces and some punctuation in strings
        key = rng.choice(sorted(args))
        args[key] = restyle(args[key])
    elif kind == "drop_param" and args:
        del args[rng.choice(sorted(args))]
    elif kind == "extra_param":
        args["unexpected_param"] = "value"
    elif kind in ("extra_call", "duplicate"):
        calls.append(copy.deepcopy(calls[target]))
        return calls
    elif kind in ("drop_call", "skip_call") and len(calls) > 1:
        calls.pop(target)
        return calls
    elif kind == "swap_order" and len(calls) > 1:
        calls.reverse()
        return calls
    elif kind == "rename":
        calls[target]["name"] = other_name
    elif kind == "text":
        return "I would call the function with these values."
    elif kind == "bad_json":
        calls[target]["arguments"] = calls[target]["arguments"][:-1]
        return calls
    elif kind == "non_object_args":
        calls[target]["arguments"] = rng.choice(NON_OBJECTS)
        return calls
    elif kind == "empty_args":
        calls[target]["arguments"] = ""
        return calls
    elif kind == "one_of_two_broken":  # a good call next to a broken one
        broken = copy.deepcopy(calls[target])
        broken["arguments"] = broken["arguments"][:-1]
        calls.insert(rng.randrange(len(calls) + 1), broken)
        return calls
    _set_args(calls[target], args)
    return calls


def mutate_single_turn(turns: list[Any], entry: dict[str, Any], rng: random.Random,
                       kind: str | None = None) -> list[Any]:
    """A single-turn script (one turn) with one mutation of its answer."""
    first = turns[0]
    names = [f["name"].replace(".", "_") for f in entry["function"]] or ["some_function"]
    if isinstance(first, str):  # an irrelevance question: calling anything is wrong, any text is right
        kind = kind if kind in ("call", "text", *FORMAT_KINDS) else rng.choice(["call", "text", *FORMAT_KINDS])
        if kind == "text":
            return ["Sorry, I cannot do that."]
        calls = [{"name": names[0], "arguments": "{}"}]
        return [{"tool_calls": calls if kind == "call" else _mutate_calls(calls, kind, rng, names[0])}]
    kind = kind or rng.choice(SINGLE_KINDS)
    if kind == "none":
        return copy.deepcopy(turns)
    other = next((n for n in names if n != first["tool_calls"][0]["name"]), "not_a_function")
    mutated = _mutate_calls(first["tool_calls"], kind, rng, other)
    return [mutated] if isinstance(mutated, str) else [{"tool_calls": mutated}]


def mutate_multi_turn(turns: list[Any], rng: random.Random, kind: str | None = None) -> list[Any]:
    """A multi-turn script with one mutation in one of its steps with calls."""
    out = copy.deepcopy(turns)
    steps = [i for i, t in enumerate(out) if not isinstance(t, str)]
    kind = kind or rng.choice(MULTI_KINDS)
    if not steps or kind == "none":
        return out
    index = rng.choice(steps)
    calls = out[index]["tool_calls"]
    if kind == "skip_step":
        out[index] = "I will not do that."
        return out
    mutated = _mutate_calls(calls, {"drop_call": "skip_call", "extra_call": "duplicate"}.get(kind, kind), rng,
                            "not_a_function")
    out[index] = {"tool_calls": mutated} if not isinstance(mutated, str) else mutated
    return out


def record_of(script: list[Any], n_turns: int) -> list[list[list[list[str]]]]:
    """The multi-turn record the session keeps when the scripted model plays ``script``: per user turn, the steps
    with calls until a text answer or a step whose arguments do not all decode to an object (BFCL ends the turn
    there); the script's last turn repeats once it runs out."""
    turns: list[list[list[list[str]]]] = []
    current: list[list[list[str]]] = []
    i = 0
    while len(turns) < n_turns:
        turn = script[i] if i < len(script) else script[-1]
        i += 1
        if isinstance(turn, str):
            turns.append(current)
            current = []
        else:
            step = [[c["name"], c["arguments"]] for c in turn["tool_calls"]]
            current.append(step)
            if not all(_decodes(raw) for _, raw in step):  # as BFCL's inference: the step ends the turn
                turns.append(current)
                current = []
    return turns


def _decodes(raw: str) -> bool:
    try:
        return isinstance(json.loads(raw), dict)
    except ValueError:
        return False


__all__ = ["FORMAT_KINDS", "MULTI_KINDS", "SINGLE_KINDS", "mutate_multi_turn", "mutate_single_turn", "record_of",
           "restyle", "wrong_type", "wrong_value"]
