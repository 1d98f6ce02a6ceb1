"""The Multilingual parsers load in any import order, without ``swebench``, and grade their repos' logs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from agentcompass.benchmarks.swebench.grading import grade
from agentcompass.benchmarks.swebench.lang_parsers import LANG_PARSERS, LANG_REPO_TO_PARSER_NAME
from agentcompass.benchmarks.swebench.log_parsers import PARSERS, get_parser
from agentcompass.benchmarks.swebench.test_specs import END_TEST_OUTPUT, START_TEST_OUTPUT

REPO = Path(__file__).resolve().parents[4]


PKG = "agentcompass.benchmarks.swebench"


@pytest.mark.parametrize("first", [f"{PKG}.lang_parsers.go", f"{PKG}.lang_parsers", f"{PKG}.lang_parsers.registry",
                                   f"{PKG}.grading"])
def test_any_module_can_be_imported_first_and_swebench_stays_unloaded(first: str) -> None:
    code = (f"import sys, {first}; from {PKG}.log_parsers import PARSERS, MAP_REPO_TO_PARSER; "
            "print(PARSERS['gotest'].__name__, MAP_REPO_TO_PARSER['jqlang/jq'].__name__, "
            "any(m == 'swebench' or m.startswith('swebench.') for m in sys.modules))")
    res = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert res.stdout.split() == ["parse_log_gotest", "parse_log_jq", "False"], res.stderr


def test_every_multilingual_repo_has_a_registered_parser() -> None:
    for repo, name in LANG_REPO_TO_PARSER_NAME.items():
        assert get_parser(repo) is LANG_PARSERS[name] is PARSERS[name]


def test_a_go_instance_grades_resolved_from_its_go_test_output() -> None:
    log = "\n".join(["+ go test -v ./...", START_TEST_OUTPUT, "=== RUN   TestNew", "=== RUN   TestNew/a b",
                     "--- PASS: TestNew (0.00s)", "    --- PASS: TestNew/a b (0.00s)", "--- FAIL: TestOld (0.01s)",
                     "FAIL", "FAIL\tgithub.com/gin-gonic/gin\t0.02s", END_TEST_OUTPUT])
    inst = {"instance_id": "gin-gonic__gin-1", "repo": "gin-gonic/gin", "version": "1",
            "FAIL_TO_PASS": ["TestNew/a b"], "PASS_TO_PASS": ["TestNew"]}
    assert grade(inst, log).resolved
    assert not grade({**inst, "PASS_TO_PASS": ["TestOld"]}, log).resolved


def test_grading_a_jekyll_instance_picks_the_parser_its_pr_number_names() -> None:
    from agentcompass.benchmarks.swebench.grading import grade
    from agentcompass.benchmarks.swebench.test_specs import END_TEST_OUTPUT, START_TEST_OUTPUT

    # a cut-off cucumber run has no "N scenarios" summary: only the instance id says it is cucumber
    log = f"{START_TEST_OUTPUT}\n{END_TEST_OUTPUT}\n"
    instance = {"instance_id": "jekyll__jekyll-8761", "repo": "jekyll/jekyll", "FAIL_TO_PASS": [], "PASS_TO_PASS": []}
    assert grade(instance, log).parser == "cucumber"
    assert grade({**instance, "instance_id": "jekyll__jekyll-8167"}, log).parser == "minitest"
