"""Our Python log parsers and log handling agree with the official swebench 5.0.2 and 4.1.0 harnesses.

For each version, agreement.compare runs the seeded generated logs (python_logs.py) of every framework through
the official release and through ours under that ``grading_version``: parser maps (whole log and test
section), ``parse_test_output`` against ``get_logs_eval``. Every difference fails unless the official parser
raised on a line a named row of deviations.py explains.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from agentcompass.benchmarks.swebench import log_parsers as lp
from tests.benchmarks.swebench.differential import deviations as dev
from tests.benchmarks.swebench.differential import official4, official5
from tests.benchmarks.swebench.differential.agreement import LOGS_PER_FRAMEWORK, compare, official
from tests.benchmarks.swebench.differential.python_logs import FRAMEWORKS, generate_many

pytestmark = pytest.mark.xdist_group("swebench-differential")  # one worker computes each comparison once
VERSIONS = (dev.V5, dev.V4)
#: the share of logs, names and reports that must agree (everything but the documented deviations does)
MIN_AGREEMENT = 0.995


def test_the_oracles_are_the_two_releases() -> None:
    assert official5.version_in_cache() == "5.0.2"
    assert official4.VERSION == "4.1.0"


@pytest.mark.parametrize("version", VERSIONS)
def test_every_official_python_repo_uses_the_same_parser_here(version: str) -> None:
    [answer] = official(version)([{"kind": "parser_map"}])
    frameworks = {f"parse_log_{fw}" for fw in FRAMEWORKS}
    python_repos = {repo: name for repo, name in answer["value"].items() if name in frameworks}
    assert len(python_repos) == 18, python_repos
    for repo, name in python_repos.items():
        assert lp.get_parser(repo, version=version).__name__.removesuffix("_v4") == name, repo


@pytest.mark.parametrize("version", VERSIONS)
def test_parser_maps_and_get_logs_eval_equal_the_official_ones(version: str) -> None:
    agreement = compare(version)
    print(agreement.summary())
    assert not agreement.differences, "\n".join(agreement.differences[:20])
    assert agreement.logs.total == 2 * LOGS_PER_FRAMEWORK * len(FRAMEWORKS)
    assert agreement.logs_eval.total == LOGS_PER_FRAMEWORK * len(FRAMEWORKS)
    for tally in (agreement.logs, agreement.names, agreement.logs_eval):
        assert tally.rate >= MIN_AGREEMENT, agreement.summary()
    # the deviations used are exactly the rows of this version, each exercised
    assert set(agreement.deviations) == {row.name for row in dev.PARSER_DEVIATIONS if version in row.versions}


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_the_generated_logs_grade_most_logs(framework: str) -> None:
    """The logs are realistic enough that most are graded (not cut before their results, not all noise)."""
    from agentcompass.benchmarks.swebench.grading import parse_test_output

    graded = sum(parse_test_output(case.text, framework)[1] is None
                 for case in generate_many(framework, LOGS_PER_FRAMEWORK, seed=41))
    assert graded >= LOGS_PER_FRAMEWORK // 3, graded


def _v5_only(pattern: str, framework: str = "pytest_v2") -> int:
    """Logs whose 5.0.2 map has a name matching ``pattern`` that the 4.1.0 map lacks."""
    count = 0
    for case in generate_many(framework, LOGS_PER_FRAMEWORK, seed=14):
        v5, v4 = lp.get_parser(None, framework)(case.text), lp.get_parser(None, framework, dev.V4)(case.text)
        count += any(re.search(pattern, name) and name not in v4 for name in v5)
    return count


def test_the_generated_logs_cover_each_class_the_versions_differ_on() -> None:
    """The classes of the issue (#31) where 5.0.2 reads logs differently from 4.1.0, each present many times."""
    assert _v5_only(r"\S \S") >= 50  # pytest_v2: names with spaces keep every word
    assert _v5_only(r" - ") >= 20  # the " - reason" of an XFAIL/XPASS/ERROR summary line is part of the name
    glued = sum("ERROR:root:" in case.text for case in generate_many("pytest_v2", LOGS_PER_FRAMEWORK, seed=14))
    assert glued >= 5  # a status word glued to more text
    coloured = [case.text for case in generate_many("pytest_v2", LOGS_PER_FRAMEWORK, seed=14)]
    assert sum(bool(re.search(r"\x1b\[\d+m(PASSED|FAILED)", t)) for t in coloured) >= 50  # either position
    assert sum(bool(re.search(r"::\S+ \x1b\[\d+m(PASSED|FAILED)", t)) for t in coloured) >= 20
    skips = sum(any(name == "[1]" for name in lp.get_parser(None, "pytest", dev.V4)(case.text))
                for case in generate_many("pytest", LOGS_PER_FRAMEWORK, seed=14))
    assert skips >= 20  # SKIPPED [N] summaries: 4.1.0 records a test "[N]", 5.0.2 does not


def test_every_deviation_is_documented_with_its_reason() -> None:
    doc = (Path(__file__).parents[4] / "docs" / "swebench.md").read_text(encoding="utf-8")
    section = doc.split("## Agreement with the official harness: log parsers and grading", 1)[1]
    for row in dev.PARSER_DEVIATIONS:
        assert f"`{row.name}`" in section, row.name


def test_the_package_never_imports_the_official_swebench() -> None:
    root = Path(__file__).parents[4]
    code = ("import sys, agentcompass.benchmarks.swebench.grading, agentcompass.benchmarks.swebench.log_parsers, "
            "agentcompass.benchmarks.swebench.test_specs; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'swebench'))")
    res = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=120)
    assert res.stdout.strip() == "[]", res.stdout + res.stderr
    for path in (root / "agentcompass").rglob("*.py"):
        assert not re.search(r"^\s*(from|import)\s+swebench\b", path.read_text(encoding="utf-8"), re.M), path
