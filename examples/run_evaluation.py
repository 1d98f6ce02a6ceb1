import agentcompass

out = agentcompass.run_evaluation(
    "shell_tasks", "shell_agent", "scripted", "local",
    benchmark_params={"categories": ["files", "answer"], "k": 2},
    harness_params={"step_limit": 20, "agent_timeout": 600},
    task_concurrency=16, max_retries=2, progress="none",
    results_dir="results",
)
print(out.status, out.metrics["pass@2"], out.counts.errors, out.run_dir)
