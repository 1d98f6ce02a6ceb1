"""Real-format logs of the Multilingual repos parse to the statuses the official parser gives them.

Each ``tests/benchmarks/swebench/fixtures/multilingual/<language>/*.log`` has a ``.json`` with its repo, an instance id
and the official ``swebench`` 4.1.0 statuses (written by ``regenerate.py`` there); ours must equal both those
and the live official parsers of 4.1.0 and 5.0.2 (each under its ``grading_version``).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from agentcompass.benchmarks.swebench.lang_parsers import parser_name_for_instance
from agentcompass.benchmarks.swebench.log_parsers import PARSERS, get_parser, get_parser_name
from tests.benchmarks.swebench.differential import official5

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "multilingual"
LANGUAGES = ("javascript", "typescript", "go", "rust", "java", "c", "cpp", "php", "ruby")
LOGS = sorted(FIXTURES.glob("*/*.log"))


def _load(log_path: Path) -> tuple[str, dict[str, object]]:
    return log_path.read_text(encoding="utf-8"), json.loads(log_path.with_suffix(".json").read_text("utf-8"))


def _ours(log: str, repo: str, instance_id: str) -> dict[str, str]:
    return PARSERS[parser_name_for_instance(get_parser_name(repo), instance_id)](log)


def test_every_language_has_a_fixture_log_with_tests_of_several_statuses() -> None:
    assert {p.parent.name for p in LOGS} == set(LANGUAGES)
    for path in LOGS:
        _, expected = _load(path)
        statuses = expected["statuses"]
        assert isinstance(statuses, dict) and len(statuses) >= 2, path


@pytest.mark.parametrize("path", LOGS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_fixture_log_gives_the_committed_official_statuses(path: Path) -> None:
    log, expected = _load(path)
    assert _ours(log, str(expected["repo"]), str(expected["instance_id"])) == expected["statuses"]


@pytest.mark.parametrize("path", LOGS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_fixture_log_gives_the_live_official_statuses(path: Path) -> None:
    import swebench.harness.log_parsers as official  # the oracle: a test dependency, never skipped
    log, expected = _load(path)
    repo, instance_id = str(expected["repo"]), str(expected["instance_id"])
    theirs = official.MAP_REPO_TO_PARSER[repo](log, SimpleNamespace(instance_id=instance_id))
    assert _ours(log, repo, instance_id) == theirs


@functools.cache
def _official5_maps() -> dict[Path, dict[str, str]]:
    """The 5.0.2 statuses of every fixture log, in one batch (its parser for the repo, given the instance)."""
    [names] = official5.run_batch([{"kind": "parser_map"}])
    jobs = []
    for path in LOGS:
        log, expected = _load(path)
        jobs.append({"kind": "parse", "parser": names["value"][str(expected["repo"])], "log": log,
                     "instance_id": str(expected["instance_id"])})
    return {path: answer["map"] for path, answer in zip(LOGS, official5.run_batch(jobs), strict=True)}


@pytest.mark.parametrize("path", LOGS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_fixture_log_gives_the_live_swebench_5_0_2_statuses(path: Path) -> None:
    log, expected = _load(path)
    repo, instance_id = str(expected["repo"]), str(expected["instance_id"])
    name = parser_name_for_instance(get_parser_name(repo), instance_id)
    assert get_parser(None, name, "5.0.2")(log) == _official5_maps()[path]
