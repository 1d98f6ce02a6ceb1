"""The SWE-bench Pro verdict from a parser's result json, as the official evaluator decides it: resolved when
every FAIL_TO_PASS and PASS_TO_PASS name has status PASSED; no (or a malformed) result json, or a run past its
deadline, is neither completed nor resolved."""

from __future__ import annotations

import json
import random

import pytest

from agentcompass.benchmarks.swebench.pro_grading import MAX_REPORTED_TESTS, grade, read_results


def result_json(tests: list[tuple[str, str]]) -> str:
    """A result json exactly as the official parsers' ``export_to_json`` writes it."""
    return json.dumps({"tests": [{"name": n, "status": s} for n, s in tests]}, indent=2)


# names in the styles the public set's parsers produce (mocha via NodeBB, pytest, go test, jest)
MOCHA = ["test/user.js | User .create(), when created should be created properly",
         "test/translator.js | Translator shim .translate() should translate correctly",
         'test/user.js | User user info should be member of "banned-users" system group only after a ban']
PYTEST = ["test/units/modules/test_apt.py::AptModuleTestCase::test_upgrade[a b]",
          "tests/unit/test_utils.py::test_parse_date"]
GO = ["TestParseConfig", "TestParseConfig/with_spaces_and_unicode_é"]
JEST = ["test/components/Room-test.tsx | <Room> | renders the room header"]


def test_all_listed_tests_passed_resolves() -> None:
    out = result_json([(n, "PASSED") for n in MOCHA + PYTEST + GO + JEST] + [("other", "FAILED")])
    r = grade(out, MOCHA[:2] + GO, PYTEST + JEST + [MOCHA[2]], returncode=0)
    assert r.completed and r.resolved and r.returncode == 0 and r.error is None
    assert r.fail_to_pass.failure == [] and r.pass_to_pass.success == PYTEST + JEST + [MOCHA[2]]
    assert {"name": "other", "status": "FAILED"} in r.tests


@pytest.mark.parametrize("status", ["FAILED", "ERROR", "SKIPPED", "passed", "XFAIL"])
def test_any_status_but_PASSED_fails_a_listed_test(status: str) -> None:
    # a SKIPPED PASS_TO_PASS test counts as a failure here (SWE-bench lets it pass)
    out = result_json([(MOCHA[0], "PASSED"), (PYTEST[0], status)])
    r = grade(out, [MOCHA[0]], [PYTEST[0]])
    assert r.completed and not r.resolved and r.pass_to_pass.failure == [PYTEST[0]]


def test_a_test_missing_from_the_results_fails() -> None:
    r = grade(result_json([(GO[0], "PASSED")]), [GO[0], GO[1]], [])
    assert r.completed and not r.resolved and r.fail_to_pass.failure == [GO[1]]


def test_a_name_passed_once_counts_even_if_also_failed() -> None:
    # the official check is set inclusion against the PASSED names, so a rerun that passed is enough
    r = grade(result_json([(GO[0], "FAILED"), (GO[0], "PASSED")]), [GO[0]], [])
    assert r.resolved


def test_names_are_compared_exactly() -> None:
    r = grade(result_json([(MOCHA[0] + " ", "PASSED"), (MOCHA[1].lower(), "PASSED")]), MOCHA[:2], [])
    assert r.completed and not r.resolved


@pytest.mark.parametrize("output", [None, "", "{not json", "[]", '{"tests": {}}', '{"tests": [{"name": "a"}]}',
                                    '{"tests": [{"status": "PASSED"}]}', '{"tests": [1]}', b"\xff\xfe"])
def test_no_or_malformed_result_json_is_not_completed(output: str | bytes | None) -> None:
    r = grade(output, ["a"], [])
    assert not r.completed and not r.resolved and r.error


def test_empty_lists_resolve_on_any_result_but_not_without_one() -> None:
    assert grade(result_json([]), [], []).resolved
    assert not grade(None, [], []).resolved


def test_a_timed_out_run_is_neither_completed_nor_resolved() -> None:
    r = grade(result_json([("a", "PASSED")]), ["a"], [], timed_out=True)
    assert r.timed_out and not r.completed and not r.resolved and r.fail_to_pass.failure == ["a"]


def test_reported_tests_are_capped_but_all_count() -> None:
    tests = [(f"t{i}", "PASSED") for i in range(MAX_REPORTED_TESTS + 10)]
    r = grade(result_json(tests), [f"t{MAX_REPORTED_TESTS + 5}"], [])
    assert r.resolved and len(r.tests) == MAX_REPORTED_TESTS


def test_read_results_keeps_name_and_status_only() -> None:
    tests, err = read_results(json.dumps({"tests": [{"name": "a", "status": "PASSED", "time": 1}], "x": 1}))
    assert err is None and tests == [{"name": "a", "status": "PASSED"}]


def test_agrees_with_the_official_set_inclusion_on_random_cases() -> None:
    rng = random.Random(14)
    names = MOCHA + PYTEST + GO + JEST + [f"t{i}" for i in range(8)]
    statuses = ["PASSED", "FAILED", "SKIPPED", "ERROR"]
    for _ in range(1000):
        results = [(rng.choice(names), rng.choice(statuses)) for _ in range(rng.randint(0, 12))]
        f2p = rng.sample(names, rng.randint(0, 3))
        p2p = rng.sample(names, rng.randint(0, 3))
        # the official evaluator: (f2p | p2p) <= {names whose status is "PASSED"}
        official = (set(f2p) | set(p2p)) <= {n for n, s in results if s == "PASSED"}
        assert grade(result_json(results), f2p, p2p).resolved is official, (results, f2p, p2p)
