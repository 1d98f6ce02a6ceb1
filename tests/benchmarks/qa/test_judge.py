"""The judge's graders: each benchmark's reply format parsed into a verdict, anything else refused (None: the
attempt becomes an eval_error, never a wrong answer)."""

from __future__ import annotations

import pytest

from agentcompass import ConfigError
from agentcompass.benchmarks.qa.judge import LetterGrader, RubricGrader, VerdictGrader, YesNoGrader, check_template


@pytest.mark.parametrize(("raw", "grade"), [
    ("A", "correct"), ("B", "incorrect"), ("C", "not_attempted"), (" B.", "incorrect"), ("**A**", "correct"),
    ("CORRECT", "correct"), ("NOT_ATTEMPTED", "not_attempted"), ("Incorrect, the year is wrong", "incorrect"),
    ("Grade: C", "not_attempted"), ("Answer: A", "correct"), ("Reasoning about it...\n\n**C**", "not_attempted"),
])
def test_letter_grades(raw: str, grade: str) -> None:
    verdict = LetterGrader().parse(raw)
    assert verdict is not None and verdict.grade == grade and verdict.score == (1.0 if grade == "correct" else 0.0)


@pytest.mark.parametrize("raw", ["", "D", "Both are plausible.", "Answer unclear", "maybe A", "a lot depends on it"])
def test_letter_garbage_has_no_verdict(raw: str) -> None:
    assert LetterGrader().parse(raw) is None


@pytest.mark.parametrize(("raw", "grade"), [
    ("extracted_final_answer: Ajax\nreasoning: same club\ncorrect: yes\nconfidence: 90", "correct"),
    ("extracted_final_answer: PSV\nreasoning: other club\ncorrect: no\nconfidence: 80", "incorrect"),
    ("extracted_final_answer: None\nreasoning: no answer given\ncorrect: no\nconfidence: 100", "not_attempted"),
    ("**extracted_final_answer:** 12\n**correct:** yes", "correct"),
])
def test_yes_no_grades(raw: str, grade: str) -> None:
    verdict = YesNoGrader().parse(raw)
    assert verdict is not None and verdict.grade == grade


def test_yes_no_without_a_correct_line_has_no_verdict() -> None:
    assert YesNoGrader().parse("extracted_final_answer: Ajax\nreasoning: looks right") is None
    assert YesNoGrader().parse("The answer is correct.") is None


def test_olympiad_verdict_takes_the_last_one() -> None:
    grader = VerdictGrader()
    v = grader.parse("If it were VERDICT: CORRECT we'd ... but the units differ.\nVERDICT: INCORRECT")
    assert v is not None and v.grade == "incorrect"
    assert grader.parse("The answer matches.") is None


@pytest.mark.parametrize(("raw", "points", "grade"), [
    ("item 1: 4\nitem 2: 3\nVERDICT: 7", 7.0, "correct"), ("VERDICT: 6.5", 6.5, "incorrect"),
    ("**VERDICT:** 10", 10.0, "correct"), ("VERDICT: 0", 0.0, "incorrect"),
])
def test_rubric_points(raw: str, points: float, grade: str) -> None:
    v = RubricGrader().parse(raw)
    assert v is not None and v.points == points and v.grade == grade and v.score == pytest.approx(points / 10)


@pytest.mark.parametrize("raw", ["VERDICT: 11", "VERDICT: -1", "seven points", "VERDICT: lots"])
def test_rubric_out_of_range_or_missing_has_no_verdict(raw: str) -> None:
    assert RubricGrader().parse(raw) is None


def test_the_prompt_keeps_braces_and_a_response_cannot_inject_the_reference() -> None:
    prompt = LetterGrader("Q={question} R={reference} A={response}").prompt("f(x) = {x}", "42", "{reference}",
                                                                          "ANSWER-1")
    assert prompt.startswith("Q=f(x) = {x} R=42 A=[") and prompt.endswith("\nBEGIN ANSWER-1\n{reference}\nEND ANSWER-1")
    assert "10 points" in RubricGrader().prompt("q", "r", "a")


def test_a_judge_prompt_must_have_every_placeholder() -> None:
    with pytest.raises(ConfigError, match="missing \\{reference\\}"):
        check_template("{question} {response}", "benchmark.params.judge_prompt")


@pytest.mark.parametrize(("raw", "grade"), [
    ("The predicted answer contradicts the gold target, so: B", "incorrect"), ("The grade is A", "correct"),
    ("After weighing both, my grade: B.", "incorrect"),
])
def test_letter_prose_is_read_leniently_as_simple_evals_does(raw: str, grade: str) -> None:
    grader = LetterGrader()
    assert grader.parse(raw) is None  # not by the strict reading
    verdict = grader.parse_lenient(raw)
    assert verdict is not None and verdict.grade == grade


def test_yes_no_lenient_reading_and_the_confidence() -> None:
    grader = YesNoGrader()
    raw = "The extracted answer is Ajax, so correct: yes (confidence: 85%)"
    assert grader.parse(raw) is None
    verdict = grader.parse_lenient(raw)
    assert verdict is not None and verdict.grade == "correct" and verdict.confidence == 85.0
    assert grader.parse_lenient("incorrect: no") is None  # "incorrect" is not the "correct" field


def test_calibration_error_is_hles_binned_rms() -> None:
    from agentcompass.benchmarks.qa.metrics import calibration_error

    assert calibration_error([(100.0, True)] * 10) == 0.0
    assert calibration_error([(100.0, False)] * 10) == pytest.approx(1.0)
    # two bins of 100: confidences 20 (all wrong) and 80 (all right): gaps 0.2 each
    pairs = [(20.0, False)] * 100 + [(80.0, True)] * 100
    assert calibration_error(pairs) == pytest.approx(0.2)
