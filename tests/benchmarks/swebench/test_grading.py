"""Grading follows the official SWE-bench report logic of the chosen ``grading_version`` (5.0.2 by default, or
4.1.0), edge cases included."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from agentcompass._errors import ConfigError
from agentcompass.benchmarks.swebench import grading
from agentcompass.benchmarks.swebench.grading import GradeError, GradeReport, ResolvedStatus, grade
from agentcompass.benchmarks.swebench.test_specs import (
    APPLY_PATCH_FAIL,
    END_TEST_OUTPUT,
    RESET_FAILED,
    START_TEST_OUTPUT,
    TEST_EXIT_CODE,
    TESTS_TIMEOUT,
)


def instance(f2p: Any, p2p: Any, repo: str = "pytest-dev/pytest", **extra: Any) -> dict[str, Any]:
    return {"instance_id": "demo__demo-1", "repo": repo, "version": "8.0", "FAIL_TO_PASS": f2p,
            "PASS_TO_PASS": p2p, **extra}


def eval_log(*result_lines: str, exit_code: int | None = None, before: str = "", after: str = "") -> str:
    """What the eval script prints: set-up noise, the markers around the test output, the exit code."""
    out = [before, "Checking patch tests/test_a.py...", "Applied patch tests/test_a.py cleanly.",
           START_TEST_OUTPUT, "============================= test session starts ==============================",
           "=========================== short test summary info ============================", *result_lines,
           END_TEST_OUTPUT]
    if exit_code is not None:
        out.append(f"{TEST_EXIT_CODE}: {exit_code}")
    out.append(after)
    return "\n".join(out) + "\n"


def test_all_fail_to_pass_and_pass_to_pass_passing_is_resolved() -> None:
    log = eval_log("PASSED tests/test_a.py::test_new", "PASSED tests/test_a.py::test_old", exit_code=0)
    r = grade(instance(["tests/test_a.py::test_new"], ["tests/test_a.py::test_old"]), log)
    assert r.resolved and r.status is ResolvedStatus.FULL and r.patch_applied and r.error is None
    assert r.tests_status["FAIL_TO_PASS"].success == ["tests/test_a.py::test_new"]
    assert r.tests_status["PASS_TO_PASS"].success == ["tests/test_a.py::test_old"]
    assert r.test_results == {"tests/test_a.py::test_new": "PASSED", "tests/test_a.py::test_old": "PASSED"}
    assert r.parser == "pytest" and r.test_exit_code == 0


def test_a_test_missing_from_the_log_counts_as_failed() -> None:
    log = eval_log("PASSED tests/test_a.py::test_old")
    r = grade(instance(["tests/test_a.py::test_new"], ["tests/test_a.py::test_old"]), log)
    assert not r.resolved and r.status is ResolvedStatus.NO
    assert r.tests_status["FAIL_TO_PASS"].failure == ["tests/test_a.py::test_new"]


def test_some_fail_to_pass_passing_with_all_pass_to_pass_is_partial() -> None:
    log = eval_log("PASSED tests/test_a.py::test_1", "FAILED tests/test_a.py::test_2 - assert 0",
                   "PASSED tests/test_a.py::test_old", exit_code=1)
    r = grade(instance(["tests/test_a.py::test_1", "tests/test_a.py::test_2"], ["tests/test_a.py::test_old"]), log)
    assert r.status is ResolvedStatus.PARTIAL and not r.resolved
    assert r.tests_status["FAIL_TO_PASS"].failure == ["tests/test_a.py::test_2"]


def test_a_failing_pass_to_pass_test_makes_it_unresolved_even_with_every_fail_to_pass_passing() -> None:
    log = eval_log("PASSED tests/test_a.py::test_new", "FAILED tests/test_a.py::test_old - boom", exit_code=1)
    r = grade(instance(["tests/test_a.py::test_new"], ["tests/test_a.py::test_old"]), log)
    assert r.status is ResolvedStatus.NO and not r.resolved
    assert r.tests_status["PASS_TO_PASS"].failure == ["tests/test_a.py::test_old"]


def test_partial_fail_to_pass_with_a_pass_to_pass_regression_is_no() -> None:
    log = eval_log("PASSED t.py::a", "FAILED t.py::b", "ERROR t.py::old", exit_code=1)
    assert grade(instance(["t.py::a", "t.py::b"], ["t.py::old"]), log).status is ResolvedStatus.NO


def test_empty_fail_to_pass_with_passing_pass_to_pass_is_resolved_as_officially() -> None:
    r = grade(instance([], ["t.py::old"]), eval_log("PASSED t.py::old", exit_code=0))
    assert r.resolved and r.status is ResolvedStatus.FULL


def test_test_lists_may_be_json_strings_as_in_the_hf_datasets() -> None:
    inst = instance(json.dumps(["t.py::new"]), json.dumps(["t.py::old"]))
    r = grade(inst, eval_log("PASSED t.py::new", "PASSED t.py::old", exit_code=0))
    assert r.resolved
    assert r.tests_status["PASS_TO_PASS"].success == ["t.py::old"]


def test_a_test_list_that_is_not_json_is_a_config_error_naming_the_field() -> None:
    with pytest.raises(ConfigError) as exc:
        grade(instance("[t.py::new", []), eval_log("PASSED t.py::new"))
    assert exc.value.field == "FAIL_TO_PASS"
    with pytest.raises(ConfigError) as exc:
        grade(instance([], {"a": 1}), eval_log("PASSED t.py::new"))
    assert exc.value.field == "PASS_TO_PASS"


def test_skipped_fail_to_pass_fails_but_skipped_pass_to_pass_is_maintained() -> None:
    log = eval_log("t.py::new SKIPPED", "t.py::old SKIPPED", exit_code=0)  # astropy's classic verbose lines
    r = grade(instance(["t.py::new"], ["t.py::old"], repo="astropy/astropy"), log)
    assert r.tests_status["FAIL_TO_PASS"].failure == ["t.py::new"]
    assert r.tests_status["PASS_TO_PASS"].success == ["t.py::old"]
    assert not r.resolved


def test_xfail_counts_as_passing_for_both_lists() -> None:
    log = eval_log("XFAIL t.py::new - reason", "XFAIL t.py::old - reason", exit_code=0)
    assert grade(instance(["t.py::new"], ["t.py::old"]), log).resolved


def test_a_patch_apply_failure_is_not_resolved_even_if_tests_seem_to_pass() -> None:
    log = APPLY_PATCH_FAIL + "\n" + eval_log("PASSED t.py::new", exit_code=0)
    r = grade(instance(["t.py::new"], []), log)
    assert not r.resolved and not r.patch_applied
    assert r.error is GradeError.PATCH_APPLY_FAILED and r.status is ResolvedStatus.NO
    assert r.tests_status["FAIL_TO_PASS"].failure == ["t.py::new"]


def test_the_apply_output_can_be_given_separately() -> None:
    log = eval_log("PASSED t.py::new", exit_code=0)
    failed = grade(instance(["t.py::new"], []), log, apply_output="error: corrupt patch\n" + APPLY_PATCH_FAIL)
    assert not failed.patch_applied and not failed.resolved
    ok = grade(instance(["t.py::new"], []), log, apply_output=">>>>> Applied Patch (git apply --verbose):\n")
    assert ok.patch_applied and ok.resolved


def test_model_patch_applied_reads_the_apply_markers() -> None:
    assert grading.model_patch_applied(">>>>> Applied Patch (patch --batch --fuzz=5 -p1 -i):\n") is True
    assert grading.model_patch_applied("git apply --verbose did not apply\n" + APPLY_PATCH_FAIL) is False
    assert grading.model_patch_applied("nothing here") is None


@pytest.mark.parametrize(("marker", "error"), [
    (RESET_FAILED, GradeError.RESET_FAILED),
    (TESTS_TIMEOUT, GradeError.TESTS_TIMED_OUT),
    (">>>>> Tests Errored", GradeError.TESTS_ERRORED),
])
def test_error_markers_make_the_log_ungradable(marker: str, error: GradeError) -> None:
    r = grade(instance(["t.py::new"], []), eval_log("PASSED t.py::new", exit_code=0, after=marker))
    assert r.error is error and not r.resolved and r.patch_applied


def test_a_run_cut_off_by_its_caller_is_not_resolved() -> None:
    r = grade(instance(["t.py::new"], []), eval_log("PASSED t.py::new"), timed_out=True)
    assert r.error is GradeError.TESTS_TIMED_OUT and not r.resolved


def test_a_log_without_the_markers_is_not_graded() -> None:
    r = grade(instance(["t.py::new"], []), "PASSED t.py::new\n")
    assert r.error is GradeError.TEST_OUTPUT_MISSING and not r.resolved


def test_a_log_with_no_test_results_is_not_graded_in_5_0_2_and_graded_in_4_1_0() -> None:
    log = eval_log("no tests ran in 0.01s", exit_code=4)
    r = grade(instance([], []), log)
    assert r.error is GradeError.NO_TEST_RESULTS and r.status is ResolvedStatus.NO and not r.resolved
    # 4.1.0 grades the empty map: empty lists resolve, as officially
    old = grade(instance([], []), log, version="4.1.0")
    assert old.error is None and old.resolved and old.grading_version == "4.1.0"


def test_an_unknown_grading_version_is_a_config_error_naming_the_allowed_ones() -> None:
    with pytest.raises(ConfigError) as err:
        grade(instance([], []), eval_log(exit_code=0), version="5.x")
    assert err.value.field == "grading_version" and "'5.0.2', '4.1.0'" in str(err.value)


def test_results_printed_outside_the_markers_are_still_read() -> None:
    log = eval_log(exit_code=0, after="PASSED t.py::new")
    r = grade(instance(["t.py::new"], []), log)
    assert r.resolved and r.error is None


def test_a_nonzero_exit_code_with_no_failure_in_the_log_is_not_trusted() -> None:
    # e.g. a conftest.py in the patch printing "PASSED ..." lines while the real run failed
    r = grade(instance(["t.py::new"], []), eval_log("PASSED t.py::new", exit_code=2))
    assert r.error is GradeError.EXIT_CODE_MISMATCH and not r.resolved
    assert r.test_exit_code == 2
    assert grade(instance(["t.py::new"], []), eval_log("PASSED t.py::new", exit_code=2), version="4.1.0").resolved


def test_django_test_names_with_spaces_and_docstring_names_are_graded() -> None:
    log = eval_log(
        "test_add_field (migrations.test_autodetector.AutodetectorTests) ... ok",
        "test_deconstruct (migrations.test_autodetector.AutodetectorTests)",
        "Nested deconstruction is handled. ... ok",
        "test_old (migrations.test_autodetector.AutodetectorTests) ... ok",
        exit_code=0)
    inst = instance(["test_add_field (migrations.test_autodetector.AutodetectorTests)",
                     "Nested deconstruction is handled."],
                    ["test_old (migrations.test_autodetector.AutodetectorTests)"], repo="django/django")
    r = grade(inst, log)
    assert r.parser == "django" and r.resolved


def test_parametrized_ids_with_brackets_match_exactly() -> None:
    log = eval_log("PASSED t.py::test_p[x[1]]", "FAILED t.py::test_p[x[2]] - boom", exit_code=1)
    r = grade(instance(["t.py::test_p[x[1]]"], ["t.py::test_p[x[2]]"]), log)
    assert r.tests_status["FAIL_TO_PASS"].success == ["t.py::test_p[x[1]]"]
    assert r.tests_status["PASS_TO_PASS"].failure == ["t.py::test_p[x[2]]"]


def test_ids_cut_at_a_space_match_the_parser_output() -> None:
    # pytest prints "PASSED t.py::test_p[a b]"; the datasets and the parser both keep "t.py::test_p[a"
    r = grade(instance(["t.py::test_p[a"], []), eval_log("PASSED t.py::test_p[a b]", exit_code=0))
    assert r.resolved


def test_a_truncated_id_is_graded_by_prefix_in_5_0_2_and_exactly_in_4_1_0() -> None:
    # the parser cuts "t.py::test_g[log(photon /cm**2)]" to the dataset's "t.py::test_g[log(photon"
    cut = eval_log("PASSED t.py::test_g[log(photon /cm**2)]", exit_code=0)
    assert grade(instance(["t.py::test_g[log(photon"], []), cut).resolved
    assert grade(instance(["t.py::test_g[log(photon"], []), cut, version="4.1.0").resolved
    # 5.0.2: a cut name (more "[" than "]") is graded from the full ids it prefixes when they agree
    other = eval_log("PASSED t.py::test_g[log(photon)]", "PASSED t.py::test_g[log(photon)-2]", exit_code=0)
    assert grade(instance(["t.py::test_g[log(photon"], []), other).resolved
    r = grade(instance(["t.py::test_g[log(photon"], []), other, version="4.1.0")
    assert r.tests_status["FAIL_TO_PASS"].failure == ["t.py::test_g[log(photon"] and not r.resolved
    mixed = eval_log("PASSED t.py::test_g[log(photon)]", "FAILED t.py::test_g[log(photon)-2]", exit_code=1)
    assert not grade(instance(["t.py::test_g[log(photon"], []), mixed).resolved  # they disagree: missing


def test_fail_only_repos_fail_only_on_a_recorded_failure() -> None:
    log = eval_log("FAILED t.py::bad", "ERROR t.py::err", exit_code=1)
    inst = instance(["t.py::missing", "t.py::err"], ["t.py::bad"], repo="markedjs/marked")
    r = grade(inst, log, parser_name="pytest")
    assert r.tests_status["FAIL_TO_PASS"].success == ["t.py::missing", "t.py::err"]
    assert r.tests_status["PASS_TO_PASS"].failure == ["t.py::bad"] and not r.resolved
    assert grade(instance(["t.py::missing"], [], repo="markedjs/marked"), log, parser_name="pytest").resolved


def test_a_log_with_only_non_status_words_is_graded_as_officially() -> None:
    # "ERROR: file or directory not found" is recorded as test "file" with status "ERROR:", as officially; the
    # map is not empty, so it is graded (a listed test is missing from it, so it fails)...
    log = eval_log("ERROR: file or directory not found: t.py")
    for version in ("5.0.2", "4.1.0"):
        r = grade(instance(["t.py::new"], []), log, version=version)
        assert r.test_results == {"file": "ERROR:"} and r.error is None and not r.resolved
    # ... unless 5.0.2 sees a non-zero exit code without a FAILED or ERROR result
    with_code = eval_log("ERROR: file or directory not found: t.py", exit_code=4)
    assert grade(instance([], []), with_code).error is GradeError.EXIT_CODE_MISMATCH
    assert grade(instance([], []), with_code, version="4.1.0").resolved


def test_the_section_ends_at_a_second_start_marker_as_officially() -> None:
    log = eval_log("PASSED t.py::new", START_TEST_OUTPUT, "FAILED t.py::new", exit_code=0)
    assert grade(instance(["t.py::new"], []), log).resolved


def test_the_parser_comes_from_the_argument_then_the_instance_then_the_repo() -> None:
    sympy_log = eval_log("test_latex_basic ok", exit_code=0)
    local = instance(["test_latex_basic"], [], repo="me/local-project", log_parser="sympy")
    assert grade(local, sympy_log).parser == "sympy"
    assert grade(local, sympy_log).resolved
    assert grade(local, sympy_log, parser_name="pytest").parser == "pytest"
    assert not grade(local, sympy_log, parser_name="pytest").resolved


def test_an_unknown_repo_without_a_parser_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as exc:
        grade(instance(["a"], [], repo="me/local-project"), eval_log("PASSED a"))
    assert exc.value.field == "log_parser"
    assert "pytest" in str(exc.value)


def test_the_report_round_trips_through_json() -> None:
    r = grade(instance(["t.py::new"], ["t.py::old"]), eval_log("PASSED t.py::new", "FAILED t.py::old", exit_code=1))
    data = msgspec.json.encode(r)
    assert json.loads(data)["tests_status"]["PASS_TO_PASS"] == {"success": [], "failure": ["t.py::old"]}
    assert msgspec.json.decode(data, type=GradeReport) == r


# Runs the patch ended early with exit code 0 (os._exit(0) or pytest.exit(returncode=0) in conftest.py, a
# sys.exit patched in the package's __init__): the exit code says success, the per-test results do not.
EARLY_EXITS = {
    "os_exit_at_conftest_import": eval_log(exit_code=0),
    "pytest_exit_returncode_0": eval_log("!!!!!!!!!!!!!!!!!!!! _pytest.outcomes.Exit: done !!!!!!!!!!!!!!!!!!!!",
                                         "no tests ran in 0.01s", exit_code=0),
    "exit_after_the_first_test": eval_log("PASSED tests/test_a.py::test_old", exit_code=0),
}


@pytest.mark.parametrize("case", sorted(EARLY_EXITS))
def test_a_run_that_exited_0_early_without_the_tests_results_is_not_resolved(case: str) -> None:
    r = grade(instance(["tests/test_a.py::test_new"], ["tests/test_a.py::test_old"]), EARLY_EXITS[case])
    assert not r.resolved and r.status is ResolvedStatus.NO
    assert r.test_exit_code == 0
    assert "tests/test_a.py::test_new" in r.tests_status["FAIL_TO_PASS"].failure
    assert "tests/test_a.py::test_new" not in r.test_results


def test_a_django_run_that_exited_0_before_any_test_is_not_resolved() -> None:
    log = "\n".join([START_TEST_OUTPUT, "Testing against Django installed in '/testbed/django'",
                     "Importing application admin_scripts", END_TEST_OUTPUT, f"{TEST_EXIT_CODE}: 0"])
    r = grade(instance(["test_version (admin_scripts.tests.CommandTypes)"], [], repo="django/django"), log)
    assert r.error is GradeError.NO_TEST_RESULTS and not r.resolved and r.parser == "django"


# The fail-only repos' parsers record failures only: an all-passing run has an empty map, graded when the
# runner's own summary says it ran tests (the official FAIL_ONLY repos and their runners).
ALL_PASSING_FAIL_ONLY_RUNS = {
    "chartjs/Chart.js": ("chart_js", "Chrome 120.0.0.0 (Linux x86_64): Executed 1 of 120 SUCCESS (0.1 secs / 0 secs)\n"
                         "\x1b[32mChrome 120.0.0.0 (Linux x86_64): Executed 120 of 120 SUCCESS (3 secs / 2.9 secs)"
                         "\x1b[39m"),
    "markedjs/marked": ("marked", "Started\n.....\n\n\n120 specs, 0 failures\nFinished in 0.3 seconds"),
    "processing/p5.js": ("p5js", "  Running \"mocha:test\" (mocha) task\n\n  120 passing (4s)\n  2 pending\n"),
}


@pytest.mark.parametrize("repo", sorted(ALL_PASSING_FAIL_ONLY_RUNS))
def test_an_all_passing_run_of_a_fail_only_repo_is_resolved(repo: str) -> None:
    parser, summary = ALL_PASSING_FAIL_ONLY_RUNS[repo]
    inst = instance(["suite test_new"], ["suite test_old"], repo=repo)
    r = grade(inst, "\n".join([START_TEST_OUTPUT, summary, END_TEST_OUTPUT]) + "\n")
    assert r.parser == parser and r.error is None and r.test_results == {}
    assert r.resolved and r.status is ResolvedStatus.FULL


@pytest.mark.parametrize("summary", [
    "",  # the runner never started (a browser that failed to launch)
    "Chrome 120.0.0.0 (Linux x86_64): Executed 0 of 0 ERROR (0.001 secs / 0 secs)",
    "0 specs, 0 failures",
    "  0 passing (1ms)",
])
def test_a_fail_only_run_without_a_test_executed_is_not_graded(summary: str) -> None:
    r = grade(instance(["suite test_new"], [], repo="chartjs/Chart.js"),
              "\n".join([START_TEST_OUTPUT, summary, END_TEST_OUTPUT]) + "\n")
    assert r.error is GradeError.NO_TEST_RESULTS and not r.resolved


def test_a_runner_that_ran_some_tests_makes_an_empty_map_graded_in_5_0_2() -> None:
    # any count of tests run is evidence in 5.0.2, for every repo (a karma run that lost its browser after 5)
    lost = ("Chrome 120.0.0.0 (Linux x86_64): Executed 5 of 120 SUCCESS (0.2 secs / 0.1 secs)\n"
            "Chrome 120.0.0.0 (Linux x86_64): Executed 5 of 120 DISCONNECTED (30 secs / 0.2 secs)")
    r = grade(instance(["suite test_new"], [], repo="chartjs/Chart.js"),
              "\n".join([START_TEST_OUTPUT, lost, END_TEST_OUTPUT]) + "\n")
    assert r.error is None and r.resolved
    r = grade(instance(["t.py::new"], []), eval_log("120 passing (4s)", exit_code=0))
    assert r.error is None and r.tests_status["FAIL_TO_PASS"].failure == ["t.py::new"] and not r.resolved


def test_a_recorded_failure_still_fails_a_fail_only_instance_with_a_summary() -> None:
    log = "\n".join([START_TEST_OUTPUT, "Chrome 120.0.0.0 (Linux x86_64) suite test_new FAILED",
                     "Chrome 120.0.0.0 (Linux x86_64): Executed 120 of 120 (1 FAILED) (3 secs / 2.9 secs)",
                     END_TEST_OUTPUT]) + "\n"
    r = grade(instance(["suite test_new "], [], repo="chartjs/Chart.js"), log)  # the parser keeps the space
    assert r.error is None and r.tests_status["FAIL_TO_PASS"].failure == ["suite test_new "] and not r.resolved


def test_an_exit_code_line_the_tests_print_is_not_believed_over_the_scripts_own() -> None:
    # 5.0.2 reads the first such line anywhere, so a line the tests print before the script's own wins there;
    # ours (a documented deviation) reads only after the last end marker, where the eval script writes
    forged = eval_log("FAILED t.py::test_f2p", f"{TEST_EXIT_CODE}: 0", "PASSED t.py::test_f2p", exit_code=1)
    assert grading.parse_test_exit_code(forged) == 1
    r = grade(instance(["t.py::test_f2p"], []), forged)
    assert r.test_exit_code == 1 and r.error is GradeError.EXIT_CODE_MISMATCH and not r.resolved
    honest = eval_log("FAILED t.py::test_f2p", "PASSED t.py::test_f2p", exit_code=1)
    assert grade(instance(["t.py::test_f2p"], []), honest).error is GradeError.EXIT_CODE_MISMATCH
    passing = eval_log("PASSED t.py::test_f2p", exit_code=0)
    assert grade(instance(["t.py::test_f2p"], []), passing).resolved


def test_the_exit_code_rule_applies_to_every_parser_in_5_0_2_and_none_in_4_1_0() -> None:
    # jest exits 1 on a missed coverage threshold with every test passing (a row with its own eval script
    # records the exit code whatever its language): 5.0.2 does not believe the results, 4.1.0 never looks
    log = "\n".join([START_TEST_OUTPUT, "  ✓ adds numbers (3 ms)", "  ✓ keeps old behaviour (1 ms)",
                     "Jest: \"global\" coverage threshold for lines (90%) not met: 80%", END_TEST_OUTPUT,
                     f"{TEST_EXIT_CODE}: 1"]) + "\n"
    inst = instance(["adds numbers"], ["keeps old behaviour"], repo="babel/babel")
    r = grade(inst, log)
    assert r.parser == "jest" and r.test_exit_code == 1 and r.error is GradeError.EXIT_CODE_MISMATCH
    assert grade(inst, log, version="4.1.0").resolved


def test_a_rows_own_eval_type_decides_fail_only_grading() -> None:
    log = eval_log("FAILED t.py::bad", exit_code=1)
    plain = instance(["t.py::missing"], [], repo="octo/demo")
    assert not grade(plain, log, parser_name="pytest").resolved  # a missing test fails by default
    assert grade({**plain, "eval_type": "fail_only"}, log, parser_name="pytest").resolved
    marked = instance(["t.py::missing"], [], repo="markedjs/marked")
    assert not grade({**marked, "eval_type": "pass_and_fail"}, log, parser_name="pytest").resolved
    with pytest.raises(ConfigError) as err:
        grade({**plain, "eval_type": "failonly"}, log, parser_name="pytest")
    assert err.value.field == "eval_type" and "pass_and_fail, fail_only" in str(err.value)
