"""Embed AgentCompass in an async application: await async_launch and watch typed progress events."""

from __future__ import annotations

import asyncio

from agentcompass import async_launch
from agentcompass.records import ProgressEvent, TaskFinished


def on_progress(event: ProgressEvent) -> None:
    if isinstance(event, TaskFinished):
        print(f"  {event.task_id}: {'solved' if event.correct else 'not solved'}")


async def main() -> None:
    result = await async_launch(
        {"requests": [{"benchmark": {"id": "shell_tasks", "params": {"categories": ["python"]}},
                       "harness": "shell_agent", "model": "scripted", "task_concurrency": 4}],
         "progress": "none"},
        on_progress=on_progress,
    )
    out = result.outcomes[0]
    print(out.status, out.metrics)


if __name__ == "__main__":
    asyncio.run(main())
