import agentcompass
from agentcompass.records import TaskFinished, TryRetrying


def on_progress(ev):
    if isinstance(ev, TaskFinished):
        print(ev.task_id, "solved" if ev.correct else "not solved")
    elif isinstance(ev, TryRetrying):
        print("retrying", ev.task_id, ev.error_kind, f"in {ev.backoff_s:.1f}s")


out = agentcompass.run_evaluation("shell_tasks", "shell_agent", "scripted",
                                  benchmark_params={"categories": ["text"]},
                                  on_progress=on_progress, progress="none")
print(out.status, out.metrics)
