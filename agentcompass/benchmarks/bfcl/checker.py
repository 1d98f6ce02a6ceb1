"""BFCL's single-turn grading, our own implementation of its AST checker and its relevance rule.

A model's answer is its tool calls (``[{name: arguments_json}, ...]``) or, without calls, its text. The AST
categories decode the calls (a text answer or arguments that are not a JSON object fail to decode) and check them
against the possible answers: each parameter lists its accepted values (``""`` among them: the parameter may be
left out); strings compare after BFCL's normalisation (lower case, no spaces nor ``,./-_*^``, ``'`` as ``"``);
an int is accepted for a float; a value of the possible answers' type where the schema wants another is a
"variable" and compares as is; dicts and lists of dicts compare key by key; ``parallel`` categories match the
calls to the answers in any order, ``multiple`` ones check the one call, the others want exactly one call. Java and
JavaScript parameters are strings in the language's syntax, converted first (``bfcl_java_js``). Irrelevance
categories pass when the answer holds no call, relevance ones when it holds one. Each verdict carries BFCL's
``error_type`` and message, so a disagreement with BFCL's own checker is visible.
"""

from __future__ import annotations

import re
from typing import Any, cast

from ...tool_json import loads_bounded
from .java_js import JAVA_TYPES, JS_TYPES, java_value, js_value

Verdict = dict[str, Any]

_PYTHON_TYPES: dict[str, type] = {"string": str, "integer": int, "float": float, "boolean": bool, "array": list,
                                  "tuple": list, "dict": dict, "any": str}
_NESTED_PYTHON = ("array", "tuple")
_NESTED_CONVERTED = ("Array", "ArrayList", "array")
_STRIP = re.compile(r"[ ,./\-_*^]")
#: characters of one call's arguments decoded at most (the tool_agent harness's cap on arguments it executes).
MAX_ARGUMENT_CHARS = 256 * 1024


def language_of(category: str) -> str:
    """``java``, ``javascript`` or ``python``: how a category's parameter values are written."""
    if "java" in category and "javascript" not in category:
        return "java"
    if "javascript" in category:
        return "javascript"
    return "python"


def tool_name(name: str) -> str:
    """A function's name as offered to the model: OpenAI-style APIs refuse ``.`` in names, so it becomes ``_``."""
    return name.replace(".", "_")


def normalise(text: str) -> str:
    """BFCL's string normalisation: no spaces nor ``,./-_*^``, lower case, ``'`` as ``"``."""
    return _STRIP.sub("", text).lower().replace("'", '"')


def _fail(error: str | list[Any], error_type: str) -> Verdict:
    return {"valid": False, "error": error if isinstance(error, list) else [error], "error_type": error_type}


_OK: Verdict = {"valid": True, "error": []}


def decode_calls(answer: Any) -> list[dict[str, Any]]:
    """The answer's calls as ``[{name: {param: value}}]``; ValueError when they do not decode (a text answer,
    arguments that are not JSON, longer than ``MAX_ARGUMENT_CHARS`` or nested deeper than ``tool_json.MAX_DEPTH``:
    no BFCL answer comes near either)."""
    if isinstance(answer, str):
        if answer:
            raise ValueError("the answer is text, not function calls")
        return []
    if not isinstance(answer, list):
        raise ValueError("the answer is not a list of calls")
    out = []
    for call in answer:
        if not isinstance(call, dict) or not call:
            raise ValueError("a call is not a {name: arguments} object")
        name = next(iter(call))
        raw = call[name]
        out.append({name: loads_bounded(raw, what=f"the arguments of {name}", max_chars=MAX_ARGUMENT_CHARS)
                    if isinstance(raw, str) else raw})
    return out


def _call_shaped(calls: list[Any]) -> bool:
    return all(isinstance(c, dict) and len(c) == 1 and isinstance(next(iter(c.values())), dict) for c in calls)


def has_call(answer: Any) -> bool:
    """Whether the answer holds a function call, as BFCL's relevance rule sees it."""
    try:
        calls = decode_calls(answer)
    except (ValueError, TypeError):
        return False
    if not _call_shaped(calls) or not calls:
        return False
    return not (len(calls) == 1 and not calls[0])


def check_relevance(answer: Any, category: str) -> Verdict:
    """Irrelevance categories: no call is right; relevance ones: a call is."""
    called = has_call(answer)
    if "irrelevance" in category:
        return _OK if not called else _fail("Valid syntax. Successfully decode AST when it should not.",
                                            "irrelevance_error:decoder_success")
    return _OK if called else _fail("Invalid syntax. Failed to decode AST when it should have.",
                                    "relevance_error:decoder_failed")


def check_answer(functions: list[dict[str, Any]], answer: Any, possible: list[dict[str, Any]],
                 category: str) -> Verdict:
    """The verdict on an AST category's answer against the possible answers."""
    if "relevance" in category:
        return check_relevance(answer, category)
    try:
        calls = decode_calls(answer)
    except (ValueError, TypeError) as exc:
        return _fail(f"Invalid syntax. Failed to decode AST. {exc}", "ast_decoder:decoder_failed")
    if not _call_shaped(calls):
        return _fail("Did not output in the specified format.", "ast_decoder:decoder_wrong_output_format")
    return check_calls(functions, calls, possible, category)


def check_calls(functions: list[dict[str, Any]], calls: list[dict[str, Any]], possible: list[dict[str, Any]],
                category: str) -> Verdict:
    """BFCL's ``ast_checker`` on decoded calls."""
    language = language_of(category)
    if "parallel" in category:
        return _check_parallel(functions, calls, possible, language)
    if "multiple" in category:
        if len(calls) != len(possible):
            return _fail("Wrong number of functions.", "multiple_function_checker:wrong_count")
        return _check_one(_describe(functions, next(iter(possible[0]))), calls[0], possible[0], language)
    if len(calls) != 1:
        return _fail("Wrong number of functions.", "simple_function_checker:wrong_count")
    return _check_one(functions[0], calls[0], possible[0], language)


def _describe(functions: list[dict[str, Any]], name: str) -> dict[str, Any] | None:
    return next((f for f in functions if f["name"] == name), None)


def _check_parallel(functions: list[dict[str, Any]], calls: list[dict[str, Any]], possible: list[dict[str, Any]],
                    language: str) -> Verdict:
    if len(calls) != len(possible):
        return _fail("Wrong number of functions.", "parallel_function_checker_no_order:wrong_count")
    used: set[int] = set()
    for i, expected in enumerate(possible):
        description = _describe(functions, next(iter(expected)))
        errors: list[Any] = []
        matched = False
        for index, call in enumerate(calls):
            if index in used:
                continue
            verdict = _check_one(description, call, expected, language)
            if verdict["valid"]:
                used.add(index)
                matched = True
                break
            errors.append({f"Model Result Index {index}": {"sub_error": verdict["error"],
                                                            "sub_error_type": verdict["error_type"]}})
        if not matched:
            left = [n for n in range(len(calls)) if n not in used]
            errors.insert(0, f"Could not find a matching function among index {left} of model output for index {i} "
                             "of possible answers.")
            return _fail(errors, "parallel_function_checker_no_order:cannot_find_match")
    return _OK


def _answer_type(options: list[Any]) -> type | None:
    return next((type(o) for o in options if o != ""), None)


def _type_check(param: str, value: Any, options: list[Any], described: str, expected: type,
                nested: type | None) -> Verdict:
    """BFCL's one-level type check; ``is_variable``: the value has the possible answers' type, not the schema's."""
    answer_type = _answer_type(options)
    is_variable = answer_type is not None and answer_type is not expected
    if type(value) is expected:
        if nested is None:
            return {"valid": True, "error": [], "is_variable": is_variable}
        items: list[Any] = cast(list[Any], value)  # nested types are the item types of arrays and tuples
        for option in options:
            ok = True
            if type(option) is list:
                for item in items:
                    if not _type_check(param, item, option, str(nested), nested, None)["valid"]:
                        ok = False
                        break
            if ok:
                return {"valid": True, "error": [], "is_variable": is_variable}
        nested_error = (f"Nested type checking failed for parameter {param!r}. Expected outer type {described} "
                        f"with inner type {nested}. Parameter value: {value!r}.")
        if answer_type is not None and type(value) is answer_type:
            return {**_fail(nested_error, "type_error:nested"), "is_variable": True}
        return {**_fail([nested_error,
                         f"Incorrect type for parameter {param!r}. Expected type {described}, got "
                         f"{type(value).__name__}. Parameter value: {value!r}."], "type_error:simple"),
                "is_variable": False}
    if answer_type is not None and type(value) is answer_type:
        return {"valid": True, "error": [], "is_variable": True}
    return {**_fail(f"Incorrect type for parameter {param!r}. Expected type {described}, got {type(value).__name__}. "
                    f"Parameter value: {value!r}.", "type_error:simple"), "is_variable": False}


def _norm_if_str(value: Any) -> Any:
    return normalise(value) if type(value) is str else value


def _check_string(param: str, value: str, options: list[Any]) -> Verdict:
    if normalise(value) not in [normalise(o) for o in options if type(o) is str]:
        return _fail(f"Invalid value for parameter {param!r}: {value!r}. Expected one of {options}. Case "
                     "insensitive.", "value_error:string")
    return _OK


def _check_list(param: str, value: list[Any], options: list[Any]) -> Verdict:
    mine = [_norm_if_str(v) for v in value]
    if mine not in [[_norm_if_str(v) for v in option] for option in options]:
        return _fail(f"Invalid value for parameter {param!r}: {value!r}. Expected one of {options}.",
                     "value_error:list/tuple")
    return _OK


def _check_dict(param: str, value: dict[str, Any], options: list[Any]) -> Verdict:
    verdict = _fail([], "dict_checker:unclear")
    for option in options:
        if option == "":
            continue
        verdict = _fail([], "dict_checker:unclear")
        ok = True
        for key, item in value.items():
            if key not in option:
                verdict = _fail(f"Unexpected dict key parameter: '{key}'.", "value_error:dict_key")
                ok = False
                break
            if _norm_if_str(item) not in [_norm_if_str(o) for o in option[key]]:
                verdict = _fail(f"Invalid value for parameter {key!r}: {item!r}.", "value_error:dict_value")
                ok = False
                break
        for key, accepted in option.items():
            if key not in value and "" not in accepted:
                verdict = _fail(f"Missing dict key parameter: '{key}'.", "value_error:dict_key")
                ok = False
                break
        if ok:
            return _OK
    return verdict


def _check_list_of_dicts(param: str, value: list[Any], options: list[Any]) -> Verdict:
    verdict = _fail([], "list_dict_checker:unclear")
    for option in options:
        if len(value) != len(option):
            verdict = _fail("Wrong number of dictionaries in the list.", "value_error:list_dict_count")
            continue
        ok = True
        for item, expected in zip(value, option, strict=True):
            verdict = _check_dict(param, item, [expected])
            if not verdict["valid"]:
                ok = False
                break
        if ok:
            return _OK
    return verdict


def _check_one(description: dict[str, Any] | None, call: dict[str, Any], possible: dict[str, Any],
               language: str) -> Verdict:
    """BFCL's ``simple_function_checker``: one call against one function's possible answers."""
    if description is None:
        raise ValueError("the possible answer names a function the question does not offer")
    accepted: dict[str, list[Any]] = next(iter(possible.values()))
    name = tool_name(description["name"])
    properties: dict[str, Any] = description["parameters"]["properties"]
    if name not in call:
        return _fail(f"Function name {name!r} not found in model output.", "simple_function_checker:wrong_func_name")
    args: dict[str, Any] = call[name]
    for param in description["parameters"]["required"]:
        if param not in args:
            return _fail(f"Missing required parameter: {param!r}.", "simple_function_checker:missing_required")
    for param, value in args.items():
        if param not in properties or param not in accepted:
            return _fail(f"Unexpected parameter: {param!r}.", "simple_function_checker:unexpected_param")
        described = properties[param]["type"]
        nested: type | None = None
        if language == "java":
            expected = JAVA_TYPES[described]
            if type(value) is not str:
                return _fail(f"Incorrect type for parameter {param!r}. Expected type String, got "
                             f"{type(value).__name__}. Parameter value: {value!r}.", "type_error:java")
            if described in _NESTED_CONVERTED:
                item_type = properties[param]["items"]["type"]
                nested = JAVA_TYPES[item_type]
                value = java_value(value, described, item_type)
            else:
                value = java_value(value, described)
        elif language == "javascript":
            expected = JS_TYPES[described]
            if type(value) is not str:
                return _fail(f"Incorrect type for parameter {param!r}. Expected type String, got "
                             f"{type(value).__name__}. Parameter value: {value!r}.", "type_error:js")
            if described in _NESTED_CONVERTED:
                item_type = properties[param]["items"]["type"]
                nested = JS_TYPES[item_type]
                value = js_value(value, described, item_type)
            else:
                value = js_value(value, described)
        else:
            expected = _PYTHON_TYPES[described]
            if described in _NESTED_PYTHON:
                nested = _PYTHON_TYPES[properties[param]["items"]["type"]]
        if described == "tuple" and type(value) is tuple:
            value = list(value)
        if language == "python" and described == "float" and type(value) is int:
            value = float(value)
        typed = _type_check(param, value, accepted[param], described, expected, nested)
        if not typed["valid"]:
            return {"valid": False, "error": typed["error"], "error_type": typed["error_type"]}
        if not typed["is_variable"]:
            special: Verdict | None = None
            if expected is dict:
                special = _check_dict(param, value, accepted[param])
            elif expected is list and nested is dict:
                special = _check_list_of_dicts(param, value, accepted[param])
            elif expected is str:
                special = _check_string(param, value, accepted[param])
            elif expected is list:
                special = _check_list(param, value, accepted[param])
            if special is not None:
                if not special["valid"]:
                    return special
                continue
        if value not in accepted[param]:
            return _fail(f"Invalid value for parameter {param!r}: {value!r}. Expected one of {accepted[param]}.",
                         "value_error:others")
    for param, options in accepted.items():
        if param not in args and "" not in options:
            return _fail(f"Optional parameter {param!r} not provided and not marked as optional.",
                         "simple_function_checker:missing_optional")
    return {"valid": True, "error": []}


__all__ = ["check_answer", "check_calls", "check_relevance", "decode_calls", "has_call", "language_of", "normalise",
           "tool_name"]
