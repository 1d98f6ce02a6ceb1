"""The harness contract: the agent loop the engine runs, each optional hook with a real default.

A harness subclasses ``Harness`` and implements ``run``; the engine calls ``setup`` and ``resolved_settings``
directly, so a subclass overrides only what it needs.
"""

from __future__ import annotations

import abc
import logging
from typing import TYPE_CHECKING, Any, ClassVar

from ..params import convert_params

if TYPE_CHECKING:
    from ..dependencies import Requirement
    from ..interfaces import ComponentContext, Environment, HarnessResult, ModelClient, Mount, PreparedTask, RunContext


class Harness(abc.ABC):
    """The agent loop. Constructed as ``Cls(params, ctx)``; a subclass calls ``super().__init__(params, ctx)``,
    which keeps them as ``self.params`` (its ``Params`` struct) and ``self.ctx``."""

    #: the harness's short name (the class name when not given).
    name: ClassVar[str] = ""
    #: when False the engine records attempts as ``skipped`` and runs no verifier (e.g. harness ``none``).
    evaluates: ClassVar[bool] = True
    #: when False the engine opens no environment for the agent.
    needs_environment: ClassVar[bool] = True
    #: when True the engine routes model calls through its gateway and gives the harness ``RunContext.model_env``
    #: (an agent process that calls the model itself over HTTP).
    needs_model_endpoint: ClassVar[bool] = False
    #: when True the engine gives the harness the task's reference solution (``RunContext.solution``, from
    #: ``Benchmark.reference_solution``); no other harness ever receives it.
    oracle: ClassVar[bool] = False
    #: when True the harness runs only on benchmarks that offer tools (``Benchmark.tool_session``): refused
    #: before any task on one that defines none (e.g. ``tool_agent``).
    needs_tools: ClassVar[bool] = False
    #: when True the harness submits patches it did not make (``predictions``): refused before any task on a
    #: benchmark that does not grade a submitted patch (``Benchmark.grades_patch``).
    submits_patches: ClassVar[bool] = False
    #: when True the harness gives back a finished run's recorded attempts (``recorded``, for ``rescore``): refused
    #: before any task on a benchmark whose grading needs the agent's environment (``Benchmark.rescorable``).
    regrades: ClassVar[bool] = False
    #: when False the harness never calls a model (e.g. ``none``, ``oracle``, ``predictions``): a model named
    #: without ``base_url`` then only labels the run (e.g. a predictions file's ``model_name_or_path``).
    calls_model: ClassVar[bool] = True
    #: packages the harness imports, checked (or installed) before it is constructed.
    requirements: ClassVar[tuple[Requirement, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not cls.name:
            cls.name = cls.__name__

    def __init__(self, params: Any, ctx: ComponentContext) -> None:
        # the registry passes the ``Params`` struct it converted; a dict given by hand is converted here
        self.params = convert_params(type(self), params, f"harness {self.name}")
        self.ctx = ctx

    @abc.abstractmethod
    async def run(self, task: PreparedTask, env: Environment | None, model: ModelClient, ctx: RunContext,
                  log: logging.Logger) -> HarnessResult:
        """Run the agent on ``task``; ``env`` is None when ``needs_environment`` is False."""

    async def setup(self, task: PreparedTask, env: Environment, log: logging.Logger) -> None:
        """Runs in the agent's environment after the benchmark's ``setup``, before ``run`` (e.g. installing the
        agent), bounded by ``setup_timeout``. Default: nothing."""
        return None  # a hook with nothing to do by default, not a required method

    def mounts(self) -> tuple[Mount, ...]:
        """Host directories the agent's environment gets (read-only binds, e.g. an installed agent's program),
        passed in ``EnvOpenSpec.mounts`` to providers with ``capabilities.mounts``. Default: none."""
        return ()

    def resolved_settings(self) -> dict[str, Any]:
        """What the harness chose beyond its params (e.g. a default agent config and its package version), for
        params.json. Default: ``{}``."""
        return {}


__all__ = ["Harness"]
