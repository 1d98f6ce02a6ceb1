"""Post-hoc checks of an attempt (reward hacking, loops, empty or truncated output, mixed language).

An analyzer subclasses ``Analyzer`` (``base.py``) and implements ``analyze(task, attempt) -> dict | None``:
``task`` is the public TaskSpec (no ground truth), ``attempt`` the finished AttemptRecord. It returns None
when it found nothing, else a dict of evidence, stored as ``attempt.analysis[name]``. The request field
``enable_analysis`` (true = every registered analyzer, or a list of ids / ``{"id", "params"}``) turns them
on; the engine runs them after the last try of an attempt, before the detail is committed. An analyzer
that raises never fails the attempt: the error goes to ``analysis["analyzer_errors"][name]``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from .._errors import ConfigError
from ..interfaces import ComponentContext, TaskSpec
from ..records import AttemptRecord
from .base import Analyzer

#: where analyzer exceptions are recorded in an attempt's analysis (not a flag).
ERRORS_KEY = "analyzer_errors"
_ERROR_CHARS = 500


def flag_names(analysis: Mapping[str, Any]) -> list[str]:
    """The flags an attempt's analysis raises: every key with a non-empty value, except the error record
    and a dict carrying ``flagged: false``; the names listed under a ``flags`` key count too.

    Benchmarks put their own flags there (e.g. SWE-bench's ``suspected_reward_hacking``)."""
    out: set[str] = set()
    for key, value in analysis.items():
        if key == ERRORS_KEY:
            continue
        if key == "flags" and isinstance(value, list):
            out.update(str(v) for v in value if v)
        elif isinstance(value, dict) and "flagged" in value:
            if value["flagged"]:
                out.add(key)
        elif value:
            out.add(key)
    return sorted(out)


def _entries(enable: bool | Sequence[Any], registry: Any) -> list[tuple[str, dict[str, Any], str]]:
    """(id, params, field) of each analyzer ``enable_analysis`` asks for."""
    if enable is False:
        return []
    if enable is True:
        return [(name, {}, "enable_analysis") for name in registry.names()]
    out: list[tuple[str, dict[str, Any], str]] = []
    for i, item in enumerate(enable):
        field = f"enable_analysis[{i}]"
        if isinstance(item, str):
            out.append((item, {}, field))
        else:  # a ComponentSpec (or anything with id/params)
            out.append((item.id, dict(item.params), field))
    return out


def build_analyzers(enable: bool | Sequence[Any], registry: Any, ctx: ComponentContext) -> list[Analyzer]:
    """Instantiate the analyzers ``enable_analysis`` selects; ConfigError for unknown ids or bad params."""
    analyzers: list[Analyzer] = []
    seen: set[str] = set()
    for name, params, field in _entries(enable, registry):
        cls = registry.resolve(name, field=field)
        try:
            analyzer = cls(registry.convert_params(cls, params, name), ctx)
        except ConfigError as exc:
            raise ConfigError(f"{exc} (in `{field}`)", field=f"{field}.params") from None
        label = str(getattr(analyzer, "name", "") or name)
        if label in seen:
            raise ConfigError(f"Analyzer {label!r} is enabled twice in `enable_analysis`.", field=field)
        seen.add(label)
        analyzer.name = label
        analyzers.append(analyzer)
    return analyzers


def run_analyzers(analyzers: Sequence[Analyzer], task: TaskSpec, attempt: AttemptRecord,
                  log: logging.Logger | None = None) -> dict[str, Any]:
    """The attempt's analysis with every analyzer's findings merged in. Never raises.

    What the benchmark already put there is kept; a finding under a key the benchmark used is merged into
    it when both are dicts, else stored as ``<name>_analyzer``."""
    analysis = dict(attempt.analysis)
    errors: dict[str, str] = dict(analysis.get(ERRORS_KEY) or {})
    for analyzer in analyzers:
        try:
            found = analyzer.analyze(task, attempt)
            if found is not None:
                found = msgspec.to_builtins(found)  # whatever it returned must be JSON-serialisable
        except Exception as exc:
            errors[analyzer.name] = f"{type(exc).__name__}: {exc}"[:_ERROR_CHARS]
            if log is not None:
                log.warning("analyzer %s failed on %s: %r", analyzer.name, task.task_id, exc)
            continue
        if not found:
            continue
        key = analyzer.name
        before = analysis.get(key)
        if before is None:
            analysis[key] = found
        elif isinstance(before, dict) and isinstance(found, dict):
            analysis[key] = {**before, **found}
        else:
            analysis[f"{key}_analyzer"] = found
    if errors:
        analysis[ERRORS_KEY] = errors
    return analysis


__all__ = ["ERRORS_KEY", "Analyzer", "build_analyzers", "flag_names", "run_analyzers"]
