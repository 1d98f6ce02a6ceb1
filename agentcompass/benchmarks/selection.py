"""Which tasks a benchmark runs and how many attempts each gets, resolved the same way for every benchmark.

``sample_ids`` is the one selection param (a task id or a list of them; ``task_ids`` and ``user_tasks`` are old
names for it, and giving two of them is an error); an id the dataset does not have is a ``ConfigError`` in one
format, naming the param as given, the unknown ids, a did-you-mean and a few valid ids. ``k`` is the benchmark
param ``k`` (or its avg@k form ``avgk``), else the request's ``ComponentContext.k``, else the class's ``k`` (1).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from .._errors import ConfigError, did_you_mean
from .._validate import MAX_K, count

if TYPE_CHECKING:
    from ..interfaces import ComponentContext

T = TypeVar("T")

#: the param that names the tasks to run.
SELECTION_PARAM = "sample_ids"
#: older names of ``sample_ids`` some benchmarks declared (tau2 and bfcl ``task_ids``, agentdojo ``user_tasks``).
SELECTION_ALIASES: tuple[str, ...] = ("task_ids", "user_tasks")
#: the ids an error shows at most (unknown ones, and valid ones as examples).
SHOWN_IDS = 5


def _param(params: Any, name: str) -> Any:
    if isinstance(params, Mapping):
        return params.get(name)
    return getattr(params, name, None)


def _task_id(item: Any) -> str:
    return str(item.task_id)


def _listed(ids: Sequence[str]) -> str:
    more = f", ... ({len(ids)} in all)" if len(ids) > SHOWN_IDS else ""
    return ", ".join(repr(i) for i in ids[:SHOWN_IDS]) + more


def resolve_k(params: Any, ctx: ComponentContext | None, where: str, default: int = 1) -> int:
    """Attempts per task: the param ``k`` (or ``avgk``; not both), else the request's ``ctx.k``, else ``default``
    (a benchmark class's own ``k``, 1 unless it declares one)."""
    k, avgk = _param(params, "k"), _param(params, "avgk")
    if k is not None and avgk is not None:
        raise ConfigError(f"{where}: give either k or avgk, not both", field="benchmark.params.avgk")
    name = "avgk" if avgk is not None else "k"
    given = avgk if avgk is not None else k
    if given is not None:
        return count(given, f"benchmark.params.{name}", maximum=MAX_K, label=f"Parameter {name!r} of {where}")
    # ComponentContext.k is 1 when the request gave none (the engine sets it only after construction): that 1
    # must not replace a benchmark's declared k
    requested = 1 if ctx is None else int(ctx.k or 1)
    return requested if requested > 1 else default


def requested_ids(params: Any, where: str) -> tuple[str, list[str] | None]:
    """(the selection param as the user named it, its ids once each in the given order, or None for all)."""
    given = [(name, value) for name in (SELECTION_PARAM, *SELECTION_ALIASES)
             if (value := _param(params, name)) is not None]
    if not given:
        return SELECTION_PARAM, None
    field, value = given[0]
    if len(given) > 1:
        names = " and ".join(repr(n) for n, _ in given)
        raise ConfigError(f"Parameters {names} of {where} both select the tasks to run "
                          f"({', '.join(SELECTION_ALIASES)} are older names of {SELECTION_PARAM!r}): give one.",
                          field=f"benchmark.params.{given[1][0]}")
    ids = [value] if isinstance(value, str) else value
    if not isinstance(ids, list | tuple) or not all(isinstance(i, str) for i in ids):
        raise ConfigError(f"Parameter {field!r} of {where} must be a task id or a list of them, got {value!r}.",
                          field=f"benchmark.params.{field}")
    if not ids:
        raise ConfigError(f"Parameter {field!r} of {where} must not be empty, got [] (leave it out to run every "
                          "task).", field=f"benchmark.params.{field}")
    return field, list(dict.fromkeys(ids))


def unknown_ids_error(unknown: Sequence[str], known: Sequence[str], *, field: str, where: str,
                      scope: str = "") -> ConfigError:
    """The one error for task ids a benchmark does not have: the param, the unknown ids, a did-you-mean for the
    first and a few valid ids. ``scope`` says which part of the dataset was searched (e.g. ``split 'test'``)."""
    within = f" ({scope})" if scope else ""
    guesses = ((u, did_you_mean(u, known)) for u in unknown[:SHOWN_IDS])
    first, hint = next(((u, h) for u, h in guesses if h), ("", ""))
    if hint and len(unknown) > 1:  # say which of the unknown ids the guess is for
        hint = f"{hint[:-1]} for {first!r}?"
    return ConfigError(f"Unknown task id{'s' if len(unknown) > 1 else ''} {_listed(unknown)} in parameter "
                       f"{field!r} of {where}{within}.{hint} Valid ids: {_listed(known) if known else '(none)'}.",
                       field=f"benchmark.params.{field}")


def select_tasks(items: Iterable[T], ids: Sequence[str] | None, *, field: str, where: str,
                 id_of: Callable[[T], str] | None = None, scope: str = "") -> list[T]:
    """The items whose id (``id_of(item)``, default ``item.task_id``) is in ``ids``, in the items' order (all of
    them when ``ids`` is None); an id no item has is ``unknown_ids_error``."""
    items = list(items)
    if ids is None:
        return items
    key = id_of or _task_id
    known = [key(t) for t in items]
    have = set(known)
    unknown = [i for i in ids if i not in have]
    if unknown:
        raise unknown_ids_error(unknown, known, field=field, where=where, scope=scope)
    wanted = set(ids)
    return [t for t, i in zip(items, known, strict=True) if i in wanted]


__all__ = ["SELECTION_ALIASES", "SELECTION_PARAM", "requested_ids", "resolve_k", "select_tasks",
           "unknown_ids_error"]
