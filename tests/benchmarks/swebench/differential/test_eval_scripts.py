"""Our eval scripts against the official ones of swebench 4.1.0 (the last release that generates them), on
synthetic instances of every Python (repo, version) of its specs table.

Both scripts are reduced to their semantic steps (env lines, reinstall, which files are reset to the base
commit or removed, the test patch applied, the markers, the test command as argv); the steps must be equal.
The mechanics that legitimately differ are dropped by name (``MECHANICS``), and every other difference is a
named deviation (``DEVIATIONS``, also listed in docs/swebench.md) with a test showing exactly that difference.
"""

from __future__ import annotations

import random
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from swebench.harness.constants import END_TEST_OUTPUT as OFFICIAL_END
from swebench.harness.constants import START_TEST_OUTPUT as OFFICIAL_START
from swebench.harness.constants.python import MAP_REPO_VERSION_TO_SPECS_PY
from swebench.harness.test_spec.create_scripts import make_eval_script_list
from swebench.harness.test_spec.python import get_test_directives as official_directives
from swebench.harness.test_spec.test_spec import TestSpec as _OfficialTestSpec

from agentcompass._errors import ConfigError
from agentcompass.benchmarks.swebench import test_specs as ts

ROOT = Path(__file__).resolve().parents[4]
BASE = "0123456789abcdef0123456789abcdef01234567"
PAIRS = sorted((repo, version) for repo, versions in MAP_REPO_VERSION_TO_SPECS_PY.items() for version in versions)
#: the official table has no test_cmd for these repos: it cannot build their eval scripts
NO_OFFICIAL_TEST_CMD = sorted({repo for repo, v in PAIRS if "test_cmd" not in MAP_REPO_VERSION_TO_SPECS_PY[repo][v]})
COMPARED = [(r, v) for r, v in PAIRS if r not in NO_OFFICIAL_TEST_CMD]

#: lines of one script with no counterpart in the other, dropped by name
MECHANICS = {
    "conda": "official: `source /opt/miniconda3/bin/activate` + `conda activate testbed` (twice); ours: "
             "the same guarded by `if [ -f ... ]`, so images without conda run too",
    "cd": "official: `cd /testbed` (twice); ours: one `cd` that fails with the reset marker",
    "safe_directory": "official: `git config --global --add safe.directory`; ours: `git -c safe.directory=` per call",
    "informational_git": "official: `git status`, `git show`, `git diff <base>` printed before the tests "
                         "(informational)",
    "shell_options": "official: `set -uxo pipefail` (markers traced by -x); ours: `set -uo pipefail` + "
                     "`exec 2>&1`, markers echoed",
    "heredoc": "the test patch's heredoc delimiter, and the newline the official script adds after the patch",
    "exit": "ours ends with `exit 0`",
}
#: semantic differences, each shown by its own test below
DEVIATIONS = {
    "remove_created_files": "each reset also removes the files the test patch creates (new files, rename "
                            "targets): a file the agent created at such a path would make the official "
                            "`git apply` fail and the tests run on the agent's file",
    "no_bare_checkout": "when the test patch creates every file, official runs a bare `git checkout <base>` "
                        "(no paths); ours checks out nothing",
    "stop_on_test_patch_failure": "a test patch that does not apply ends the script with no test output "
                                  "(graded as an error); official runs the tests on the unpatched files",
    "exit_code_recorded": "the test command's exit code is printed after the end marker (as swebench 5.x does)",
    "quoted_arguments": "paths are shell-quoted: official splits a path with a space into two arguments",
    "quoted_paths_reset": "files whose diff header git quotes (non-ASCII names) are reset too; official's "
                          "patch reader skips them (both take no test directive from them)",
    "headers_only": "only lines starting with `diff --git` name files: official also reads such text "
                    "inside a hunk's lines",
    "no_official_test_cmd": "dbt-labs/dbt-core has no test_cmd in the official table (its script cannot be "
                            "built); ours refuses with a ConfigError unless the instance brings a test_cmd",
}


# ---------------------------------------------------------------------------------------------- instances

@dataclass
class Synthetic:
    """A test patch and what it does: the files that exist at base (reset by checkout) and those it creates."""

    patch: str = ""
    existing: list[str] = field(default_factory=list)
    created: list[str] = field(default_factory=list)


_WORDS = ("basic", "models", "utils", "parser", "io", "core", "printing", "fields", "views", "forms", "units")


def _pools(repo: str, rng: random.Random) -> tuple[list[str], list[str]]:
    """Test-file and data-file paths in the repo's own layout."""
    w = rng.sample(_WORDS, 6)
    if repo == "django/django":
        tests = ["tests/runtests.py", f"tests/{w[0]}_tests/tests.py", f"tests/{w[1]}/test_{w[2]}.py",
                 f"tests/migrations/test_migrations_{w[3]}/0001_initial.py", f"tests/auth_tests/models/{w[4]}.py",
                 f"tests/template_tests/syntax_tests/i18n/test_{w[5]}.py", "tests/test_sqlite.py",
                 f"tests/{w[0]}/templates/{w[1]}.html", "tests/i18n/commands/locale/fr/LC_MESSAGES/django.po"]
        data = ["tests/fixtures/fixtures/db.json", f"tests/staticfiles_tests/project/{w[2]}/test.txt",
                f"tests/{w[3]}/data.yaml"]
    elif repo == "sympy/sympy":
        tests = [f"sympy/{w[0]}/tests/test_{w[1]}.py", f"sympy/{w[2]}/tests/test_{w[3]}.py",
                 f"sympy/{w[4]}/{w[5]}/tests/test_{w[0]}.py", "sympy/utilities/tests/test_pickling.py"]
        data = [f"sympy/{w[1]}/tests/data/{w[2]}.txt", "doc/src/modules/printing.md"]
    elif repo == "astropy/astropy":
        tests = [f"astropy/{w[0]}/tests/test_{w[1]}.py", f"astropy/io/{w[2]}/tests/test_{w[3]}.py",
                 f"astropy/{w[4]}/tests/data/{w[5]}.fits", "astropy/conftest.py"]
        data = [f"astropy/io/{w[0]}/tests/data/{w[1]}.json", f"astropy/utils/iers/tests/data/{w[2]}.txt",
                f"astropy/{w[3]}/tests/data/{w[4]}.csv", "docs/changes/12345.bugfix.rst.txt"]
    else:
        pkg = repo.split("/")[1].replace("-", "_")
        tests = [f"tests/test_{w[0]}.py", f"{pkg}/tests/test_{w[1]}.py", f"testing/test_{w[2]}.py",
                 f"tests/{w[3]}/test_{w[4]}.py", "tests/conftest.py"]
        data = [f"tests/data/{w[0]}.json", f"tests/fixtures/{w[1]}.txt", f"tests/baseline/{w[2]}.png",
                f"tests/data/{w[3]}.yml", f"tests/data/{w[4]}.toml", f"tests/data/{w[5]}.pkl"]
    return tests, data


def _hunk(rng: random.Random, old: int, new: int) -> str:
    lines = [f" context_{rng.randrange(999)}"] + [f"-old_{i}" for i in range(old)] + [f"+new_{i}" for i in range(new)]
    return f"@@ -1,{old + 1} +1,{new + 1} @@\n" + "\n".join(lines) + "\n"


def _index(rng: random.Random) -> str:
    return f"{rng.getrandbits(28):07x}..{rng.getrandbits(28):07x}"


def _entry(kind: str, path: str, rng: random.Random, syn: Synthetic) -> str:
    head = f"diff --git a/{path} b/{path}\n"
    if kind == "modify":
        syn.existing.append(path)
        return head + f"index {_index(rng)} 100644\n--- a/{path}\n+++ b/{path}\n" + _hunk(rng, 1, 2)
    if kind == "new":
        syn.created.append(path)
        body = "".join(f"+line_{i}\n" for i in range(3))
        return head + f"new file mode 100644\nindex 0000000..{rng.getrandbits(28):07x}\n--- /dev/null\n" \
                      f"+++ b/{path}\n@@ -0,0 +1,3 @@\n{body}"
    if kind == "binary_new":
        syn.created.append(path)
        return head + f"new file mode 100644\nindex 0000000..{rng.getrandbits(28):07x}\n" \
                      f"Binary files /dev/null and b/{path} differ\n"
    if kind == "delete":
        syn.existing.append(path)
        return head + f"deleted file mode 100644\nindex {rng.getrandbits(28):07x}..0000000\n--- a/{path}\n" \
                      f"+++ /dev/null\n@@ -1,2 +0,0 @@\n-gone_1\n-gone_2\n"
    stem, dot, ext = path.rpartition(".")
    target = f"{stem}_renamed.{ext}" if dot else f"{path}_renamed"
    syn.existing.append(path)
    syn.created.append(target)
    head = f"diff --git a/{path} b/{target}\n"
    if kind == "rename":
        return head + "similarity index 100%\n" + f"rename from {path}\nrename to {target}\n"
    return head + f"similarity index 88%\nrename from {path}\nrename to {target}\nindex {_index(rng)} 100644\n" \
                  f"--- a/{path}\n+++ b/{target}\n" + _hunk(rng, 1, 1)


def synthetic(repo: str, seed: str, *, all_new: bool = False) -> Synthetic:
    """A realistic test patch in ``repo``'s layout: modified, new, deleted and renamed tests and data files;
    with ``all_new`` only new files."""
    rng = random.Random(seed)
    tests, data = _pools(repo, rng)
    syn = Synthetic()
    entries = []
    if all_new:
        picks = [("new", p) for p in rng.sample(tests, rng.randint(1, 3))]
        picks += [("binary_new" if p.endswith(".png") else "new", p) for p in rng.sample(data, 1)]
    else:
        n = rng.randint(3, len(tests))
        kinds = ["modify"] + [rng.choice(("modify", "new", "delete", "rename", "rename_edit")) for _ in range(n - 1)]
        picks = list(zip(kinds, rng.sample(tests, n), strict=True))
        picks += [(rng.choice(("modify", "new")) if not p.endswith(".png") else "binary_new", p)
                  for p in rng.sample(data, rng.randint(1, 2))]
        rng.shuffle(picks)
    for kind, path in picks:
        entries.append(_entry(kind, path, rng, syn))
    syn.patch = "".join(entries)
    return syn


def instance(repo: str, version: str, test_patch: str) -> dict[str, str]:
    return {"instance_id": f"{repo.replace('/', '__')}-1", "repo": repo, "version": version, "base_commit": BASE,
            "test_patch": test_patch, "patch": "", "problem_statement": "x"}


def official_script(inst: dict[str, str]) -> str:
    """``TestSpec.eval_script`` as ``make_test_spec`` builds it (the env and repo scripts, which would fetch
    requirement files from GitHub, are not built: the eval script does not depend on them)."""
    specs = MAP_REPO_VERSION_TO_SPECS_PY[inst["repo"]][inst["version"]]
    lines = make_eval_script_list(inst, specs, "testbed", "/testbed", inst["base_commit"], inst["test_patch"])
    spec = _OfficialTestSpec(instance_id=inst["instance_id"], repo=inst["repo"], version=inst["version"],
                    repo_script_list=[], eval_script_list=lines, env_script_list=[], arch="x86_64",
                    FAIL_TO_PASS=[], PASS_TO_PASS=[], language="py", docker_specs={}, namespace=None)
    return spec.eval_script


# ---------------------------------------------------------------------------------------------- normaliser

@dataclass(frozen=True)
class Step:
    """One semantic step: ``command`` (argv), ``reset`` (checked out, removed), ``test_patch``, ``marker``."""

    kind: str
    value: tuple[str, ...]
    removed: tuple[str, ...] = ()


@dataclass
class Parsed:
    steps: list[Step] = field(default_factory=list)
    mechanics: set[str] = field(default_factory=set)
    deviations: set[str] = field(default_factory=set)


def _heredoc(lines: list[str], i: int, delim: str) -> tuple[str, int]:
    end = lines.index(delim, i + 1)
    return "\n".join(lines[i + 1:end]), end + 1


def parse_official(script: str, base: str = BASE, repo_dir: str = "/testbed") -> Parsed:
    out = Parsed()
    mechanics = {"#!/bin/bash": "shell_options", "set -uxo pipefail": "shell_options",
                 "source /opt/miniconda3/bin/activate": "conda", "conda activate testbed": "conda",
                 f"cd {repo_dir}": "cd", f"git config --global --add safe.directory {repo_dir}": "safe_directory",
                 "git status": "informational_git", "git show": "informational_git",
                 f"git -c core.fileMode=false diff {base}": "informational_git"}
    lines = script.rstrip("\n").split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        heredoc = re.fullmatch(r"git apply -v - <<'(\w+)'", line)
        if heredoc:
            body, i = _heredoc(lines, i, heredoc.group(1))
            out.mechanics.add("heredoc")
            out.steps.append(Step("test_patch", (body.removesuffix("\n") + "\n",)))  # the added newline
            continue
        i += 1
        if line in mechanics:
            out.mechanics.add(mechanics[line])
        elif line.startswith(f"git checkout {base}"):
            files = tuple(shlex.split(line[len(f"git checkout {base}"):]))
            if not files:
                out.deviations.add("no_bare_checkout")
            out.steps.append(Step("reset", files))
        elif line in (f": '{OFFICIAL_START}'", f": '{OFFICIAL_END}'"):
            out.steps.append(Step("marker", (line[3:-1],)))
        else:
            out.steps.append(Step("command", tuple(shlex.split(line))))
    return out


def _reset_body(body: list[str], git: str, base: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    checkout: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    for line in body:
        argv = shlex.split(line.strip().removesuffix("|| return 1"))
        if argv[:6] == [*shlex.split(git), "checkout", base, "--"]:
            checkout = tuple(argv[6:])
        elif argv[:3] == ["rm", "-f", "--"]:
            removed = tuple(argv[3:])
        else:
            assert argv == ["return", "0"], line
    return checkout, removed


def parse_ours(script: str, base: str = BASE, repo_dir: str = "/testbed") -> Parsed:
    out = Parsed()
    git = f"git -c safe.directory={shlex.quote(repo_dir)}"
    mechanics = {"#!/bin/bash": "shell_options", "set -uo pipefail": "shell_options", "exec 2>&1": "shell_options",
                 f"if [ -f {ts.CONDA_ACTIVATE} ]; then set +u; source {ts.CONDA_ACTIVATE} testbed; set -u; fi": "conda",
                 "exit 0": "exit"}
    deviations = {"if [ $? -ne 0 ]; then echo 'the test patch did not apply'; ac_reset_tests; exit 1; fi":
                  "stop_on_test_patch_failure", "ac_test_rc=$?": "exit_code_recorded",
                  f'echo "{ts.TEST_EXIT_CODE}: $ac_test_rc"': "exit_code_recorded"}
    lines = script.rstrip("\n").split("\n")
    reset: tuple[tuple[str, ...], tuple[str, ...]] | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        heredoc = re.fullmatch(rf"{re.escape(git)} apply -v - <<'(\w+)'", line)
        if heredoc:
            body, i = _heredoc(lines, i, heredoc.group(1))
            out.mechanics.add("heredoc")
            out.steps.append(Step("test_patch", (body + "\n",)))
            continue
        i += 1
        if line == "ac_reset_tests() {":
            end = lines.index("}", i)
            reset = _reset_body(lines[i:end], git, base)
            i = end + 1
        elif line in mechanics:
            out.mechanics.add(mechanics[line])
        elif line in deviations:
            out.deviations.add(deviations[line])
        elif line.startswith(f"cd {shlex.quote(repo_dir)} || "):
            out.mechanics.add("cd")
        elif line.startswith("ac_reset_tests || "):
            assert reset is not None
            if reset[1]:
                out.deviations.add("remove_created_files")
            out.steps.append(Step("reset", reset[0], reset[1]))
        elif line in (ts._echo(ts.START_TEST_OUTPUT), ts._echo(ts.END_TEST_OUTPUT)):
            out.steps.append(Step("marker", (shlex.split(line)[1],)))
        else:
            out.steps.append(Step("command", tuple(shlex.split(line))))
    return out


def _both(inst: dict[str, str]) -> tuple[Parsed, Parsed]:
    return parse_official(official_script(inst)), parse_ours(ts.make_eval_script(inst))


def _without_removals(parsed: Parsed) -> list[Step]:
    return [Step(s.kind, s.value) for s in parsed.steps]


# ---------------------------------------------------------------------------------------------- the comparison

def test_every_python_pair_of_the_official_table_is_covered() -> None:
    assert len(PAIRS) >= 290 and len(COMPARED) == len(PAIRS) - 17
    assert NO_OFFICIAL_TEST_CMD == ["dbt-labs/dbt-core"]


@pytest.mark.parametrize(("repo", "version"), COMPARED)
def test_our_eval_script_does_what_the_official_one_does(repo: str, version: str) -> None:
    for n in range(3):
        syn = synthetic(repo, f"{repo}@{version}#{n}")
        inst = instance(repo, version, syn.patch)
        official, ours = _both(inst)
        assert ts.get_test_directives(inst) == official_directives(inst)
        assert _without_removals(ours) == official.steps
        # the reset: exactly the files that exist at base are checked out, those the patch creates removed
        resets = [s for s in ours.steps if s.kind == "reset"]
        assert len(resets) == 2 and all(s.value == tuple(syn.existing) for s in resets)
        assert all(s.removed == tuple(syn.created) for s in resets)
        assert [s.value[0] for s in official.steps if s.kind == "marker"] == [OFFICIAL_START, OFFICIAL_END]
        assert official.mechanics <= set(MECHANICS) and ours.mechanics <= set(MECHANICS)
        assert official.deviations == set()
        assert ours.deviations == ({"remove_created_files"} if syn.created else set()) \
            | {"stop_on_test_patch_failure", "exit_code_recorded"}


@pytest.mark.parametrize(("repo", "version"), COMPARED)
def test_a_test_patch_of_new_files_only_is_applied_the_same_way(repo: str, version: str) -> None:
    syn = synthetic(repo, f"{repo}@{version}/new", all_new=True)
    inst = instance(repo, version, syn.patch)
    official, ours = _both(inst)
    assert ts.get_test_directives(inst) == official_directives(inst)
    assert official.deviations == {"no_bare_checkout"}  # official: `git checkout <base>` with no paths
    assert _without_removals(ours) == official.steps  # ours: no checkout at all
    assert [s.removed for s in ours.steps if s.kind == "reset"] == [tuple(syn.created)] * 2


def test_the_official_steps_are_what_the_normaliser_expects() -> None:
    # the normaliser must see the steps, not swallow them: env lines, reinstall, reset, patch, test
    inst = instance("django/django", "3.0", synthetic("django/django", "shape").patch)
    steps = parse_official(official_script(inst)).steps
    kinds = [s.kind for s in steps]
    assert kinds == ["command"] * 5 + ["reset", "test_patch", "marker", "command", "marker", "reset"]
    assert steps[0].value[:3] == ("sed", "-i", "/en_US.UTF-8/s/^# //g")
    assert steps[4].value == ("python", "-m", "pip", "install", "-e", ".")
    assert steps[8].value[:2] == ("./tests/runtests.py", "--verbosity")
    assert "runtests" in steps[8].value  # the official directives keep tests/runtests.py, as ours do


# ---------------------------------------------------------------------------------------------- deviations

def _patch(*paths: str, new: bool = False) -> str:
    out = ""
    for p in paths:
        a, b = (f'"a/{p[1:-1]}"', f'"b/{p[1:-1]}"') if p.startswith('"') else (f"a/{p}", f"b/{p}")
        if new:
            out += f"diff --git {a} {b}\nnew file mode 100644\n--- /dev/null\n+++ {b}\n@@ -0,0 +1 @@\n+x\n"
        else:
            out += f"diff --git {a} {b}\nindex 1..2 100644\n--- {a}\n+++ {b}\n@@ -1 +1 @@\n-x\n+y\n"
    return out


def test_deviation_quoted_arguments() -> None:
    inst = instance("pytest-dev/pytest", "7.0", _patch("testing/test_a b.py"))
    official, ours = _both(inst)
    off_test = next(s for s in official.steps if s.kind == "command" and s.value[0] == "pytest")
    our_test = next(s for s in ours.steps if s.kind == "command" and s.value[0] == "pytest")
    assert off_test.value == ("pytest", "-rA", "testing/test_a", "b.py")
    assert our_test.value == ("pytest", "-rA", "testing/test_a b.py")
    assert next(s.value for s in official.steps if s.kind == "reset") == ("testing/test_a", "b.py")
    assert next(s.value for s in ours.steps if s.kind == "reset") == ("testing/test_a b.py",)


def test_deviation_quoted_paths_reset() -> None:
    quoted = '"testing/test_caf\\303\\251.py"'
    inst = instance("pytest-dev/pytest", "7.0", _patch(quoted) + _patch("testing/test_b.py"))
    official, ours = _both(inst)
    assert ts.get_test_directives(inst) == official_directives(inst) == ["testing/test_b.py"]
    assert next(s.value for s in official.steps if s.kind == "reset") == ("testing/test_b.py",)
    assert next(s.value for s in ours.steps if s.kind == "reset") == ("testing/test_café.py", "testing/test_b.py")


def test_deviation_headers_only() -> None:
    patch = _patch("tests/test_diff.py").replace("+y\n", "+diff --git a/x.py b/y.py\n")
    inst = instance("psf/requests", "2.0", patch)
    assert official_directives(inst) == ["tests/test_diff.py", "y.py"]
    assert ts.get_test_directives(inst) == ["tests/test_diff.py"]


def test_deviation_no_official_test_cmd() -> None:
    inst = instance("dbt-labs/dbt-core", "1.7", _patch("test/unit/test_a.py"))
    with pytest.raises(KeyError):
        official_script(inst)
    with pytest.raises(ConfigError) as exc:
        ts.make_eval_script(inst)
    assert exc.value.field == "test_cmd"
    script = ts.make_eval_script({**inst, "test_cmd": "pytest -rA"})
    assert "pytest -rA test/unit/test_a.py" in script and "python -m pip install -e ." in script


def test_deviation_stop_and_exit_code_lines_are_the_only_extra_lines() -> None:
    parsed = parse_ours(ts.make_eval_script(instance("psf/requests", "2.0", _patch("tests/test_a.py"))))
    assert parsed.deviations == {"stop_on_test_patch_failure", "exit_code_recorded"}


def test_every_deviation_and_mechanic_is_documented() -> None:
    doc = (ROOT / "docs" / "swebench.md").read_text()
    section = doc.split("## Agreement with the official harness: eval scripts", 1)[1]
    for name in (*DEVIATIONS, *MECHANICS):
        assert f"`{name}`" in section, name


def test_official_markers_are_ours() -> None:
    assert (OFFICIAL_START, OFFICIAL_END) == (ts.START_TEST_OUTPUT, ts.END_TEST_OUTPUT)
