"""Seeded generator of realistic test logs for every SWE-bench Multilingual parser framework.

Each log is what the framework prints, with random variation: names with spaces, brackets, slashes, dots,
dashes and unicode; ANSI colours; CRLF line ends; noise from other frameworks; small corruptions of
result lines (the parsers' edge cases); and truncation.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from xml.sax.saxutils import quoteattr

Gen = Callable[[random.Random], list[str]]

_WORDS = ["parse", "render", "works", "handles", "empty", "input", "config", "merge", "list", "map", "value",
          "nested", "unicode é", "日本語", "ünïcödé", "a b", "x[1]", "(paren)", "[bracket]", "with/slash", "dot.ted",
          "dash-ed", "under_score", "colon:", "q?", "'quote'", '"dq"', "=eq", "…", "emoji 🚀", "tab\tbed", "",
          " - ", " > ", "✓", "PASS", "ok", "1)", "ms", "(12ms)", "(3 ms)"]
_MARKS = ["", "", "", " ", "  ", "\t", "\x1b[32m", "\x1b[0m", "\x1b[1m\x1b[31m", "(", ")", "[", "]", ".", "..",
          "-", "=", ":", ">", "/", "✓", "✕", "\u00d7", "✔", "✖", "○", "↓", "↩", "✘", "é", "\u00a0", "\r", " (5 ms)",
          " (12ms)", " 3ms", "ok", "FAILED", "PASSED", "#", "§", "<", ">", "&", '"', "{", "}", "]\n", "\n  "]


def words(rng: random.Random, lo: int = 1, hi: int = 4) -> str:
    """A random test-name-like phrase."""
    return " ".join(rng.choice(_WORDS[:-12] if rng.random() < 0.8 else _WORDS) for _ in range(rng.randint(lo, hi)))


def ident(rng: random.Random) -> str:
    """A random identifier (no spaces)."""
    base = rng.choice(["Foo", "Bar", "Parser", "Config", "Écrire", "X", "test", "Sphere", "List", "Über"])
    return base + "".join(rng.choice("abcxyz_019") for _ in range(rng.randint(0, 6)))


def ms(rng: random.Random) -> str:
    return str(rng.choice([0, 1, 5, 12, 123, 1500]))


def colour(rng: random.Random, text: str) -> str:
    if rng.random() < 0.25:
        return f"\x1b[{rng.choice(['32', '31', '33', '1', '2', '90'])}m{text}\x1b[0m"
    return text


# --- Go --------------------------------------------------------------------------------------------------------

def _gotest(rng: random.Random) -> list[str]:
    out: list[str] = []
    for _ in range(rng.randint(1, 6)):
        pkg = f"github.com/{ident(rng)}/{ident(rng)}/{rng.choice(['', 'internal/', 'cmd/'])}{ident(rng)}"
        failed = False
        for _ in range(rng.randint(0, 5)):
            test = "Test" + ident(rng)
            out.append(f"=== RUN   {test}")
            subs = [f"{test}/{words(rng).replace(' ', rng.choice(['_', ' ']))}" for _ in range(rng.randint(0, 3))]
            for sub in subs:
                out.append(f"=== RUN   {sub}")
                if rng.random() < 0.3:
                    out.append(f"    {ident(rng)}_test.go:{rng.randint(1, 400)}: {words(rng)}")
            status = rng.choice(["PASS", "PASS", "FAIL", "SKIP"])
            failed |= status == "FAIL"
            out.append(f"--- {status}: {test} ({rng.choice(['0.00s', '0.01s', '1.23s', '12.5s'])})")
            for sub in subs:
                out.append(f"    --- {rng.choice(['PASS', 'FAIL', 'SKIP'])}: {sub} (0.00s)")
            if rng.random() < 0.1:
                out += [f"panic: {words(rng)} [recovered]", "goroutine 7 [running]:",
                        f"testing.tRunner.func1.2({{0x{rng.randint(1, 10**6):x}}})"]
        out.append("FAIL" if failed else "PASS")
        out.append(f"{'FAIL' if failed else 'ok  '}\t{pkg}\t{rng.choice(['0.012s', '1.5s', '(cached)'])}")
        if rng.random() < 0.2:
            out.append(f"?   \t{pkg}/x\t[no test files]")
    return out


# --- Rust ------------------------------------------------------------------------------------------------------

def _cargo(rng: random.Random) -> list[str]:
    out = [f"   Compiling {ident(rng)} v0.1.0 (/testbed)", "    Finished test [unoptimized + debuginfo] target(s)"]
    for _ in range(rng.randint(1, 4)):
        out.append(f"     Running tests/{ident(rng)}.rs (target/debug/deps/{ident(rng)}-{rng.randint(0, 10**8):x})")
        n = rng.randint(0, 8)
        out.append(f"running {n} tests")
        for _ in range(n):
            name = "::".join(ident(rng) for _ in range(rng.randint(1, 3)))
            if rng.random() < 0.15:
                name = f"src/{ident(rng)}.rs - {ident(rng)} (line {rng.randint(1, 99)})"
            if rng.random() < 0.1:
                name += " - should panic"
            out.append(f"test {name} ... {rng.choice(['ok', 'ok', 'FAILED', 'ignored', 'ignored, slow'])}")
        out.append(f"test result: {rng.choice(['ok', 'FAILED'])}. 3 passed; 1 failed; 0 ignored; 0 measured; "
                   f"0 filtered out; finished in 0.0{rng.randint(0, 9)}s")
        if rng.random() < 0.3:
            out += ["failures:", f"---- {ident(rng)} stdout ----",
                    f"thread '{ident(rng)}' panicked at src/lib.rs:1:1:", words(rng)]
    return out


# --- Java ------------------------------------------------------------------------------------------------------

def _maven(rng: random.Random) -> list[str]:
    out = ["[INFO] Scanning for projects..."] if rng.random() < 0.5 else []
    # traced commands and maven's output may interleave: several commands before their results, a result first
    raced = rng.random() < 0.3
    if raced and rng.random() < 0.3:
        out.append(f"[INFO] BUILD {rng.choice(['SUCCESS', 'FAILURE'])}")
    results: list[str] = []
    for _ in range(rng.randint(1, 5)):
        cls = f"com.google.gson.{ident(rng)}Test"
        test = cls + (f"#{ident(rng)}" if rng.random() < 0.7 else "")
        out.append(f"+ mvn test -B -Dsurefire.useFile=false -Dtest={test} -DfailIfNoTests=false"
                   + rng.choice(["", " -pl gson", " -Dmaven.javadoc.skip"]))
        result = ["[INFO] -------------------------------------------------------",
                  "[INFO]  T E S T S", f"[INFO] Running {cls}",
                  f"[INFO] Tests run: {rng.randint(0, 9)}, Failures: {rng.randint(0, 2)}, Errors: 0, Skipped: 0",
                  f"[INFO] BUILD {rng.choice(['SUCCESS', 'SUCCESS', 'FAILURE'])}"]
        if rng.random() < 0.3:
            result.append("[ERROR] Failed to execute goal org.apache.maven.plugins:maven-surefire-plugin: "
                          + words(rng))
        if raced and rng.random() < 0.6:
            results += result
        else:
            out += result
    return out + results


def _ant(rng: random.Random) -> list[str]:
    out = ["Buildfile: /testbed/build.xml", "test:"]
    for _ in range(rng.randint(1, 8)):
        status = rng.choice(["PASS", "PASS", "FAIL", "ERR", "SKIP"])
        out.append(f"    [junit] [{status}] {rng.choice([ident(rng), words(rng)])}"
                   f"{rng.choice(['', '(lombok.transform.TestWithDelombok)'])}")
        if rng.random() < 0.2:
            out.append(f"    [junit] Tests run: 3, Failures: 1, Errors: 0, Time elapsed: 0.{rng.randint(0, 9)} sec")
    out.append(rng.choice(["BUILD SUCCESSFUL", "BUILD FAILED"]))
    return out


def _gradle_custom(rng: random.Random) -> list[str]:
    out = ["> Task :compileJava UP-TO-DATE", "> Task :test"]
    for _ in range(rng.randint(1, 8)):
        name = f"io.reactivex.rxjava3.{ident(rng)}Test > {ident(rng)}{rng.choice(['()', '', '[1]', ' ' + words(rng)])}"
        outcome = rng.choice(['PASSED', 'PASSED', 'FAILED', 'SKIPPED'])
        if rng.random() < 0.2:  # interleaved output: the outcome on a line of its own, after other lines
            out += [name, *rng.sample(["    WARNING: x", "", "> Task :test"], rng.randint(0, 2)), outcome]
            continue
        out.append(f"{name}{rng.choice([' ', '  ', chr(9)])}{outcome}")
        if rng.random() < 0.2:
            out += ["    java.lang.AssertionError: expected:<1> but was:<2>", "        at org.junit.Assert.fail"]
    out.append(rng.choice(["BUILD SUCCESSFUL in 12s", "BUILD FAILED in 3s", "> Task :test FAILED"]))
    return out


# --- C / C++ ---------------------------------------------------------------------------------------------------

def _redis(rng: random.Random) -> list[str]:
    out = ["Cleanup: may take some time... OK", "Starting test server at port 21079",
           f"[ready]: {rng.randint(1000, 9999)}", "Testing unit/type/list"]
    for _ in range(rng.randint(1, 8)):
        status = rng.choice(["ok", "ok", "err", "skip", "ignore", "exception"])
        name = words(rng, 1, 5)
        if status == "err" and rng.random() < 0.7:
            name += f" in tests/unit/{ident(rng)}.tcl"
        dur = rng.choice(["", f" ({ms(rng)} ms)", f" ({ms(rng)}ms)", " (1 s)"])
        out.append(f"[{status}]: {name}{dur}")
        if status == "err" and rng.random() < 0.5:
            out.append(f"Expected '{words(rng)}' to equal or match '{words(rng)}'")
    out.append(rng.choice(["\\o/ All tests passed without errors!", "[1/1 done]: unit/type/list (2 seconds)"]))
    return out


def _jq(rng: random.Random) -> list[str]:
    out = ["make  check-TESTS"]
    for _ in range(rng.randint(1, 6)):
        out.append(f"{rng.choice(['PASS', 'PASS', 'FAIL', 'SKIP', 'XFAIL', 'ERROR'])}: "
                   f"tests/{rng.choice(['jqtest', 'shtest', 'onigtest', 'base64test', words(rng)])}")
    out += ["=" * 60, "Testsuite summary for jq 1.7.1", "# TOTAL: 5", "# PASS:  4", "# FAIL:  1"]
    if rng.random() < 0.3:
        out.append(f"*** Expected {words(rng)}, but got {words(rng)} for test at line number {rng.randint(1, 900)}")
    return out


def _micropython_test(rng: random.Random) -> list[str]:
    out = ["platform=linux arch=x64"]
    for _ in range(rng.randint(1, 8)):
        out.append(f"{rng.choice(['pass', 'pass', 'FAIL', 'skip', 'lrun'])}{rng.choice([' ', '  '])}"
                   f"{rng.choice(['basics', 'extmod', 'micropython', 'float'])}/{ident(rng)}.py")
    out += [f"{rng.randint(1, 900)} tests performed ({rng.randint(1, 9000)} individual testcases)",
            f"{rng.randint(1, 900)} tests passed", "1 tests failed: basics/x.py"]
    return out


def _googletest(rng: random.Random) -> list[str]:
    out = ["Running main() from gtest_main.cc", "[==========] Running 5 tests from 2 test suites.",
           "[----------] Global test environment set-up."]
    failed: list[str] = []
    for _ in range(rng.randint(1, 3)):
        suite = ident(rng) + rng.choice(["Test", "/0", "/ParamTest"])
        out.append(f"[----------] 3 tests from {suite}")
        for _ in range(rng.randint(1, 4)):
            name = f"{suite}.{ident(rng)}{rng.choice(['', '/0', '/1'])}"
            out.append(f"[ RUN      ] {name}")
            if rng.random() < 0.3:
                out += [f"/testbed/test/{ident(rng)}-test.cc:{rng.randint(1, 999)}: Failure",
                        f"Expected equality of these values: {words(rng)}"]
                res = f"[  FAILED  ] {name}"
                failed.append(name)
            else:
                res = f"[       OK ] {name}"
            out.append(res + rng.choice([f" ({ms(rng)} ms)", ", where GetParam() = 4 (0 ms)", ""]))
        out.append(f"[----------] 3 tests from {suite} ({ms(rng)} ms total)")
    out += ["[==========] 5 tests from 2 test suites ran. (3 ms total)", "[  PASSED  ] 4 tests."]
    if failed:
        out.append(f"[  FAILED  ] {len(failed)} test, listed below:")
        out += [f"[  FAILED  ] {n}" for n in failed]
    return out


def _doctest(rng: random.Random) -> list[str]:
    out = ["[doctest] doctest version is \"2.4.11\"", '<?xml version="1.0" encoding="UTF-8"?>',
           f'<doctest binary="/testbed/build/tests/test-{ident(rng)}" version="2.4.11">',
           '  <Options order_by="file" rand_seed="0" first="0" last="4294967295" abort_after="0"/>',
           '  <TestSuite>']

    def subcase(depth: int) -> list[str]:
        lines = [f"      <SubCase name={quoteattr(words(rng))} filename=\"tests/src/unit.cpp\" line=\"12\">"]
        for _ in range(rng.randint(0, 3)):
            ok = rng.choice(["true", "true", "false", "maybe"])
            lines += [f'        <Expression success="{ok}" type="CHECK" filename="unit.cpp" line="3">',
                      f"          <Original>{quoteattr(words(rng))[1:-1]}</Original>", "        </Expression>"]
        if depth < 2 and rng.random() < 0.3:
            lines += subcase(depth + 1)
        lines.append("      </SubCase>")
        return lines

    for _ in range(rng.randint(1, 4)):
        out.append(f"    <TestCase name={quoteattr(words(rng))} filename=\"tests/src/unit-{ident(rng)}.cpp\""
                   ' line="7">')
        for _ in range(rng.randint(0, 3)):
            out += subcase(0)
        out += ['      <OverallResultsAsserts successes="3" failures="0" test_case_success="true"/>', "    </TestCase>"]
    out += ["  </TestSuite>", '  <OverallResultsAsserts successes="9" failures="1"/>',
            '  <OverallResultsTestCases successes="2" failures="1"/>', "</doctest>"]
    if rng.random() < 0.05:
        out.insert(rng.randint(3, len(out) - 1), "<unclosed>")
    return out


# --- PHP -------------------------------------------------------------------------------------------------------

def _phpunit(rng: random.Random) -> list[str]:
    out = ["PHPUnit 10.5.9 by Sebastian Bergmann and contributors.", "", "Runtime:       PHP 8.3.2",
           "Configuration: /testbed/phpunit.xml.dist", ""]
    if rng.random() < 0.5:
        out += [".F.S.                                                               5 / 5 (100%)", ""]
    for _ in range(rng.randint(1, 4)):
        cls = rng.choice(["Illuminate\\Tests\\Database\\", "PhpOffice\\PhpSpreadsheet\\Tests\\", "Carbon\\Tests\\"])
        out.append(f"{words(rng).strip() or 'Suite'} ({cls}{ident(rng)}Test)")
        for _ in range(rng.randint(1, 5)):
            mark = rng.choice(["✔", "✔", "✘", "↩", "∅", "☢"])
            data = rng.choice(["", " with data set #0", ' with data set "a b"'])
            out.append(f" {mark} {words(rng)}{data}")
            if mark == "✘":
                out += ["   │", f"   │ Failed asserting that {words(rng)} is true.", "   │",
                        f"   │ /testbed/tests/{ident(rng)}Test.php:{rng.randint(1, 500)}", "   │"]
        out.append("")
    out += ["Time: 00:00.123, Memory: 24.00 MB", "", rng.choice(["OK (5 tests, 9 assertions)",
                                                                "FAILURES!", "Tests: 5, Assertions: 9, Failures: 1."])]
    return out


# --- Ruby ------------------------------------------------------------------------------------------------------

def _minitest(rng: random.Random) -> list[str]:
    out = [f"Run options: -v -n \"/{words(rng)}/\" --seed {rng.randint(1, 65535)}", "", "# Running:", ""]
    for _ in range(rng.randint(1, 8)):
        # shoulda-context names end in ". " ("test_: context should work. "), as jekyll's do
        name = f"{ident(rng)}#test_{rng.choice([': ', ': ', '_'])}{words(rng)}{rng.choice(['. ', '. ', '.', ''])}"
        out.append(f"{name} = {rng.choice(['0.00', '0.12', '1.50'])} s = {rng.choice(['.', '.', 'F', 'E', 'S'])}")
    out += ["", f"Finished in 0.{rng.randint(0, 99999)}s, 12.3 runs/s, 45.6 assertions/s.", "",
            "3 runs, 5 assertions, 0 failures, 0 errors, 0 skips"]
    return out


def _cucumber(rng: random.Random) -> list[str]:
    out = ["Using the default profile..."]
    for _ in range(rng.randint(1, 6)):
        kind = rng.random()
        if kind < 0.5:
            out.append(f"{rng.choice(['Scenario: ', 'Feature: ', ''])}{words(rng)} "
                       f"{'.' * rng.randint(1, 8)}{rng.choice(['.', 'F', '-', 'U', ''])}")
        else:
            out.append("".join(rng.choice("..F-U") for _ in range(rng.randint(1, 30))))
    n = rng.randint(1, 5)
    out += ["", f"{n} scenario{'s' if n > 1 else ''} ({n} passed)", f"{n * 3} steps ({n * 3} passed)", "0m1.234s"]
    return out


def _ruby_unit(rng: random.Random) -> list[str]:
    out = [f"Loaded suite test/{ident(rng)}", "Started"]
    for _ in range(rng.randint(1, 3)):
        out.append(f"{ident(rng)}Test: ")
        for _ in range(rng.randint(1, 5)):
            name = rng.choice([f"test: {words(rng)}", f"test_{ident(rng)}", f"{words(rng)}"])
            res = rng.choice([".", ".", "F", "E", "O", "P", "Failure", "E!"])
            gap = rng.choice(["\t\t\t", " ", "  "])
            out.append(f"  {name}:{gap}{res}{rng.choice(['', ': (0.001234s)'])}")
    out += ["", f"Finished in 0.{rng.randint(1, 9999)} seconds.", "-" * 60,
            "5 tests, 9 assertions, 1 failures, 0 errors, 0 pendings, 1 omissions, 0 notifications"]
    return out


def _rspec_transformed_json(rng: random.Random) -> list[str]:
    out: list[str] = []
    for _ in range(rng.randint(1, 10)):
        desc = words(rng, 1, 6)
        mid = rng.choice(["", f" - ./spec/{ident(rng)}_spec.rb[1:{rng.randint(1, 9)}]"])
        out.append(f"{desc}{mid} - {rng.choice(['passed', 'passed', 'failed', 'pending'])}")
    return out


# --- JavaScript / TypeScript -----------------------------------------------------------------------------------

def _jest_describe(rng: random.Random, marks: tuple[str, str, str], timed: Callable[[random.Random], str]) -> list[str]:
    out: list[str] = []
    for _ in range(rng.randint(1, 3)):
        out.append(f"{rng.choice(['PASS', 'FAIL'])} {rng.choice(['packages/', 'src/', ''])}{ident(rng)}.test.js"
                   + rng.choice(["", f" ({rng.choice(['1.2', '12.05'])} s)", " (5.3s)", " (123ms)"]))
        depth = 1
        for _ in range(rng.randint(1, 8)):
            if rng.random() < 0.3:
                depth = rng.randint(1, 3)
                out.append("  " * depth + words(rng))
            mark = rng.choice(marks + marks[:1])
            out.append("  " * (depth + 1) + f"{mark} {words(rng)}{timed(rng)}")
    return out


def _jest_timed(rng: random.Random) -> str:
    return rng.choice(["", f" ({ms(rng)} ms)", f" ({ms(rng)}ms)", f" ({ms(rng)} s)"])


def _jest_timed_blank(rng: random.Random) -> str:
    """A duration, sometimes after two blanks (the title then ends in a blank, which 5.0.2 strips)."""
    return rng.choice(["", f"  ({ms(rng)} ms)", " "]) if rng.random() < 0.2 else _jest_timed(rng)


def _jest(rng: random.Random) -> list[str]:
    out = ["yarn run v1.22.19", f"$ jest {ident(rng)} --verbose"]
    out += _jest_describe(rng, ("✓", "✕", "○"), _jest_timed_blank)
    if rng.random() < 0.5:
        out += [f"  ● {words(rng)} \u203a {words(rng)}", "", "    expect(received).toBe(expected)", ""]
    out += ["Test Suites: 1 failed, 2 passed, 3 total", "Tests:       2 failed, 1 skipped, 10 passed, 13 total",
            "Snapshots:   0 total", "Time:        2.345 s", "Ran all test suites matching /x/i."]
    return out


def _jest_json(rng: random.Random) -> list[str]:
    out = [f"[{rng.choice(['PASSED', 'PASSED', 'FAILED', 'PENDING'])}] {words(rng)} {words(rng)}"
           for _ in range(rng.randint(1, 10))]
    if rng.random() < 0.3:
        out.insert(0, "Determining test suites to run...")
    return out


def _vitest(rng: random.Random) -> list[str]:
    out = [" RUN  v1.6.0 /testbed", ""]
    for _ in range(rng.randint(1, 3)):
        f = f"packages/{ident(rng)}/__tests__/{ident(rng)}.spec.ts"
        file_mark = rng.choice(["✓", "\u276f"])
        out.append(f" {file_mark} {f} ({rng.randint(1, 40)} tests | 1 skipped) {ms(rng)}ms")
        for _ in range(rng.randint(1, 6)):
            mark = rng.choice(["✓", "✓", "\u00d7", "↓"])
            suffix = rng.choice(["", f" {ms(rng)}ms", " [skipped]", f" {ms(rng)}", " 3s"])
            out.append(f"   {mark} {f} > {words(rng)} > {words(rng)}{suffix}")
    out += ["", " Test Files  1 failed | 2 passed (3)", "      Tests  1 failed | 30 passed | 1 skipped (32)",
            "   Duration  1.23s"]
    return out


def _karma(rng: random.Random) -> list[str]:
    out = ["START:", "12 04 2024 10:00:00.000:INFO [karma-server]: Karma v6.4.2 server started",
           "12 04 2024 10:00:00.100:INFO [launcher]: Starting browser ChromeHeadless"]
    if rng.random() < 0.1:
        out = out[:2]  # never started
    for _ in range(rng.randint(1, 3)):
        depth = rng.randint(1, 2)
        out.append("  " * depth + words(rng))
        for _ in range(rng.randint(1, 5)):
            if rng.random() < 0.3:
                depth = max(1, depth + rng.choice([-1, 1]))
                out.append("  " * depth + words(rng))
            out.append("  " * (depth + 1) + f"{rng.choice(['✔', '✔', '✖', '-'])} {words(rng)}")
    out += ["", "Finished in 1.2 secs / 0.9 secs @ 10:00:01 GMT+0000", "", "SUMMARY:", "✔ 10 tests completed",
            "✖ 1 test failed", "", "FAILED TESTS:", f"  {words(rng)}", f"    ✖ {words(rng)}"]
    return out


def _tap(rng: random.Random) -> list[str]:
    out = ["TAP version 13"]
    n = rng.randint(1, 10)
    for i in range(1, n + 1):
        status = rng.choice(["ok", "ok", "not ok"])
        name = rng.choice([f"{ident(rng)} > {words(rng)}", f"- {words(rng)}", words(rng)])
        out.append(f"{status} {i} {name}{rng.choice(['', ' # SKIP', ' # TODO later'])}")
        if status == "not ok":
            out += ["  ---", f"  message: {words(rng)}", "  severity: failed", "  ..."]
    out += [f"1..{n}", f"# pass  {n - 1}", "# skip  0", "# todo  0", "# fail  1"]
    return out


def _calypso(rng: random.Random) -> list[str]:
    out = ["+ cd /testbed"]
    for _ in range(rng.randint(1, 3)):
        out.append(f"+ ./node_modules/.bin/jest --verbose -c=test/client/jest.config.js client/{ident(rng)}")
        out.append(f"PASS client/{ident(rng)}/test/index.js")
        out += _jest_describe(rng, ("✓", "✕", "✓"), lambda r: r.choice(["", f" ({ms(r)}ms)", f" ({ms(r)} ms)"]))
        if rng.random() < 0.3:
            out += [f"  ● {words(rng)} \u203a {words(rng)}", "    TypeError: x is undefined"]
        out += ["Test Suites: 1 passed, 1 total", "Tests:       3 passed, 3 total"]
    return out


def _chart_js(rng: random.Random) -> list[str]:
    out = ["12 04 2024 10:00:00.000:INFO [launcher]: Starting browser ChromeHeadless"]
    for _ in range(rng.randint(1, 6)):
        browser = rng.choice(["Chrome 120.0.6099.109", "Chrome 120.0.6099.109", "Chrome Headless 120.0.6099.109",
                              "Firefox 121.0"])
        out.append(f"{browser} (Linux x86_64) {words(rng)} {words(rng)} {rng.choice(['FAILED', 'FAILED', ''])}")
        if rng.random() < 0.3:
            out.append(f"Chrome 120.0.6099.109 (Linux x86_64) {words(rng)} FAILED")
        if rng.random() < 0.5:
            out.append(f"\tExpected {words(rng)} to equal {words(rng)}.")
    out.append("Chrome 120.0.6099.109 (Linux x86_64): Executed 10 of 12 (1 FAILED) (skipped 2) (1.2 secs / 1 secs)")
    return out


def _marked(rng: random.Random) -> list[str]:
    out = ["Started", "".join(rng.choice("..F*") for _ in range(rng.randint(1, 40))), "", "Failures:"]
    for i in range(1, rng.randint(2, 5)):
        out += [f"{i}) {words(rng)} {words(rng)}", "  Message:", f"    Expected {words(rng)}", "  Stack:",
                "    at <Jasmine>"]
    out += ["", f"{rng.randint(1, 900)} specs, 1 failure", "Finished in 1.2 seconds"]
    return out


def _p5js(rng: random.Random) -> list[str]:
    out = ["", f"  {ident(rng)}", f"    ✓ {words(rng)}"]
    if rng.random() < 0.4:
        out += ["    {", '      "key": "value"', "    }", '[1, 2, 3]', '{"a": 1}']
    if rng.random() < 0.3:
        out += ["<div>", f"  <p>{words(rng)}</p>", "</div>"]
    out += ["", f"  {rng.randint(1, 900)} passing (2s)", f"  {rng.randint(1, 9)} failing", ""]
    for i in range(1, rng.randint(2, 5)):
        titles = [words(rng) for _ in range(rng.randint(1, 3))]
        lines = [f"  {i}) {titles[0]}"] + [" " * (5 + 2 * k) + t for k, t in enumerate(titles[1:])]
        lines[-1] += ":"
        out += [*lines, f"     AssertionError: {words(rng)}", "      at Context.<anonymous> (test/unit/x.js:1:2)", ""]
    return out


def _react_pdf(rng: random.Random) -> list[str]:
    out = ["$ jest --no-color"]
    for _ in range(rng.randint(1, 8)):
        out.append(f"{rng.choice(['PASS', 'FAIL', ' PASS ', 'PASS '])} "
                   f"{rng.choice(['tests/', 'packages/layout/tests/'])}{ident(rng)}.test.js"
                   + rng.choice(["", " (1.234 s)", " (5.3s)", " (123ms)", " (12.1 s) (3ms)"]))
        if rng.random() < 0.2:
            out += [f"  ● {words(rng)}", "    expect(received).toEqual(expected)"]
    out += ["Test Suites: 1 failed, 4 passed, 5 total", "Tests:       1 failed, 40 passed, 41 total"]
    return out


GENERATORS: dict[str, Gen] = {
    "gotest": _gotest, "cargo": _cargo, "maven": _maven, "ant": _ant, "gradle_custom": _gradle_custom,
    "redis": _redis, "jq": _jq, "doctest": _doctest, "micropython_test": _micropython_test,
    "googletest": _googletest, "phpunit": _phpunit, "minitest": _minitest, "cucumber": _cucumber,
    "ruby_unit": _ruby_unit, "rspec_transformed_json": _rspec_transformed_json, "calypso": _calypso,
    "chart_js": _chart_js, "marked": _marked, "p5js": _p5js, "react_pdf": _react_pdf, "jest": _jest,
    "jest_json": _jest_json, "vitest": _vitest, "karma": _karma, "tap": _tap,
}

# parsers that dispatch per instance: (format, instance id whose PR number selects it)
DISPATCHED: dict[str, list[tuple[str, str]]] = {
    "jekyll": [("minitest", "jekyll__jekyll-9141"), ("minitest", "jekyll__jekyll-8167"),
               ("cucumber", "jekyll__jekyll-8761"), ("cucumber", "jekyll__jekyll-8771")],
    "immutable_js": [("jest", "immutable-js__immutable-js-2006"), ("jest_json", "immutable-js__immutable-js-2005")],
}


def _corrupt(rng: random.Random, line: str) -> str:
    """A small random edit: insert, delete or replace one character or mark."""
    pos = rng.randint(0, len(line))
    op = rng.random()
    if op < 0.5:
        return line[:pos] + rng.choice(_MARKS) + line[pos:]
    if op < 0.75:
        return line[:pos] + line[pos + 1:]
    return line[:pos] + rng.choice(_MARKS) + line[pos + 1:]


# XML breaks at the first stray byte: doctest logs get less noise so that most of them still parse.
_NOISE = {"doctest": 0.15}


def generate(framework: str, rng: random.Random) -> str:
    """One random log of ``framework`` (a parser name of GENERATORS)."""
    lines = GENERATORS[framework](rng)
    others = [g for name, g in GENERATORS.items() if name != framework]
    noise = _NOISE.get(framework, 1.0)
    corrupt_rate = rng.choice([0.0, 0.0, 0.05, 0.2]) * noise
    out: list[str] = ["+ set -x" if rng.random() < 0.3 else "", ">>>>> Start Test Output"]
    for line in lines:
        if rng.random() < 0.04 * noise:
            out.append(rng.choice(rng.choice(others)(rng)))  # a stray line of another framework
        if rng.random() < corrupt_rate:
            line = _corrupt(rng, line)
        if rng.random() < 0.05 * noise:
            line = colour(rng, line)
        if rng.random() < 0.03:
            line = " " * rng.randint(1, 4) + line
        out.append(line)
    out.append(">>>>> End Test Output")
    text = "\n".join(out)
    if rng.random() < 0.08:
        text = text.replace("\n", "\r\n")
    if rng.random() < 0.1 * noise:
        text = "\x1b[1m" + text.replace(" ", " \x1b[0m", rng.randint(0, 3))
    if rng.random() < 0.15:
        text = text[: rng.randint(0, len(text))]  # truncated
    return text
