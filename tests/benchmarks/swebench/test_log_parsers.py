"""Log parsers read real-format test output the way the official SWE-bench harness does."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from agentcompass._errors import ConfigError
from agentcompass.benchmarks.swebench import log_parsers as lp

# pytest 9 `-rA` output (short test summary) of a file with every outcome, as pytest printed it.
PYTEST_RA = """\
============================= test session starts ==============================
platform linux -- Python 3.11.7, pytest-9.2.0, pluggy-1.7.0
rootdir: /testbed
collected 9 items

tests/test_demo.py .FsxXE.F.                                             [100%]

==================================== ERRORS ====================================
_________________________ ERROR at setup of test_error _________________________

    @pytest.fixture
    def broken():
>       raise RuntimeError("fixture broke")
E       RuntimeError: fixture broke

tests/test_demo.py:23: RuntimeError
=================================== FAILURES ===================================
___________________________________ test_bad ___________________________________

    def test_bad():
>       assert 1 == 2, "boom - with dash"
E       AssertionError: boom - with dash
E       assert 1 == 2

tests/test_demo.py:7: AssertionError
==================================== PASSES ====================================
=========================== short test summary info ============================
PASSED tests/test_demo.py::test_ok
PASSED tests/test_demo.py::test_param[a b]
PASSED tests/test_demo.py::test_param[/abs/path/file.txt]
SKIPPED [1] tests/test_demo.py:9: not today
XFAIL tests/test_demo.py::test_xfail - known
XPASS tests/test_demo.py::test_xpass - known
ERROR tests/test_demo.py::test_error - RuntimeError: fixture broke
FAILED tests/test_demo.py::test_bad - AssertionError: boom - with dash
FAILED tests/test_demo.py::test_param[x[1]] - AssertionError: assert 'x[1]' !...
==== 2 failed, 3 passed, 1 skipped, 1 xfailed, 1 xpassed, 1 error in 0.06s =====
"""

# The same run with `-v --color=yes` (astropy runs -vv; sklearn/sphinx logs carry colour codes).
PYTEST_COLOR_VERBOSE = (
    "\x1b[1mcollecting ... \x1b[0mcollected 9 items\n\n"
    "tests/test_demo.py::test_ok \x1b[32mPASSED\x1b[0m\x1b[32m                                       [ 11%]\x1b[0m\n"
    "tests/test_demo.py::test_bad \x1b[31mFAILED\x1b[0m\x1b[31m                                      [ 22%]\x1b[0m\n"
    "tests/test_demo.py::test_skipped \x1b[33mSKIPPED\x1b[0m (not today)\x1b[31m                     [ 33%]\x1b[0m\n"
    "tests/test_demo.py::test_xfail \x1b[33mXFAIL\x1b[0m (known)\x1b[31m                             [ 44%]\x1b[0m\n"
    "tests/test_demo.py::test_xpass \x1b[33mXPASS\x1b[0m (known)\x1b[31m                             [ 55%]\x1b[0m\n"
    "tests/test_demo.py::test_error \x1b[31mERROR\x1b[0m\x1b[31m                                     [ 66%]\x1b[0m\n"
    "tests/test_demo.py::test_param[a b] \x1b[32mPASSED\x1b[0m\x1b[31m                               [ 77%]\x1b[0m\n"
    "\n\x1b[36m\x1b[1m=========================== short test summary info ============================\x1b[0m\n"
    "\x1b[32mPASSED\x1b[0m tests/test_demo.py::\x1b[1mtest_ok\x1b[0m\n"
    "\x1b[33mSKIPPED\x1b[0m [1] tests/test_demo.py:9: not today\n"
    "\x1b[31mFAILED\x1b[0m tests/test_demo.py::\x1b[1mtest_bad\x1b[0m - AssertionError: boom - with dash\n"
)

# django ./tests/runtests.py --verbosity 2 (migrations, docstring tests, output between "..." and "ok").
DJANGO_LOG = """\
Testing against Django installed in '/testbed/django'
Importing application migrations
Skipping setup of unused database(s): other.
Operations to perform:
  Synchronize unmigrated apps: auth, contenttypes, messages, migrations, sessions, staticfiles
  Apply all migrations: admin, sites
Synchronizing apps without migrations:
  Creating tables...
    Creating table django_content_type
    Running deferred SQL...
Running migrations:
  Applying admin.0001_initial... OK
  Applying sites.0001_initial... OK
System check identified no issues (0 silenced).
test_add_field (migrations.test_autodetector.AutodetectorTests) ... ok
test_alter_field (migrations.test_autodetector.AutodetectorTests) ... FAIL
test_create_model (migrations.test_autodetector.AutodetectorTests) ... ERROR
test_sqlite_only (migrations.test_autodetector.AutodetectorTests) ... skipped 'Database has feature(s) foo'
test_rename_model (migrations.test_autodetector.AutodetectorTests.test_rename_model) ... ok
test_deconstruct_field_kwarg (migrations.test_autodetector.AutodetectorTests)
Field instances are handled correctly by nested deconstruction. ... ok
test_noisy (migrations.test_autodetector.AutodetectorTests) ... Some output the test printed
over two lines
ok
test_version (admin_scripts.tests.CommandTypes)
--version is equivalent to version ... ok

======================================================================
ERROR: test_create_model (migrations.test_autodetector.AutodetectorTests)
----------------------------------------------------------------------
Traceback (most recent call last):
  File "/testbed/tests/migrations/test_autodetector.py", line 120, in test_create_model
    raise ValueError("nope")
ValueError: nope

======================================================================
FAIL: test_alter_field (migrations.test_autodetector.AutodetectorTests)
----------------------------------------------------------------------
Traceback (most recent call last):
  File "/testbed/tests/migrations/test_autodetector.py", line 99, in test_alter_field
    self.assertEqual(1, 2)
AssertionError: 1 != 2

----------------------------------------------------------------------
Ran 8 tests in 0.212s

FAILED (failures=1, errors=1, skipped=1)
Destroying test database for alias 'default' ('file:memorydb_default?mode=memory&cache=shared')...
"""

# sympy bin/test -C --verbose: the last test of a file shares its line with [OK]/[FAIL].
SYMPY_LOG = """\
============================= test process starts ==============================
executable:         /opt/miniconda3/envs/testbed/bin/python  (3.9.20-final-0) [CPython]
architecture:       64-bit
cache:              no
ground types:       python \n\
numpy:              None
random seed:        83052126
hash randomization: on (PYTHONHASHSEED=3142257717)

sympy/printing/tests/test_latex.py[5] \n\
test_printmethod ok
test_latex_basic ok
test_latex_symbols F
test_latex_matrix E
test_latex_functions ok                                                   [FAIL]

________________________________________________________________________________
________ sympy/printing/tests/test_latex.py:test_latex_symbols _________________
Traceback (most recent call last):
  File "/testbed/sympy/printing/tests/test_latex.py", line 12, in test_latex_symbols
    assert latex(Symbol('x')) == 'y'
AssertionError
________________________________________________________________________________
_________ sympy/printing/tests/test_latex.py:test_latex_matrix _________________
Traceback (most recent call last):
  File "/testbed/sympy/printing/tests/test_latex.py", line 40, in test_latex_matrix
    Matrix(1, 2)
ValueError: bad shape

=========== tests finished: 3 passed, 1 failed, 1 exceptions, in 0.51 seconds ===========
DO *NOT* COMMIT!
"""

# seaborn: pytest --no-header -rA.
SEABORN_LOG = """\
collected 4 items

tests/test_core.py ..Fs                                                  [100%]

=========================== short test summary info ============================
PASSED tests/test_core.py::TestSemanticMapping::test_call_lookup
PASSED tests/test_core.py::TestHueMapping::test_init_from_map
SKIPPED [1] tests/test_core.py:88: no scipy
FAILED tests/test_core.py::TestHueMapping::test_hue_map_null - AssertionError: Arrays are not equal
ERROR tests/test_core.py::TestHueMapping::test_fixture - KeyError: 'x'
tests/test_core.py::TestSizeMapping::test_norm PASSED                    [ 50%]
======================== 1 failed, 2 passed, 1 skipped in 1.02s =========================
"""

# matplotlib: pytest -rA, MouseButton parametrization.
MATPLOTLIB_LOG = """\
=========================== short test summary info ============================
PASSED lib/matplotlib/tests/test_widgets.py::test_rectangle_selector[MouseButton.LEFT]
PASSED lib/matplotlib/tests/test_widgets.py::test_span_selector_drag[MouseButton.RIGHT-True]
SKIPPED [1] lib/matplotlib/tests/test_widgets.py:1010: Cannot import qt
XFAIL lib/matplotlib/tests/test_axes.py::test_log_scales_invalid - inverting log axis
FAILED lib/matplotlib/tests/test_axes.py::test_bar_label_fmt - ValueError: bad fmt
======= 1 failed, 2 passed, 1 skipped, 1 xfailed in 8.11s ========
"""


def test_pytest_parser_reads_the_short_summary_of_every_outcome() -> None:
    sm = lp.parse_log_pytest(PYTEST_RA)
    assert sm == {
        "tests/test_demo.py::test_ok": "PASSED",
        "tests/test_demo.py::test_param[a": "PASSED",  # ids end at the first space, as in the datasets
        "tests/test_demo.py::test_param[/abs/path/file.txt]": "PASSED",
        "tests/test_demo.py::test_xfail": "XFAIL",
        "tests/test_demo.py::test_error": "ERROR",
        "tests/test_demo.py::test_bad": "FAILED",
        "tests/test_demo.py::test_param[x[1]]": "FAILED",
    }


def test_pytest_parser_ignores_skip_summaries_and_xpass() -> None:
    sm = lp.parse_log_pytest(PYTEST_RA)
    assert "[1]" not in sm
    assert not any("test_xpass" in k for k in sm)


def test_pytest_parsers_do_not_read_verbose_progress_lines_or_section_headers() -> None:
    # as officially: a skipped PASS_TO_PASS test seen only in a progress line is missing, i.e. failed
    log = ("tests/a.py::test_one PASSED                    [ 50%]\ntests/a.py::test_two SKIPPED (why)  [100%]\n"
           "_____ ERROR at setup of test_foo _____\n___________ test_bad ___________\n")
    for parser in (lp.parse_log_pytest, lp.parse_log_pytest_options, lp.parse_log_pytest_v2,
                   lp.parse_log_matplotlib):
        assert parser(log) == {}, parser.__name__
    assert lp.parse_log_seaborn(log) == {"tests/a.py::test_one": "PASSED"}  # seaborn reads " PASSED " anywhere


def test_pytest_v2_reads_classic_verbose_lines_whole_in_5_0_2_and_by_their_first_two_words_in_4_1_0() -> None:
    log = "tests/a.py::test_one PASSED\ntests/a.py::test_two \x1b[33mSKIPPED\x1b[0m\ntests/a.py::test_p[a b] FAILED\n"
    assert lp.parse_log_pytest_v2(log) == {"tests/a.py::test_one": "PASSED", "tests/a.py::test_two": "SKIPPED",
                                           "tests/a.py::test_p[a b]": "FAILED"}
    assert lp.get_parser("astropy/astropy", version="4.1.0")(log) == {
        "tests/a.py::test_one": "PASSED", "tests/a.py::test_two": "SKIPPED",
        "tests/a.py::test_p[a": "b]"}  # the official 4.1.0 word rule, quirk included


def test_pytest_v2_summary_lines_in_5_0_2() -> None:
    # every word after the status is the name; a FAILED line is cut at its first " - ", others keep the reason;
    # a status glued to more text is the status, as officially
    log = ("\x1b[31mFAILED\x1b[0m t.py::test_p[a b] - AssertionError: x - y\nXFAIL t.py::test_x - known - bug\n"
           "ERROR:root:boom - here\nSKIPPED [2] t.py:3: no net\n")
    assert lp.parse_log_pytest_v2(log) == {"t.py::test_p[a b]": "FAILED", "t.py::test_x - known - bug": "XFAIL",
                                           "- here": "ERROR:root:boom"}
    assert lp.get_parser(None, "pytest_v2", "4.1.0")(log) == {
        "t.py::test_p[a": "FAILED", "t.py::test_x": "XFAIL", "-": "ERROR:root:boom", "[2]": "SKIPPED"}


def test_an_unknown_grading_version_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as err:
        lp.get_parser("astropy/astropy", version="4.0")
    assert err.value.field == "grading_version" and "'5.0.2', '4.1.0'" in str(err.value)


def test_skip_summaries_are_not_tests_but_wrapped_progress_lines_are() -> None:
    # pytest-dev__pytest-5262 and -7521 list "[100%]" in PASS_TO_PASS (a progress line wrapped after a long id)
    log = "SKIPPED [2] tests/a.py:12: no network\nPASSED [100%]\n"
    for name in ("pytest", "pytest_options", "pytest_v2", "matplotlib"):
        assert lp.get_parser(None, name)(log) == {"[100%]": "PASSED"}, name
        # 4.1.0 records the count as a test
        assert lp.get_parser(None, name, "4.1.0")(log) == {"[2]": "SKIPPED", "[100%]": "PASSED"}, name


def test_pytest_options_parser_keeps_only_the_last_part_of_absolute_path_parameters() -> None:
    sm = lp.parse_log_pytest_options(PYTEST_RA)
    assert sm["tests/test_demo.py::test_param[/file.txt]"] == "PASSED"
    assert "tests/test_demo.py::test_param[/abs/path/file.txt]" not in sm
    # a URL-like "//" parameter and a glob stay as they are
    log = "PASSED t.py::test_u[//host/x]\nPASSED t.py::test_g[/a/*.py]\n"
    assert set(lp.parse_log_pytest_options(log)) == {"t.py::test_u[//host/x]", "t.py::test_g[/a/*.py]"}


def test_plain_pytest_parser_misses_coloured_lines_that_v2_reads() -> None:
    assert lp.parse_log_pytest(PYTEST_COLOR_VERBOSE) == {}
    # v2 reads the coloured summary; progress lines ending in "[ 11%]" are not read, as officially
    sm = lp.parse_log_pytest_v2(PYTEST_COLOR_VERBOSE)
    assert sm == {"tests/test_demo.py::test_ok": "PASSED", "tests/test_demo.py::test_bad": "FAILED"}


def _run_pytest(tmp_path: Path, *args: str) -> str:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_live.py").write_text(
        "import pytest\n\n"
        "def test_pass():\n    pass\n\n"
        "def test_fail():\n    assert 0, 'a - b'\n\n"
        "@pytest.mark.xfail\ndef test_xf():\n    assert 0\n\n"
        "@pytest.mark.parametrize('v', ['p q', 'r'])\ndef test_p(v):\n    pass\n")
    res = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args, "tests/test_live.py"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert res.returncode == 1, res.stdout + res.stderr
    return res.stdout + res.stderr


@pytest.mark.parametrize(("args", "parser", "spaced"), [
    (("-rA",), lp.parse_log_pytest, "test_p[p"),
    (("-rA", "--color=yes", "-vv"), lp.parse_log_pytest_v2, "test_p[p q]"),  # 5.0.2 keeps every word
    (("-rA", "--color=yes", "-vv"), lp.parse_log_pytest_v2_v4, "test_p[p"),
    (("-rA", "--color=no", "-vv", "-o", "console_output_style=classic", "--tb=no"), lp.parse_log_pytest, "test_p[p"),
])
def test_pytest_parsers_read_output_of_the_installed_pytest(tmp_path: Path, args: tuple[str, ...],
                                                           parser: lp.LogParser, spaced: str) -> None:
    sm = parser(_run_pytest(tmp_path, *args))
    assert sm["tests/test_live.py::test_pass"] == "PASSED"
    assert sm["tests/test_live.py::test_fail"] == "FAILED"
    assert sm["tests/test_live.py::test_xf"] == "XFAIL"
    assert sm["tests/test_live.py::test_p[r]"] == "PASSED"
    assert sm[f"tests/test_live.py::{spaced}"] == "PASSED"


def test_django_parser_reads_verbose_runner_output() -> None:
    sm = lp.parse_log_django(DJANGO_LOG)
    assert sm["test_add_field (migrations.test_autodetector.AutodetectorTests)"] == "PASSED"
    assert sm["test_alter_field (migrations.test_autodetector.AutodetectorTests)"] == "FAILED"
    assert sm["test_create_model (migrations.test_autodetector.AutodetectorTests)"] == "ERROR"
    assert sm["test_sqlite_only (migrations.test_autodetector.AutodetectorTests)"] == "SKIPPED"
    assert sm["test_rename_model (migrations.test_autodetector.AutodetectorTests.test_rename_model)"] == "PASSED"


def test_django_parser_names_docstring_tests_by_their_docstring_line() -> None:
    sm = lp.parse_log_django(DJANGO_LOG)
    assert sm["Field instances are handled correctly by nested deconstruction."] == "PASSED"
    assert sm["--version is equivalent to version"] == "PASSED"
    assert "test_deconstruct_field_kwarg (migrations.test_autodetector.AutodetectorTests)" not in sm


def test_django_parser_reads_a_result_split_from_its_test_by_printed_output() -> None:
    sm = lp.parse_log_django(DJANGO_LOG)
    assert sm["test_noisy (migrations.test_autodetector.AutodetectorTests)"] == "PASSED"
    log = ("test_runserver (admin_scripts.tests.ManageRunserver) ... System check identified no issues "
           "(0 silenced)\nok\n")
    assert lp.parse_log_django(log)["test_runserver (admin_scripts.tests.ManageRunserver)"] == "PASSED"


def test_django_parser_also_records_failure_headers_by_method_name() -> None:
    sm = lp.parse_log_django(DJANGO_LOG)
    assert sm["test_alter_field"] == "FAILED"
    assert sm["test_create_model"] == "ERROR"


def test_django_and_seaborn_parsers_skip_result_lines_cut_before_the_name() -> None:
    assert lp.parse_log_django("test_a (m.C) ... ok\nFAIL:\nERROR:") == {"test_a (m.C)": "PASSED"}
    assert lp.parse_log_seaborn("PASSED t.py::a\nFAILED\n PASSED \n") == {"t.py::a": "PASSED"}


def test_django_parser_does_not_read_migration_lines_as_tests() -> None:
    sm = lp.parse_log_django(DJANGO_LOG)
    assert not any(k.startswith("Applying") for k in sm)


def test_sympy_parser_reads_verbose_results_and_failure_headers() -> None:
    sm = lp.parse_log_sympy(SYMPY_LOG)
    assert sm == {
        "test_printmethod": "PASSED",
        "test_latex_basic": "PASSED",
        "test_latex_symbols": "FAILED",
        "test_latex_matrix": "ERROR",
        "sympy/printing/tests/test_latex.py:test_latex_symbols": "FAILED",
        "sympy/printing/tests/test_latex.py:test_latex_matrix": "FAILED",
    }


def test_seaborn_parser_records_only_passed_and_failed() -> None:
    sm = lp.parse_log_seaborn(SEABORN_LOG)
    assert sm == {
        "tests/test_core.py::TestSemanticMapping::test_call_lookup": "PASSED",
        "tests/test_core.py::TestHueMapping::test_init_from_map": "PASSED",
        "tests/test_core.py::TestHueMapping::test_hue_map_null": "FAILED",
        "tests/test_core.py::TestSizeMapping::test_norm": "PASSED",
    }


def test_matplotlib_parser_rewrites_mouse_buttons_and_keeps_its_quirks() -> None:
    sm = lp.parse_log_matplotlib(MATPLOTLIB_LOG)
    assert sm["lib/matplotlib/tests/test_widgets.py::test_rectangle_selector[1]"] == "PASSED"
    assert sm["lib/matplotlib/tests/test_widgets.py::test_span_selector_drag[3-True]"] == "PASSED"
    assert sm["lib/matplotlib/tests/test_axes.py::test_log_scales_invalid"] == "XFAIL"
    assert sm["lib/matplotlib/tests/test_axes.py::test_bar_label_fmt"] == "FAILED"
    assert "[1]" not in sm  # a skip summary; the official 4.1.0 parser records it as a test (a deviation)


def test_every_official_repo_has_its_official_parser() -> None:
    expected = {
        "astropy/astropy": lp.parse_log_pytest_v2,
        "django/django": lp.parse_log_django,
        "matplotlib/matplotlib": lp.parse_log_matplotlib,
        "mwaskom/seaborn": lp.parse_log_seaborn,
        "pallets/flask": lp.parse_log_pytest,
        "psf/requests": lp.parse_log_pytest_options,
        "pydata/xarray": lp.parse_log_pytest,
        "pylint-dev/pylint": lp.parse_log_pytest_options,
        "pytest-dev/pytest": lp.parse_log_pytest,
        "scikit-learn/scikit-learn": lp.parse_log_pytest_v2,
        "sphinx-doc/sphinx": lp.parse_log_pytest_v2,
        "sympy/sympy": lp.parse_log_sympy,
    }
    for repo, parser in expected.items():
        assert lp.MAP_REPO_TO_PARSER[repo] is parser, repo
        assert lp.get_parser(repo) is parser


def test_an_explicit_parser_name_wins_over_the_repo() -> None:
    assert lp.get_parser("django/django", "pytest") is lp.parse_log_pytest
    assert lp.get_parser("me/my-project", "sympy") is lp.parse_log_sympy
    assert lp.get_parser(None, "requests") is lp.parse_log_pytest_options


def test_unknown_parser_names_and_repos_are_config_errors_listing_the_allowed_names() -> None:
    with pytest.raises(ConfigError) as exc:
        lp.get_parser("django/django", "nose")
    assert exc.value.field == "log_parser"
    assert "pytest_v2" in str(exc.value) and "django" in str(exc.value)
    with pytest.raises(ConfigError) as exc:
        lp.get_parser("me/my-project")
    assert "me/my-project" in str(exc.value) and "pytest" in str(exc.value)
