"""The benchmark contract: what the engine calls on a benchmark, each optional hook with a real default.

A benchmark subclasses ``Benchmark`` and implements ``load_tasks``, ``prepare`` and ``evaluate``; the engine calls
the other hooks directly, so a subclass overrides only what it needs.
"""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator, Callable, Iterable
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from ..params import convert_params
from .selection import SELECTION_PARAM, requested_ids, resolve_k, select_tasks

if TYPE_CHECKING:
    from ..dependencies import Requirement
    from ..interfaces import (
        ComponentContext,
        Environment,
        EvalContext,
        EvalResult,
        HarnessResult,
        MetricsAccumulator,
        PreparedTask,
        ReferenceSolution,
        RunContext,
        TaskSpec,
    )
    from ..tools import ToolSession

T = TypeVar("T")

#: the dimensions a benchmark measures (``Benchmark.dimension``): the summary and the report group by them.
DIMENSIONS: tuple[str, ...] = ("tool_use", "web_research", "science", "coding", "productivity")


class Benchmark(abc.ABC):
    """Loads tasks, prepares what the agent sees, grades attempts, aggregates metrics.

    Constructed as ``Cls(params, ctx)``; a subclass calls ``super().__init__(params, ctx)``, which keeps them as
    ``self.params`` (its ``Params`` struct) and ``self.ctx``, resolves ``k`` and reads the selection param
    (``sample_ids`` or an old name of it) for ``select``."""

    #: the benchmark's short name (the class name when not given).
    name: ClassVar[str] = ""
    #: bump when loading/grading changes: part of the reuse identity hash.
    version: ClassVar[str] = "0"
    #: packages the benchmark imports, checked (or installed) before it is constructed.
    requirements: ClassVar[tuple[Requirement, ...]] = ()
    #: attempts per task, read by the engine after construction: the base constructor sets it from the ``k``
    #: param (or ``avgk``), else ``ComponentContext.k``; a class may declare its own default here.
    k: int = 1
    #: the task ids the selection param names (None: every task), and that param's name as given.
    sample_ids: list[str] | None = None
    selection_field: str = SELECTION_PARAM
    #: what the benchmark measures: one of ``DIMENSIONS``.
    dimension: ClassVar[str] = "coding"
    #: True when ``evaluate`` grades the patch a harness submits (``HarnessResult.patch``) without an agent
    #: environment, so a predictions file can be graded (harness ``predictions``, ``agentcompass evaluate``).
    grades_patch: ClassVar[bool] = False
    #: True when ``evaluate`` needs only what an attempt's record keeps (its final answer, its patch, its
    #: trajectory), not what ``collect`` takes out of the agent's environment: a finished run can then be graded
    #: again (``agentcompass rescore``, harness ``recorded``).
    rescorable: ClassVar[bool] = False
    #: where the tasks came from (e.g. a Hub dataset's resolved commit), recorded in params.json.
    source: Any = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not cls.name:
            cls.name = cls.__name__
        if cls.dimension not in DIMENSIONS:
            raise TypeError(f"{cls.__qualname__}.dimension is {cls.dimension!r}, not one of {', '.join(DIMENSIONS)}")

    def __init__(self, params: Any, ctx: ComponentContext) -> None:
        # the registry passes the ``Params`` struct it converted; a dict given by hand is converted here
        where = f"benchmark {self.name}"
        self.params = convert_params(type(self), params, where)
        self.ctx = ctx
        self.k = resolve_k(self.params, ctx, where, default=type(self).k)
        self.selection_field, self.sample_ids = requested_ids(self.params, where)

    def select(self, items: Iterable[T], id_of: Callable[[T], str] | None = None, *, scope: str = "") -> list[T]:
        """The items the selection param names, in their order (all when it is not given); an unknown id is a
        ConfigError naming the param. ``id_of(item)`` is an item's task id (default ``item.task_id``)."""
        return select_tasks(items, self.sample_ids, field=self.selection_field, where=f"benchmark {self.name}",
                            id_of=id_of, scope=scope)

    @abc.abstractmethod
    def load_tasks(self) -> Iterable[TaskSpec] | AsyncIterator[TaskSpec]:
        """The tasks, in run order (a list, any iterable, or an async iterator)."""

    @abc.abstractmethod
    def prepare(self, task: TaskSpec) -> PreparedTask:
        """What the harness and the agent's environment may see of ``task`` (it has no ground truth)."""

    @abc.abstractmethod
    async def evaluate(self, ctx: EvalContext) -> EvalResult:
        """The verdict on one attempt."""

    async def setup(self, task: PreparedTask, env: Environment) -> None:
        """Prepare the agent's environment after it opens, before the harness runs (e.g. hide git history the
        agent must not see). Default: nothing."""
        return None  # a hook with nothing to do by default, not a required method

    async def collect(self, task: PreparedTask, env: Environment, result: HarnessResult) -> dict[str, Any]:
        """Take what grading needs out of the agent's environment (a patch, a workspace tar) before the engine
        closes it; ``EvalContext.artifacts`` in ``evaluate``. Default: nothing (``{}``)."""
        return {}

    def reference_solution(self, task: TaskSpec) -> ReferenceSolution | None:
        """The task's known-good solution, for a harness that declares ``oracle = True`` (only such a harness
        ever gets it, in ``RunContext.solution``). Default: None (the benchmark has none)."""
        return None

    def tool_session(self, task: TaskSpec, ctx: RunContext) -> ToolSession | None:
        """The tools of one try of ``task`` (its public form, no ground truth) for a tool-calling harness
        (``tool_agent``), given to it in ``RunContext.tools``; closed by the engine after the agent's run.
        Default: None (the benchmark offers no tools)."""
        return None

    def new_accumulator(self) -> MetricsAccumulator | None:
        """A fresh metrics accumulator for one request; None (the default) means the engine's
        ``DefaultAccumulator``."""
        return None

    def resolved_settings(self) -> dict[str, Any]:
        """What the benchmark chose beyond its params, for params.json. Default: ``{}``."""
        return {}

    def secrets(self) -> tuple[str, ...]:
        """Strings in the benchmark's params that must never reach disk or logs (e.g. a token in a URL); the
        engine masks them everywhere. Default: none."""
        return ()

    async def aclose(self) -> None:
        """Release what the benchmark held for the request (worker processes, clients); the engine calls it once
        when the request ends, however it ended. Default: nothing."""
        return None  # a hook with nothing to do by default


__all__ = ["DIMENSIONS", "Benchmark"]
