"""Components for measuring the engine itself, loaded by dotted path like any third-party plugin.

- ``MockTasks``: ``n`` tasks whose answer is ``42``, graded in-process (no verifier environment).
- ``NoopProvider``: an environment whose open, exec and close return at once (exec answers ``hi``).
- ``SCRIPT``: the scripted-model params that solve a MockTasks task in 2 turns with the ``shell_agent``
  harness: turn 1 runs ``echo hi``, turn 2 submits ``42``.

So one task is: engine bookkeeping + 2 model calls + 1 exec + grading + its detail on disk -- what every real
task costs the engine, with the model and the sandbox taking no time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import IO, Any, ClassVar

from agentcompass.interfaces import (
    Benchmark,
    ComponentContext,
    EnvironmentProvider,
    EnvOpenSpec,
    EvalContext,
    EvalResult,
    ExecResult,
    NetworkPolicy,
    PreparedTask,
    TaskSpec,
)

MATCH = "perf-mock-task"
ANSWER = "42"
SCRIPT: dict[str, Any] = {
    "bundled": False,
    "script": [{"match": MATCH, "turns": ["```bash\necho hi\n```", f"<submit>{ANSWER}</submit>"]}],
}
BENCHMARK = "benchmarks_perf._components:MockTasks"
PROVIDER = "benchmarks_perf._components:NoopProvider"


class MockTasks(Benchmark):
    """``n`` identical tasks (ids ``mock-<i>``); correct when the final answer is ``42``."""

    version: ClassVar[str] = "1"

    def __init__(self, params: dict[str, Any], ctx: ComponentContext) -> None:
        self.n = int(params.get("n", 100))

    def load_tasks(self) -> list[TaskSpec]:
        return [TaskSpec(task_id=f"mock-{i}", ground_truth=ANSWER) for i in range(self.n)]

    def prepare(self, task: TaskSpec) -> PreparedTask:
        return PreparedTask(task_id=task.task_id, prompt=f"{MATCH} {task.task_id}: print hi, then answer 42.")

    async def evaluate(self, ctx: EvalContext) -> EvalResult:
        return EvalResult(correct=(ctx.result.final_answer or "").strip() == ctx.task.ground_truth)


class NoopEnvironment:
    """An environment that does nothing, instantly."""

    def __init__(self, env_id: str) -> None:
        self.id = env_id
        self.workdir = "/noop"

    async def exec(self, cmd: str | Sequence[str], *, timeout: float | None = None, cwd: str | None = None,
                   env: dict[str, str] | None = None) -> ExecResult:
        return ExecResult(exit_code=0, stdout="hi\n", output_bytes=3)

    async def write_file(self, path: str, data: bytes | str) -> None:
        pass

    async def read_file(self, path: str) -> bytes:
        return b""

    async def put_archive(self, path: str, tar_bytes: bytes | IO[bytes]) -> None:
        pass

    async def get_archive(self, path: str) -> bytes:
        return b""

    async def set_network_policy(self, policy: NetworkPolicy) -> None:
        pass

    async def close(self) -> None:
        pass


class NoopProvider(EnvironmentProvider):
    """Opens ``NoopEnvironment``s."""

    name: ClassVar[str] = "noop"

    def __init__(self, params: dict[str, Any], ctx: ComponentContext) -> None:
        self.opened = 0

    def check_network_policy(self, policy: NetworkPolicy) -> None:
        pass

    async def open(self, spec: EnvOpenSpec) -> NoopEnvironment:
        self.opened += 1
        return NoopEnvironment(f"noop-{self.opened}")
