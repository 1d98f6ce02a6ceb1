"""The ``oracle`` harness: runs the task's reference solution instead of an agent, so every task of a benchmark
is checked to be solvable (a task its own solution fails is a broken task).

It declares ``oracle = True``: the engine asks the benchmark for the task's solution
(``Benchmark.reference_solution``) and hands it over in ``RunContext.solution``; no other harness ever gets it.
The solution's files are put into its directory in the agent's environment and its command runs there. No model
is called.
"""

from __future__ import annotations

import logging
import time
from typing import Any, ClassVar

import msgspec

from .._errors import ConfigError
from .._validate import Seconds
from ..common.text import truncate_middle
from ..environments._tar import tar_from_files
from ..interfaces import ComponentContext, Environment, HarnessResult, ModelClient, PreparedTask, RunContext
from ..records import Step, Trajectory
from .base import Harness

_WHERE = "harness oracle"
_OUTPUT_CAP = 20_000


class OracleParams(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """``oracle`` params: ``timeout`` seconds for the solution (default: the solution's own, else 600)."""

    timeout: Seconds | None = None


class Oracle(Harness):
    """Runs ``RunContext.solution`` in the agent's environment (params: ``OracleParams``)."""

    name: ClassVar[str] = "oracle"
    oracle: ClassVar[bool] = True
    calls_model: ClassVar[bool] = False
    Params: ClassVar[type[OracleParams]] = OracleParams
    params: OracleParams

    def __init__(self, params: OracleParams | dict[str, Any], ctx: ComponentContext) -> None:
        super().__init__(params, ctx)

    async def run(self, task: PreparedTask, env: Environment | None, model: ModelClient, ctx: RunContext,
                  log: logging.Logger) -> HarnessResult:
        solution = ctx.solution
        if solution is None:
            raise ConfigError(f"{_WHERE}: the benchmark has no reference solution for task {task.task_id!r}",
                              field="harness")
        assert env is not None  # needs_environment
        started = time.time()
        if solution.files:
            await env.exec(["mkdir", "-p", solution.directory], timeout=60)
            await env.put_archive(solution.directory, tar_from_files(solution.files, mode=0o755))
        res = await env.exec(solution.command, cwd=env.workdir, env=dict(solution.env),
                             timeout=self.params.timeout or solution.timeout_s)
        log.debug("oracle %s: solution exited %s", task.task_id, res.exit_code)
        step = Step(index=0, action=" ".join(solution.command), observation=truncate_middle(res.output, _OUTPUT_CAP),
                    exit_code=res.exit_code, exec_latency_s=res.duration_s, started_at=started)
        ctx.trajectory.steps.append(step)
        stop = "solution_timeout" if res.timed_out else "solution_done" if res.exit_code == 0 else "solution_failed"
        trajectory = Trajectory(started_at=started, finished_at=time.time(), steps=[step], stop_reason=stop)
        return HarnessResult(trajectory=trajectory)
