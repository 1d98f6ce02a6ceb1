import os

from agentcompass import OrchestrationSpec, RunRequestSpec, launch

model = {"id": "gpt-5-mini", "base_url": os.environ["MODEL_BASE_URL"], "api_key": os.environ["MODEL_API_KEY"]}
result = launch(OrchestrationSpec(
    task_concurrency=4,
    requests=[
        RunRequestSpec(name="agent", benchmark={"id": "shell_tasks"}, harness={"id": "shell_agent"}, model=model),
        RunRequestSpec(name="one-shot", benchmark={"id": "shell_tasks", "params": {"categories": ["answer"]}},
                       harness={"id": "openai_chat"}, model=model),
    ],
))
for outcome in result.outcomes:
    print(outcome.name, outcome.status, outcome.metrics)
