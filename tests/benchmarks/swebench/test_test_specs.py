"""Test commands, test directives, and the eval / apply scripts, run for real with bash on a small git repo."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentcompass._errors import ConfigError
from agentcompass.benchmarks.swebench import test_specs as ts
from agentcompass.benchmarks.swebench.grading import GradeError, grade, model_patch_applied

# ---------------------------------------------------------------------------------------------- commands


@pytest.mark.parametrize(("repo", "version", "cmd"), [
    ("django/django", "3.0", "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1"),
    ("django/django", "1.9", "./tests/runtests.py --verbosity 2"),
    ("sympy/sympy", "1.12", "PYTHONWARNINGS='ignore::UserWarning,ignore::SyntaxWarning' bin/test -C --verbose"),
    ("astropy/astropy", "4.3", "pytest -rA"),
    ("astropy/astropy", "1.3", "pytest -rA -vv -o console_output_style=classic --tb=no"),
    ("mwaskom/seaborn", "0.12", "pytest --no-header -rA"),
    ("sphinx-doc/sphinx", "7.1", "tox --current-env -epy39 -v --"),
    ("scikit-learn/scikit-learn", "1.3", "pytest -rA"),
    ("psf/requests", "2.0", "pytest -rA"),
    ("pydata/xarray", "2022.06", "pytest -rA"),
    ("pylint-dev/pylint", "2.15", "pytest -rA"),
    ("pytest-dev/pytest", "7.0", "pytest -rA"),
    ("matplotlib/matplotlib", "3.5", "pytest -rA"),
    ("pallets/flask", "2.3", "pytest -rA"),
])
def test_official_repos_use_their_official_test_command(repo: str, version: str, cmd: str) -> None:
    assert ts.get_test_cmd({"repo": repo, "version": version}) == cmd


def test_a_numeric_version_is_read_as_its_string() -> None:
    assert ts.get_test_cmd({"repo": "django/django", "version": 1.9}) == ts.TEST_DJANGO_NO_PARALLEL


def test_an_instance_test_cmd_overrides_the_repo_default() -> None:
    assert ts.get_test_cmd({"repo": "django/django", "version": "3.0", "test_cmd": "pytest -x"}) == "pytest -x"
    assert ts.get_test_cmd({"repo": "me/tool", "test_cmd": "python -m pytest -rA"}) == "python -m pytest -rA"


def test_an_unknown_repo_without_a_test_cmd_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as exc:
        ts.get_test_cmd({"repo": "me/tool", "version": "1.0"})
    assert exc.value.field == "test_cmd" and "django/django" in str(exc.value)


def test_django_reinstalls_and_sets_its_locale_where_the_official_harness_does() -> None:
    old = ts.get_repo_spec("django/django", "2.2")
    assert old is not None and old.install == "python setup.py install"
    assert "export LANG=en_US.UTF-8" in old.eval_commands
    new = ts.get_repo_spec("django/django", "4.1")
    assert new is not None and new.install == "python -m pip install -e ." and new.eval_commands == ()


# ---------------------------------------------------------------------------------------------- patches

TEST_PATCH = """\
diff --git a/tests/test_calc.py b/tests/test_calc.py
index 3b18e51..1c2d3e4 100644
--- a/tests/test_calc.py
+++ b/tests/test_calc.py
@@ -1,2 +1,5 @@
 def test_add():
     assert 1 + 1 == 2
+
+def test_add_negative():
+    assert -1 + -1 == -2
diff --git a/tests/test_new.py b/tests/test_new.py
new file mode 100644
index 0000000..e69de29
--- /dev/null
+++ b/tests/test_new.py
@@ -0,0 +1,2 @@
+def test_mul():
+    assert 2 * 3 == 6
diff --git a/tests/old_helper.py b/tests/old_helper.py
deleted file mode 100644
index 1111111..0000000
--- a/tests/old_helper.py
+++ /dev/null
@@ -1 +0,0 @@
-X = 1
diff --git a/tests/data/expected.json b/tests/data/expected.json
index 2222222..3333333 100644
--- a/tests/data/expected.json
+++ b/tests/data/expected.json
@@ -1 +1 @@
-{}
+{"a": 1}
diff --git a/tests/a.py b/tests/b.py
similarity index 90%
rename from tests/a.py
rename to tests/b.py
diff --git a/tests/with space.py b/tests/with space.py
index 4444444..5555555 100644
--- a/tests/with space.py\t
+++ b/tests/with space.py\t
@@ -1 +1 @@
-A = 1
+A = 2
diff --git "a/tests/caf\\303\\251.py" "b/tests/caf\\303\\251.py"
new file mode 100644
--- /dev/null
+++ "b/tests/caf\\303\\251.py"
@@ -0,0 +1 @@
+B = 1
"""


def test_patch_files_reads_modified_new_deleted_renamed_and_quoted_paths() -> None:
    files = ts.patch_files(TEST_PATCH)
    assert files == [
        ts.PatchFile(path="tests/test_calc.py", old_path="tests/test_calc.py"),
        ts.PatchFile(path="tests/test_new.py", old_path=None, is_new=True),
        ts.PatchFile(path="tests/old_helper.py", old_path="tests/old_helper.py", is_deleted=True),
        ts.PatchFile(path="tests/data/expected.json", old_path="tests/data/expected.json"),
        ts.PatchFile(path="tests/b.py", old_path="tests/a.py"),
        ts.PatchFile(path="tests/with space.py", old_path="tests/with space.py"),
        ts.PatchFile(path="tests/café.py", old_path=None, is_new=True),
    ]


def test_directives_are_the_test_patch_files_without_data_files() -> None:
    inst = {"repo": "pytest-dev/pytest", "test_patch": TEST_PATCH}
    # renamed files by their new name; a header git quotes names no directive (as the official generator)
    assert ts.get_test_directives(inst) == ["tests/test_calc.py", "tests/test_new.py", "tests/old_helper.py",
                                            "tests/b.py", "tests/with space.py"]


def test_only_header_lines_name_directives() -> None:
    patch = ("diff --git a/tests/test_diff.py b/tests/test_diff.py\n--- a/tests/test_diff.py\n"
             "+++ b/tests/test_diff.py\n@@ -1 +1 @@\n-x\n+diff --git a/x.py b/y.py\n")
    assert ts.get_test_directives({"repo": "psf/requests", "test_patch": patch}) == ["tests/test_diff.py"]


def test_sympy_directives_are_the_test_file_paths() -> None:
    patch = ("diff --git a/sympy/core/tests/test_basic.py b/sympy/core/tests/test_basic.py\n"
             "--- a/sympy/core/tests/test_basic.py\n+++ b/sympy/core/tests/test_basic.py\n@@ -1 +1 @@\n-a\n+b\n")
    assert ts.get_test_directives({"repo": "sympy/sympy", "test_patch": patch}) == [
        "sympy/core/tests/test_basic.py"]


def test_django_directives_are_the_module_names_of_every_test_patch_file() -> None:
    def diff(path: str) -> str:
        return f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n-a\n+b\n"

    patch = "".join(diff(p) for p in ("tests/migrations/test_autodetector.py", "tests/admin_views/tests.py",
                                      "tests/i18n/sampleproject/locale/fr/LC_MESSAGES/django.po",
                                      "tests/auth_tests/models/custom_user.py", "tests/templates/x.txt",
                                      "tests/runtests.py", "django/db/models/base.py"))
    # as the official generator: no file is dropped for not looking like a test, only data files
    assert ts.get_test_directives({"repo": "django/django", "test_patch": patch}) == [
        "migrations.test_autodetector", "admin_views.tests", "i18n.sampleproject.locale.fr.LC_MESSAGES.django.po",
        "auth_tests.models.custom_user", "runtests", "django.db.models.base"]


def test_a_django_test_patch_of_data_files_only_passes_no_label() -> None:
    patch = "diff --git a/tests/fixtures/x.json b/tests/fixtures/x.json\n--- a/tests/fixtures/x.json\n" \
            "+++ b/tests/fixtures/x.json\n@@ -1 +1 @@\n-a\n+b\n"
    inst = {"repo": "django/django", "version": "4.0", "test_patch": patch, "base_commit": "abc"}
    assert ts.get_test_directives(inst) == []
    assert f"\n{ts.TEST_DJANGO}\n" in ts.make_eval_script(inst)


def test_humaneval_runs_its_test_file() -> None:
    inst = {"repo": "swe-bench/humaneval", "version": "1.0", "test_patch": "", "base_commit": "abc"}
    assert ts.get_test_directives(inst) == ["test.py"]
    assert "\npython test.py\n" in ts.make_eval_script(inst)


def test_dbt_core_has_no_official_test_command_but_takes_the_instances() -> None:
    with pytest.raises(ConfigError) as exc:
        ts.get_test_cmd({"repo": "dbt-labs/dbt-core", "version": "1.7"})
    assert exc.value.field == "test_cmd" and "dbt-labs/dbt-core" not in ts.known_repos()
    assert ts.get_test_cmd({"repo": "dbt-labs/dbt-core", "version": "1.7", "test_cmd": "pytest"}) == "pytest"


# ---------------------------------------------------------------------------------------------- scripts, for real

BASE_FILES = {
    "calc.py": "def add(a, b):\n    return a + b if a >= 0 else a - b\n",
    "tests/test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(1, 1) == 2\n",
    "tests/conftest.py": "import sys, os\nsys.path.insert(0, os.path.dirname(os.path.dirname(__file__)))\n",
}
# The test patch adds a failing-before test to an existing file and a new test file.
TEST_CHANGES = {
    "tests/test_calc.py": BASE_FILES["tests/test_calc.py"] + "\n\ndef test_add_negative():\n"
                                                              "    assert add(-1, -1) == -2\n",
    "tests/test_new.py": "from calc import add\n\n\ndef test_zero():\n    assert add(0, 0) == 0\n",
}
FIX = {"calc.py": "def add(a, b):\n    return a + b\n"}
F2P = ["tests/test_calc.py::test_add_negative"]
P2P = ["tests/test_calc.py::test_add", "tests/test_new.py::test_zero"]


def _git(repo: Path, *args: str) -> str:
    res = subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main",
                          *args], cwd=repo, capture_output=True, text=True, timeout=60, env=_env(repo.parent))
    assert res.returncode == 0, res.stderr
    return res.stdout


def _env(home: Path) -> dict[str, str]:
    # a private HOME so neither the scripts nor these helpers read or write the user's git config
    return {"PATH": os.environ["PATH"], "HOME": str(home), "GIT_CONFIG_NOSYSTEM": "1", "LANG": "C.UTF-8"}


def _write(repo: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)


def _diff(repo: Path, changes: dict[str, str]) -> str:
    """A real git diff of ``changes`` against HEAD; the work tree is put back at HEAD afterwards."""
    _write(repo, changes)
    _git(repo, "add", "-A")
    patch = _git(repo, "diff", "--cached", "HEAD")
    _git(repo, "reset", "-q", "--hard", "HEAD")
    _git(repo, "clean", "-qfd")
    return patch


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    """A git repo at its base commit and an instance for it (test command: this interpreter's pytest)."""
    repo = tmp_path / "testbed"
    repo.mkdir()
    _git(repo, "init", "-q")
    _write(repo, BASE_FILES)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "base")
    base = _git(repo, "rev-parse", "HEAD").strip()
    inst = {"instance_id": "local__calc-1", "repo": "local/calc", "version": "1.0", "base_commit": base,
            "test_patch": _diff(repo, TEST_CHANGES), "patch": _diff(repo, FIX), "FAIL_TO_PASS": F2P,
            "PASS_TO_PASS": P2P, "log_parser": "pytest",
            "test_cmd": f"{shlex.quote(sys.executable)} -m pytest -rA -p no:cacheprovider"}
    return repo, inst


def _bash(script: str, repo: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    path = repo.parent / "script.sh"
    path.write_text(script)
    return subprocess.run(["bash", str(path)], cwd=repo.parent, capture_output=True, text=True, timeout=timeout,
                          env=_env(repo.parent))


def _apply(repo: Path, patch: str) -> subprocess.CompletedProcess[str]:
    patch_file = repo.parent / "model.patch"
    patch_file.write_text(patch)
    return _bash(ts.apply_patch_script(str(patch_file), repo_dir=str(repo)), repo)


def _tests_as_at_base(repo: Path) -> None:
    assert (repo / "tests/test_calc.py").read_text() == BASE_FILES["tests/test_calc.py"]
    assert not (repo / "tests/test_new.py").exists()


def test_the_eval_script_runs_the_new_tests_and_resets_them_afterwards(repo: tuple[Path, dict[str, Any]]) -> None:
    path, inst = repo
    applied = _apply(path, inst["patch"])
    assert applied.returncode == 0 and model_patch_applied(applied.stdout) is True
    res = _bash(ts.make_eval_script(inst, repo_dir=str(path)), path)
    out = res.stdout
    assert res.returncode == 0, out
    assert out.index(ts.START_TEST_OUTPUT) < out.index("PASSED tests/test_calc.py::test_add_negative") \
        < out.index(ts.END_TEST_OUTPUT) < out.index(f"{ts.TEST_EXIT_CODE}: 0")
    report = grade(inst, applied.stdout + out)
    assert report.resolved and report.error is None, report
    assert report.tests_status["PASS_TO_PASS"].success == P2P
    _tests_as_at_base(path)
    # only the model's change is left
    assert _git(path, "status", "--porcelain", "--untracked-files=no").strip() == "M calc.py"


def test_without_the_fix_the_new_test_fails_and_is_graded_unresolved(repo: tuple[Path, dict[str, Any]]) -> None:
    path, inst = repo
    out = _bash(ts.make_eval_script(inst, repo_dir=str(path)), path).stdout
    report = grade(inst, out)
    assert not report.resolved and report.error is None
    assert report.tests_status["FAIL_TO_PASS"].failure == F2P
    assert report.test_exit_code == 1
    _tests_as_at_base(path)


def test_test_files_the_agent_edited_are_reset_before_the_tests_run(repo: tuple[Path, dict[str, Any]]) -> None:
    path, inst = repo
    # the agent "fixes" the bug by gutting the test, and plants its own test_new.py
    _write(path, {"tests/test_calc.py": "def test_add_negative():\n    pass\n",
                  "tests/test_new.py": "def test_zero():\n    pass\n"})
    report = grade(inst, _bash(ts.make_eval_script(inst, repo_dir=str(path)), path).stdout)
    assert report.tests_status["FAIL_TO_PASS"].failure == F2P and not report.resolved
    _tests_as_at_base(path)


def test_a_test_patch_that_does_not_apply_leaves_no_test_output(repo: tuple[Path, dict[str, Any]]) -> None:
    path, inst = repo
    broken = {**inst, "test_patch": inst["test_patch"].replace("def test_add():", "def test_other():")}
    res = _bash(ts.make_eval_script(broken, repo_dir=str(path)), path)
    assert res.returncode == 1 and ts.START_TEST_OUTPUT not in res.stdout
    assert grade(broken, res.stdout).error is GradeError.TEST_OUTPUT_MISSING
    _tests_as_at_base(path)


def test_a_missing_base_commit_is_reported_as_a_reset_failure(repo: tuple[Path, dict[str, Any]]) -> None:
    path, inst = repo
    res = _bash(ts.make_eval_script({**inst, "base_commit": "0" * 40}, repo_dir=str(path)), path)
    assert ts.RESET_FAILED in res.stdout
    assert grade(inst, res.stdout).error is GradeError.RESET_FAILED


def test_a_test_run_over_its_time_limit_is_cut_and_marked(repo: tuple[Path, dict[str, Any]]) -> None:
    path, inst = repo
    slow = {**inst, "test_cmd": "sleep 30; true"}
    res = _bash(ts.make_eval_script(slow, repo_dir=str(path), test_timeout=1), path, timeout=60)
    assert ts.TESTS_TIMEOUT in res.stdout and f"{ts.TEST_EXIT_CODE}: 124" in res.stdout
    assert grade(slow, res.stdout).error is GradeError.TESTS_TIMED_OUT
    _tests_as_at_base(path)


def test_the_script_activates_conda_only_where_it_exists_and_can_skip_reinstalling() -> None:
    inst = {"repo": "django/django", "version": "2.2", "base_commit": "abc", "test_patch": ""}
    script = ts.make_eval_script(inst)
    assert f"if [ -f {ts.CONDA_ACTIVATE} ]; then" in script
    assert "cd /testbed " in script and "python setup.py install" in script
    assert "export LANG=en_US.UTF-8" in script
    assert "python setup.py install" not in ts.make_eval_script(inst, install=False)
    assert ts.make_eval_script(inst, "pytest -q").count("pytest -q") == 1


def test_an_instance_without_a_base_commit_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as exc:
        ts.make_eval_script({"repo": "django/django", "version": "3.0", "test_patch": ""})
    assert exc.value.field == "base_commit"


def test_a_clean_patch_applies_with_the_first_command(repo: tuple[Path, dict[str, Any]]) -> None:
    path, inst = repo
    res = _apply(path, inst["patch"])
    assert res.returncode == 0
    assert f"{ts.APPLY_PATCH_PASS} (git apply --verbose):" in res.stdout
    assert (path / "calc.py").read_text() == FIX["calc.py"]


def test_a_patch_with_stale_context_falls_back_to_patch_with_fuzz(repo: tuple[Path, dict[str, Any]]) -> None:
    path, inst = repo
    stale = inst["patch"].replace(" def add(a, b):", " def add(a,b):")  # context no longer matches exactly
    res = _apply(path, stale)
    assert res.returncode == 0, res.stdout
    assert f"{ts.APPLY_PATCH_PASS} (patch --batch --fuzz=5 -p1 -i):" in res.stdout
    assert "git apply --verbose did not apply the patch:" in res.stdout
    assert model_patch_applied(res.stdout) is True
    assert "return a + b\n" in (path / "calc.py").read_text()


def test_a_patch_nothing_can_apply_prints_the_failure_marker(repo: tuple[Path, dict[str, Any]]) -> None:
    path, _ = repo
    res = _apply(path, "diff --git a/nope.py b/nope.py\n--- a/nope.py\n+++ b/nope.py\n@@ -1 +1 @@\n-x\n+y\n")
    assert res.returncode == 1
    assert res.stdout.rstrip().endswith(ts.APPLY_PATCH_FAIL)
    assert model_patch_applied(res.stdout) is False
    assert ts.APPLY_PATCH_COMMANDS == ("git apply --verbose", "git apply --verbose --reject",
                                       "patch --batch --fuzz=5 -p1 -i")


# ------------------------------------------------------------------------------------- an instance's own script

def _official_style_script(inst: dict[str, Any], repo: Path,
                           tests: str = "tests/test_calc.py tests/test_new.py") -> str:
    """An eval script as newer SWE-bench releases ship it in the ``eval_script`` column (4.1.0's shape)."""
    reset = f"git checkout {inst['base_commit']} tests/test_calc.py"
    return "\n".join([
        "#!/bin/bash", "set -uxo pipefail", f"cd {repo}", f"git config --global --add safe.directory {repo}",
        reset, f"git apply -v - <<'EOF_114329324912'\n{inst['test_patch']}\nEOF_114329324912",
        f": '{ts.START_TEST_OUTPUT}'", f"{inst['test_cmd']} {tests}",
        f": '{ts.END_TEST_OUTPUT}'", reset]) + "\n"


def test_an_instance_eval_script_is_run_as_given_with_its_exit_code_recorded(
        repo: tuple[Path, dict[str, Any]]) -> None:
    path, inst = repo
    own = {**inst, "eval_script": _official_style_script(inst, path), "test_cmd": "false"}
    script = ts.make_eval_script(own, "also ignored", repo_dir=str(path), test_timeout=5)
    lines = script.splitlines()
    assert lines[:3] == ["#!/bin/bash", "set -uxo pipefail", "exec 2>&1"] and "false" not in lines
    end = lines.index(f": '{ts.END_TEST_OUTPUT}'")
    assert lines[end - 1] == "ac_test_rc=$?" and lines[end + 1] == f'echo "{ts.TEST_EXIT_CODE}: $ac_test_rc"'
    assert lines[end - 2].endswith("tests/test_calc.py tests/test_new.py")

    before = grade(own, _bash(script, path).stdout)
    assert not before.resolved and before.error is None and before.test_exit_code == 1
    assert before.tests_status["FAIL_TO_PASS"].failure == F2P
    # that script leaves the file its test patch created (the official shape does): the next run removes it first
    assert (path / "tests/test_new.py").exists()
    applied = _apply(path, inst["patch"])
    out = _bash(script, path).stdout
    assert out.index(ts.START_TEST_OUTPUT) < out.index("PASSED tests/test_calc.py::test_add_negative") \
        < out.index(ts.END_TEST_OUTPUT) < out.index(f"{ts.TEST_EXIT_CODE}: 0")
    after = grade(own, applied.stdout + out)
    assert after.resolved and after.error is None and after.test_exit_code == 0


def test_an_eval_script_without_markers_or_not_text_is_a_config_error() -> None:
    inst = {"instance_id": "x__y-1", "repo": "x/y", "base_commit": "abc", "test_patch": ""}
    with pytest.raises(ConfigError, match="markers") as exc:
        ts.make_eval_script({**inst, "eval_script": "#!/bin/bash\npytest\n"})
    assert exc.value.field == "eval_script"
    with pytest.raises(ConfigError) as exc:
        ts.own_eval_script({**inst, "eval_script": ["pytest"]})
    assert exc.value.field == "eval_script"
    assert ts.own_eval_script({**inst, "eval_script": ""}) is None and ts.own_eval_script(inst) is None


NEW_TEST = {"tests/test_neg.py": "from calc import add\n\n\ndef test_neg():\n    assert add(-1, -1) == -2\n"}


@pytest.fixture
def own_row(repo: tuple[Path, dict[str, Any]]) -> tuple[Path, dict[str, Any]]:
    """A row with its own eval script whose test patch only creates a file, holding the FAIL_TO_PASS test."""
    path, inst = repo
    row = {**inst, "test_patch": _diff(path, NEW_TEST), "FAIL_TO_PASS": ["tests/test_neg.py::test_neg"],
           "PASS_TO_PASS": ["tests/test_calc.py::test_add"]}
    return path, {**row, "eval_script": _official_style_script(row, path, "tests/test_calc.py tests/test_neg.py")}


def test_a_test_file_the_agent_planted_where_an_own_script_creates_one_is_replaced(
        own_row: tuple[Path, dict[str, Any]]) -> None:
    path, row = own_row
    # the agent's patch pre-creates the new test file with a passing test of the FAIL_TO_PASS name, so the
    # row's own `git apply` would fail ("already exists") and, without -e, run the tests on the agent's file
    forged = _apply(path, _diff(path, {"tests/test_neg.py": "def test_neg():\n    pass\n"}))
    assert model_patch_applied(forged.stdout) is True
    out = _bash(ts.make_eval_script(row, repo_dir=str(path)), path).stdout
    report = grade(row, forged.stdout + out)
    assert not report.resolved, out
    assert report.tests_status["FAIL_TO_PASS"].failure == ["tests/test_neg.py::test_neg"]


def test_the_gold_patch_still_resolves_a_row_with_its_own_script(own_row: tuple[Path, dict[str, Any]]) -> None:
    path, row = own_row
    applied = _apply(path, row["patch"])
    out = _bash(ts.make_eval_script(row, repo_dir=str(path)), path).stdout
    report = grade(row, applied.stdout + out)
    assert report.resolved and report.error is None, out
    # run twice in the same work tree (the row's script leaves the file it created): still graded the same
    assert grade(row, applied.stdout + _bash(ts.make_eval_script(row, repo_dir=str(path)), path).stdout).resolved


def test_an_own_script_whose_test_patch_does_not_apply_runs_no_tests(own_row: tuple[Path, dict[str, Any]]) -> None:
    path, row = own_row
    # a test patch whose context is not in the repo: the row's own `git apply` fails and would run the tests
    # on files the patch never reached
    extra = {"tests/test_calc.py": BASE_FILES["tests/test_calc.py"] + "\n\ndef test_more():\n    pass\n"}
    broken = _diff(path, {**NEW_TEST, **extra}).replace(" def test_add():", " def test_other():")
    row = {**row, "test_patch": broken}
    row["eval_script"] = _official_style_script(row, path, "tests/test_calc.py tests/test_neg.py")
    res = _bash(ts.make_eval_script(row, repo_dir=str(path)), path)
    assert res.returncode == 1 and ts.START_TEST_OUTPUT not in res.stdout, res.stdout
    assert grade(row, res.stdout).error is GradeError.TEST_OUTPUT_MISSING


def test_test_files_the_agent_edited_are_reset_before_an_own_script_even_without_a_base_commit(
        own_row: tuple[Path, dict[str, Any]]) -> None:
    path, row = own_row
    # the agent guts the existing test and plants the new one; the row names no base commit (HEAD is used)
    _write(path, {"tests/test_calc.py": "def test_add():\n    pass\n", **{k: "def test_neg():\n    pass\n"
                                                                         for k in NEW_TEST}})
    row = {**row, "base_commit": ""}
    report = grade(row, _bash(ts.make_eval_script(row, repo_dir=str(path)), path).stdout)
    assert not report.resolved and report.error is None
    assert report.tests_status["FAIL_TO_PASS"].failure == ["tests/test_neg.py::test_neg"]
    assert (path / "tests/test_calc.py").read_text() == BASE_FILES["tests/test_calc.py"]
