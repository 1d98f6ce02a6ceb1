"""The Multilingual log parsers give the status maps of the official ``swebench`` 5.0.2 and 4.1.0 parsers on
generated logs, each version's under ``grading_version`` of the same name.

For each official parser function, LOGS_PER_PARSER seeded random logs (multilingual_logs.py) are parsed by
both; any difference fails unless DEVIATIONS names it. Where the official parser raises, ours must return
``{}`` (both leave the instance unresolved). 5.0.2 runs in a subprocess (official5.py), fed every log at once.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any
from xml.etree import ElementTree

import pytest
import swebench.harness.log_parsers as official_parsers  # the oracle: a test dependency, never skipped
import swebench.harness.log_parsers.python as official_py

from agentcompass.benchmarks.swebench import log_parsers
from agentcompass.benchmarks.swebench.lang_parsers import (
    LANG_PARSERS,
    LANG_REPO_TO_PARSER_NAME,
    parser_name_for_instance,
)
from tests.benchmarks.swebench.differential import official5
from tests.benchmarks.swebench.differential.multilingual_logs import DISPATCHED, GENERATORS, generate

pytestmark = pytest.mark.xdist_group("swebench-differential")  # one worker runs the 5.0.2 batch once
LOGS_PER_PARSER = 500
VERSIONS = ("5.0.2", "4.1.0")
#: the repos of swebench 5.0.2's parser map outside SWE-bench Multilingual (JavaScript repos it added), which
#: have no parser here
NOT_MULTILINGUAL_V5 = frozenset({
    "GoogleChrome/lighthouse", "PrismJS/prism", "alibaba-fusion/next", "bpmn-io/bpmn-js",
    "carbon-design-system/carbon", "cypress-io/cypress", "emotion-js/emotion", "eslint/eslint", "grommet/grommet",
    "highlightjs/highlight.js", "openlayers/openlayers", "plotly/plotly.js", "prettier/prettier",
    "quarto-dev/quarto-cli", "scratchfoundation/scratch-gui"})

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


def test_every_multilingual_repo_has_the_same_parser_in_swebench_5_0_2() -> None:
    [answer] = official5.run_batch([{"kind": "parser_map"}])
    theirs = {repo: fn for repo, fn in answer["value"].items() if repo not in official_py.MAP_REPO_TO_PARSER_PY}
    assert set(theirs) - set(LANG_REPO_TO_PARSER_NAME) == NOT_MULTILINGUAL_V5
    for repo, name in LANG_REPO_TO_PARSER_NAME.items():
        assert theirs[repo] == f"parse_log_{name}", repo


def test_generators_cover_every_log_only_official_parser() -> None:
    assert set(GENERATORS) | set(DISPATCHED) == set(OFFICIAL)


#: (official parser name, log, instance id) of every generated case, per parser name
def _cases(name: str) -> list[tuple[str, str, str]]:
    if name in GENERATORS:
        return [(name, generate(name, _rng(name, i)), "x__y-1") for i in range(LOGS_PER_PARSER)]
    out = []
    for i in range(LOGS_PER_PARSER):
        rng = _rng(name, i)
        fmt, instance_id = rng.choice(DISPATCHED[name])
        out.append((name, generate(fmt, rng), instance_id))
    return out


@functools.cache
def _official_maps(version: str) -> dict[str, list[dict[str, str] | None]]:
    """The official maps of every case of every parser (None: it raised its documented exception)."""
    names = sorted({*GENERATORS, *DISPATCHED})
    cases = [case for name in names for case in _cases(name)]
    if version == "4.1.0":
        flat = [_official(name, log, instance_id) for name, log, instance_id in cases]
    else:
        answers = official5.run_batch([{"kind": "parse", "parser": f"parse_log_{name}", "log": log,
                                        "instance_id": instance_id} for name, log, instance_id in cases])
        flat = []
        for (name, _, _), answer in zip(cases, answers, strict=True):
            if "raised" in answer:
                assert name in OFFICIAL_RAISES and answer["raised"] == OFFICIAL_RAISES[name].__name__, answer
                flat.append(None)
            else:
                flat.append(answer["map"])
    return {name: flat[i * LOGS_PER_PARSER:(i + 1) * LOGS_PER_PARSER] for i, name in enumerate(names)}


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name", sorted(GENERATORS))
def test_status_maps_equal_the_official_parsers_on_generated_logs(name: str, version: str) -> None:
    mismatches = []
    raised = recorded = 0
    ours = log_parsers.get_parser(None, name, version)
    for i, ((_, log, _), theirs) in enumerate(zip(_cases(name), _official_maps(version)[name], strict=True)):
        raised += theirs is None
        recorded += bool(theirs)
        diff = _diff(ours(log), theirs)
        if diff is not None:
            mismatches.append((i, diff))
    assert not mismatches, f"{len(mismatches)} of {LOGS_PER_PARSER} logs differ; first: {mismatches[:3]}"
    # the generator must exercise the parser: most logs give the official parser tests to record
    assert recorded > LOGS_PER_PARSER // 2, (name, recorded, raised)


@pytest.mark.parametrize("name", ["maven", "gradle_custom", "jest"])
def test_the_generated_logs_exercise_what_5_0_2_reads_differently(name: str) -> None:
    differ = sum(log_parsers.get_parser(None, name)(log) != log_parsers.get_parser(None, name, "4.1.0")(log)
                 for _, log, _ in _cases(name))
    assert differ >= 20, differ


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name", sorted(DISPATCHED))
def test_per_instance_parsers_equal_the_official_dispatch(name: str, version: str) -> None:
    mismatches = []
    log_only_differences = 0
    for i, ((_, log, instance_id), theirs) in enumerate(zip(_cases(name), _official_maps(version)[name],
                                                             strict=True)):
        resolved = parser_name_for_instance(name, instance_id)
        diff = _diff(log_parsers.get_parser(None, resolved, version)(log), theirs)
        if diff is not None:
            mismatches.append((i, instance_id, diff))
        log_only_differences += _diff(log_parsers.get_parser(None, name, version)(log), theirs) is not None
    assert not mismatches, f"{len(mismatches)} of {LOGS_PER_PARSER} logs differ; first: {mismatches[:3]}"
    # without the instance id, only the documented deviation (truncated/mixed logs) may differ, and rarely
    assert name in DEVIATIONS
    assert log_only_differences < LOGS_PER_PARSER // 10


@pytest.mark.parametrize("name", sorted(DISPATCHED))
def test_an_unknown_instance_keeps_the_format_detecting_parser(name: str) -> None:
    assert parser_name_for_instance(name, "someone__else-424242") == name
    assert parser_name_for_instance("gotest", "jekyll__jekyll-9141") == "gotest"
