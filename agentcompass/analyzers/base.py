"""The analyzer contract: one check of a finished attempt (see the package docstring)."""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Any

from ..params import convert_params

if TYPE_CHECKING:
    from ..interfaces import ComponentContext, TaskSpec
    from ..records import AttemptRecord


class Analyzer(abc.ABC):
    """One check of a finished attempt. Constructed as ``Cls(params, ctx)``; a subclass calls
    ``super().__init__(params, ctx)``, which keeps them as ``self.params`` (its ``Params`` struct) and ``self.ctx``."""

    #: the key its findings are stored under in ``attempt.analysis`` (the registry id when empty).
    name: str = ""

    def __init__(self, params: Any, ctx: ComponentContext) -> None:
        # the registry passes the ``Params`` struct it converted; a dict given by hand is converted here
        self.params = convert_params(type(self), params, f"analyzer {self.name or type(self).__name__}")
        self.ctx = ctx

    @abc.abstractmethod
    def analyze(self, task: TaskSpec, attempt: AttemptRecord) -> dict[str, Any] | None:
        """None when it found nothing, else a dict of evidence."""


__all__ = ["Analyzer"]
