"""Two requests in one launch: they share one task limit and one timeout; each has its own outcome."""

from __future__ import annotations

from agentcompass import OrchestrationSpec, RunRequestSpec, launch
from agentcompass.specs import ComponentSpec, ModelSpec


def main() -> None:
    spec = OrchestrationSpec(
        requests=[
            RunRequestSpec(name="shell-agent", benchmark=ComponentSpec("shell_tasks"),
                           harness=ComponentSpec("shell_agent", {"step_limit": 10}), model=ModelSpec("scripted")),
            RunRequestSpec(name="one-shot", benchmark=ComponentSpec("shell_tasks", {"categories": ["answer"]}),
                           harness=ComponentSpec("openai_chat"), model=ModelSpec("scripted")),
        ],
        max_concurrent_tasks=16,
        timeout_seconds=600,
        progress="plain",
    )
    result = launch(spec)
    for o in result.outcomes:
        print(f"{o.name}: {o.status} {o.metrics} -> {o.run_dir}")


if __name__ == "__main__":
    main()
