"""Helpers for benchmark tests: real local environments and an EvalContext whose verifier is local."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from agentcompass.environments.local.provider import LocalProvider
from agentcompass.interfaces import (
    Environment,
    EnvOpenSpec,
    EvalContext,
    EvalResult,
    HarnessResult,
    TaskSpec,
)

LOG = logging.getLogger("agentcompass.tests.benchmarks")


class LocalGrader:
    """Opens agent environments and grades attempts the way the engine does, with local verifiers."""

    def __init__(self, provider: LocalProvider, concurrency: int = 4) -> None:
        self.provider = provider
        self.limit = asyncio.Semaphore(concurrency)
        self.verifier_files: list[dict[str, str]] = []
        #: each verifier's workdir as a tar, taken just before it closed
        self.verifier_archives: list[bytes] = []

    @contextlib.asynccontextmanager
    async def agent_env(self, task: TaskSpec, files: dict[str, str]) -> AsyncIterator[Environment]:
        env = await self.provider.open(EnvOpenSpec(run_id="test", task_id=task.task_id, files=files))
        try:
            yield env
        finally:
            await env.close()

    def open_verifier_for(self, task: TaskSpec) -> Callable[..., AbstractAsyncContextManager[Environment]]:
        @contextlib.asynccontextmanager
        async def open_verifier(*, image: str | None = None, files: dict[str, str] | None = None,
                                workdir: str | None = None) -> AsyncIterator[Environment]:
            self.verifier_files.append(dict(files or {}))
            env = await self.provider.open(EnvOpenSpec(run_id="test", task_id=task.task_id, role="verifier",
                                                       image=image, workdir=workdir, files=files or {}))
            try:
                yield env
                self.verifier_archives.append(await env.get_archive(env.workdir))
            finally:
                await env.close()

        return open_verifier

    async def evaluate(self, benchmark: Any, task: TaskSpec, result: HarnessResult,
                       agent_env: Environment | None) -> EvalResult:
        prepared = benchmark.prepare(task.public())
        # as the engine does: collect from the agent's environment first, then grade in a verifier
        artifacts = await benchmark.collect(prepared, agent_env, result) if agent_env is not None else {}
        ctx = EvalContext(task, prepared, result, artifacts, self.open_verifier_for(task), LOG)
        out: EvalResult = await benchmark.evaluate(ctx)
        return out

    async def bounded(self, coro: Awaitable[Any]) -> Any:
        async with self.limit:
            return await coro
