"""BFCL function docs as OpenAI tools, the way BFCL offers them to function-calling models.

BFCL's docs use Python-ish type names (``dict``, ``float``, ``tuple``, ``any``) and, for Java and JavaScript, the
language's own (``HashMap``, ``Bigint``...). A model sees: the description with a language hint appended; for Java
and JavaScript every parameter typed ``string`` (values are written in the language's syntax) with the real type
in its description; then each type mapped to JSON Schema (``dict`` -> ``object``, ``float`` -> ``number`` with a
note, ``tuple`` -> ``array``, unknown -> ``string``) down the nesting BFCL handles; and ``.`` in names as ``_``.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from .checker import language_of, tool_name

#: BFCL's type names -> JSON Schema types (its ``GORILLA_TO_OPENAPI``).
OPENAPI_TYPES: dict[str, str] = {
    "integer": "integer", "number": "number", "float": "number", "string": "string", "boolean": "boolean",
    "bool": "boolean", "array": "array", "list": "array", "dict": "object", "object": "object", "tuple": "array",
    "any": "string", "byte": "integer", "short": "integer", "long": "integer", "double": "number", "char": "string",
    "ArrayList": "array", "Array": "array", "HashMap": "object", "Hashtable": "object", "Queue": "array",
    "Stack": "array", "Any": "string", "String": "string", "Bigint": "integer"}

_HINTS = {"java": " Note that the provided function is in Java 8 SDK syntax.",
          "javascript": " Note that the provided function is in JavaScript syntax.",
          "python": " Note that the provided function is in Python 3 syntax."}


def with_language_hint(functions: list[dict[str, Any]], category: str) -> list[dict[str, Any]]:
    """The docs as BFCL shows them: a language hint on each description; Java/JavaScript parameters as strings."""
    language = language_of(category)
    out = copy.deepcopy(functions)
    for item in out:
        item["description"] = item["description"] + _HINTS[language]
        if language == "python":
            continue
        lang = "Java" if language == "java" else "JavaScript"
        for value in item["parameters"]["properties"].values():
            if value["type"] == "any":
                value["description"] += f" This parameter can be of any type of {lang} object in string representation."
            else:
                value["description"] += f" This is {lang} {value['type']} type parameter in string representation."
            if value["type"] in (("ArrayList", "Array") if language == "java" else ("array",)):
                value["description"] += (f" The list elements are of type {value['items']['type']}; they are not in "
                                         "string representation.")
                del value["items"]
            if language == "javascript" and value["type"] == "dict" and "properties" in value:
                value["description"] += (" The dictionary entries have the following schema; they are not in string "
                                         f"representation. {json.dumps(value['properties'])}")
                del value["properties"]
            value["type"] = "string"
    return out


def _cast(properties: dict[str, Any]) -> dict[str, Any]:
    for value in properties.values():
        if "type" not in value:
            value["type"] = "string"
        else:
            kind = value["type"]
            if kind == "float":
                value["format"] = "float"
                value["description"] += " This is a float type value."
            value["type"] = OPENAPI_TYPES.get(kind, "string")
        if value["type"] in ("array", "object"):
            if "properties" in value:
                value["properties"] = _cast(value["properties"])
            elif "items" in value:
                items = value["items"]
                items["type"] = OPENAPI_TYPES[items["type"]]
                if items["type"] == "array" and "items" in items:
                    items["items"]["type"] = OPENAPI_TYPES[items["items"]["type"]]
                elif items["type"] == "object" and "properties" in items:
                    items["properties"] = _cast(items["properties"])
    return properties


def to_tools(functions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI chat tools for the (already hinted) docs."""
    tools = []
    for item in copy.deepcopy(functions):
        params = item.get("parameters") or {}
        params["type"] = "object"
        params["properties"] = _cast(params.get("properties") or {})
        tools.append({"type": "function", "function": {"name": tool_name(item["name"]),
                                                       "description": item.get("description", ""),
                                                       "parameters": params}})
    return tools


__all__ = ["OPENAPI_TYPES", "to_tools", "with_language_hint"]
