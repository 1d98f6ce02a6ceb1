"""Our non-Python eval scripts against the official ``swebench`` package's (``make_test_spec(...).eval_script``),
for every non-Python (repo, version) of its specs, on seeded random test patches: the same reset, the same
test-patch application, the same build and test commands, in the same order.

Documented deviations (docs/swebench.md, "SWE-bench Multilingual"), checked here as such: git is told the repo
is safe per call (``git -c safe.directory=...``) instead of via ``git config --global``; files the test patch
creates are removed on each reset (``rm -f -- ...``); stderr is merged into stdout by the script itself.
"""

from __future__ import annotations

import json
import random
import shlex
from typing import Any

import pytest
import swebench.harness.constants as official_constants  # the oracle: a test dependency, never skipped
import swebench.harness.log_parsers as official_parsers
import swebench.harness.test_spec.test_spec as official_test_spec

from agentcompass.benchmarks.swebench import multilingual_specs as ml
from agentcompass.benchmarks.swebench.test_specs import patch_files

NON_PYTHON = sorted((repo, version) for repo, versions in official_constants.MAP_REPO_VERSION_TO_SPECS.items()
                    if official_constants.MAP_REPO_TO_EXT[repo] != "py" for version in versions)
VARIANTS = 3
_EXT = {"c": ".c", "go": "_test.go", "java": "Test.java", "js": ".test.js", "php": "Test.php", "rb": "_spec.rb",
        "rs": ".rs"}
_DIRS = ["tests", "test/unit", "src/__tests__", "pkg/a b", "spec/models", "internal/x", "client/state",
         "packages/ui/src", "test/e2e/specs", "client/blocks/__snapshots__"]


def _file_diff(kind: str, path: str, rng: random.Random) -> str:
    n = rng.randint(1, 3)
    added = "".join(f"+line {i} {rng.random()}\n" for i in range(n))
    if kind == "new":
        return (f"diff --git a/{path} b/{path}\nnew file mode 100644\nindex 0000000..1234567\n--- /dev/null\n"
                f"+++ b/{path}\n@@ -0,0 +1,{n} @@\n{added}")
    if kind == "deleted":
        return (f"diff --git a/{path} b/{path}\ndeleted file mode 100644\nindex 1234567..0000000\n--- a/{path}\n"
                f"+++ /dev/null\n@@ -1,1 +0,0 @@\n-gone\n")
    if kind == "renamed":
        new = path.replace(".", "_renamed.", 1)
        return (f"diff --git a/{path} b/{new}\nsimilarity index 90%\nrename from {path}\nrename to {new}\n"
                f"index 1234567..89abcde 100644\n--- a/{path}\n+++ b/{new}\n@@ -1,1 +1,{n + 1} @@\n keep\n{added}")
    return (f"diff --git a/{path} b/{path}\nindex 1234567..89abcde 100644\n--- a/{path}\n+++ b/{path}\n"
            f"@@ -1,2 +1,{n + 2} @@\n keep\n{added} keep\n")


def _instance(repo: str, version: str, rng: random.Random) -> dict[str, Any]:
    ext = official_constants.MAP_REPO_TO_EXT[repo]
    parts = []
    for i in range(rng.randint(1, 4)):
        directory = rng.choice(_DIRS)
        name = f"case_{i}{_EXT[ext]}" if "__snapshots__" not in directory else f"comp_{i}.js.snap"
        kind = rng.choices(["modified", "new", "deleted", "renamed"], weights=[5, 3, 1, 1])[0]
        parts.append(_file_diff(kind, f"{directory}/{name}".replace(" ", "_"), rng))
    inst: dict[str, Any] = {
        "instance_id": f"{repo.replace('/', '__')}-{version}", "repo": repo, "version": version,
        "base_commit": f"{rng.getrandbits(160):040x}", "test_patch": "".join(parts), "patch": "",
        "problem_statement": "", "FAIL_TO_PASS": "[]", "PASS_TO_PASS": "[]",
    }
    if ext == "js" and rng.random() < 0.3:
        inst["image_assets"] = json.dumps({"test_patch": [
            {"path": f"test/fixtures/img{i}.png", "url": f"https://example.invalid/img{i}.png"} for i in range(2)]})
    return inst


def _commands(script: str) -> list[str]:
    """The script's commands, one per line, a heredoc kept with its command."""
    lines = script.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if "<<'" in line:
            delim = line.split("<<'", 1)[1].rstrip("'")
            end = lines.index(delim, i + 1)
            out.append("\n".join(lines[i:end + 1]))
            i = end + 1
            continue
        if line.strip():
            out.append(line)
        i += 1
    return out


def _git_args(cmd: str) -> list[str]:
    """A git command's words without ``-c safe.directory=...`` (our documented deviation)."""
    words = shlex.split(cmd)
    if words[:2] == ["git", "-c"] and words[2].startswith("safe.directory="):
        words = ["git", *words[3:]]
    return words


def _words(cmd: str) -> list[str] | str:
    """A command as shell words (quoting style aside); a line that is not complete by itself (a ``\\``
    continuation) as it is."""
    try:
        return shlex.split(cmd)
    except ValueError:
        return cmd


def _structure(script: str, *, ours: bool) -> dict[str, Any]:
    """The semantic steps of an eval script: reset, downloads, test-patch application, build, tests."""
    cmds = _commands(script)
    assert cmds[:2] == ["#!/bin/bash", "set -uxo pipefail"]
    cmds = cmds[2:]
    if ours:
        assert cmds[0] == "exec 2>&1"
        cmds = cmds[1:]
    else:  # the official global safe.directory (and a repeated cd)
        assert cmds[1] == "git config --global --add safe.directory /testbed" and cmds[2] == cmds[0]
        del cmds[1:3]
    assert cmds.pop(0) == "cd /testbed"
    removed: list[str] = []
    reset = _git_args(cmds.pop(0)) if cmds[0].startswith("git") else shlex.split(cmds.pop(0))
    if ours and cmds[0].startswith("rm -f -- "):
        removed = shlex.split(cmds.pop(0))[3:]
    apply_at = next(i for i, c in enumerate(cmds) if "<<'" in c)
    downloads = [shlex.split(c) for c in cmds[:apply_at]]
    apply_cmd = cmds[apply_at]
    head, rest = apply_cmd.split("\n", 1)
    body = rest.rsplit("\n", 1)[0]
    start = cmds.index(": '>>>>> Start Test Output'")
    end = cmds.index(": '>>>>> End Test Output'")
    final = cmds[end + 1:]
    final_reset = _git_args(final[0]) if final[0].startswith("git") else shlex.split(final[0])
    if ours and removed:
        assert shlex.split(final[1])[3:] == removed and len(final) == 2
    else:
        assert len(final) == 1
    return {
        "reset": reset, "final_reset": final_reset, "removed": removed, "downloads": downloads,
        "apply": _git_args(head.split("<<", 1)[0]), "test_patch": body.rstrip("\n"),
        "build": [_words(c) for c in cmds[apply_at + 1:start]], "tests": [_words(c) for c in cmds[start + 1:end]],
    }


@pytest.mark.parametrize(("repo", "version"), NON_PYTHON, ids=[f"{r}@{v}" for r, v in NON_PYTHON])
def test_eval_script_matches_the_official_one(repo: str, version: str) -> None:
    rng = random.Random(f"{repo}@{version}")
    for _ in range(VARIANTS):
        inst = _instance(repo, version, rng)
        official = _structure(official_test_spec.make_test_spec(inst).eval_script, ours=False)
        ours = _structure(ml.make_eval_script(inst), ours=True)
        created = [f.path for f in patch_files(inst["test_patch"]) if f.old_path is None or f.path != f.old_path]
        assert ours.pop("removed") == created  # the documented deviation, exactly the new files
        official.pop("removed")
        assert ours == official


def test_every_non_python_repo_and_version_is_in_our_table() -> None:
    ours = {(repo, v) for repo, info in ml.repo_table().items() for v in info.versions}
    assert ours == set(NON_PYTHON) and len(ours) > 300


def test_language_and_parser_of_every_repo_are_the_official_ones() -> None:
    for repo, info in ml.repo_table().items():
        assert info.ext == official_constants.MAP_REPO_TO_EXT[repo]
        assert info.parser == official_parsers.MAP_REPO_TO_PARSER[repo].__name__.removeprefix("parse_log_")
    languages = {info.language for info in ml.repo_table().values()}
    assert languages == {"C", "C++", "Go", "Java", "JavaScript", "TypeScript", "PHP", "Ruby", "Rust"}


def test_official_docker_capabilities_are_in_our_table() -> None:
    for repo, version in NON_PYTHON:
        specs = official_constants.MAP_REPO_VERSION_TO_SPECS[repo][version]
        want = tuple(specs.get("docker_specs", {}).get("run_args", {}).get("cap_add", []))
        assert ml.version_spec(repo, version).cap_add == want
