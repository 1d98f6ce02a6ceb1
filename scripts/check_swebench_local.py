#!/usr/bin/env python3
"""Check every bundled ``swebench_local`` instance for real, in Docker (a dev script; it uses the docker CLI).

For each instance: build its image from the recipe, then in fresh containers
  (c) HEAD is ``base_commit``, the history has exactly one commit, the tree is clean and the gold patch
      is not in it (``git apply --check`` of the gold patch and of the test patch both succeed);
  (a) with the test patch only, the FAIL_TO_PASS tests fail and the PASS_TO_PASS tests pass;
  (b) with the test patch and the gold patch, all FAIL_TO_PASS and PASS_TO_PASS tests pass.
Prints a table; exits 1 if any check fails. Needs ``agentcompass/base:debian-bookworm``
(``agentcompass images build-base``).

Usage: python scripts/check_swebench_local.py [--run-id h2-check] [--only ID ...] [--keep-contexts DIR]
"""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentcompass.benchmarks.swebench.local_instances import (
    BASE_IMAGE,
    TESTBED,
    load_local_instances,
    recipe,
)

BUILD_TIMEOUT_S = 900
EXEC_TIMEOUT_S = 300
_STATUS = re.compile(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (\S+)")
_DIFF_FILE = re.compile(r"^diff --git a/(\S+) b/(\S+)", re.MULTILINE)


def docker(*args: str, stdin: str | None = None, timeout: float = EXEC_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], input=stdin, capture_output=True, text=True, timeout=timeout)


def test_statuses(output: str) -> dict[str, str]:
    """node id -> status from the short test summary that ``pytest -rA`` prints."""
    out: dict[str, str] = {}
    for line in output.splitlines():
        m = _STATUS.match(line)
        if m and "::" in m.group(2):
            out[m.group(2)] = m.group(1)
    return out


class Container:
    """One container of ``image`` (labelled with the run id), removed by id on close."""

    def __init__(self, image: str, run_id: str) -> None:
        proc = docker("run", "-d", "--init", "--network", "none", "--label", f"agentcompass.run_id={run_id}",
                      "--label", "agentcompass.task_id=swebench-local-check", image, "sleep", "infinity")
        if proc.returncode != 0:
            raise RuntimeError(f"docker run {image} failed: {proc.stderr.strip()}")
        self.id = proc.stdout.strip()

    def sh(self, script: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return docker("exec", "-i", "-w", TESTBED, self.id, "bash", "-c", script, stdin=stdin)

    def apply(self, patch: str, check_only: bool = False) -> bool:
        return self.sh(f"git apply {'--check ' if check_only else ''}-", stdin=patch).returncode == 0

    def close(self) -> None:
        docker("rm", "-f", self.id, timeout=60)


def run_tests(c: Container, inst: dict[str, Any]) -> dict[str, str]:
    files = sorted({b for _, b in _DIFF_FILE.findall(inst["test_patch"])})
    out = c.sh(f"{inst['test_cmd']} {' '.join(map(shlex.quote, files))} 2>&1")
    return test_statuses(out.stdout)


def check(inst: dict[str, Any], image: str, run_id: str) -> dict[str, Any]:
    f2p, p2p = inst["FAIL_TO_PASS"], inst["PASS_TO_PASS"]
    row: dict[str, Any] = {"id": inst["instance_id"], "image": image, "head": False, "commits": "?", "clean": False,
                           "gold_absent": False, "test_patch_applies": False, "gold_applies": False,
                           "before_f2p_fail": 0, "before_p2p_pass": 0, "after_f2p_pass": 0, "after_p2p_pass": 0,
                           "n_f2p": len(f2p), "n_p2p": len(p2p), "error": ""}
    opened: list[Container] = []
    try:
        c = Container(image, run_id)
        opened.append(c)
        head = c.sh("git rev-parse HEAD").stdout.strip()
        count = c.sh("git rev-list --all --count").stdout.strip()
        dirty = c.sh("git status --porcelain").stdout.strip()
        row["head"] = head == inst["base_commit"]
        row["commits"] = count
        row["clean"] = not dirty
        row["gold_absent"] = c.apply(inst["patch"], check_only=True) and c.apply(inst["test_patch"], check_only=True)

        row["test_patch_applies"] = c.apply(inst["test_patch"])
        before = run_tests(c, inst)
        row["before_f2p_fail"] = sum(before.get(t) in ("FAILED", "ERROR") for t in f2p)
        row["before_p2p_pass"] = sum(before.get(t) == "PASSED" for t in p2p)

        c2 = Container(image, run_id)
        opened.append(c2)
        row["gold_applies"] = c2.apply(inst["test_patch"]) and c2.apply(inst["patch"])
        after = run_tests(c2, inst)
        row["after_f2p_pass"] = sum(after.get(t) == "PASSED" for t in f2p)
        row["after_p2p_pass"] = sum(after.get(t) == "PASSED" for t in p2p)
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        row["error"] = str(exc)
    finally:
        for c in opened:
            c.close()
    row["ok"] = (not row["error"] and row["head"] and row["commits"] == "1" and row["clean"] and row["gold_absent"]
                 and row["test_patch_applies"] and row["gold_applies"]
                 and row["before_f2p_fail"] == len(f2p) and row["before_p2p_pass"] == len(p2p)
                 and row["after_f2p_pass"] == len(f2p) and row["after_p2p_pass"] == len(p2p))
    return row


def print_table(rows: list[dict[str, Any]]) -> None:
    head = ["instance", "image", "HEAD=base", "commits", "clean", "no gold", "before F2P fail", "before P2P pass",
            "after F2P pass", "after P2P pass", "ok"]
    body = [[r["id"], r["image"], str(r["head"]), r["commits"], str(r["clean"]), str(r["gold_absent"]),
             f"{r['before_f2p_fail']}/{r['n_f2p']}", f"{r['before_p2p_pass']}/{r['n_p2p']}",
             f"{r['after_f2p_pass']}/{r['n_f2p']}", f"{r['after_p2p_pass']}/{r['n_p2p']}",
             "OK" if r["ok"] else "FAIL"] for r in rows]
    widths = [max(len(x) for x in col) for col in zip(head, *body, strict=True)]
    for line in [head, ["-" * w for w in widths], *body]:
        print("  ".join(x.ljust(w) for x, w in zip(line, widths, strict=True)).rstrip())
    for r in rows:
        if r["error"]:
            print(f"{r['id']}: {r['error']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--run-id", default="h2-check", help="value of the agentcompass.run_id container label")
    parser.add_argument("--only", nargs="*", default=None, help="instance ids to check (default: all)")
    parser.add_argument("--keep-contexts", default=None, help="prepare the build contexts here and keep them")
    args = parser.parse_args(argv)
    if docker("image", "inspect", BASE_IMAGE, timeout=60).returncode != 0:
        print(f"error: {BASE_IMAGE} is missing: run `agentcompass images build-base` first")
        return 1
    instances = [i for i in load_local_instances() if not args.only or i["instance_id"] in args.only]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="swebench-local-contexts-") as tmp:
        cache = Path(args.keep_contexts or tmp)
        for inst in instances:
            image, context = recipe(inst, cache)
            proc = docker("build", "-q", "-t", image, context, timeout=BUILD_TIMEOUT_S)
            if proc.returncode != 0:
                print(f"error: building {image} failed:\n{proc.stderr[-3000:]}")
                return 1
            print(f"built {image} from {context}", flush=True)
            rows.append(check(inst, image, args.run_id))
    print_table(rows)
    return 0 if rows and all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
