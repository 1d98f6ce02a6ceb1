"""Seeded generator of realistic eval-script logs for every Python framework of the official harness.

A log is built from a random list of (test id, status), so the generator knows the truth; the output carries
the variation real runs have: ANSI colours, parametrised ids with spaces, brackets, slashes and unicode,
xfail/xpass/skip/error lines, section headers, warnings summaries, printed output that looks like results,
output outside the harness markers, duplicated markers and logs cut mid-line.
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass, field

from agentcompass.benchmarks.swebench.test_specs import (
    APPLY_PATCH_FAIL,
    END_TEST_OUTPUT,
    RESET_FAILED,
    START_TEST_OUTPUT,
    TEST_EXIT_CODE,
    TESTS_ERROR,
    TESTS_TIMEOUT,
)

#: the distinct official Python parsers (the per-repo aliases map onto these)
FRAMEWORKS = ("pytest", "pytest_options", "pytest_v2", "django", "seaborn", "sympy", "matplotlib")

PYTEST_STATUSES = ("PASSED", "FAILED", "SKIPPED", "ERROR", "XFAIL", "XPASS")
_WORDS = ("basic", "parse", "ok", "bad", "skip", "io", "unicode", "fit", "PASSED", "FAILED", "error", "x")
_PARAMS = ("a b", "x[1]", "/abs/path/file.txt", "//host/x", "/a/*.py", "ünïcødé", "1-2", "a - b", "é ö",
           "log(photon /cm**2/s/Hz)", "True-None", "a/b", "MouseButton.LEFT", "MouseButton.RIGHT-True", "",
           "[nested]", "0.5", "foo\tbar", "x - y - z", "PASSED", "k=v]", "[", "int64-float32", "日本")
_COLORS = ("\x1b[32m", "\x1b[31m", "\x1b[33m", "\x1b[1m", "\x1b[36m", "\x1b[1;31m", "\x1b[0m")
_RESET = "\x1b[0m"
_PYTEST_CODE = {"PASSED": ".", "FAILED": "F", "SKIPPED": "s", "ERROR": "E", "XFAIL": "x", "XPASS": "X"}
_PYTEST_COLOR = {"PASSED": "\x1b[32m", "FAILED": "\x1b[31m", "ERROR": "\x1b[31m"}


@dataclass
class GeneratedLog:
    """One eval-script log and the (test id, status) list it was built from."""

    framework: str
    text: str
    tests: list[tuple[str, str]] = field(default_factory=list)


def _word(rng: random.Random) -> str:
    return rng.choice(_WORDS)


def _pytest_id(rng: random.Random, framework: str) -> str:
    root = "lib/matplotlib/tests" if framework == "matplotlib" else rng.choice(("tests", "pkg/tests", "t"))
    test_id = f"{root}/test_{_word(rng)}.py::"
    if rng.random() < 0.4:
        test_id += f"Test{_word(rng).title()}::"
    test_id += f"test_{_word(rng)}_{rng.randrange(50)}"
    if rng.random() < 0.5:
        test_id += "[" + "-".join(rng.choice(_PARAMS) for _ in range(rng.randint(1, 2))) + "]"
    return test_id


def _colour(rng: random.Random, text: str, on: bool) -> str:
    return f"{rng.choice(_COLORS)}{text}{_RESET}" if on else text


def _noise(rng: random.Random) -> str:
    """A printed line that looks like a result to a naive reader."""
    return rng.choice((
        "FAILED to connect - retrying", "PASSED", "FAILED", "ERROR: file or directory not found: tests/x.py",
        "SKIPPED", "    assert result == PASSED", "E   AssertionError: expected FAILED", "PASSEDfoo bar",
        "something went wrong ERROR", "XFAIL", "ok", "test_fake ok", "FAIL:", "ERROR:", " PASSED ",
        "collected 0 items", "ok so far", "ERROR at setup", f"tests/x.py::test_{_word(rng)} PASSED",
        # status words glued to more text (captured logging), as 5.0.2 keeps them: status "ERROR:root:..."
        "ERROR:root:Something went wrong - retry later", "ERROR    root:x.py:12 boom - again",
        "FAILED:tests/x.py::test_glued", "XFAIL\x1b[0m tests/x.py::test_tail - reason",
    ))


def _tests(rng: random.Random, framework: str, statuses: tuple[str, ...]) -> list[tuple[str, str]]:
    return [(_pytest_id(rng, framework), rng.choice(statuses)) for _ in range(rng.randint(0, 12))]


def _pytest_body(rng: random.Random, framework: str, tests: list[tuple[str, str]]) -> list[str]:
    """A pytest run: header, progress (dots, verbose, classic verbose or wrapped), sections, summary."""
    colour = (framework == "pytest_v2" and rng.random() < 0.6) or rng.random() < 0.1
    out = ["============================= test session starts ==============================",
           "platform linux -- Python 3.9.20, pytest-7.4.0, pluggy-1.5.0", "rootdir: /testbed",
           f"collected {len(tests)} items", ""]
    style = rng.choice(("dots", "verbose", "classic", "wrapped"))
    for i, (test, status) in enumerate(tests):
        pct = f"[{100 * (i + 1) // max(len(tests), 1):3d}%]"
        word = _colour(rng, status, colour)
        reason = f" ({rng.choice(('needs net', 'known - bug', 'PASSED later'))})" \
            if status in ("SKIPPED", "XFAIL", "XPASS") and rng.random() < 0.5 else ""
        if style == "dots":
            if i == 0:
                out.append(f"{test.split('::')[0]} " + "".join(_PYTEST_CODE[s] for _, s in tests) + "  [100%]")
        elif style == "verbose":
            out.append(f"{test} {word}{reason} {pct}")
        elif style == "classic":
            out.append(f"{test} {word}{reason}")
        else:
            out.extend((test, f"{word} {pct}"))
        if rng.random() < 0.05:
            out.append(_noise(rng))
    errors = [t for t, s in tests if s == "ERROR"]
    failures = [t for t, s in tests if s == "FAILED"]
    if errors:
        out.append(_colour(rng, "==================================== ERRORS ====================================",
                           colour))
        for test in errors:
            name = test.split("::")[-1]
            out += [_colour(rng, f"_____ ERROR at {rng.choice(('setup', 'teardown'))} of {name} _____", colour),
                    "", "    @pytest.fixture", ">       raise RuntimeError('fixture - broke')",
                    "E       RuntimeError: fixture - broke", "", f"{test.split('::')[0]}:23: RuntimeError"]
    if failures:
        out.append("=================================== FAILURES ===================================")
        for test in failures:
            out += [_colour(rng, f"____________ {test.split('::', 1)[-1].replace('::', '.')} ____________", colour),
                    "", "    def test_bad():", ">       assert 1 == 2, 'boom - with dash'",
                    "E       AssertionError: boom - with dash", _noise(rng), f"{test.split('::')[0]}:7: AssertionError"]
    if rng.random() < 0.4:
        out += ["=============================== warnings summary ===============================",
                tests[0][0] if tests else "tests/test_x.py::test_w",
                "  /testbed/pkg/x.py:12: DeprecationWarning: PASSED is deprecated - use OK",
                "    warnings.warn(", "",
                "-- Docs: https://docs.pytest.org/en/stable/how-to/capture-warnings.html"]
    if rng.random() < 0.3:
        out += ["==================================== PASSES ====================================",
                f"_________________ {_word(rng)} _________________",
                "----------------------------- Captured stdout call -----------------------------",
                _noise(rng), _noise(rng)]
    out.append(_colour(rng, "=========================== short test summary info ============================",
                       colour))
    skips = 0
    for test, status in tests:
        word = _colour(rng, status, colour and rng.random() < 0.7)
        if status == "SKIPPED":
            skips += 1
            if rng.random() < 0.7:
                out.append(f"{word} [{rng.randint(1, 3)}] {test.split('::')[0]}:{rng.randint(1, 400)}: "
                           f"{rng.choice(('no scipy', 'needs - network', 'unconditional skip'))}")
            continue
        line = f"{word} {test}"
        if status in ("FAILED", "ERROR"):
            line += f" - {rng.choice(('AssertionError: a - b', 'ValueError: x', 'assert 1 == 2'))}"
        elif status in ("XFAIL", "XPASS") and rng.random() < 0.6:
            line += rng.choice((" - reason", " reason with words", " - known - bug"))
        out.append(line)
    counts = {s: sum(1 for _, t in tests if t == s) for s in PYTEST_STATUSES}
    out.append(_colour(rng, "==== " + ", ".join(f"{n} {s.lower()}" for s, n in counts.items() if n)
                       + " in 0.06s ====", colour))
    return out


def _django_body(rng: random.Random) -> tuple[list[str], list[tuple[str, str]]]:
    """``./tests/runtests.py --verbosity 2``: set-up, result lines, failure sections and the totals."""
    out = ["Testing against Django installed in '/testbed/django' with up to 8 processes",
           f"Importing application {_word(rng)}", "Operations to perform:",
           "  Synchronize unmigrated apps: auth, contenttypes", "Running migrations:",
           "  Applying admin.0001_initial... OK", "  Applying sites.0001_initial... OK",
           "System check identified no issues (0 silenced)."]
    tests: list[tuple[str, str]] = []
    failed: list[tuple[str, str]] = []
    for _ in range(rng.randint(0, 12)):
        method = f"test_{_word(rng)}_{rng.randrange(50)}"
        cls = f"{_word(rng)}.tests.{_word(rng).title()}Tests"
        name = f"{method} ({cls}.{method})" if rng.random() < 0.3 else f"{method} ({cls})"
        result = rng.choice(("ok", "ok", "FAIL", "ERROR", "skipped 'Database has feature(s) x'",
                             "expected failure", "unexpected success"))
        status = {"ok": "PASSED", "FAIL": "FAILED", "ERROR": "ERROR"}.get(result.split()[0], result)
        form = rng.random()
        if form < 0.15:  # a docstring: the dataset names the test by its first line
            doc = rng.choice(("Nested deconstruction is handled.", "A test - with dashes ... really",
                              "Ünïcode docstring (x.y)", "--version is equivalent to version"))
            out += [name, f"{doc} ... {result}"]
            name = doc
        elif form < 0.25 and result == "ok":  # output printed between "..." and "ok"
            printed = rng.choice(("Some output", "System check identified no issues (0 silenced).",
                                  "Internal Server Error: /x/"))
            out += [f"{name} ... {printed}", rng.choice(("ok", "more output\nok"))]
        elif form < 0.28:
            out.append(f"Applying sites.0002_alter_domain_unique...{name} ... {result}")
        else:
            out.append(f"{name} ... {result}")
        if rng.random() < 0.05:
            out.append(_noise(rng))
        tests.append((name, status))
        if result in ("FAIL", "ERROR"):
            failed.append((result, name))
    for result, name in failed:
        suffix = " [<object object at 0x7f>] (i=1)" if rng.random() < 0.2 else ""
        out += ["", "=" * 70, f"{result}: {name}{suffix}", "-" * 70, "Traceback (most recent call last):",
                '  File "/testbed/tests/x/tests.py", line 99, in test_x', "AssertionError: 1 != 2 ... FAIL"]
    out += ["", "-" * 70, f"Ran {len(tests)} tests in 0.212s", "",
            "FAILED (failures=1)" if failed else "OK (skipped=1)"]
    return out, tests


def _sympy_body(rng: random.Random) -> tuple[list[str], list[tuple[str, str]]]:
    """``bin/test -C --verbose``: per-file blocks of ``test_x ok|F|E|f|s|X`` and the failure headers."""
    out = ["============================= test process starts ==============================",
           "executable:         /opt/miniconda3/envs/testbed/bin/python  (3.9.20-final-0) [CPython]",
           "random seed:        83052126", ""]
    tests: list[tuple[str, str]] = []
    bad: list[str] = []
    for _ in range(rng.randint(0, 3)):
        path = f"sympy/{_word(rng)}/tests/test_{_word(rng)}.py"
        block = [(f"test_{_word(rng)}_{rng.randrange(50)}", rng.choice(("ok", "ok", "F", "E", "f", "s", "X", "w")))
                 for _ in range(rng.randint(1, 5))]
        out.append(f"{path}[{len(block)}] ")
        for i, (test, code) in enumerate(block):
            line = f"{test} {code}"
            if i == len(block) - 1:
                line += " " * rng.randint(1, 40) + ("[OK]" if all(c in "ok s f w" for _, c in block) else "[FAIL]")
            out.append(line)
            tests.append((test, {"ok": "PASSED", "F": "FAILED", "E": "ERROR"}.get(code, code)))
            if code in ("F", "E"):
                bad.append(f"{path}:{test}")
        out.append("")
    for name in bad:
        out += ["_" * 80, f"{'_' * rng.randint(1, 12)} {name} {'_' * rng.randint(1, 20)}",
                "Traceback (most recent call last):", '  File "/testbed/sympy/x.py", line 12, in test_x',
                "AssertionError"]
    out += [f"=========== tests finished: {len(tests)} passed, in 0.51 seconds ===========", "DO *NOT* COMMIT!"]
    return out, tests


def _cut(rng: random.Random, text: str) -> str:
    """The text cut at a random character (a killed run, a capped log)."""
    return text[:rng.randrange(len(text) + 1)]


def generate(framework: str, rng: random.Random) -> GeneratedLog:
    """One random eval-script log for ``framework``."""
    if framework == "django":
        body, tests = _django_body(rng)
    elif framework == "sympy":
        body, tests = _sympy_body(rng)
    else:
        statuses = PYTEST_STATUSES if framework != "seaborn" or rng.random() < 0.5 else ("PASSED", "FAILED")
        tests = _tests(rng, framework, statuses)
        body = _pytest_body(rng, framework, tests)
    output = "\n".join(body)
    if rng.random() < 0.15:
        output = _cut(rng, output)
    before = ["+ git checkout abc123 tests/test_x.py", "Updated 1 path from abc123",
              "Checking patch tests/test_x.py...", "Applied patch tests/test_x.py cleanly."]
    after: list[str] = []
    placement = rng.random()
    if placement < 0.1:  # results written to another stream: the section stays empty
        after.append(output)
        output = ""
    elif placement < 0.2 and body:  # a stray result line outside the markers
        (before if rng.random() < 0.5 else after).append(rng.choice(body))
    section = [START_TEST_OUTPUT, output]
    if rng.random() < 0.03:
        section.insert(1, START_TEST_OUTPUT)
    lines = [*before, *section, END_TEST_OUTPUT, *after]
    if rng.random() < 0.8:
        lines.append(f"{TEST_EXIT_CODE}: {rng.choice((0, 0, 1, 1, 2, 4, 124))}")
    if rng.random() < 0.05:
        lines.insert(rng.randrange(len(lines) + 1), rng.choice((APPLY_PATCH_FAIL, RESET_FAILED, TESTS_ERROR,
                                                                TESTS_TIMEOUT)))
    text = "\n".join(lines) + "\n"
    if rng.random() < 0.05:
        text = _cut(rng, text)
    return GeneratedLog(framework, text, tests)


@functools.cache
def generate_many(framework: str, count: int, seed: int) -> tuple[GeneratedLog, ...]:
    """``count`` logs for ``framework``, the same for the same seed."""
    rng = random.Random(f"{framework}-{seed}")
    return tuple(generate(framework, rng) for _ in range(count))

