"""A harness declaring a requirement that only the test's local package index serves (loaded by dotted path)."""

from __future__ import annotations

import importlib
from typing import Any, ClassVar

from agentcompass.dependencies import Requirement
from agentcompass.harnesses.shell_agent import ShellAgent
from agentcompass.interfaces import ComponentContext

PROBE = Requirement("acdep-probe==1.0", "acdep_probe")


class ProbeHarness(ShellAgent):
    """``shell_agent`` that imports ``acdep_probe`` when constructed: it must be installed before that."""

    requirements: ClassVar[tuple[Requirement, ...]] = (PROBE,)

    def __init__(self, params: dict[str, Any], ctx: ComponentContext) -> None:
        super().__init__(params, ctx)
        self.probe_answer = importlib.import_module(PROBE.module).ANSWER
