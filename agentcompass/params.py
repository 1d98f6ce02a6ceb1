"""Component params: each component class declares a msgspec ``Params`` struct, and ``convert_params`` turns
the user's dict into it once, with one readable error for every component.

The error names the field (``benchmark.params.sample_ids``), the value given and what is allowed (the expected
type and range, the allowed values, the known parameter names with a did-you-mean for a typo).
"""

from __future__ import annotations

import re
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

import msgspec
from msgspec import inspect as mi

from ._errors import ConfigError, did_you_mean
from ._validate import _range_text

S = TypeVar("S", bound=msgspec.Struct)

#: the params that select tasks for a benchmark that declares no ``selection_params`` (the names every built-in
#: benchmark used before the declaration existed).
DEFAULT_SELECTION_PARAMS: tuple[str, ...] = ("sample_ids", "limit", "categories", "shard", "repeat")


def params_type(cls: type) -> type[msgspec.Struct] | None:
    """The ``Params`` struct ``cls`` declares, or None (its constructor then takes the dict as given)."""
    declared = getattr(cls, "Params", None)
    return declared if isinstance(declared, type) and issubclass(declared, msgspec.Struct) else None


def selection_params(cls: type) -> tuple[str, ...]:
    """The benchmark params that select tasks (left out of the reuse identity): its ``selection_params``."""
    declared = getattr(cls, "selection_params", None)
    return tuple(declared) if declared is not None else DEFAULT_SELECTION_PARAMS


def convert_params(cls: type, raw: Any, where: str) -> Any:
    """``raw`` (a mapping) as ``cls``'s ``Params`` struct; a struct already converted (also one a subclass hands
    its base, of its parent's ``Params``), and any params of a class without ``Params``, are returned as they are.
    ``where`` names the component: ``"benchmark shell_tasks"``."""
    declared = params_type(cls)
    if declared is None or isinstance(raw, msgspec.Struct):
        return raw
    return as_params(declared, raw, where)


def as_params(struct: type[S], raw: msgspec.Struct | Mapping[str, Any] | None, where: str, *,
              field_prefix: str | None = None) -> S:
    """``raw`` converted to ``struct`` (kept when it already is one); ConfigError naming the param otherwise.

    The error's field is ``<kind>.params.<key>``, or ``<field_prefix><key>`` for params that live elsewhere in
    the request (a model's are ``model_params.<key>``)."""
    if isinstance(raw, struct):
        return raw
    if raw is None:
        raw = {}
    elif isinstance(raw, msgspec.Struct):  # another component's params (a subclass's): the same fields again
        raw = msgspec.structs.asdict(raw)
    if not isinstance(raw, Mapping):
        raise ConfigError(f"The params of {where} must be a mapping of parameter names to values, got "
                          f"{type(raw).__name__}.", field=_whole(where, field_prefix))
    try:
        return msgspec.convert(dict(raw), struct)
    except msgspec.ValidationError as exc:
        raise readable_params_error(exc, struct, raw, where, field_prefix) from None


def readable_params_error(exc: msgspec.ValidationError, struct: type[msgspec.Struct], raw: Mapping[str, Any],
                          where: str, field_prefix: str | None = None) -> ConfigError:
    """msgspec's ``Expected `int` >= 1 - at `$.k` `` as a sentence naming the param, the value and what is allowed."""
    text, _, path = str(exc).partition(" - at `")
    names = [f.name for f in _fields(struct)]
    if text.startswith("Object contains unknown field `"):
        key = text.removeprefix("Object contains unknown field `").rstrip("`")
        return ConfigError(f"Unknown parameter {key!r} for {where}. Allowed parameters: "
                           f"{', '.join(names) or '(none)'}.{did_you_mean(key, names)}",
                           field=_field(where, key, field_prefix))
    path = path.rstrip("`")
    in_key = "` in `" in path  # "key` in `$.tmpfs": a mapping's key is wrong
    path = path.split("` in `", 1)[-1]
    key = path.removeprefix("$.").split("[", 1)[0].split(".", 1)[0]
    if key not in raw:  # a check of the struct as a whole (its __post_init__)
        return ConfigError(f"Invalid params for {where}: {text}.", field=_whole(where, field_prefix))
    field = next(f for f in _fields(struct) if f.name == key)
    inner = path.removeprefix(f"$.{key}")
    text = re.sub(r" matching regex '.*'$", "", text)  # the pattern is in the description, in words
    detail = f" ({text} at `{key}{inner}`{' (a key)' if in_key else ''})" if inner or in_key else ""
    order = literal_values(typing.get_type_hints(struct, include_extras=True).get(key))
    return ConfigError(f"Parameter {key!r} of {where} must be {describe(field.type, order)}{detail}, got "
                       f"{_shown(raw[key])}.", field=_field(where, key, field_prefix))


def describe(t: mi.Type, order: list[Any] | None = None) -> str:
    """What a value of type ``t`` must be, in words: ``an integer >= 1 and <= 1000``, ``one of a, b``
    (literal values listed in ``order`` when given: msgspec sorts them). A type annotated with
    ``msgspec.Meta(description=...)`` is described by that text (a pattern is no sentence)."""
    if isinstance(t, mi.Metadata):  # a type with its own words (msgspec.Meta(description=...))
        words = (t.extra_json_schema or {}).get("description")
        return str(words) if words else describe(t.type, order)
    if isinstance(t, mi.UnionType):
        parts = [describe(u, order) for u in t.types if not isinstance(u, mi.NoneType)]
        for part in parts:  # "x or a list of (x)" reads better as "x, or a list of them"
            if f"a list of ({part})" in parts:
                return f"{part}, or a list of them"
        return " or ".join(parts) if parts else "null"
    if isinstance(t, mi.BoolType):
        return "true or false"
    if isinstance(t, mi.IntType | mi.FloatType):
        noun = "an integer" if isinstance(t, mi.IntType) else "a number"
        bounds = _range_text(t.gt, t.ge, t.le)
        if t.lt is not None:
            bounds = " and ".join(b for b in (bounds, f"< {t.lt:g}") if b)
        return f"{noun} {bounds}" if bounds else noun
    if isinstance(t, mi.StrType):
        if t.pattern is not None:
            return f"a string matching {t.pattern!r}"
        return "a non-empty string" if t.min_length else "a string"
    if isinstance(t, mi.LiteralType):
        rank = order or []
        values = sorted(t.values, key=lambda v: rank.index(v) if v in rank else len(rank))
        return f"one of {', '.join(str(v) for v in values)}"
    if isinstance(t, mi.ListType | mi.TupleType | mi.VarTupleType | mi.SetType | mi.FrozenSetType):
        item = getattr(t, "item_type", None)
        return f"a list of ({describe(item, order)})" if item is not None else "a list"
    if isinstance(t, mi.DictType):
        return f"a mapping of ({describe(t.key_type, order)}) to ({describe(t.value_type, order)})"
    if isinstance(t, mi.AnyType):
        return "any value"
    return type(t).__name__.removesuffix("Type").lower()


def literal_values(annotation: Any) -> list[Any]:
    """The values of every ``Literal`` in ``annotation``, in declared order."""
    if typing.get_origin(annotation) is typing.Literal:
        return list(typing.get_args(annotation))
    return [v for arg in typing.get_args(annotation) for v in literal_values(arg)]


def _fields(struct: type[msgspec.Struct]) -> tuple[mi.Field, ...]:
    info = mi.type_info(struct)
    assert isinstance(info, mi.StructType)
    return info.fields


def _kind(where: str) -> str:
    return where.split()[0]


def _field(where: str, key: str, prefix: str | None = None) -> str:
    return f"{_kind(where)}.params.{key}" if prefix is None else f"{prefix}{key}"


def _whole(where: str, prefix: str | None) -> str:
    return f"{_kind(where)}.params" if prefix is None else prefix.rstrip(".") or "params"


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 200 else f"{text[:197]}..."
