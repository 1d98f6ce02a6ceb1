"""repeated_tool_calls and repetitive_output: loops are flagged, ordinary work and text are not."""

from __future__ import annotations

import time

import pytest

from agentcompass._errors import ConfigError
from agentcompass.analyzers.repetition import RepeatedToolCalls, RepetitiveOutput, longest_tandem_repeat

from .trajectories import CTX, messages, shell, task, tool_call, tools


def repeated(attempt: object, **params: object) -> dict | None:
    return RepeatedToolCalls(dict(params), CTX).analyze(task(), attempt)  # type: ignore[arg-type]


def test_the_same_command_three_times_in_a_row_is_flagged() -> None:
    found = repeated(shell("ls", "cat a.py", "cat a.py", "cat  a.py"))  # whitespace does not make it new
    assert found is not None and found["max_consecutive"] == 3
    assert found["repeated"] == [{"action": "cat a.py", "max_consecutive": 3, "total": 3, "first_step": 1}]


def test_a_command_repeated_with_other_work_between_is_flagged_only_past_the_total() -> None:
    five = ["pytest -q", "sed -i 's/a/b/' x.py"] * 5
    assert repeated(shell(*five)) is None  # 5 of each, never twice in a row
    found = repeated(shell(*five, "pytest -q"))
    assert found is not None and found["max_total"] == 6 and found["max_consecutive"] == 1
    assert repeated(shell(*five), total=5) is not None


def test_varied_commands_are_not_flagged() -> None:
    assert repeated(shell("ls", "cat a.py", "ls", "python a.py", "ls")) is None
    assert repeated(shell("ls", "ls")) is None


def test_tool_calls_with_the_same_arguments_count_as_one_action() -> None:
    calls = [tool_call("read_file", path="a.py", limit=10), tool_call("read_file", limit=10, path="a.py"),
             tool_call("read_file", path="a.py", limit=10)]
    found = repeated(tools(*calls))
    assert found is not None and found["max_consecutive"] == 3
    other = [tool_call("read_file", path=f"{n}.py") for n in "abc"]
    assert repeated(tools(*other)) is None


def test_bad_thresholds_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="consecutive"):
        RepeatedToolCalls({"consecutive": 1}, CTX)


LOOP = "Let me check the configuration file again to be sure. " * 20
PROSE = ("The function reads the input file line by line, strips trailing whitespace, and counts the words "
         "in each line. Lines that start with a hash are comments and are skipped. At the end it prints the "
         "total, the longest line and the number of distinct words, sorted by frequency, so the output "
         "matches what the task asks for. I tested it on the sample data and the numbers agree.")


def repetitive(attempt: object, **params: object) -> dict | None:
    return RepetitiveOutput(dict(params), CTX).analyze(task(), attempt)  # type: ignore[arg-type]


def test_a_message_stuck_in_a_loop_is_flagged() -> None:
    found = repetitive(messages("I will fix it. " + LOOP))
    assert found is not None
    hit = found["messages"][0]
    assert hit["repeats"] == 20 and hit["field"] == "content" and "configuration file" in hit["block"]


def test_a_loop_in_the_reasoning_is_flagged_as_reasoning() -> None:
    found = repetitive(messages("42", reasoning="Hmm. " + "wait, let me recount the items. " * 15))
    assert found is not None and found["messages"][0]["field"] == "reasoning"


def test_ordinary_prose_code_and_rules_are_not_flagged() -> None:
    code = "\n".join(f"    total += values[{i}] * weights[{i}]" for i in range(40))
    table = "| a | b |\n|" + "---|" * 60 + "\n" + "=" * 400
    assert repetitive(messages(PROSE, code, table)) is None


def test_a_short_repeat_below_the_thresholds_is_not_flagged() -> None:
    assert repetitive(messages("yes " * 30)) is None  # 120 characters: under min_chars
    assert repetitive(messages("Let me check the configuration file again to be sure. " * 5 + PROSE)) is None


def test_tandem_repeat_reports_the_block_and_span() -> None:
    text = "intro " + "abc def ghi " * 10 + "outro"
    block, repeats, chars = longest_tandem_repeat(text, max_period=8, min_repeats=5)  # type: ignore[misc]
    assert repeats == 10 and set(block.split()) == {"abc", "def", "ghi"} and chars == len("abc def ghi " * 10) - 1


def test_a_long_message_is_checked_quickly() -> None:
    text = " ".join(f"word{i % 997} token{i % 991}" for i in range(40_000))  # 80k tokens, no loop
    started = time.monotonic()
    assert repetitive(messages(text)) is None
    assert time.monotonic() - started < 60  # hang guard against a quadratic scan
