"""Helpers of the bfcl tests: bfcl-eval (installed once, without dependencies, into a cache directory), its own
checker functions as the oracle, reference answers built from the possible answers, and mutations of them."""

from __future__ import annotations

import copy
import importlib
import importlib.util
import json
import os
import sys
import types
from pathlib import Path
from typing import Any

from agentcompass.benchmarks.bfcl.benchmark import CATEGORIES, is_multi_turn, load_category
from agentcompass.benchmarks.bfcl.checker import language_of, tool_name
from agentcompass.benchmarks.bfcl.multi_turn import parse_call
from agentcompass.benchmarks.bfcl.package import data_dir, ensure_bfcl_eval

#: the model name the oracle grades as: one whose tools have ``.`` replaced by ``_`` (as ours are).
ORACLE_MODEL = "gpt-4o-2024-11-20-FC"


def bfcl_data() -> Path:
    """The package's data directory; bfcl-eval is installed into the cache (pip, no deps) on first use: pip reads
    PyPI or the configured index, as CI's venv build does; the tests themselves open no connection."""
    os.environ.setdefault("BFCL_PROJECT_ROOT", str(Path.home() / ".cache" / "agentcompass" / "bfcl-project"))
    return data_dir(ensure_bfcl_eval(auto_install=True))


def official_checkers() -> types.SimpleNamespace:
    """bfcl-eval's ``ast_checker`` and ``multi_turn_checker``. Its model table (``constants.model_config``) imports
    every model SDK the package supports (~40 packages, not installed): the checker reads only
    ``MODEL_CONFIG_MAPPING[name].underscore_to_dot`` from it, so that one module is given as a table of the one
    model the oracle grades as, its real setting (True: OpenAI's function names cannot hold a dot)."""
    bfcl_data()
    if "bfcl_eval.constants.model_config" not in sys.modules:
        table = types.ModuleType("bfcl_eval.constants.model_config")
        table.MODEL_CONFIG_MAPPING = {ORACLE_MODEL: types.SimpleNamespace(underscore_to_dot=True)}  # type: ignore[attr-defined]
        sys.modules["bfcl_eval.constants.model_config"] = table
    ast_mod = importlib.import_module("bfcl_eval.eval_checker.ast_eval.ast_checker")
    mt_mod = importlib.import_module("bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker")
    enums = importlib.import_module("bfcl_eval.constants.enums")
    return types.SimpleNamespace(ast_checker=ast_mod.ast_checker, multi_turn_checker=mt_mod.multi_turn_checker,
                                 Language=enums.Language)


def official_single_turn(functions: list[dict[str, Any]], answer: Any, possible: Any, category: str) -> bool:
    """bfcl-eval's verdict on one single-turn answer (see ``official_single_turn_verdict``)."""
    return bool(official_single_turn_verdict(functions, answer, possible, category)["valid"])


def official_single_turn_verdict(functions: list[dict[str, Any]], answer: Any, possible: Any,
                                 category: str) -> dict[str, Any]:
    """bfcl-eval's verdict (valid, error_type) on one single-turn answer, through the steps its eval runner takes
    for an OpenAI function-calling model: the handler's ``decode_ast``, the format check, ``ast_checker``."""
    ck = official_checkers()
    # the FC handlers' decode_ast: [{name: json}] -> [{name: dict}]; a text answer iterates its characters and fails
    try:
        decoded = []
        for invoked in answer:
            name = next(iter(invoked.keys()))
            decoded.append({name: json.loads(invoked[name])})
    except Exception:
        decoded = None
    if "relevance" in category:
        called = decoded is not None and not _is_empty_output(decoded)
        if "irrelevance" in category:
            return {"valid": not called} if not called else {"valid": False,
                                                             "error_type": "irrelevance_error:decoder_success"}
        return {"valid": True} if called else {"valid": False, "error_type": "relevance_error:decoder_failed"}
    if decoded is None:
        return {"valid": False, "error_type": "ast_decoder:decoder_failed"}
    if not _is_function_calling_format(decoded):
        return {"valid": False, "error_type": "ast_decoder:decoder_wrong_output_format"}
    language = {"java": ck.Language.JAVA, "javascript": ck.Language.JAVASCRIPT}.get(language_of(category),
                                                                                   ck.Language.PYTHON)
    result = ck.ast_checker(copy.deepcopy(functions), decoded, copy.deepcopy(possible), language, category,
                            ORACLE_MODEL)
    return {"valid": bool(result["valid"]), **({} if result["valid"] else {"error_type": result["error_type"]})}


def _bfcl_utils() -> Any:
    """bfcl-eval's ``bfcl_eval.utils`` (the format checks), imported for real: it imports ``filelock`` (not
    installed, used only by its result-file writers, never by the functions the oracle calls), given as a stub."""
    bfcl_data()
    if "filelock" not in sys.modules and importlib.util.find_spec("filelock") is None:
        stub = types.ModuleType("filelock")
        stub.FileLock = object  # type: ignore[attr-defined]
        sys.modules["filelock"] = stub
    return importlib.import_module("bfcl_eval.utils")


def _is_function_calling_format(decoded: Any) -> bool:
    return bool(_bfcl_utils().is_function_calling_format_output(decoded))


def _is_empty_output(decoded: Any) -> bool:
    return bool(_bfcl_utils().is_empty_output(decoded))


_RUNS = [0]


def official_multi_turn(entry: dict[str, Any], turns: list[list[list[list[str]]]], truth: list[list[str]]) -> bool:
    """bfcl-eval's verdict on a multi-turn record (see ``official_multi_turn_verdict``)."""
    return bool(official_multi_turn_verdict(entry, turns, truth)["valid"])


def official_multi_turn_verdict(entry: dict[str, Any], turns: list[list[list[list[str]]]],
                                truth: list[list[str]]) -> dict[str, Any]:
    """bfcl-eval's verdict on a multi-turn record: its FC decode (``name(k=repr(v))``) and ``multi_turn_checker``
    (whose API instances live in its module globals by model name: each call gets a fresh name)."""
    ck = official_checkers()
    if len(turns) != len(truth):
        return {"valid": False, "error_type": "multi_turn:force_terminated"}
    decoded_turns = []
    for turn in turns:
        steps = []
        for step in turn:
            try:
                calls = []
                for name, raw in step:
                    value = json.loads(raw)
                    calls.append(f"{name}({','.join(f'{k}={v!r}' for k, v in value.items())})")
            except Exception:
                continue
            if calls:
                steps.append(calls)
        decoded_turns.append(steps)
    _RUNS[0] += 1
    prompt = copy.deepcopy(entry)
    name = f"oracle_{os.getpid()}_{_RUNS[0]}"
    try:
        result = ck.multi_turn_checker(decoded_turns, truth, prompt, entry["id"].rsplit("_", 1)[0], name)
    finally:  # its instances stay in its module's globals under that name
        module = sys.modules[ck.multi_turn_checker.__module__.replace("multi_turn_checker", "multi_turn_utils")]
        for key in [k for k in vars(module) if k.startswith(name)]:
            delattr(module, key)
    return {"valid": bool(result["valid"]), **({} if result["valid"] else {"error_type": result["error_type"]})}


def _java_literal(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    return str(value)


def _js_literal(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f"'{value}'"
    if isinstance(value, list):
        return "[" + ", ".join(_js_literal(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_js_literal(v)}" for k, v in value.items()) + "}"
    return str(value)


def _in_language(value: Any, schema: dict[str, Any], language: str) -> Any:
    """A possible-answer value written as the model writes it: Python as is; Java/JavaScript as a source string."""
    kind = schema.get("type")
    if language == "python":
        if kind == "dict" and isinstance(value, dict):
            return {k: next(o for o in v if o != "") for k, v in value.items() if "" not in v}
        if kind in ("array", "tuple") and schema.get("items", {}).get("type") == "dict" and isinstance(value, list):
            return [{k: next(o for o in v if o != "") for k, v in d.items() if "" not in v} for d in value]
        return value
    if isinstance(value, str):
        return value
    item = schema.get("items", {}).get("type")
    if language == "java":
        if isinstance(value, bool):
            return "true" if value else "false"
        if kind == "long":
            return f"{value}L"
        if kind == "float":
            return f"{value}f"
        if kind == "Array" and isinstance(value, list):
            return "new " + {"String": "String", "integer": "int"}.get(item or "", "Object") + "[]{" + ", ".join(
                str(v) for v in value) + "}"
        if kind == "ArrayList" and isinstance(value, list):
            return "new ArrayList<>(Arrays.asList(" + ", ".join(_java_literal(v) for v in value) + "))"
        if kind == "HashMap" and isinstance(value, dict):
            puts = " ".join(f'put("{k}", {_java_literal(v)});' for k, v in value.items())
            return "new HashMap<String, String>() {{ " + puts + " }}"
        return str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if kind == "Bigint":
        return f"{value}n"
    if kind == "array" and isinstance(value, list):
        return "[" + ", ".join(_js_literal(v) for v in value) + "]"
    if kind == "dict" and isinstance(value, dict):
        return _js_literal({k: next((o for o in v if o != ""), "") for k, v in value.items() if "" not in v}
                           if all(isinstance(v, list) for v in value.values()) else value)
    return str(value)


def reference_calls(entry: dict[str, Any], possible: list[dict[str, Any]],
                    category: str) -> list[tuple[str, Any]] | None:
    """The reference answer of a single-turn question: one call per possible answer, each parameter's first
    accepted value, optional ones left out (None: a parameter lists no value at all)."""
    language = language_of(category)
    docs = {f["name"]: f for f in entry["function"]}
    calls = []
    for expected in possible:
        name, params = next(iter(expected.items()))
        props = docs[name]["parameters"]["properties"]
        required = docs[name]["parameters"].get("required", [])
        args = {}
        for param, options in params.items():
            if "" in options and param not in required:
                continue
            values = [o for o in options if o != ""]
            if not values:
                return None
            args[param] = _in_language(values[0], props.get(param, {}), language)
        calls.append((tool_name(name), args))
    return calls


def multi_turn_reference(entry: dict[str, Any], truth: list[list[str]]) -> list[list[tuple[str, dict[str, Any]]]]:
    """The ground truth's calls per turn with positional arguments named (from the API methods' signatures)."""
    import inspect

    from agentcompass.benchmarks.bfcl.multi_turn import ApiState
    state = ApiState(entry.get("initial_config", {}), entry["involved_classes"], False)
    out = []
    for turn in truth:
        calls = []
        for text in turn:
            name, args, kwargs = parse_call(text)
            names = [p for p in inspect.signature(state.methods[name]).parameters]
            calls.append((name, {**dict(zip(names, args, strict=False)), **kwargs}))
        out.append(calls)
    return out


def all_rows(categories: tuple[str, ...] = CATEGORIES) -> list[tuple[str, dict[str, Any], Any]]:
    """(category, entry, ground truth) of every question of the categories."""
    data = bfcl_data()
    return [(c, e, a) for c in categories for e, a in load_category(data, c)]


__all__ = ["ORACLE_MODEL", "all_rows", "bfcl_data", "is_multi_turn", "multi_turn_reference", "official_checkers",
           "official_multi_turn", "official_multi_turn_verdict", "official_single_turn",
           "official_single_turn_verdict", "reference_calls"]
