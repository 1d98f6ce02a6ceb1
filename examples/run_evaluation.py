"""Evaluate the native shell agent on the bundled benchmark with the built-in scripted model (no network)."""

from __future__ import annotations

import agentcompass


def main() -> None:
    out = agentcompass.run_evaluation(
        "shell_tasks", "shell_agent", "scripted", "local",
        benchmark_params={"categories": ["files", "answer"]},
        task_concurrency=8,
        results_dir="results",
        progress="plain",
    )
    print(out.status, out.metrics)
    print("run directory:", out.run_dir)


if __name__ == "__main__":
    main()
