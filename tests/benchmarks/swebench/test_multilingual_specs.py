"""The non-Python eval script run for real in a git repo on this host: it resets the test files, applies the
test patch (even over a file the agent created at a new test file's path), runs the test commands between the
markers after the build commands, and leaves the test files as at the base commit; and the table's lookups
refuse unknown repos and versions naming the field."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from agentcompass._errors import ConfigError
from agentcompass.benchmarks.swebench import multilingual_specs as ml
from agentcompass.benchmarks.swebench.test_specs import END_TEST_OUTPUT, START_TEST_OUTPUT

_ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
TEST_PATCH = """\
diff --git a/a_test.go b/a_test.go
index 1111111..2222222 100644
--- a/a_test.go
+++ b/a_test.go
@@ -1 +1,2 @@
 base
+from the test patch
diff --git a/new_test.go b/new_test.go
new file mode 100644
index 0000000..3333333
--- /dev/null
+++ b/new_test.go
@@ -0,0 +1 @@
+new test
"""


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, env=_ENV, timeout=60,
                          check=True).stdout


def test_the_script_resets_applies_builds_runs_and_resets_again(tmp_path: Path) -> None:
    repo = tmp_path / "testbed"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "a_test.go").write_text("base\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "base")
    base = _git(repo, "rev-parse", "HEAD").strip()
    (repo / "a_test.go").write_text("the agent's edit\n")  # both are undone before the test patch
    (repo / "new_test.go").write_text("the agent's own file\n")
    inst = {"repo": "octo/go", "base_commit": base, "test_patch": TEST_PATCH,
            "test_cmd": ["cat a_test.go new_test.go", "echo second command"], "build": ["echo built > built.txt"]}
    script = ml.make_eval_script(inst, repo_dir=str(repo))
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=_ENV, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    section = proc.stdout.split(START_TEST_OUTPUT, 1)[1].split(END_TEST_OUTPUT, 1)[0]
    assert "base\nfrom the test patch\nnew test\n" in section and "second command" in section
    assert "the agent" not in section
    assert (repo / "built.txt").read_text() == "built\n"
    assert (repo / "a_test.go").read_text() == "base\n" and not (repo / "new_test.go").exists()


def test_unknown_repo_and_version_are_refused_naming_the_field() -> None:
    with pytest.raises(ConfigError, match="not a SWE-bench Multilingual repo") as err:
        ml.get_test_cmds({"repo": "octo/none", "version": "1"})
    assert err.value.field == "repo"
    with pytest.raises(ConfigError, match="has no version '0'") as err:
        ml.get_test_cmds({"repo": "gin-gonic/gin", "version": "0"})
    assert err.value.field == "version"
    assert ml.get_test_cmds({"repo": "gin-gonic/gin", "version": "0", "test_cmd": "go test -v ./..."}) == [
        "go test -v ./..."]
