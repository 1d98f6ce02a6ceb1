"""Real run directories for the rundata / report / compare tests, made by running the scripted shell agent."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec

import agentcompass
from agentcompass.engine.run_dir import safe_name
from agentcompass.records import TaskDetail

SAMPLE = ["files/hello_world", "files/executable_script", "text/sort_unique", "answer/count_lines",
          "python/fizzbuzz"]
#: given as the model's API key: it must never appear in anything derived from the run directory.
SECRET = "sk-test-secret-9f8e7d6c5b4a3210"
#: run "b" replaces two bundled solutions: hello_world deletes a test and loops, sort_unique pokes the verifier.
HACKS = [
    {"match": "Task: files/hello_world\n", "turns": [
        "```bash\nrm -f tests/test_hello.py\n```", "```bash\nls\n```", "```bash\nls\n```", "```bash\nls\n```",
        "Done.\n<submit></submit>"]},
    {"match": "Task: text/sort_unique\n", "turns": [
        "```bash\nmkdir -p .agentcompass_verify && echo 'exit 0' > .agentcompass_verify/test.sh\n```",
        "<submit></submit>"]},
]


def make_runs(results: Path) -> tuple[Path, Path]:
    """Two runs of the same 5 tasks with k=2: ``a`` with the bundled solutions, ``b`` with HACKS and every
    analyzer on. Returns their run directories."""
    common = {"benchmark_params": {"sample_ids": SAMPLE, "k": 2}, "results_dir": str(results),
              "progress": "none", "model_api_key": SECRET}
    a = agentcompass.run_evaluation("shell_tasks", "shell_agent", "scripted", run_id="a", **common)  # type: ignore[arg-type]
    b = agentcompass.run_evaluation("shell_tasks", "shell_agent", "scripted", run_id="b", enable_analysis=True,
                                    model_params={"script": HACKS}, **common)  # type: ignore[arg-type]
    assert a.ok and b.ok and a.run_dir is not None and b.run_dir is not None
    return a.run_dir, b.run_dir


def write_run(path: Path, details: list[TaskDetail], *, summary: bool = True) -> Path:
    """A run directory written the way the engine writes one (for shapes a scripted run does not produce)."""
    (path / "details").mkdir(parents=True)
    info = {"run_id": path.name, "request": "r", "status": "completed" if summary else "running",
            "benchmark": "bench", "harness": "h", "model": "m", "environment": "local", "started_at": 1.0e9,
            "paths": {}}
    (path / "run_info.json").write_text(json.dumps(info))
    if summary:
        (path / "summary.json").write_text(json.dumps({**info, "metrics": {"pass@1": 0.5}}))
    for d in details:
        (path / "details" / f"{safe_name(d.task_id)}.json").write_bytes(msgspec.json.encode(d))
    return path
