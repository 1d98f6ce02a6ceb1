"""Test-log parsers: turn a test run's output into ``{test_name: status}``.

Each parser reproduces the official SWE-bench harness (``swebench/harness/log_parsers/python.py``) for one test
framework, quirks included, as of the chosen ``grading_version``: ``PARSERS`` follow swebench 5.0.2 (the
default), ``PARSERS_V4`` swebench 4.1.0. The FAIL_TO_PASS / PASS_TO_PASS names in the datasets were produced by
these rules (most pytest ids end at their first space, so ``PASSED t.py::test_p[a b]`` is test ``t.py::test_p[a``),
so a "cleaner" parser would grade real instances wrongly. The few deliberate differences (lines the official
parser raises on) are listed in docs/swebench.md ("Agreement with the official harness") and pinned by
tests/benchmarks/swebench/differential.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from enum import StrEnum

from agentcompass._errors import ConfigError
from agentcompass.benchmarks.swebench.grading_version import DEFAULT_GRADING_VERSION, V4, check_grading_version


class TestStatus(StrEnum):
    """Status of one test in a parsed log (the official harness's values)."""

    __test__ = False  # not a pytest test class

    FAILED = "FAILED"
    PASSED = "PASSED"
    SKIPPED = "SKIPPED"
    ERROR = "ERROR"
    XFAIL = "XFAIL"


LogParser = Callable[[str], dict[str, str]]

_STATUSES = tuple(s.value for s in TestStatus)
_SKIP_SUMMARY_COUNT = re.compile(r"\[\d+\]")


def _is_skip_summary(status: str, name: str) -> bool:
    """``SKIPPED [2] path:12: reason`` counts skips; ``[2]`` is no test (5.0.2 drops it, 4.1.0 records it).

    Only for SKIPPED: a wrapped progress line ``PASSED [100%]`` is kept, because the PASS_TO_PASS lists of
    pytest-dev__pytest-5262 and -7521 name ``[100%]``.
    """
    return status == TestStatus.SKIPPED and _SKIP_SUMMARY_COUNT.fullmatch(name) is not None


def _status_first(line: str, skip_summary_is_test: bool = False) -> tuple[str, str] | None:
    """A ``STATUS test`` line (pytest ``-rA`` summary) -> (test, status), by the official word rule.

    Any line starting with a status counts; the status is its first word and the test its second (so
    ``ERROR: file not found`` gives test ``file`` with status ``ERROR:``, as officially). In FAILED lines
    every `` - `` is dropped before splitting, so the message after the id never becomes part of it.
    ``skip_summary_is_test``: 4.1.0's rule, ``SKIPPED [2] ...`` records test ``[2]``.
    """
    if not line.startswith(_STATUSES):
        return None
    if line.startswith(TestStatus.FAILED):
        line = line.replace(" - ", " ")
    words = line.split()
    if len(words) < 2 or (not skip_summary_is_test and _is_skip_summary(words[0], words[1])):
        return None
    return words[1], words[0]


def parse_log_pytest(log: str) -> dict[str, str]:
    """pytest ``-rA`` short-summary lines ``STATUS test``; verbose ``test STATUS`` lines are not read."""
    status_map: dict[str, str] = {}
    for line in log.split("\n"):
        parsed = _status_first(line)
        if parsed is not None:
            status_map[parsed[0]] = parsed[1]
    return status_map


def parse_log_pytest_v4(log: str) -> dict[str, str]:
    """pytest as swebench 4.1.0 reads it: ``SKIPPED [2] path: reason`` records a test ``[2]``."""
    status_map: dict[str, str] = {}
    for line in log.split("\n"):
        parsed = _status_first(line, skip_summary_is_test=True)
        if parsed is not None:
            status_map[parsed[0]] = parsed[1]
    return status_map


_OPTION = re.compile(r"(.*?)\[(.*)\]")


def _normalize_option(test: str) -> str:
    """Keep only the last path component of an absolute-path parameter (``t[/a/b/c]`` -> ``t[/c]``)."""
    m = _OPTION.search(test)
    if not m:
        return test
    main, option = m.groups()
    if option.startswith("/") and not option.startswith("//") and "*" not in option:
        option = "/" + option.split("/")[-1]
    return f"{main}[{option}]"


def _pytest_options(log: str, skip_summary_is_test: bool) -> dict[str, str]:
    status_map: dict[str, str] = {}
    for line in log.split("\n"):
        parsed = _status_first(line, skip_summary_is_test)
        if parsed is not None:
            status_map[_normalize_option(parsed[0])] = parsed[1]
    return status_map


def parse_log_pytest_options(log: str) -> dict[str, str]:
    """pytest, with absolute-path parameters in test ids shortened (requests, pylint, pydicom)."""
    return _pytest_options(log, skip_summary_is_test=False)


def parse_log_pytest_options_v4(log: str) -> dict[str, str]:
    """``parse_log_pytest_options`` as swebench 4.1.0 reads it (``SKIPPED [2]`` records a test ``[2]``)."""
    return _pytest_options(log, skip_summary_is_test=True)


_COLOR_CODE = re.compile(r"\[(\d+)m")
_CONTROL_CHARS = str.maketrans("", "", "".join(chr(c) for c in range(1, 32)))


def _v2_lines(log: str) -> list[str]:
    """The log's lines with colour codes (``[31m``, the ESC goes with the control characters) and control
    characters (tabs too) removed, as pytest_v2 reads them."""
    return [_COLOR_CODE.sub("", raw).translate(_CONTROL_CHARS) for raw in log.split("\n")]


def parse_log_pytest_v2(log: str) -> dict[str, str]:
    """pytest, newer versions (astropy, scikit-learn, sphinx), as swebench 5.0.2 reads it.

    A ``STATUS words...`` line records every word after the status, joined by single spaces, as the test (a
    FAILED line is first cut at its first `` - ``; XFAIL/XPASS/ERROR lines keep their `` - reason``); a line
    ending in a status (``test STATUS``, pytest's classic verbose style) records all but its last word as
    the test and the last as the status. A ``test STATUS [ 50%]`` progress line ends in ``%]`` and is not read.
    """
    status_map: dict[str, str] = {}
    for line in _v2_lines(log):
        if line.startswith(_STATUSES):
            if line.startswith(TestStatus.FAILED):
                line = line.split(" - ", 1)[0]
            words = line.split()
            if len(words) >= 2 and not _is_skip_summary(words[0], words[1]):
                status_map[" ".join(words[1:])] = words[0]
        elif line.endswith(_STATUSES):
            words = line.split()
            if len(words) >= 2:
                status_map[" ".join(words[:-1])] = words[-1]
    return status_map


def parse_log_pytest_v2_v4(log: str) -> dict[str, str]:
    """pytest_v2 as swebench 4.1.0 reads it: ``STATUS test`` lines as pytest does (second word, ``SKIPPED [2]``
    recorded), and a line ending in a status gives its first word as the test and its second as the status."""
    status_map: dict[str, str] = {}
    for line in _v2_lines(log):
        if line.startswith(_STATUSES):
            parsed = _status_first(line, skip_summary_is_test=True)
            if parsed is not None:
                status_map[parsed[0]] = parsed[1]
        elif line.endswith(_STATUSES):
            words = line.split()
            if len(words) >= 2:
                status_map[words[0]] = words[1]
    return status_map


_DJANGO_PASS_SUFFIXES = (" ... ok", " ... OK", " ...  OK")
# Output that a test prints between "..." and "ok" splits its result over two lines.
_DJANGO_INTERRUPTED = (
    re.compile(r"^(.*?)\s\.\.\.\sTesting\ against\ Django\ installed\ in\ ((?s:.*?))\ silenced\)\.\nok$", re.M),
    re.compile(r"^(.*?)\s\.\.\.\sInternal\ Server\ Error:\ \/(.*)\/\nok$", re.M),
    re.compile(r"^(.*?)\s\.\.\.\sSystem check identified no issues \(0 silenced\)\nok$", re.M),
)


def parse_log_django(log: str) -> dict[str, str]:
    """Django ``runtests.py --verbosity 2``: ``test (module.Class) ... ok|FAIL|ERROR|skipped``.

    With a docstring, unittest prints ``test (module.Class)`` and then ``First docstring line ... ok``;
    the dataset names such tests by that docstring line, and so does this parser.
    """
    status_map: dict[str, str] = {}
    prev_test: str | None = None
    for raw in log.split("\n"):
        line = raw.strip()
        if "--version is equivalent to version" in line:
            status_map["--version is equivalent to version"] = TestStatus.PASSED
        if " ... " in line:
            prev_test = line.split(" ... ")[0]
        for suffix in _DJANGO_PASS_SUFFIXES:
            if line.endswith(suffix):
                # django__django-7188: a migration message shares the line with the test name
                if line.startswith("Applying sites.0002_alter_domain_unique...test_no_migrations"):
                    line = line.split("...", 1)[-1].strip()
                status_map[line.rsplit(suffix, 1)[0]] = TestStatus.PASSED
                break
        if " ... skipped" in line:
            status_map[line.split(" ... skipped")[0]] = TestStatus.SKIPPED
        if line.endswith(" ... FAIL"):
            status_map[line.split(" ... FAIL")[0]] = TestStatus.FAILED
        words = line.split()
        # a bare "FAIL:" (a log cut mid-line) has no name; the official parser raises IndexError on it
        if line.startswith("FAIL:") and len(words) > 1:
            status_map[words[1]] = TestStatus.FAILED
        if line.endswith(" ... ERROR"):
            status_map[line.split(" ... ERROR")[0]] = TestStatus.ERROR
        if line.startswith("ERROR:") and len(words) > 1:
            status_map[words[1]] = TestStatus.ERROR
        if line.lstrip().startswith("ok") and prev_test is not None:
            # the test passed after printing something between "..." and "ok"
            status_map[prev_test] = TestStatus.PASSED
    for pattern in _DJANGO_INTERRUPTED:
        for m in pattern.finditer(log):
            status_map[m.group(1)] = TestStatus.PASSED
    return status_map


def parse_log_seaborn(log: str) -> dict[str, str]:
    """seaborn's pytest output; only PASSED and FAILED are recorded (as the official parser does).

    A bare ``FAILED`` or ``PASSED`` line (a log cut mid-line) is skipped; the official parser raises
    IndexError on it.
    """
    status_map: dict[str, str] = {}
    for line in log.split("\n"):
        words = line.split()
        if len(words) < 2:
            continue
        if line.startswith(TestStatus.FAILED):
            status_map[words[1]] = TestStatus.FAILED
        elif f" {TestStatus.PASSED} " in line:
            if words[1] == TestStatus.PASSED:
                status_map[words[0]] = TestStatus.PASSED
        elif line.startswith(TestStatus.PASSED):
            status_map[words[1]] = TestStatus.PASSED
    return status_map


_SYMPY_FAILURE_HEADER = re.compile(r"(_*) (.*)\.py:(.*) (_*)")


def parse_log_sympy(log: str) -> dict[str, str]:
    """sympy ``bin/test -C --verbose``: ``test_name ok|F|E`` lines and ``___ path.py:test ___`` headers."""
    status_map: dict[str, str] = {}
    for m in _SYMPY_FAILURE_HEADER.findall(log):
        status_map[f"{m[1]}.py:{m[2]}"] = TestStatus.FAILED
    for raw in log.split("\n"):
        line = raw.strip()
        if not line.startswith("test_"):
            continue
        if line.endswith(" E"):
            status_map[line.split()[0]] = TestStatus.ERROR
        if line.endswith(" F"):
            status_map[line.split()[0]] = TestStatus.FAILED
        if line.endswith(" ok"):
            status_map[line.split()[0]] = TestStatus.PASSED
    return status_map


def parse_log_matplotlib(log: str) -> dict[str, str]:
    """matplotlib's pytest ``-rA`` summary, with ``MouseButton.LEFT/RIGHT`` ids rewritten to 1/3."""
    return parse_log_pytest(log.replace("MouseButton.LEFT", "1").replace("MouseButton.RIGHT", "3"))


def parse_log_matplotlib_v4(log: str) -> dict[str, str]:
    """``parse_log_matplotlib`` as swebench 4.1.0 reads it (``SKIPPED [2]`` records a test ``[2]``)."""
    return parse_log_pytest_v4(log.replace("MouseButton.LEFT", "1").replace("MouseButton.RIGHT", "3"))


# Named parsers: the frameworks plus the official per-repo aliases.
PARSERS: dict[str, LogParser] = {
    "pytest": parse_log_pytest,
    "pytest_options": parse_log_pytest_options,
    "pytest_v2": parse_log_pytest_v2,
    "django": parse_log_django,
    "seaborn": parse_log_seaborn,
    "sympy": parse_log_sympy,
    "matplotlib": parse_log_matplotlib,
    # aliases, as the official harness names them
    "astroid": parse_log_pytest,
    "flask": parse_log_pytest,
    "marshmallow": parse_log_pytest,
    "pvlib": parse_log_pytest,
    "pyvista": parse_log_pytest,
    "sqlfluff": parse_log_pytest,
    "xarray": parse_log_pytest,
    "pydicom": parse_log_pytest_options,
    "requests": parse_log_pytest_options,
    "pylint": parse_log_pytest_options,
    "astropy": parse_log_pytest_v2,
    "scikit": parse_log_pytest_v2,
    "sphinx": parse_log_pytest_v2,
}

# repo -> parser name: the 12 SWE-bench repos plus the other Python repos of the official harness.
MAP_REPO_TO_PARSER_NAME: dict[str, str] = {
    "astropy/astropy": "astropy",
    "django/django": "django",
    "matplotlib/matplotlib": "matplotlib",
    "mwaskom/seaborn": "seaborn",
    "pallets/flask": "flask",
    "psf/requests": "requests",
    "pydata/xarray": "xarray",
    "pylint-dev/pylint": "pylint",
    "pytest-dev/pytest": "pytest",
    "scikit-learn/scikit-learn": "scikit",
    "sphinx-doc/sphinx": "sphinx",
    "sympy/sympy": "sympy",
    "marshmallow-code/marshmallow": "marshmallow",
    "pvlib/pvlib-python": "pvlib",
    "pydicom/pydicom": "pydicom",
    "pylint-dev/astroid": "astroid",
    "pyvista/pyvista": "pyvista",
    "sqlfluff/sqlfluff": "sqlfluff",
}

MAP_REPO_TO_PARSER: dict[str, LogParser] = {repo: PARSERS[name] for repo, name in MAP_REPO_TO_PARSER_NAME.items()}

#: swebench 4.1.0's parsers where they differ from 5.0.2's (the frameworks and their aliases)
_V4_FRAMEWORKS: dict[LogParser, LogParser] = {
    parse_log_pytest: parse_log_pytest_v4, parse_log_pytest_options: parse_log_pytest_options_v4,
    parse_log_pytest_v2: parse_log_pytest_v2_v4, parse_log_matplotlib: parse_log_matplotlib_v4}
PARSERS_V4: dict[str, LogParser] = {}


def get_parser_name(repo: str | None, name: str | None = None) -> str:
    """The parser name for ``name`` if given, else the official one for ``repo``; ConfigError otherwise."""
    if name is not None:
        if name not in PARSERS:
            raise ConfigError(f"unknown log parser {name!r}; allowed: {', '.join(sorted(PARSERS))}",
                              field="log_parser")
        return name
    if repo is not None and repo in MAP_REPO_TO_PARSER_NAME:
        return MAP_REPO_TO_PARSER_NAME[repo]
    raise ConfigError(
        f"no log parser known for repo {repo!r}: set log_parser to one of {', '.join(sorted(PARSERS))} "
        f"(known repos: {', '.join(sorted(MAP_REPO_TO_PARSER_NAME))})",
        field="log_parser",
    )


def get_parser(repo: str | None, name: str | None = None, version: str = DEFAULT_GRADING_VERSION) -> LogParser:
    """The parser named ``name`` if given, else the official one for ``repo``, as swebench ``version`` reads
    logs; ConfigError otherwise."""
    parsers = PARSERS_V4 if check_grading_version(version) == V4 else PARSERS
    return parsers[get_parser_name(repo, name)]


# SWE-bench Multilingual (every non-Python repo of the official harness). Imported last: those modules use
# TestStatus from here; the import goes through lang_parsers.registry so it works whichever module loads first.
from agentcompass.benchmarks.swebench.lang_parsers.registry import (  # noqa: E402
    LANG_PARSERS as _LANG_PARSERS,
)
from agentcompass.benchmarks.swebench.lang_parsers.registry import (  # noqa: E402
    LANG_PARSERS_V4 as _LANG_PARSERS_V4,
)
from agentcompass.benchmarks.swebench.lang_parsers.registry import (  # noqa: E402
    LANG_REPO_TO_PARSER_NAME as _LANG_REPO_TO_PARSER_NAME,
)

PARSERS.update(_LANG_PARSERS)
MAP_REPO_TO_PARSER_NAME.update(_LANG_REPO_TO_PARSER_NAME)
MAP_REPO_TO_PARSER.update({repo: PARSERS[name] for repo, name in _LANG_REPO_TO_PARSER_NAME.items()})
PARSERS_V4.update({name: _V4_FRAMEWORKS.get(parser, parser) for name, parser in PARSERS.items()}, **_LANG_PARSERS_V4)
