"""AgentCompass: evaluate LLM agents -- benchmark x harness x environment x model -- fast and crash-safe.

Public API: ``run_evaluation``, ``launch``, ``async_launch``, ``rescore``, ``OrchestrationSpec``,
``RunRequestSpec``; the component bases ``Benchmark``, ``Harness``, ``EnvironmentProvider`` (with
``ProviderCapabilities``).
Heavy modules are imported lazily so ``import agentcompass`` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_LAZY = {
    "run_evaluation": "agentcompass.api",
    "launch": "agentcompass.api",
    "async_launch": "agentcompass.api",
    "rescore": "agentcompass.rescoring",
    "async_rescore": "agentcompass.rescoring",
    "RescoreResult": "agentcompass.rescoring",
    "OrchestrationSpec": "agentcompass.specs",
    "RunRequestSpec": "agentcompass.specs",
    "ComponentSpec": "agentcompass.specs",
    "ModelSpec": "agentcompass.specs",
    "LaunchResult": "agentcompass.results",
    "RequestOutcome": "agentcompass.results",
    "EvaluationResult": "agentcompass.results",
    "AgentCompassError": "agentcompass._errors",
    "ConfigError": "agentcompass._errors",
    "NotSupportedYet": "agentcompass._errors",
    "ModelError": "agentcompass._errors",
    "RunInsideLoopError": "agentcompass._errors",
    "Registries": "agentcompass.registry",
    "Requirement": "agentcompass.dependencies",
    "ProgressEvent": "agentcompass.records",
    "Benchmark": "agentcompass.benchmarks.base",
    "Harness": "agentcompass.harnesses.base",
    "EnvironmentProvider": "agentcompass.environments.base",
    "ProviderCapabilities": "agentcompass.environments.base",
}

__all__ = sorted([*_LAZY, "__version__"])

if TYPE_CHECKING:
    from ._errors import AgentCompassError, ConfigError, ModelError, NotSupportedYet, RunInsideLoopError  # noqa: F401
    from .api import async_launch, launch, run_evaluation  # noqa: F401
    from .benchmarks.base import Benchmark  # noqa: F401
    from .dependencies import Requirement  # noqa: F401
    from .environments.base import EnvironmentProvider, ProviderCapabilities  # noqa: F401
    from .harnesses.base import Harness  # noqa: F401
    from .records import ProgressEvent  # noqa: F401
    from .registry import Registries  # noqa: F401
    from .rescoring import RescoreResult, async_rescore, rescore  # noqa: F401
    from .results import EvaluationResult, LaunchResult, RequestOutcome  # noqa: F401
    from .specs import ComponentSpec, ModelSpec, OrchestrationSpec, RunRequestSpec  # noqa: F401


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agentcompass' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
