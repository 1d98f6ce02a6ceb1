"""Per-repo test commands and the bash scripts that apply a patch and run an instance's tests.

The commands, directives and script steps follow the official SWE-bench harness
(``MAP_REPO_VERSION_TO_SPECS``, ``get_test_directives``, ``make_eval_script_list_py`` of swebench 4.1.0);
tests/benchmarks/swebench/differential/test_eval_scripts.py compares the scripts with the official ones for every
Python (repo, version). The scripts differ in mechanics: conda is activated only when
``/opt/miniconda3/bin/activate`` exists, git is told the repo is safe per call instead of through the
global config, markers are echoed (not traced by ``set -x``), paths are shell-quoted, and the official
informational ``git status/show/diff`` lines are left out. They differ on purpose where the official script
is wrong (docs/swebench.md, "Agreement with the official harness: eval scripts"): files the test patch
creates are removed before it is applied, no bare ``git checkout <base>`` when it creates every file, and
a test patch that does not apply stops the script instead of testing the unpatched files.

An instance that carries its own ``eval_script`` (newer SWE-bench releases) is run with it, made to record
the test command's exit code as swebench 5.x does.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from typing import Any

import msgspec

from agentcompass._errors import ConfigError

# Markers written into logs; grading looks for them (values as in the official harness).
APPLY_PATCH_FAIL = ">>>>> Patch Apply Failed"
APPLY_PATCH_PASS = ">>>>> Applied Patch"
RESET_FAILED = ">>>>> Reset Failed"
TESTS_ERROR = ">>>>> Tests Errored"
TESTS_TIMEOUT = ">>>>> Tests Timed Out"
START_TEST_OUTPUT = ">>>>> Start Test Output"
END_TEST_OUTPUT = ">>>>> End Test Output"
TEST_EXIT_CODE = ">>>>> Test Exit Code"

DEFAULT_REPO_DIR = "/testbed"
CONDA_ACTIVATE = "/opt/miniconda3/bin/activate"

# The official fallbacks to apply a model patch, tried in order; each takes the patch path last.
APPLY_PATCH_COMMANDS: tuple[str, ...] = (
    "git apply --verbose",
    "git apply --verbose --reject",
    "patch --batch --fuzz=5 -p1 -i",
)

# Files of a test patch that are data, not tests to run (the official list; "csv" has no dot there too).
NON_TEST_EXTS = (".json", ".png", "csv", ".txt", ".md", ".jpg", ".jpeg", ".pkl", ".yml", ".yaml", ".toml")

TEST_PYTEST = "pytest -rA"
TEST_ASTROPY_PYTEST = "pytest -rA -vv -o console_output_style=classic --tb=no"
TEST_DJANGO = "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1"
TEST_DJANGO_NO_PARALLEL = "./tests/runtests.py --verbosity 2"
TEST_SEABORN = "pytest --no-header -rA"
TEST_SPHINX = "tox --current-env -epy39 -v --"
TEST_SYMPY = "PYTHONWARNINGS='ignore::UserWarning,ignore::SyntaxWarning' bin/test -C --verbose"


class RepoSpec(msgspec.Struct, frozen=True):
    """How one repo (at one version) runs its tests: the command, the reinstall step, env setup lines."""

    test_cmd: str | None
    install: str | None = None
    eval_commands: tuple[str, ...] = ()


_PIP_E = "python -m pip install -e ."
_DJANGO_LOCALE = ("export LANG=en_US.UTF-8", "export LC_ALL=en_US.UTF-8", "export PYTHONIOENCODING=utf8",
                  "export LANGUAGE=en_US:en")
_DJANGO_LOCALE_GEN = ("sed -i '/en_US.UTF-8/s/^# //g' /etc/locale.gen && locale-gen", "export LANG=en_US.UTF-8",
                      "export LANGUAGE=en_US:en", "export LC_ALL=en_US.UTF-8")

# Default spec per repo; versions that differ are listed in _VERSION_SPECS.
_REPO_SPECS: dict[str, RepoSpec] = {
    "astropy/astropy": RepoSpec(TEST_PYTEST, "python -m pip install -e .[test] --verbose"),
    "django/django": RepoSpec(TEST_DJANGO, _PIP_E),
    "matplotlib/matplotlib": RepoSpec(TEST_PYTEST, _PIP_E),
    "mwaskom/seaborn": RepoSpec(TEST_SEABORN, "python -m pip install -e .[dev]"),
    "pallets/flask": RepoSpec(TEST_PYTEST, _PIP_E),
    "psf/requests": RepoSpec(TEST_PYTEST, "python -m pip install ."),
    "pydata/xarray": RepoSpec(TEST_PYTEST, _PIP_E),
    "pylint-dev/pylint": RepoSpec(TEST_PYTEST, _PIP_E),
    "pytest-dev/pytest": RepoSpec(TEST_PYTEST, _PIP_E),
    "scikit-learn/scikit-learn": RepoSpec(
        TEST_PYTEST, "python -m pip install -v --no-use-pep517 --no-build-isolation -e ."),
    "sphinx-doc/sphinx": RepoSpec(TEST_SPHINX, "python -m pip install -e .[test]"),
    "sympy/sympy": RepoSpec(TEST_SYMPY, _PIP_E),
    # the other Python repos of the official harness
    "marshmallow-code/marshmallow": RepoSpec(TEST_PYTEST, "python -m pip install -e '.[dev]'"),
    "pvlib/pvlib-python": RepoSpec(TEST_PYTEST, "python -m pip install -e .[all]"),
    "pydicom/pydicom": RepoSpec(TEST_PYTEST, _PIP_E),
    "pylint-dev/astroid": RepoSpec(TEST_PYTEST, _PIP_E),
    "pyvista/pyvista": RepoSpec(TEST_PYTEST, _PIP_E),
    "sqlfluff/sqlfluff": RepoSpec(TEST_PYTEST, _PIP_E),
    # the official table has no test command for dbt-core: its instances must bring a test_cmd
    "dbt-labs/dbt-core": RepoSpec(None, _PIP_E),
    "swe-bench/humaneval": RepoSpec("python"),
}

_VERSION_SPECS: dict[tuple[str, str], RepoSpec] = {
    **{("astropy/astropy", v): RepoSpec(TEST_ASTROPY_PYTEST, "python -m pip install -e .[test] --verbose")
       for v in ("0.1", "0.2", "0.3", "0.4", "1.1", "1.2", "1.3")},
    **{("django/django", v): RepoSpec(TEST_DJANGO, "python setup.py install", _DJANGO_LOCALE)
       for v in ("1.7", "1.8", "1.10", "1.11", "2.0", "2.1", "2.2")},
    ("django/django", "1.9"): RepoSpec(TEST_DJANGO_NO_PARALLEL, "python setup.py install", _DJANGO_LOCALE),
    **{("django/django", v): RepoSpec(TEST_DJANGO, "python setup.py install") for v in ("1.4", "1.5", "1.6")},
    **{("django/django", v): RepoSpec(TEST_DJANGO, _PIP_E, _DJANGO_LOCALE_GEN) for v in ("3.0", "3.1", "3.2")},
    **{("matplotlib/matplotlib", v): RepoSpec(TEST_PYTEST, "python setup.py build; python setup.py install")
       for v in ("1.0", "1.1", "1.2", "1.3", "1.4", "1.5", "2.0", "2.1", "2.2")},
    **{("matplotlib/matplotlib", v): RepoSpec(TEST_PYTEST, 'python -m pip install --no-build-isolation -e ".[dev]"')
       for v in ("3.8", "3.9")},
    ("mwaskom/seaborn", "0.11"): RepoSpec(TEST_SEABORN, _PIP_E),
}


def get_repo_spec(repo: str, version: str | None = None) -> RepoSpec | None:
    """The spec for ``repo`` at ``version`` (the repo default for other versions); None for unknown repos."""
    if version is not None and (repo, str(version)) in _VERSION_SPECS:
        return _VERSION_SPECS[(repo, str(version))]
    return _REPO_SPECS.get(repo)


def known_repos() -> list[str]:
    """Repos with a built-in test command."""
    return sorted(repo for repo, spec in _REPO_SPECS.items() if spec.test_cmd is not None)


def _version(instance: Mapping[str, Any]) -> str | None:
    v = instance.get("version")
    return None if v is None else str(v)


def get_test_cmd(instance: Mapping[str, Any]) -> str:
    """The instance's own ``test_cmd`` if it has one, else the official command for its repo and version."""
    own = instance.get("test_cmd")
    if own:
        if not isinstance(own, str):
            raise ConfigError(f"test_cmd must be a string, got {type(own).__name__}", field="test_cmd")
        return own
    repo = str(instance.get("repo", ""))
    spec = get_repo_spec(repo, _version(instance))
    if spec is None or spec.test_cmd is None:
        raise ConfigError(f"no test command known for repo {repo!r}: give the instance a test_cmd "
                          f"(known repos: {', '.join(known_repos())})", field="test_cmd")
    return spec.test_cmd


class PatchFile(msgspec.Struct, frozen=True):
    """One file a diff touches: ``old_path`` is None for a new file, ``path`` is the path after the change."""

    path: str
    old_path: str | None
    is_new: bool = False
    is_deleted: bool = False


_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


def _unquote(path: str) -> str:
    """Undo git's C-style quoting (``"a/\\303\\251.py"``); unquoted paths pass through."""
    if not (len(path) >= 2 and path.startswith('"') and path.endswith('"')):
        return path
    body, out, i = path[1:-1], bytearray(), 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if re.fullmatch(r"[0-7]{3}", body[i + 1:i + 4]):
                out.append(int(body[i + 1:i + 4], 8))
                i += 4
                continue
            out.append(_ESCAPES.get(nxt, ord(nxt)))
            i += 2
            continue
        out.extend(ch.encode())
        i += 1
    return out.decode("utf-8", errors="surrogateescape")


def _strip_prefix(path: str, prefix: str) -> str | None:
    # git ends a path containing spaces with a tab on ---/+++ lines; other diffs put a timestamp there
    path = _unquote(path.strip() if path.startswith('"') else path.split("\t", 1)[0])
    if path == "/dev/null":
        return None
    return path[len(prefix):] if path.startswith(prefix) else path


def _paths_from_git_line(rest: str) -> tuple[str, str]:
    """Paths from ``a/X b/Y`` of a ``diff --git`` line (X == Y unless renamed, then --- / +++ decide)."""
    if rest.startswith('"'):
        m = re.match(r'("(?:[^"\\]|\\.)*"|\S+) ("(?:[^"\\]|\\.)*"|\S+)$', rest)
        if m:
            return _strip_prefix(m.group(1), "a/") or "", _strip_prefix(m.group(2), "b/") or ""
    n = (len(rest) - 5) // 2
    if rest.startswith("a/") and rest[2 + n:5 + n] == " b/" and rest[2:2 + n] == rest[5 + n:]:
        return rest[2:2 + n], rest[2:2 + n]
    m = re.match(r"a/(.*) b/(.*)$", rest)
    if m:
        return m.group(1), m.group(2)
    return rest, rest


def patch_files(patch: str) -> list[PatchFile]:
    """The files a git diff touches, in order, from its ``diff --git`` headers."""
    files: list[PatchFile] = []
    lines = patch.split("\n")
    i = 0
    while i < len(lines):
        if not lines[i].startswith("diff --git "):
            i += 1
            continue
        old, new = _paths_from_git_line(lines[i][len("diff --git "):].rstrip("\r"))
        old_path: str | None = old
        new_path: str | None = new
        is_new = is_deleted = False
        i += 1
        while i < len(lines) and not lines[i].startswith(("diff --git ", "@@")):
            line = lines[i].rstrip("\r")
            if line.startswith("new file mode"):
                is_new = True
            elif line.startswith("deleted file mode"):
                is_deleted = True
            elif line.startswith("rename from "):
                old_path = _unquote(line[len("rename from "):])
            elif line.startswith("rename to "):
                new_path = _unquote(line[len("rename to "):])
            elif line.startswith("--- "):
                old_path = _strip_prefix(line[4:], "a/")
                is_new = is_new or old_path is None
            elif line.startswith("+++ "):
                new_path = _strip_prefix(line[4:], "b/")
                is_deleted = is_deleted or new_path is None
            i += 1
        if is_new:
            files.append(PatchFile(path=new_path or new, old_path=None, is_new=True))
        elif is_deleted:
            files.append(PatchFile(path=old_path or old, old_path=old_path or old, is_deleted=True))
        else:
            files.append(PatchFile(path=new_path or new, old_path=old_path or old))
    return files


def _directive_paths(test_patch: str) -> list[str]:
    """The b/ path of every ``diff --git`` header, in order (renamed files by their new name).

    As the official generator: a header git had to quote (non-ASCII or unusual characters in a path)
    names no directive, and a path containing `` b/`` is cut at its last `` b/``.
    """
    out = []
    for line in test_patch.split("\n"):
        rest = line.rstrip("\r")[len("diff --git "):]
        if not line.startswith("diff --git a/") or ' "b/' in rest:
            continue
        m = re.match(r"a/.* b/(.*)$", rest)
        if m:
            out.append(m.group(1))
    return out


def get_test_directives(instance: Mapping[str, Any]) -> list[str]:
    """What to pass the test command: the test patch's files without data files; for django, each as a
    module name (``tests/`` and ``.py`` dropped, slashes to dots), every file as the official generator
    does (``tests/runtests.py`` too)."""
    if instance.get("repo") == "swe-bench/humaneval":
        return ["test.py"]
    paths = _directive_paths(str(instance.get("test_patch") or ""))
    paths = [p for p in paths if not p.endswith(NON_TEST_EXTS)]
    if instance.get("repo") == "django/django":
        return [p.removesuffix(".py").removeprefix("tests/").replace("/", ".") for p in paths]
    return paths


def _heredoc_delimiter(text: str, base: str) -> str:
    delim, n = base, 0
    lines = set(text.split("\n"))
    while delim in lines:
        n += 1
        delim = f"{base}_{n}"
    return delim


def _echo(text: str) -> str:
    return f"echo {shlex.quote(text)}"


def _reset_function(base_commit: str, files: list[PatchFile], git: str) -> list[str]:
    """A bash function that puts the test patch's files back as they are at the base commit."""
    existing = [f.old_path for f in files if f.old_path is not None]
    created = [f.path for f in files if f.old_path is None or f.path != f.old_path]
    body = []
    if existing:
        body.append(f"{git} checkout {shlex.quote(base_commit)} -- {' '.join(map(shlex.quote, existing))} || return 1")
    if created:
        body.append(f"rm -f -- {' '.join(map(shlex.quote, created))} || return 1")
    body.append("return 0")
    return ["ac_reset_tests() {", *(f"  {line}" for line in body), "}"]


def make_eval_script(
    instance: Mapping[str, Any],
    test_cmd: str | None = None,
    *,
    repo_dir: str = DEFAULT_REPO_DIR,
    install: bool = True,
    test_timeout: float | None = None,
) -> str:
    """A bash script that runs the instance's tests in ``repo_dir`` and prints the markers grading reads.

    Steps: activate conda if the image has it; run the repo's env lines and (``install``) its reinstall
    command; reset the test patch's files to ``base_commit``; apply ``test_patch``; print the start
    marker; run ``test_cmd`` (default: ``get_test_cmd``) on the test directives; print the end marker and
    the test command's exit code; reset the test files again. stderr is merged into stdout. With
    ``test_timeout`` the test command is killed after that many seconds and the timeout marker printed.
    An instance with its own ``eval_script`` gets that (``own_eval_script``) and the other arguments
    do not apply.
    """
    own = own_eval_script(instance, repo_dir=repo_dir)
    if own is not None:
        return own
    base_commit = str(instance.get("base_commit") or "")
    if not base_commit:
        raise ConfigError("instance has no base_commit", field="base_commit")
    test_patch = str(instance.get("test_patch") or "")
    cmd = test_cmd or get_test_cmd(instance)
    directives = get_test_directives(instance)
    spec = get_repo_spec(str(instance.get("repo", "")), _version(instance))
    files = patch_files(test_patch)
    repo = shlex.quote(repo_dir)
    git = f"git -c safe.directory={repo}"

    full_cmd = " ".join([cmd, *map(shlex.quote, directives)])
    if test_timeout is not None:
        full_cmd = f"timeout --kill-after=10 {float(test_timeout):g} bash -c {shlex.quote(full_cmd)}"

    lines = [
        "#!/bin/bash",
        "set -uo pipefail",  # no -e: the test files must be reset whatever the tests do
        "exec 2>&1",
        f"cd {repo} || {{ {_echo(RESET_FAILED + ': no repository at ' + repo_dir)}; exit 1; }}",
        f"if [ -f {CONDA_ACTIVATE} ]; then set +u; source {CONDA_ACTIVATE} testbed; set -u; fi",
    ]
    if spec is not None:
        lines += list(spec.eval_commands)
        if install and spec.install:
            lines.append(spec.install)
    lines += _reset_function(base_commit, files, git)
    lines.append(f"ac_reset_tests || {{ {_echo(RESET_FAILED)}; exit 1; }}")
    if test_patch.strip():
        body = test_patch if test_patch.endswith("\n") else test_patch + "\n"
        delim = _heredoc_delimiter(body, "EOF_AGENTCOMPASS_TEST_PATCH")
        lines.append(f"{git} apply -v - <<'{delim}'\n{body}{delim}")
        lines.append("if [ $? -ne 0 ]; then echo 'the test patch did not apply'; ac_reset_tests; exit 1; fi")
    lines += [
        _echo(START_TEST_OUTPUT),
        full_cmd,
        "ac_test_rc=$?",
        _echo(END_TEST_OUTPUT),
        f'echo "{TEST_EXIT_CODE}: $ac_test_rc"',
    ]
    if test_timeout is not None:
        lines.append(f"if [ $ac_test_rc -eq 124 ] || [ $ac_test_rc -eq 137 ]; then {_echo(TESTS_TIMEOUT)}; fi")
    lines += [
        # no RESET_FAILED marker here: the tests already ran and their log is still good
        "ac_reset_tests || echo 'warning: the test files could not be reset after the tests'",
        "exit 0",
    ]
    return "\n".join(lines) + "\n"


_OFFICIAL_PROLOGUE = ("#!/bin/bash", "set -uxo pipefail")


def own_eval_script(instance: Mapping[str, Any], *, repo_dir: str = DEFAULT_REPO_DIR) -> str | None:
    """The instance's own ``eval_script`` (newer SWE-bench releases), or None if it has none.

    Run as swebench 5.x runs it: under ``set -uxo pipefail`` (the official script prints its markers
    through ``set -x``), with the test command's exit code saved just before the end marker and printed
    after it. stderr is merged into stdout so the traced markers and the test output stay in order.
    Before it, in ``repo_dir``, the files of the row's ``test_patch`` are reset (existing ones checked out
    at ``base_commit``, else HEAD; created ones removed) and the test patch must apply (``git apply
    --check``), else the script stops with no test output: such a script goes on when its own ``git apply``
    fails, so a test file the agent planted would otherwise be run in place of the real one.
    """
    script = instance.get("eval_script")
    if script is None or script == "":
        return None
    if not isinstance(script, str):
        raise ConfigError(f"eval_script must be a string, got {type(script).__name__}", field="eval_script")
    if START_TEST_OUTPUT not in script or END_TEST_OUTPUT not in script:
        raise ConfigError(f"instance {instance.get('instance_id', '?')!r}: its eval_script prints no "
                          f"{START_TEST_OUTPUT!r} / {END_TEST_OUTPUT!r} markers, so its log cannot be graded",
                          field="eval_script")
    lines = [line for line in script.strip().split("\n") if line not in _OFFICIAL_PROLOGUE]
    end = next(i for i, line in enumerate(lines) if END_TEST_OUTPUT in line)
    lines[end:end + 1] = ["ac_test_rc=$?", lines[end], f'echo "{TEST_EXIT_CODE}: $ac_test_rc"']
    return "\n".join([*_OFFICIAL_PROLOGUE, "exec 2>&1", *_test_patch_guard(instance, repo_dir), *lines]) + "\n"


def _test_patch_guard(instance: Mapping[str, Any], repo_dir: str) -> list[str]:
    """Lines that reset the test patch's files and stop the script if the test patch does not apply."""
    test_patch = str(instance.get("test_patch") or "")
    if not test_patch.strip():
        return []
    repo = shlex.quote(repo_dir)
    git = f"git -c safe.directory={repo}"
    body = test_patch if test_patch.endswith("\n") else test_patch + "\n"
    delim = _heredoc_delimiter(body, "EOF_AGENTCOMPASS_TEST_PATCH")
    base = str(instance.get("base_commit") or "") or "HEAD"
    # in subshells: the row's script starts in the directory it was given
    return [
        *_reset_function(base, patch_files(test_patch), git),
        f"(cd {repo} && ac_reset_tests) || {{ {_echo(RESET_FAILED)}; exit 1; }}",
        f"(cd {repo} && {git} apply --check - <<'{delim}'\n{body}{delim}\n) "
        "|| { echo 'the test patch does not apply: no tests are run'; exit 1; }",
    ]


def apply_patch_script(patch_path: str, *, repo_dir: str = DEFAULT_REPO_DIR) -> str:
    """A bash script that applies the patch at ``patch_path`` in ``repo_dir`` with the official fallbacks.

    It prints ``APPLY_PATCH_PASS`` and the command that worked, or ``APPLY_PATCH_FAIL`` after all fail
    (exit 1). Only the final outcome carries a marker, so a failed first attempt is not read as failure.
    """
    repo = shlex.quote(repo_dir)
    path = shlex.quote(patch_path)
    lines = [
        "#!/bin/bash",
        "set -u",
        f"cd {repo} || {{ {_echo(APPLY_PATCH_FAIL + ': no repository at ' + repo_dir)}; exit 1; }}",
    ]
    for cmd in APPLY_PATCH_COMMANDS:
        run = cmd.replace("git ", f"git -c safe.directory={repo} ", 1) if cmd.startswith("git ") else cmd
        lines += [
            f"if ac_out=$({run} {path} 2>&1); then",
            f"  printf '%s\\n' {shlex.quote(f'{APPLY_PATCH_PASS} ({cmd}):')} \"$ac_out\"",
            "  exit 0",
            "fi",
            f"printf '%s\\n' {shlex.quote(f'{cmd} did not apply the patch:')} \"$ac_out\"",
        ]
    lines += [_echo(APPLY_PATCH_FAIL), "exit 1"]
    return "\n".join(lines) + "\n"
