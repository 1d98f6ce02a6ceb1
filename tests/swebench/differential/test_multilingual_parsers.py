"""The Multilingual log parsers give the official ``swebench`` 4.1.0 parsers' status maps on generated logs.

For each official parser function, LOGS_PER_PARSER seeded random logs (multilingual_logs.py) are parsed by
both; any difference fails unless DEVIATIONS names it. Where the official parser raises, ours must return
``{}`` (both leave the instance unresolved).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any
from xml.etree import ElementTree

import pytest
import swebench.harness.log_parsers as official_parsers  # the oracle: a test dependency, never skipped
import swebench.harness.log_parsers.python as official_py

from agentcompass.swebench import log_parsers
from agentcompass.swebench.lang_parsers import LANG_PARSERS, LANG_REPO_TO_PARSER_NAME, parser_name_for_instance
from tests.swebench.differential.multilingual_logs import DISPATCHED, GENERATORS, generate

LOGS_PER_PARSER = 500

# Differences from the official parsers that are allowed, with the reason (also in docs/swebench.md).
DEVIATIONS: dict[str, str] = {
    "jekyll": "Given only a log (no instance id) jekyll picks cucumber when the log has cucumber's "
              "'N scenarios (...)' summary, else minitest; the official parser picks by PR number. Only logs "
              "cut before that summary can differ; parser_name_for_instance gives the official choice.",
    "immutable_js": "Given only a log, immutable-js picks jest-json when a '[PASSED]/[FAILED] name' line is "
                    "present, else jest; the official parser picks by PR number. Only a jest log that also "
                    "holds such a line can differ; parser_name_for_instance gives the official choice.",
}

OFFICIAL: dict[str, Callable[..., dict[str, str]]] = {
    fn.__name__.removeprefix("parse_log_"): fn
    for repo, fn in official_parsers.MAP_REPO_TO_PARSER.items() if repo not in official_py.MAP_REPO_TO_PARSER_PY
}
# parsers the official dispatchers call but no repo maps to directly
OFFICIAL.update({name: getattr(official_parsers.javascript, f"parse_log_{name}", None)
                 or getattr(official_parsers.ruby, f"parse_log_{name}") for name in ("jest_json", "minitest",
                                                                                    "cucumber")})


# The documented "official raises, ours gives {}" deviation, parser by parser, with the exception each raises
# (calypso: a checkmark line its regex does not match; doctest: XML that does not parse; karma: a suite stack
# that runs out). Any other exception is a broken comparison, not a deviation.
OFFICIAL_RAISES: dict[str, type[BaseException]] = {
    "calypso": AttributeError, "doctest": ElementTree.ParseError, "karma": IndexError}


def _official(name: str, log: str, instance_id: str = "x__y-1") -> dict[str, str] | None:
    """The official status map, or None when the official parser raises its documented exception."""
    try:
        return dict(OFFICIAL[name](log, SimpleNamespace(instance_id=instance_id)))
    except Exception as exc:
        expected = OFFICIAL_RAISES.get(name)
        if expected is None or not isinstance(exc, expected):
            raise
        return None


def _rng(name: str, i: int) -> random.Random:
    return random.Random(f"{name}-{i}")


def _diff(ours: dict[str, str], theirs: dict[str, str] | None) -> dict[str, Any] | None:
    expected = {} if theirs is None else theirs
    if ours == expected:
        return None
    keys = set(ours) | set(expected)
    return {k: (ours.get(k), expected.get(k)) for k in sorted(keys) if ours.get(k) != expected.get(k)}


def test_every_official_multilingual_parser_is_registered_under_its_name() -> None:
    assert set(OFFICIAL) <= set(LANG_PARSERS)
    for repo, fn in official_parsers.MAP_REPO_TO_PARSER.items():
        if repo in official_py.MAP_REPO_TO_PARSER_PY:
            continue
        assert LANG_REPO_TO_PARSER_NAME[repo] == fn.__name__.removeprefix("parse_log_"), repo
        assert log_parsers.get_parser(repo) is LANG_PARSERS[LANG_REPO_TO_PARSER_NAME[repo]]
        assert log_parsers.MAP_REPO_TO_PARSER[repo] is LANG_PARSERS[LANG_REPO_TO_PARSER_NAME[repo]]
    assert set(LANG_REPO_TO_PARSER_NAME) == set(official_parsers.MAP_REPO_TO_PARSER) - set(
        official_py.MAP_REPO_TO_PARSER_PY)


def test_generators_cover_every_log_only_official_parser() -> None:
    assert set(GENERATORS) | set(DISPATCHED) == set(OFFICIAL)


@pytest.mark.parametrize("name", sorted(GENERATORS))
def test_status_maps_equal_the_official_parsers_on_generated_logs(name: str) -> None:
    mismatches = []
    raised = recorded = 0
    for i in range(LOGS_PER_PARSER):
        log = generate(name, _rng(name, i))
        theirs = _official(name, log)
        raised += theirs is None
        recorded += bool(theirs)
        diff = _diff(LANG_PARSERS[name](log), theirs)
        if diff is not None:
            mismatches.append((i, diff))
    assert not mismatches, f"{len(mismatches)} of {LOGS_PER_PARSER} logs differ; first: {mismatches[:3]}"
    # the generator must exercise the parser: most logs give the official parser tests to record
    assert recorded > LOGS_PER_PARSER // 2, (name, recorded, raised)


@pytest.mark.parametrize("name", sorted(DISPATCHED))
def test_per_instance_parsers_equal_the_official_dispatch(name: str) -> None:
    mismatches = []
    log_only_differences = 0
    for i in range(LOGS_PER_PARSER):
        rng = _rng(name, i)
        fmt, instance_id = rng.choice(DISPATCHED[name])
        log = generate(fmt, rng)
        theirs = _official(name, log, instance_id)
        resolved = parser_name_for_instance(name, instance_id)
        assert resolved == fmt
        diff = _diff(LANG_PARSERS[resolved](log), theirs)
        if diff is not None:
            mismatches.append((i, instance_id, diff))
        log_only_differences += _diff(LANG_PARSERS[name](log), theirs) is not None
    assert not mismatches, f"{len(mismatches)} of {LOGS_PER_PARSER} logs differ; first: {mismatches[:3]}"
    # without the instance id, only the documented deviation (truncated/mixed logs) may differ, and rarely
    assert name in DEVIATIONS
    assert log_only_differences < LOGS_PER_PARSER // 10


@pytest.mark.parametrize("name", sorted(DISPATCHED))
def test_an_unknown_instance_keeps_the_format_detecting_parser(name: str) -> None:
    assert parser_name_for_instance(name, "someone__else-424242") == name
    assert parser_name_for_instance("gotest", "jekyll__jekyll-9141") == "gotest"
