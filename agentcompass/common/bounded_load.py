"""Loading user-written YAML and JSON with every size bounded.

A YAML alias is cheap to parse but is expanded wherever the document is walked (validation, hashing,
``params.json``): nine levels of nine aliases ("billion laughs") are a few hundred bytes that become 9**9
values. So a document is composed first and refused when its expanded size (every node counted as often
as aliases repeat it) passes ``MAX_NODES``, or when an alias refers to itself; only then is it constructed.
Input size is capped too, and nesting too deep for the parser is a ``ConfigError``, not a traceback.
"""

from __future__ import annotations

import json
from typing import Any

from .._errors import ConfigError

#: the largest spec file read (bytes).
MAX_SPEC_BYTES = 16 << 20
#: the most YAML nodes a document may expand to, counting each alias as the nodes it repeats.
MAX_NODES = 1_000_000


def _line(node: Any) -> str:
    mark = getattr(node, "start_mark", None)
    return f" at line {mark.line + 1}" if mark is not None else ""


def _check_expansion(root: Any, where: str) -> None:
    """Refuse a composed YAML node graph that expands past ``MAX_NODES`` or contains a cycle."""
    import yaml

    sizes: dict[int, int] = {}
    busy: set[int] = set()
    # post-order walk without recursion: (node, children pushed?)
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        key = id(node)
        if key in sizes:
            continue
        if isinstance(node, yaml.SequenceNode):
            children: list[Any] = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        else:
            sizes[key] = 1
            continue
        if not expanded:
            if key in busy:
                raise ConfigError(f"{where}: a YAML alias refers to a node that contains it{_line(node)} "
                                  "(a recursive structure cannot be a spec).", field="spec")
            busy.add(key)
            stack.append((node, True))
            stack.extend((c, False) for c in children if id(c) not in sizes)
            continue
        busy.discard(key)
        size = 1 + sum(sizes[id(c)] for c in children)
        if size > MAX_NODES:
            raise ConfigError(f"{where}: the YAML node{_line(node)} expands to more than {MAX_NODES} values "
                              f"through aliases (*name); the cap is {MAX_NODES}. Write the values out or "
                              f"use fewer aliases.", field="spec")
        sizes[key] = size


def load_yaml(text: str, where: str) -> Any:
    """``text`` parsed as YAML (safe types only) with alias expansion bounded; ``where`` names the source."""
    import yaml

    class _Loader(yaml.SafeLoader):
        def get_single_node(self) -> Any:
            node = super().get_single_node()
            if node is not None:
                _check_expansion(node, where)
            return node

    loader = _Loader(text)
    try:
        return loader.get_single_data()
    except RecursionError:
        raise ConfigError(f"{where}: nested too deeply to read.", field="spec") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"{where} is not valid YAML{at}: {problem}.", field="spec") from None
    finally:
        loader.dispose()


def load_json(text: str | bytes, where: str, field: str) -> Any:
    """``text`` parsed as JSON; bad syntax or nesting too deep is a ``ConfigError`` naming ``where``."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{where} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}.",
                          field=field) from None
    except RecursionError:
        raise ConfigError(f"{where} is nested too deeply to read.", field=field) from None


def read_spec_text(path: str) -> str:
    """The text of a spec file, refusing one larger than ``MAX_SPEC_BYTES`` before reading it whole."""
    from pathlib import Path

    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"Spec file {path!r} does not exist (or is not a file).", field="spec")
    with p.open("rb") as f:
        data = f.read(MAX_SPEC_BYTES + 1)
    if len(data) > MAX_SPEC_BYTES:
        raise ConfigError(f"Spec file {path!r} is larger than {MAX_SPEC_BYTES >> 20} MiB, the cap for a spec.",
                          field="spec")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"Spec file {path!r} is not UTF-8 text ({exc.reason} at byte {exc.start}).",
                          field="spec") from None
