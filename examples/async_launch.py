import asyncio

from agentcompass import async_launch


async def main():
    result = await async_launch({
        "requests": [{"benchmark": {"id": "shell_tasks", "params": {"categories": ["python"]}},
                      "harness": "shell_agent", "model": "scripted"}],
        "task_concurrency": 4,
        "progress": "none",
    })
    print(result.outcomes[0].status, result.outcomes[0].metrics)


asyncio.run(main())
