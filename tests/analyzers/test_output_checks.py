"""empty_output, truncated and mixed_language on attempts that should and should not trigger them."""
# ruff: noqa: RUF001  (the texts mix scripts on purpose)

from __future__ import annotations

from typing import get_args

import pytest

from agentcompass._errors import ConfigError
from agentcompass.analyzers.output_checks import SCRIPTS, EmptyOutput, MixedLanguage, Script, Truncation
from agentcompass.records import AttemptRecord, Step, Trajectory

from .trajectories import CTX, messages, shell, task


def empty(attempt: AttemptRecord) -> dict | None:
    return EmptyOutput({}, CTX).analyze(task(), attempt)


def test_an_empty_last_message_is_flagged_and_reasoning_only_is_noted() -> None:
    found = empty(messages("Working on it.", "", reasoning="The answer is probably 4 but"))
    assert found is not None and found["step"] == 1 and found["reasoning_only"] is True
    assert found["final_answer_empty"] is True and found["empty_steps"] == 1


def test_a_completed_attempt_with_no_steps_and_no_answer_is_flagged() -> None:
    assert empty(AttemptRecord(status="completed")) is not None


def test_real_output_is_not_empty() -> None:
    assert empty(shell("touch out.txt")) is None  # ends with an empty <submit></submit>: content, not empty
    assert empty(messages("42")) is None
    assert empty(AttemptRecord(status="completed", artifacts={"patch": "diff --git a/x b/x"})) is None


def test_attempts_that_failed_before_the_model_spoke_or_were_skipped_are_not_empty() -> None:
    assert empty(AttemptRecord(status="run_error", error_kind="env_open_failed")) is None
    assert empty(AttemptRecord(status="skipped")) is None


def truncated(attempt: AttemptRecord, **params: object) -> dict | None:
    return Truncation(dict(params), CTX).analyze(task(), attempt)


def test_a_final_reply_cut_at_the_token_limit_is_flagged_as_the_last_step() -> None:
    found = truncated(messages("Step one.", "The answer is", finish="length"))
    assert found == {"steps": [0, 1], "count": 2, "last_step": True}


def test_a_truncated_middle_step_is_flagged_but_not_as_last() -> None:
    steps = [Step(index=0, content="a" * 50, finish_reason="max_tokens"), Step(index=1, content="done",
                                                                                finish_reason="end_turn")]
    found = truncated(AttemptRecord(status="completed", trajectory=Trajectory(steps=steps)))
    assert found == {"steps": [0], "count": 1, "last_step": False}


def test_normal_stops_are_not_truncation_and_the_reasons_are_configurable() -> None:
    assert truncated(messages("done")) is None
    assert truncated(messages("done", finish="stop"), finish_reasons=["stop"]) is not None


def mixed(attempt: AttemptRecord, prompt: str = "Explain the result.", **params: object) -> dict | None:
    return MixedLanguage(dict(params), CTX).analyze(task(prompt=prompt), attempt)


def test_an_english_answer_with_a_chinese_run_is_flagged() -> None:
    found = mixed(messages("The total is 42 因为我们计算了所有的数字 and that is the final answer here."))
    assert found is not None and found["scripts"] == ["cjk"]
    hit = found["messages"][0]
    assert hit["dominant"] == "latin" and hit["other"] == "cjk" and "因为" in hit["sample"]


def test_an_english_answer_with_a_cyrillic_phrase_is_flagged() -> None:
    found = mixed(messages("The function returns the sum, это значит that we are done with the loop."))
    assert found is not None and found["scripts"] == ["cyrillic"]


def test_a_chinese_answer_with_a_long_english_sentence_is_flagged_but_terms_are_not() -> None:
    prompt = "统计文件中出现最多的三个单词。"
    terms = "我们使用 Python 的 list 和 dict 来存储结果，然后用 sorted 函数排序，最后输出答案。"
    assert mixed(messages(terms), prompt=prompt) is None
    sentence = ("我们先读取整个文件的内容，然后按空格分词。Then we count every word in the file and print the top "
                "three results. 最后把结果写入输出文件并检查格式是否正确。")
    found = mixed(messages(sentence), prompt=prompt)
    assert found is not None and found["messages"][0]["dominant"] == "cjk" and found["scripts"] == ["latin"]
    assert mixed(messages(sentence)) is None  # the task is in English: English runs are not out of place


def test_code_math_symbols_and_scripts_of_the_task_itself_are_not_flagged() -> None:
    code = "Here is the fix for the parser module:\n```python\n# 计算总和\ntotal = sum(xs)\n```\nIt now sums."
    assert mixed(messages(code)) is None
    assert mixed(messages("The angle α plus β equals π over two, so the triangle is right-angled.")) is None
    quoting = "The file says 你好世界 which means hello world in the greeting line."
    assert mixed(messages(quoting), prompt="Translate 你好世界 to English.") is None
    assert mixed(messages(quoting), allowed_scripts=["cjk"]) is None


def test_reasoning_is_only_checked_when_asked() -> None:
    attempt = messages("The answer is four, computed from the list.",
                       reasoning="Let me think about it, 让我想一想这个问题, and then compute the answer.")
    assert mixed(attempt) is None
    assert mixed(attempt, reasoning=True) is not None


def test_unknown_scripts_are_config_errors_listing_the_scripts() -> None:
    with pytest.raises(ConfigError, match="must be one of latin, cjk, cyrillic") as info:
        MixedLanguage({"allowed_scripts": ["klingon"]}, CTX)
    assert info.value.field == "analyzer.params.allowed_scripts" and "'klingon'" in str(info.value)


def test_the_script_param_names_every_known_script_and_a_single_one_is_a_list() -> None:
    assert get_args(Script) == tuple(SCRIPTS)
    assert MixedLanguage({"allowed_scripts": "cjk"}, CTX).allowed == {"cjk"}
    with pytest.raises(ConfigError, match="must be true or false, got 'yes'") as info:
        MixedLanguage({"reasoning": "yes"}, CTX)
    assert info.value.field == "analyzer.params.reasoning"


def test_a_single_finish_reason_is_a_one_item_list() -> None:
    assert Truncation({"finish_reasons": "stop"}, CTX).reasons == {"stop"}
    assert Truncation({}, CTX).reasons == {"length", "max_tokens", "max_output_tokens"}
