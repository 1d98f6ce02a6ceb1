"""The ``agentdojo`` package as the ``agentdojo`` benchmark uses it: benchmark versions, suites, attacks, the tool
schemas and the system prompt, all read from the installed package (imported lazily: it is an optional extra).

Nothing here is copied from AgentDojo: the suites' environments, tasks, graders, tools and injection texts are the
package's own objects, looked up by name at run time.
"""

from __future__ import annotations

import functools
from typing import Any

#: the four suites AgentDojo ships, in its order.
SUITES: tuple[str, ...] = ("workspace", "travel", "banking", "slack")
#: attacks that cannot run unattended (``manual`` asks for each injection on stdin).
_INTERACTIVE_ATTACKS = frozenset({"manual"})


def package_version() -> str:
    """The installed ``agentdojo`` distribution's version."""
    import importlib.metadata

    return importlib.metadata.version("agentdojo")


@functools.cache
def benchmark_versions() -> tuple[str, ...]:
    """The benchmark versions the package registers (``v1`` ... ``v1.2.2``)."""
    from agentdojo.task_suite import load_suites

    return tuple(load_suites._SUITES)


def default_benchmark_version() -> str:
    """The newest version the package registers (``v1.2.2`` in 0.1.35, which is also its benchmark script's
    default; read from the registry rather than the script, which imports every provider's SDK)."""
    return benchmark_versions()[-1]


def get_suite(benchmark_version: str, name: str) -> Any:
    """The package's ``TaskSuite`` ``name`` of ``benchmark_version`` (both already validated)."""
    from agentdojo.task_suite.load_suites import get_suites

    return get_suites(benchmark_version)[name]


@functools.cache
def attack_names() -> tuple[str, ...]:
    """The registered attacks that run unattended (every one but ``manual``), sorted."""
    import agentdojo.attacks  # noqa: F401  (importing the package registers its attacks)
    from agentdojo.attacks.attack_registry import ATTACKS

    return tuple(sorted(n for n in ATTACKS if n not in _INTERACTIVE_ATTACKS))


def model_names() -> tuple[str, ...]:
    """The model names AgentDojo's attacks know how to address (``agentdojo.models.MODEL_NAMES``)."""
    from agentdojo.models import MODEL_NAMES

    return tuple(MODEL_NAMES)


def _target(name: str | None) -> Any:
    from agentdojo.agent_pipeline.base_pipeline_element import BasePipelineElement

    class Target(BasePipelineElement):
        """The attacked pipeline as AgentDojo's attacks see it: only its name (they address the model by it)."""

        def query(self, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("the agentdojo benchmark runs the agent through its harness, not a pipeline")

    target = Target()
    target.name = name
    return target


def load_attack(name: str, suite: Any, target_model: str | None) -> Any:
    """AgentDojo's attack ``name`` on ``suite``, aimed at a pipeline named ``target_model``. ValueError (the
    package's message) when the attack's text depends on the model's name and ``target_model`` is not one it knows.

    When ``target_model`` is None or unknown, an attack whose constructor insists on a name but whose text does not
    depend on it
    (``important_instructions_no_model_name`` replaces the name with its own) is built with a stand-in name: the
    text is the same whichever name it gets."""
    import agentdojo.attacks  # noqa: F401  (importing the package registers its attacks)
    from agentdojo.attacks.attack_registry import load_attack as load

    try:
        return load(name, suite, _target(target_model))
    except ValueError:
        names = _two_model_names()
        built = [load(name, suite, _target(n)) for n in names]
        if len({getattr(b, "model_name", None) for b in built}) == 1:
            return built[0]
        raise


def _two_model_names() -> tuple[str, str]:
    """Two model names AgentDojo addresses differently (to tell whether an attack's text depends on the name)."""
    from agentdojo.models import MODEL_NAMES

    first = next(iter(MODEL_NAMES))
    other = next(k for k, v in MODEL_NAMES.items() if v != MODEL_NAMES[first])
    return first, other


@functools.cache
def system_message() -> str:
    """The system prompt AgentDojo's pipelines use by default (``data/system_messages.yaml``, ``default``)."""
    from agentdojo.agent_pipeline.agent_pipeline import load_system_message

    return str(load_system_message(None))


def tool_schemas(suite: Any) -> list[dict[str, Any]]:
    """The suite's tools as OpenAI function tools, built as AgentDojo's OpenAI pipeline builds them: the name, the
    docstring's description and the JSON schema of the function's pydantic parameter model."""
    return [{"type": "function", "function": {"name": f.name, "description": f.description,
                                              "parameters": f.parameters.model_json_schema()}}
            for f in suite.tools]


__all__ = ["SUITES", "attack_names", "benchmark_versions", "default_benchmark_version", "get_suite", "load_attack",
           "model_names", "package_version", "system_message", "tool_schemas"]
