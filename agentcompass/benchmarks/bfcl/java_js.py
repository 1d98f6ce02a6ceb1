"""BFCL's reading of Java and JavaScript parameter values: the model passes each as a string in the language's
syntax (``"3.5f"``, ``"new ArrayList<>(Arrays.asList(1, 2))"``, ``"[1, 2]"``, ``"{key: 'v'}"``) and the checker
converts it to a Python value before comparing. A string that does not have the expected shape stays a string
(and so fails the type check), as in BFCL's own converters, whose regular-expression reading (including its
limits, e.g. elements split on every comma) this follows so verdicts agree.
"""

from __future__ import annotations

import re
from typing import Any

JAVA_TYPES: dict[str, type] = {"byte": int, "short": int, "integer": int, "float": float, "double": float,
                               "long": int, "boolean": bool, "char": str, "Array": list, "ArrayList": list,
                               "Set": set, "HashMap": dict, "Hashtable": dict, "Queue": list, "Stack": list,
                               "String": str, "any": str}
JS_TYPES: dict[str, type] = {"String": str, "integer": int, "float": float, "Bigint": int, "Boolean": bool,
                             "dict": dict, "array": list, "any": str}

_INT = re.compile(r"^-?\d+$")
_JAVA_FLOAT = re.compile(r"^-?\d+(\.\d+)?([eE][+-]?\d+)?[fF]$")
_JAVA_DOUBLE = re.compile(r"^-?\d+(\.\d+)?([eE][+-]?\d+)?$")
_JAVA_LONG = re.compile(r"^-?\d+[lL]$")


def _number(text: str) -> Any:
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text


def _java_literal(text: str) -> Any:
    if text in ("true", "false"):
        return text == "true"
    if text.startswith('"') and text.endswith('"'):
        return text[1:-1]
    if _JAVA_LONG.match(text):
        return int(text[:-1])
    if _JAVA_FLOAT.match(text):
        return float(text[:-1])
    return _number(text)


def _java_element(text: str, item_type: str | None) -> Any:
    if item_type in ("char", "String"):
        return text[1:-1]
    return java_value(text, item_type) if item_type else _java_literal(text)


def java_value(value: str, described: str, item_type: str | None = None) -> Any:
    """A Java-syntax string as the Python value BFCL compares (the string itself when it does not parse)."""
    if described not in JAVA_TYPES:
        raise ValueError(f"Unsupported type: {described}")
    if described in ("byte", "short", "integer"):
        return int(value) if _INT.match(value) else str(value)
    if described == "float":
        return float(value[:-1]) if _JAVA_FLOAT.match(value) else str(value)
    if described == "double":
        return float(value) if _JAVA_DOUBLE.match(value) else str(value)
    if described == "long":
        return int(value[:-1]) if _JAVA_LONG.match(value) else str(value)
    if described == "boolean":
        return value == "true" if value in ("true", "false") else str(value)
    if described in ("char", "String", "any"):
        return str(value)
    if described == "ArrayList":
        return _java_arraylist(value, item_type)
    if described == "Array":
        found = re.search(r"new\s+\w+\[\]\s*\{(.*?)\}", value)
        if not found:
            return value
        parts = [x.strip() for x in found.group(1).split(",") if x.strip()]
        return [java_value(x, item_type) if item_type else _java_literal(x) for x in parts]
    if described == "HashMap":
        return _java_hashmap(value)
    raise NotImplementedError(f"{described} conversion is not implemented")


def _java_arraylist(value: str, item_type: str | None) -> Any:
    found = re.search(r"new\s+ArrayList<\w*>\(Arrays\.asList\((.+?)\)\)", value)
    if found:
        return [_java_element(x.strip(), item_type) for x in found.group(1).split(",")]
    found = re.search(r"new\s+ArrayList<\w*>\(\)\s*\{\{\s*(.+?)\s*\}\}", value, re.DOTALL)
    if found:
        return [_java_element(x.strip(), item_type) for x in re.findall(r"add\((.+?)\)", found.group(1))]
    if re.search(r"new\s+ArrayList<\w*>\(\)", value):
        return []
    return value


def _java_hashmap(value: str) -> Any:
    found = re.search(r"new\s+HashMap<.*?>\s*\(\)\s*\{\s*\{?\s*(.*?)\s*\}?\s*\}", value, re.DOTALL)
    if found:
        out: dict[str, Any] = {}
        if found.group(1).strip():
            for key, item in re.findall(r"put\(\"(.*?)\",\s*(.*?)\)", found.group(1)):
                out[key] = _java_literal(item.strip())
        return out
    if re.search(r"new\s+HashMap<.*?>\s*\(\)", value):
        return {}
    return value


def _js_literal(text: str) -> Any:
    text = text.strip()
    if text in ("true", "false"):
        return text == "true"
    if len(text) >= 1 and ((text.startswith('"') and text.endswith('"')) or (text.startswith("'") and
                                                                          text.endswith("'"))):
        return text[1:-1]
    return _number(text)


def js_value(value: str, described: str, item_type: str | None = None) -> Any:
    """A JavaScript-syntax string as the Python value BFCL compares (the string itself when it does not parse)."""
    if described not in JS_TYPES:
        raise ValueError(f"Unsupported type: {described}")
    if described == "String":
        quoted = (value.startswith('"') and value.endswith('"')) or (value.startswith("'") and value.endswith("'"))
        return value[1:-1] if quoted else str(value)
    if described == "integer":
        return int(value) if _INT.match(value) else str(value)
    if described == "float":
        return float(value) if re.match(r"^-?\d+(\.\d+)?$", value) else str(value)
    if described == "Bigint":
        return int(value[:-1]) if re.match(r"^-?\d+n$", value) else str(value)
    if described == "Boolean":
        return value == "true" if value in ("true", "false") else str(value)
    if described == "dict":
        return _js_dict(value.strip())
    if described == "array":
        return _js_array(value.strip(), item_type)
    return str(value)


def _js_array(code: str, item_type: str | None) -> Any:
    two_d = re.match(r"\[\s*\[.*?\]\s*(,\s*\[.*?\]\s*)*\]|\bnew\s+Array\(\s*\[.*?\]\s*(,\s*\[.*?\]\s*)*\)", code)
    try:
        if two_d:
            rows = []
            for n, inner in enumerate(re.findall(r"\[(.*?)\]", two_d.group(0))):
                inner = inner.strip()
                if n == 0 and inner.startswith("["):
                    inner = inner[1:]
                rows.append([_js_literal(e.strip()) for e in inner.split(",")])
            return rows
        flat = re.match(r"\[(.*?)\]|\bnew\s+Array\((.*?)\)", code)
        if not flat:
            return code
        body = flat.group(1) if flat.group(1) is not None else flat.group(2)
        body = (body or "").strip()
        parts = body.split(",") if body else []
        if item_type:
            return [js_value(e.strip(), item_type, "String") if e.strip().startswith(("'", '"'))
                    else js_value(e.strip(), item_type) for e in parts]
        return [_js_literal(e.strip()) for e in parts]
    except Exception:
        # BFCL's converter keeps the text when any element fails to convert (e.g. an unsupported item type)
        return code


def _js_dict(code: str) -> Any:
    if code == "{}":
        return {}
    found = re.match(r"\{(.*?)\}", code)
    if not found:
        return code
    try:
        out: dict[str, Any] = {}
        for key, item in re.findall(r"([^:]+):\s*(.*?)(?:,\s*(?=[^,]+:)|$)", found.group(1)):
            key = key.strip().strip("'\"")
            item = item.strip()
            if item.startswith("[") and item.endswith("]"):
                out[key] = _js_array(item, None)
            elif item.startswith("{") and item.endswith("}"):
                out[key] = _js_dict(item)
            else:
                out[key] = _js_literal(item.strip("'\""))
        return out
    except Exception:
        return code


__all__ = ["JAVA_TYPES", "JS_TYPES", "java_value", "js_value"]
