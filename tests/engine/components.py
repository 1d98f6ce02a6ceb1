"""Components that misbehave on purpose, loaded by dotted path like any third-party plugin."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any, ClassVar

from agentcompass.interfaces import (
    Benchmark,
    ComponentContext,
    Environment,
    EnvironmentProvider,
    Harness,
    HarnessResult,
    ModelClient,
    PreparedTask,
    RunContext,
)


class CrashingHarness(Harness):
    """Raises on every task."""

    evaluates: ClassVar[bool] = True
    needs_environment: ClassVar[bool] = True

    def __init__(self, params: dict[str, Any], ctx: ComponentContext) -> None:
        self.params = params

    async def run(self, task: PreparedTask, env: Environment | None, model: ModelClient, ctx: RunContext,
                  log: logging.Logger) -> HarnessResult:
        raise RuntimeError(f"boom on {task.task_id}")


class SleepingHarness(Harness):
    """Sleeps ``seconds`` in the environment (a real process), then answers nothing."""

    evaluates: ClassVar[bool] = True
    needs_environment: ClassVar[bool] = True

    def __init__(self, params: dict[str, Any], ctx: ComponentContext) -> None:
        self.seconds = float(params.get("seconds", 0.2))

    async def run(self, task: PreparedTask, env: Environment | None, model: ModelClient, ctx: RunContext,
                  log: logging.Logger) -> HarnessResult:
        assert env is not None
        await env.exec(f"sleep {self.seconds}", timeout=self.seconds + 30)
        await asyncio.sleep(0)
        return HarnessResult(final_answer="")


class FailingBenchmark(Benchmark):
    """Raises while loading its tasks."""

    version: ClassVar[str] = "1"

    def __init__(self, params: dict[str, Any], ctx: ComponentContext) -> None:
        pass

    def load_tasks(self) -> list[Any]:
        raise OSError("dataset file is corrupt")

    def prepare(self, task: Any) -> Any:
        raise AssertionError("never called")

    async def evaluate(self, ctx: Any) -> Any:
        raise AssertionError("never called")


class ProbeHarness(Harness):
    """Runs ``command`` in the environment and answers with its output (to observe what an agent can do)."""

    evaluates: ClassVar[bool] = False
    needs_environment: ClassVar[bool] = True

    def __init__(self, params: dict[str, Any], ctx: ComponentContext) -> None:
        self.command = str(params["command"])

    async def run(self, task: PreparedTask, env: Environment | None, model: ModelClient, ctx: RunContext,
                  log: logging.Logger) -> HarnessResult:
        assert env is not None
        res = await env.exec(self.command, timeout=60)
        return HarnessResult(final_answer=f"exit={res.exit_code}\n{res.output}")


class SandboxBreakingHarness(Harness):
    """On the first try its sandbox breaks mid-task (``breaks``: ``workspace`` vanishes, or the docker
    ``container`` is killed); later tries solve ``files/hello_world`` for real."""

    evaluates: ClassVar[bool] = True
    needs_environment: ClassVar[bool] = True

    def __init__(self, params: dict[str, Any], ctx: ComponentContext) -> None:
        self.breaks = params.get("breaks", "workspace")

    async def run(self, task: PreparedTask, env: Environment | None, model: ModelClient, ctx: RunContext,
                  log: logging.Logger) -> HarnessResult:
        assert env is not None
        if ctx.try_no == 1 and self.breaks == "workspace":
            import shutil

            shutil.rmtree(env.workdir)
        elif ctx.try_no == 1:
            import aiodocker

            async with aiodocker.Docker() as docker:
                await docker.containers.container(env.id).kill()
        await env.exec("printf 'Hello, World!\\n' > hello.txt")
        return HarnessResult(final_answer="")


class FlakyOpenProvider(EnvironmentProvider):
    """The local provider, except that every ``fail_first`` -th open fails (a sandbox service hiccup)."""

    name: ClassVar[str] = "flaky_local"

    def __init__(self, params: dict[str, Any], ctx: ComponentContext) -> None:
        from agentcompass.environments.local.provider import LocalProvider

        params = dict(params)
        self.fail_first = int(params.pop("fail_first", 1))
        self.inner = LocalProvider(params, ctx)
        self.opens = 0

    def check_network_policy(self, policy: Any) -> None:
        self.inner.check_network_policy(policy)

    async def open(self, spec: Any) -> Any:
        self.opens += 1
        if self.opens <= self.fail_first:
            raise ConnectionResetError("sandbox service reset the connection")
        return await self.inner.open(spec)

    async def aclose(self) -> None:
        await self.inner.aclose()


class UpcomingRecordingProvider(EnvironmentProvider):
    """The local provider, appending each agent open's ``EnvOpenSpec.upcoming`` to the file ``record``."""

    name: ClassVar[str] = "upcoming_local"

    def __init__(self, params: dict[str, Any], ctx: ComponentContext) -> None:
        from agentcompass.environments.local.provider import LocalProvider

        params = dict(params)
        self.record = Path(params.pop("record"))
        self.inner = LocalProvider(params, ctx)

    def check_network_policy(self, policy: Any) -> None:
        self.inner.check_network_policy(policy)

    async def open(self, spec: Any) -> Any:
        if spec.role == "agent":
            with self.record.open("a") as f:
                f.write(f"{spec.task_id} {spec.upcoming}\n")
        return await self.inner.open(spec)

    async def aclose(self) -> None:
        await self.inner.aclose()


class SlowSetupHarness(Harness):
    """Its setup hook runs a command in the environment for ``setup_seconds`` (a real process), then it answers
    nothing. The first ``slow_tries`` setups are slow, later ones instant (a sandbox that was busy once)."""

    evaluates: ClassVar[bool] = True
    needs_environment: ClassVar[bool] = True

    def __init__(self, params: dict[str, Any], ctx: ComponentContext) -> None:
        self.setup_seconds = float(params.get("setup_seconds", 60))
        self.slow_tries = int(params.get("slow_tries", 1_000_000))
        self.setups = 0

    async def setup(self, task: PreparedTask, env: Environment, log: logging.Logger) -> None:
        self.setups += 1
        if self.setups <= self.slow_tries:
            await env.exec(f"sleep {self.setup_seconds}", timeout=self.setup_seconds + 30)

    async def run(self, task: PreparedTask, env: Environment | None, model: ModelClient, ctx: RunContext,
                  log: logging.Logger) -> HarnessResult:
        return HarnessResult(final_answer="")


class _BrokenInstall:
    """What a missing attribute of the stdlib on this Python looks like (``tarfile.FilterError`` before 3.11.4)."""

    @staticmethod
    def touch_missing_attribute() -> None:
        import tarfile

        tarfile.NoSuchFilterError  # noqa: B018  (a real AttributeError, raised by Python itself)


class BrokenCollectBenchmark(Benchmark):
    """``shell_tasks`` whose ``collect`` hits a real AttributeError on tasks graded by tests (a broken install)."""

    version: ClassVar[str] = "1"

    def __init__(self, params: dict[str, Any], ctx: ComponentContext) -> None:
        from agentcompass.benchmarks.shell_tasks.benchmark import ShellTasks

        self.inner = ShellTasks(params, ctx)
        self.k = self.inner.k

    def load_tasks(self) -> Any:
        return self.inner.load_tasks()

    def prepare(self, task: Any) -> Any:
        return self.inner.prepare(task)

    async def collect(self, task: PreparedTask, env: Environment, result: HarnessResult) -> dict[str, Any]:
        if task.metadata.get("graded_by_tests", True):
            _BrokenInstall.touch_missing_attribute()
        return await self.inner.collect(task, env, result)

    async def evaluate(self, ctx: Any) -> Any:
        return await self.inner.evaluate(ctx)


class BrokenEvaluateBenchmark(BrokenCollectBenchmark):
    """``shell_tasks`` whose ``evaluate`` hits a real AttributeError on every task."""

    async def collect(self, task: PreparedTask, env: Environment, result: HarnessResult) -> dict[str, Any]:
        return await self.inner.collect(task, env, result)

    async def evaluate(self, ctx: Any) -> Any:
        _BrokenInstall.touch_missing_attribute()


class StallingHarness(Harness):
    """Takes one step, then stops making progress: ``mode`` ``wakeup`` awaits a future nobody resolves (a lost
    wakeup); ``exec`` runs a command that never ends nor prints, with no timeout of its own."""

    evaluates: ClassVar[bool] = True
    needs_environment: ClassVar[bool] = True

    def __init__(self, params: dict[str, Any], ctx: ComponentContext) -> None:
        self.mode = params.get("mode", "wakeup")

    async def run(self, task: PreparedTask, env: Environment | None, model: ModelClient, ctx: RunContext,
                  log: logging.Logger) -> HarnessResult:
        from agentcompass.records import Step

        assert env is not None
        res = await env.exec("echo step one")
        ctx.trajectory.steps.append(Step(index=0, action="echo step one", observation=res.output))
        log.info("step 0 done")
        if self.mode == "exec":
            await env.exec("exec sleep 100000")
        else:
            await asyncio.get_running_loop().create_future()
        return HarnessResult(final_answer="")


class StuckHarness(Harness):
    """Gets stuck in ways a cancel cannot interrupt: tasks in ``files/`` block a worker thread (a blocking
    ``to_thread`` call), the others wait on a command whose background child holds the output pipe open.

    With ``stuck_dir``, each attempt creates a file there once it is stuck (the thread blocking, the
    background child started), so a test waits for that instead of for some time."""

    evaluates: ClassVar[bool] = True
    needs_environment: ClassVar[bool] = True

    def __init__(self, params: dict[str, Any], ctx: ComponentContext) -> None:
        self.seconds = float(params.get("seconds", 600))
        self.stuck_dir: str | None = params.get("stuck_dir")

    def _block(self, marker: str | None) -> None:
        import time

        if marker is not None:
            open(marker, "w").close()
        time.sleep(self.seconds)

    async def run(self, task: PreparedTask, env: Environment | None, model: ModelClient, ctx: RunContext,
                  log: logging.Logger) -> HarnessResult:
        import os
        import shlex

        assert env is not None
        marker = (None if self.stuck_dir is None
                  else os.path.join(self.stuck_dir, task.task_id.replace("/", "_") + f"-{ctx.attempt}"))
        if task.task_id.startswith("files/"):
            await asyncio.to_thread(self._block, marker)
        else:
            touch = f" touch {shlex.quote(marker)};" if marker is not None else ""
            await env.exec(f"sleep {self.seconds} &{touch} sleep {self.seconds}", timeout=self.seconds + 30)
        return HarnessResult(final_answer="")


class ImageTasksBenchmark(Benchmark):
    """One task per tag in ``tags``, each in its own image built from a tiny recipe (``FROM base``, a label, a
    marker file) written under ``context_root``; every attempt that ran is correct."""

    version: ClassVar[str] = "1"

    def __init__(self, params: dict[str, Any], ctx: ComponentContext) -> None:
        import os

        self.tags: list[str] = list(params["tags"])
        self.contexts: list[str] = []
        for i, tag in enumerate(self.tags):
            ctx_dir = os.path.join(str(params["context_root"]), f"t{i}")
            os.makedirs(ctx_dir, exist_ok=True)
            with open(os.path.join(ctx_dir, "Dockerfile"), "w") as fh:
                fh.write(f"FROM {params['base']}\nLABEL agentcompass.test=image_cache\n"
                         f"RUN echo {tag} > /marker\n")
            self.contexts.append(ctx_dir)

    def load_tasks(self) -> list[Any]:
        from agentcompass.interfaces import TaskSpec

        return [TaskSpec(task_id=f"t{i}") for i in range(len(self.tags))]

    def prepare(self, task: Any) -> Any:
        from agentcompass.interfaces import ImageRecipe

        i = int(task.task_id[1:])
        return PreparedTask(task_id=task.task_id, prompt="", image=self.tags[i],
                            image_recipe=ImageRecipe(self.contexts[i]))

    async def evaluate(self, ctx: Any) -> Any:
        from agentcompass.interfaces import EvalResult

        return EvalResult(correct=True)


class TypoKindHarness(Harness):
    """Stops with an error kind no ``ErrorKind`` declares (a plugin's typo of ``agent_timeout``)."""

    evaluates: ClassVar[bool] = True
    needs_environment: ClassVar[bool] = True

    def __init__(self, params: dict[str, Any], ctx: ComponentContext) -> None:
        self.params = params

    async def run(self, task: PreparedTask, env: Environment | None, model: ModelClient, ctx: RunContext,
                  log: logging.Logger) -> HarnessResult:
        return HarnessResult(error="ran out of time", error_kind="agnet_timeout")  # type: ignore[arg-type]


class ClosingBenchmark(BrokenCollectBenchmark):
    """``shell_tasks`` that writes each ``evaluate`` and ``aclose`` it gets to the file ``record`` (a param taken
    out before ``shell_tasks`` sees the rest); ``fail_evaluate`` makes every ``evaluate`` raise."""

    def __init__(self, params: dict[str, Any], ctx: ComponentContext) -> None:
        params = dict(params)
        self.record = Path(params.pop("record"))
        self.fail_evaluate = bool(params.pop("fail_evaluate", False))
        super().__init__(params, ctx)

    async def collect(self, task: PreparedTask, env: Environment, result: HarnessResult) -> dict[str, Any]:
        return await self.inner.collect(task, env, result)

    async def evaluate(self, ctx: Any) -> Any:
        with self.record.open("a") as f:
            f.write("evaluate\n")
        if self.fail_evaluate:
            raise RuntimeError("grader broke")
        return await self.inner.evaluate(ctx)

    async def aclose(self) -> None:
        with self.record.open("a") as f:
            f.write("aclose\n")
