from agentcompass import ComponentSpec, ModelSpec, OrchestrationSpec, RunRequestSpec, launch

spec = OrchestrationSpec(
    requests=[
        RunRequestSpec(name="agent", benchmark=ComponentSpec("shell_tasks"),
                       harness=ComponentSpec("shell_agent", {"step_limit": 10}), model=ModelSpec("scripted")),
        RunRequestSpec(name="one-shot", benchmark=ComponentSpec("shell_tasks", {"categories": ["answer"]}),
                       harness=ComponentSpec("openai_chat"), model=ModelSpec("scripted")),
    ],
    task_concurrency=16, timeout_seconds=600, progress="none",
)
result = launch(spec)
print(result.status, result["one-shot"].metrics)
