"""The judge-graded QA family on the bundled offline set (``qa_local``): a scripted judge's verdicts counted as
correct / incorrect / not attempted, a judge without a usable verdict (garbage, no reply in time) ending the
attempt as ``eval_error`` with its raw reply kept, the deterministic match without a judge, the judge and the
agent over HTTP on each protocol with the web search tool, and bad params refused naming the field."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import msgspec
import pytest

import agentcompass
from agentcompass.benchmarks.qa.local import QALocal
from agentcompass.models.scripted.server import ScriptedServer
from agentcompass.records import AttemptRecord

from ...run_details import details_by_task
from ...standins.search_api import SearchStandIn


def _attempts(run_dir: str) -> dict[str, AttemptRecord]:
    return {tid: d.attempts["1"] for tid, d in details_by_task(run_dir).items()}


def _run(tmp_path: Path, agent: list[dict[str, Any]], judge: dict[str, Any] | None, ids: list[str],
         harness: str = "openai_chat", **params: Any) -> agentcompass.EvaluationResult:
    bench: dict[str, Any] = {"sample_ids": ids, **params}
    if judge is not None:
        bench["judge_model"] = judge
    return agentcompass.run_evaluation("qa_local", harness, "scripted", "local",
                                       model_params={"bundled": False, "script": agent},
                                       benchmark_params=bench, results_dir=str(tmp_path), progress="none")


def quoted(answer: str) -> str:
    """What the judge's prompt holds when ``answer`` is the whole answer: its quoted block's last lines (a
    scripted judge's ``match``)."""
    return f"\n{answer}\nEND ANSWER-"


AGENT = [
    {"match": "chemical symbol of the element gold", "turns": ["The symbol is Au."]},
    {"match": "capital city of Australia", "turns": ["Sydney"]},
    {"match": "Berlin Wall fall", "turns": ["I don't know."]},
    {"match": "Which of these is a noble gas", "turns": ["Argon is inert.\nAnswer: B"]},
    {"match": "Explain why the sky appears blue", "turns": [
        "Rayleigh scattering by air molecules, much stronger for short wavelengths."]},
]

# the judge's verdict depends on the answer it is shown (its prompt holds the agent's reply)
JUDGE_SCRIPT = [
    {"match": quoted("The symbol is Au."), "turns": ["A"]},
    {"match": quoted("Sydney"), "turns": ["B"]},
    {"match": quoted("I don't know."), "turns": ["C"]},
    {"match": "Answer: B", "turns": ["A"]},
    {"match": "Rayleigh scattering by air molecules, much stronger", "turns": [
        "Item 1: named, 4 points. Item 2: stated, 3 points. Item 3: sunset not explained, 0.\nVERDICT: 7"]},
]

IDS = ["qa-local-01", "qa-local-03", "qa-local-05", "qa-local-13", "qa-local-16"]


def test_offline_set_with_a_scripted_judge_counts_correct_incorrect_and_not_attempted(tmp_path: Path) -> None:
    judge = {"id": "scripted", "params": {"bundled": False, "fallback": "garbage", "script": JUDGE_SCRIPT}}
    out = _run(tmp_path, AGENT, judge, IDS)
    assert out.status == "completed", out.error
    got = _attempts(out.run_dir)
    assert {t: a.extra.get("grade") for t, a in got.items()} == {
        "qa-local-01": "correct", "qa-local-03": "incorrect", "qa-local-05": "not_attempted",
        "qa-local-13": "correct", "qa-local-16": "correct"}
    rubric = got["qa-local-16"]
    assert rubric.extra["points"] == 7.0 and rubric.score == pytest.approx(0.7) and rubric.correct
    scoring = got["qa-local-03"].extra["scoring"]
    assert scoring["method"] == "judge" and scoring["grader"] == "letter" and scoring["model"] == "scripted"
    assert quoted("Sydney") in scoring["prompt"] and "Gold target: Canberra" in scoring["prompt"]
    assert scoring["raw_verdict"] == "B" and scoring["usage"]["calls"] == 1 and "latency_s" in scoring
    m = out.metrics
    assert (m["correct"], m["incorrect"], m["not_attempted"], m["eval_errors"]) == (3, 1, 1, 0)
    assert m["accuracy"] == pytest.approx(3 / 5) and m["not_attempted_rate"] == pytest.approx(1 / 5)
    assert (m["graded"], m["ungraded"]) == (5, 0)
    assert m["correct_given_attempted"] == pytest.approx(3 / 4)
    assert m["f_score"] == pytest.approx(2 * 0.6 * 0.75 / (0.6 + 0.75))
    summary = msgspec.json.decode((Path(out.run_dir) / "summary.json").read_bytes())
    assert summary["dimension"] == "web_research"
    assert summary["by_category"]["geography"]["incorrect"] == 1


def test_a_judge_replying_garbage_ends_the_task_as_eval_error_with_its_raw_verdict(tmp_path: Path) -> None:
    judge = {"id": "scripted", "params": {"bundled": False, "script": [
        {"match": quoted("The symbol is Au."), "turns": ["A"]},
        {"match": quoted("Sydney"), "turns": ["Hmm, hard to say. Maybe? D.", "Still unsure: D."]},
        {"match": "Rayleigh scattering", "turns": ["VERDICT: 12"]}]}}  # over the rubric's 10 points
    out = _run(tmp_path, AGENT, judge, ["qa-local-01", "qa-local-03", "qa-local-16"])
    assert out.status == "completed", out.error
    got = _attempts(out.run_dir)
    assert got["qa-local-01"].status == "completed" and got["qa-local-01"].correct
    for tid, raws in (("qa-local-03", ["Hmm, hard to say. Maybe? D.", "Still unsure: D."]),
                      ("qa-local-16", ["VERDICT: 12", "VERDICT: 12"])):
        bad = got[tid]
        assert bad.status == "eval_error" and bad.error_kind == "judge_unparsable" and bad.correct is None
        assert "JudgeError" in (bad.error or "") and "usable verdict" in (bad.error or "")
        assert bad.extra["scoring"]["replies"] == raws  # asked once more with the format, then given up
        assert bad.extra["scoring"]["raw_verdict"] == raws[-1]
        assert "expected" in bad.extra["scoring"]["error"]
        assert bad.final_answer  # the agent's answer is kept too
    m = out.metrics
    assert (m["correct"], m["incorrect"], m["eval_errors"]) == (1, 0, 2)  # not counted as wrong answers
    # ...nor left out: accuracy is over every attempt asked for, as pass@1 is
    assert m["accuracy"] == pytest.approx(1 / 3) == m["pass@1"] and (m["graded"], m["ungraded"]) == (1, 2)
    assert m["accuracy_of_graded"] == 1.0 and m["f_score"] == pytest.approx(2 * (1 / 3) * 1 / (1 / 3 + 1))


def test_a_prose_verdict_is_read_leniently_and_an_unparsable_one_is_asked_again(tmp_path: Path) -> None:
    agent = [*AGENT[:2], {"match": "Berlin Wall fall", "turns": ["1989"]}]
    judge = {"id": "scripted", "params": {"bundled": False, "script": [
        {"match": quoted("The symbol is Au."), "turns": ["Let me think.", "A"]},  # re-asked
        {"match": quoted("Sydney"), "turns": ["The predicted answer contradicts the gold target, so: B"]},
        {"match": quoted("1989"), "turns": ["The grade is A"]}]}}
    out = _run(tmp_path, agent, judge, ["qa-local-01", "qa-local-03", "qa-local-05"])
    got = _attempts(out.run_dir)
    assert {t: (a.status, a.extra.get("grade")) for t, a in got.items()} == {
        "qa-local-01": ("completed", "correct"), "qa-local-03": ("completed", "incorrect"),
        "qa-local-05": ("completed", "correct")}
    assert got["qa-local-01"].extra["scoring"]["replies"] == ["Let me think.", "A"]
    assert got["qa-local-01"].extra["scoring"]["parse"] == "strict"
    assert got["qa-local-03"].extra["scoring"]["parse"] == "lenient"
    assert "replies" not in got["qa-local-03"].extra["scoring"]  # asked once


def test_a_judge_timeout_over_verify_timeout_is_clamped_and_keeps_the_record(tmp_path: Path) -> None:
    judge = {"id": "scripted", "params": {"bundled": False, "fallback": "A", "latency_s": 30}}
    out = _run(tmp_path, AGENT, judge, ["qa-local-01"], judge_timeout=180, verify_timeout=2)
    bad = _attempts(out.run_dir)["qa-local-01"]
    assert bad.status == "eval_error" and bad.error_kind == "judge_timeout"  # the judge's, not eval_timeout
    scoring = bad.extra["scoring"]
    assert scoring["raw_verdict"] is None and "verify_timeout" in scoring["error"]
    assert "The symbol is Au." in scoring["prompt"] and scoring["model"] == "scripted"
    assert b'"judge_timeout_clamped_to_verify_timeout": true' in (Path(out.run_dir) / "params.json").read_bytes()


def test_waiting_for_a_judge_slot_does_not_count_against_judge_timeout(tmp_path: Path) -> None:
    ids = [f"qa-local-{i:02d}" for i in range(1, 7)]
    with _server({"bundled": False, "fallback": "A"}, latency_s=0.6) as server:
        judge = {"id": "scripted", "base_url": server.base_url, "api_key": JUDGE_KEY, "max_concurrency": 1}
        out = agentcompass.run_evaluation(
            "qa_local", "openai_chat", "scripted", "local", model_params={"bundled": False, "fallback": "x"},
            benchmark_params={"sample_ids": ids, "judge_model": judge, "judge_timeout": 1.5},
            results_dir=str(tmp_path), progress="none", task_concurrency=6)
    got = _attempts(out.run_dir)
    assert {a.status for a in got.values()} == {"completed"}, {t: a.error for t, a in got.items()}
    assert max(a.extra["scoring"]["queue_s"] for a in got.values()) > 0  # some waited for the one slot


def test_a_judge_refusing_its_key_stops_later_tasks_before_the_agent_runs(tmp_path: Path) -> None:
    ids = [f"qa-local-{i:02d}" for i in range(1, 5)]
    with _server({"bundled": False, "fallback": "A"}, require_api_key="the-right-key") as server:
        judge = {"id": "scripted", "base_url": server.base_url, "api_key": "a-wrong-key"}
        out = agentcompass.run_evaluation(
            "qa_local", "openai_chat", "scripted", "local", model_params={"bundled": False, "fallback": "x"},
            benchmark_params={"sample_ids": ids, "judge_model": judge},
            results_dir=str(tmp_path), progress="none", task_concurrency=1)
        served = server.requests_served
    got = _attempts(out.run_dir)
    kinds = [got[i].error_kind for i in ids]
    assert kinds[0] == "judge_auth" and got[ids[0]].extra["scoring"]["error"].startswith("model_auth")
    assert kinds[1:] == ["prepare_error"] * 3 and all("refused its key" in (got[i].error or "") for i in ids[1:])
    assert all(got[i].final_answer is None for i in ids[1:])  # the agent never ran for them
    assert served == 1


def test_a_judge_that_does_not_answer_in_time_ends_the_task_as_eval_error(tmp_path: Path) -> None:
    judge = {"id": "scripted", "params": {"bundled": False, "fallback": "A", "latency_s": 60}}
    out = _run(tmp_path, AGENT, judge, ["qa-local-01"], judge_timeout=0.5)
    assert out.status == "failed" and "judge_timeout x1" in (out.error or "")  # its only attempt could not be graded
    bad = _attempts(out.run_dir)["qa-local-01"]
    assert bad.status == "eval_error" and bad.error_kind == "judge_timeout" and bad.correct is None
    assert "judge_timeout=0.5s" in (bad.error or "")
    scoring = bad.extra["scoring"]
    assert scoring["raw_verdict"] is None and "no reply within judge_timeout" in scoring["error"]
    assert "The symbol is Au." in scoring["prompt"]
    assert out.metrics["eval_errors"] == 1 and out.metrics["incorrect"] == 0


def test_without_a_judge_the_deterministic_match_grades(tmp_path: Path) -> None:
    agent = [*AGENT, {"match": "most of Earth's atmosphere", "turns": ["Answer: nitrogen."]},
             {"match": "Which organelle", "turns": ["Answer: B"]}]
    out = _run(tmp_path, agent, None, ["qa-local-01", "qa-local-03", "qa-local-12", "qa-local-13", "qa-local-14"])
    assert out.status == "completed", out.error
    got = _attempts(out.run_dir)
    # "The symbol is Au." is not the exact answer: the match is strict where a judge is lenient
    assert {t: a.correct for t, a in got.items()} == {
        "qa-local-01": False, "qa-local-03": False, "qa-local-12": True, "qa-local-13": True, "qa-local-14": False}
    assert all(a.extra["scoring"]["method"] == "match" for a in got.values())


@pytest.mark.parametrize(("params", "field"), [
    ({"grading": "judge"}, "judge_model"),
    ({"sample_ids": ["qa-local-16"]}, "judge_model"),  # a rubric item needs a judge
    ({"judge_model": {"id": "scripted"}, "judge_prompt": "Grade {response}"}, "judge_prompt"),
    ({"judge_model": {"id": "scripted", "bogus": 1}}, "judge_model"),
    ({"sample_ids": ["qa-local-99"]}, "sample_ids"),
    ({"tools": ["web_search"]}, "search"),
    ({"tools": ["telnet"]}, "tools"),
    # refused at construction, before any agent call (each was only found mid-run, or never)
    ({"judge_model": {"id": "scripted", "timeout_s": -5}}, "judge_model"),
    ({"judge_model": {"id": "scripted", "max_concurrency": -3}}, "judge_model"),
    ({"judge_model": {"id": ""}}, "judge_model"),
    ({"judge_model": {"id": "j", "base_url": "ftp://x"}}, "judge_model"),
    ({"judge_model": {"id": "j", "api_key_env": "AGENTCOMPASS_TEST_UNSET_VAR"}}, "judge_model.api_key_env"),
    ({"judge_model": {"id": "j", "api_key": "k", "api_key_env": "HOME"}}, "judge_model"),
    ({"tools": ["web_search"], "search": {"provider": "searxng"}}, "search.base_url"),
    ({"tools": ["web_search"], "search": {"provider": "searxng", "base_url": "not a url"}}, "search"),
    ({"sample_ids": []}, "sample_ids"),
    ({"search": {"provider": "searxng", "base_url": "http://127.0.0.1:9"}}, "search"),  # no tools: unused
    ({"tools": ["web_search"], "search": {"base_url": "http://127.0.0.1:9", "max_results": 100000}}, "search"),
])
def test_bad_params_name_the_field(params: dict[str, Any], field: str, tmp_path: Path) -> None:
    with pytest.raises(agentcompass.ConfigError) as err:
        agentcompass.run_evaluation("qa_local", "openai_chat", "scripted", "local", benchmark_params=params,
                                    results_dir=str(tmp_path), progress="none")
    assert field in str(err.value) or field in (err.value.field or "")


def test_a_judged_benchmark_without_a_match_needs_a_judge(tmp_path: Path) -> None:
    with pytest.raises(agentcompass.ConfigError) as err:  # refused before any download
        agentcompass.run_evaluation("simpleqa", "openai_chat", "scripted", "local", results_dir=str(tmp_path),
                                    progress="none")
    assert "judge_model" in str(err.value)


@contextmanager
def _server(params: dict[str, Any], **options: Any) -> Iterator[ScriptedServer]:
    """The scripted HTTP server on its own event loop in a thread (run_evaluation runs its own loop)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="scripted-server", daemon=True)
    thread.start()
    server = ScriptedServer(params, **options)
    asyncio.run_coroutine_threadsafe(server.start(), loop).result(30)
    try:
        yield server
    finally:
        asyncio.run_coroutine_threadsafe(server.stop(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)
        loop.close()


MODEL_KEY = "sk-agent-model-key-5551212"
JUDGE_KEY = "sk-judge-key-8675309"


@pytest.mark.parametrize("protocol", ["openai-chat", "openai-responses", "anthropic-messages"])
def test_research_agent_searches_the_web_and_an_http_judge_grades_it(protocol: str, tmp_path: Path) -> None:
    script = [
        # the judge (same server; first: its prompt holds the question too)
        {"match": quoted("Canberra"), "turns": ["A"]},
        # the agent: one search, then the answer from its results
        {"match": "capital city of Australia", "turns": [
            {"tool_calls": [{"name": "web_search", "arguments": {"query": "capital of Australia"}}]},
            "Canberra"]},
    ]
    hits = {"capital of australia": [
        ("Canberra - Wikipedia", "https://en.wikipedia.org/wiki/Canberra", "Canberra is the capital of Australia."),
        ("Sydney", "https://example.org/sydney", "Sydney is the largest city.")]}
    with _server({"bundled": False, "script": script}, require_api_key=None) as server, \
            SearchStandIn(results=hits) as api:
        base = server.base_url
        judge = {"id": "scripted", "base_url": base, "api_key": JUDGE_KEY, "api_protocol": protocol}
        out = agentcompass.run_evaluation(
            "qa_local", "tool_agent", "scripted", "local", model_base_url=base, model_api_key=MODEL_KEY,
            model_api_protocol=protocol,
            benchmark_params={"sample_ids": ["qa-local-03"], "judge_model": judge, "tools": ["web_search"],
                              "search": {"provider": "brave", "base_url": api.url, "api_key": api.key}},
            results_dir=str(tmp_path), progress="none")
        seen = list(api.requests)
    assert out.status == "completed", out.error
    attempt = _attempts(out.run_dir)["qa-local-03"]
    assert attempt.correct and attempt.extra["grade"] == "correct"
    assert attempt.extra["scoring"]["api_protocol"] == protocol and attempt.extra["scoring"]["raw_verdict"] == "A"
    record = attempt.artifacts["tool_session"]
    assert record["calls"][0]["tool"] == "web_search" and record["calls"][0]["results"] == 2
    steps = attempt.trajectory.steps if attempt.trajectory else []
    assert "Canberra is the capital of Australia." in (steps[0].observation or "")
    ((path, query, headers),) = seen
    assert path == "/res/v1/web/search" and query["q"] == ["capital of Australia"]
    assert headers["x-subscription-token"] == api.key
    for f in Path(out.run_dir).rglob("*"):  # neither key reaches the run directory
        if f.is_file():
            text = f.read_bytes()
            assert JUDGE_KEY.encode() not in text and api.key.encode() not in text, f


def test_judge_calls_are_retried_like_any_model_call(tmp_path: Path) -> None:
    # every 2nd completion is a 429: the agent's call (1st) passes, the judge's first call (2nd) is refused and
    # retried (3rd), so the attempt is graded, not an eval_error
    script = [{"match": quoted("Canberra"), "turns": ["A"]},
              {"match": "capital city of Australia", "turns": ["Canberra"]}]
    with _server({"bundled": False, "script": script}, fail_status=429, fail_every=2, retry_after=0) as server:
        judge = {"id": "scripted", "base_url": server.base_url, "api_key": JUDGE_KEY}
        out = agentcompass.run_evaluation(
            "qa_local", "openai_chat", "scripted", "local", model_base_url=server.base_url, model_api_key=MODEL_KEY,
            benchmark_params={"sample_ids": ["qa-local-03"], "judge_model": judge},
            results_dir=str(tmp_path), progress="none")
        served, answered = server.completions_served, server.requests_served
    assert out.status == "completed", out.error
    attempt = _attempts(out.run_dir)["qa-local-03"]
    assert attempt.correct and attempt.extra["scoring"]["raw_verdict"] == "A"
    assert (served, answered) == (2, 3)  # the agent's call, the judge's refused call and its retry


def test_tool_agent_without_tools_answers_once(tmp_path: Path) -> None:
    judge = {"id": "scripted", "params": {"bundled": False, "script": JUDGE_SCRIPT}}
    out = _run(tmp_path, AGENT, judge, ["qa-local-01"], harness="tool_agent", system_prompt="Answer briefly.")
    assert out.status == "completed", out.error
    attempt = _attempts(out.run_dir)["qa-local-01"]
    assert attempt.correct and attempt.artifacts["tool_session"] == {"tools": [], "calls": []}
    assert attempt.trajectory is not None and len(attempt.trajectory.steps) == 1


@pytest.mark.parametrize(("response", "letters", "letter"), [
    ("Answer: I think it is B", "ABCD", "B"), ("answer: a", "ABCD", None), ("Reasoning...\nAnswer: **C**", "ABCD", "C"),
    ("Answer: B, because A is wrong", "ABCD", "B"), ("Answer: (D)", "ABCD", "D"), ("B", "ABCD", "B"),
    ("Answer: A\nOn reflection...\nAnswer: C", "ABCD", "C"), ("Answer: E", "ABCD", None),
])
def test_the_choice_letter_is_a_capital_of_the_items_letters(response: str, letters: str, letter: str | None) -> None:
    from agentcompass.benchmarks.qa.judged import choice_letter

    assert choice_letter(response, letters) == letter


def test_hle_without_a_judge_is_refused_unless_match_is_asked_for_by_name(tmp_path: Path) -> None:
    from agentcompass.benchmarks.qa.hle import HLE
    from agentcompass.interfaces import ComponentContext

    with pytest.raises(agentcompass.ConfigError) as err:  # before any download
        HLE({}, ComponentContext(data_dir=str(tmp_path)))
    assert err.value.field == "benchmark.params.judge_model" and "grading: 'match'" in str(err.value)


def test_the_judge_key_can_come_from_an_environment_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTCOMPASS_TEST_JUDGE_KEY", JUDGE_KEY)
    script = [{"match": quoted("Canberra"), "turns": ["A"]},
              {"match": "capital city of Australia", "turns": ["Canberra"]}]
    with _server({"bundled": False, "script": script}, require_api_key=JUDGE_KEY) as server:
        judge = {"id": "scripted", "base_url": server.base_url, "api_key_env": "AGENTCOMPASS_TEST_JUDGE_KEY"}
        out = agentcompass.run_evaluation(
            "qa_local", "openai_chat", "scripted", "local", model_params={"bundled": False, "script": script},
            benchmark_params={"sample_ids": ["qa-local-03"], "judge_model": judge},
            results_dir=str(tmp_path), progress="none")
    assert out.status == "completed", out.error
    assert _attempts(out.run_dir)["qa-local-03"].correct  # the server took the key from the variable
    for f in Path(out.run_dir).rglob("*"):
        if f.is_file():
            assert JUDGE_KEY.encode() not in f.read_bytes(), f


def test_judge_prompt_is_given_per_item_kind_and_takes_simple_evals_placeholder_names(tmp_path: Path) -> None:
    one = "Q: {question}\nGold: {target}\nPredicted: {predicted_answer}\nReply A, B or C."  # SimpleQA's names
    with pytest.raises(agentcompass.ConfigError) as err:  # a letter item and a rubric item: one text cannot do
        _run(tmp_path, AGENT, {"id": "scripted"}, ["qa-local-03", "qa-local-16"], judge_prompt=one)
    assert err.value.field == "benchmark.params.judge_prompt" and "rubric" in str(err.value)
    rubric = "Q: {question}\nRubric ({max_points} points): {correct_answer}\nAnswer: {response}\nVERDICT: <points>"
    judge = {"id": "scripted", "params": {"bundled": False, "script": [
        {"match": quoted("Sydney"), "turns": ["B"]},
        {"match": "Rubric (10 points)", "turns": ["VERDICT: 8"]}]}}
    out = _run(tmp_path, AGENT, judge, ["qa-local-03", "qa-local-16"],
               judge_prompt={"short": one, "rubric": rubric})
    got = _attempts(out.run_dir)
    assert got["qa-local-03"].extra["grade"] == "incorrect" and got["qa-local-16"].extra["points"] == 8.0
    assert "Gold: Canberra" in got["qa-local-03"].extra["scoring"]["prompt"]
    assert b'"judge_prompt": "custom"' in (Path(out.run_dir) / "params.json").read_bytes()


class UnclampedQA(QALocal):
    """``qa_local`` whose judge may outlive ``verify_timeout`` (as a benchmark that does not fit its waits in it)."""

    def __init__(self, params: Any, ctx: Any) -> None:
        super().__init__(params, ctx)
        self.judge_budget = None
        if self.judge is not None:
            self.judge.timeout_s = 600.0


def test_an_evaluation_cut_off_by_verify_timeout_keeps_what_it_recorded(tmp_path: Path) -> None:
    judge = {"id": "scripted", "params": {"bundled": False, "fallback": "A", "latency_s": 30}}
    out = agentcompass.run_evaluation(
        "tests.benchmarks.qa.test_judged_qa:UnclampedQA", "openai_chat", "scripted", "local",
        model_params={"bundled": False, "script": AGENT},
        benchmark_params={"sample_ids": ["qa-local-01"], "judge_model": judge, "verify_timeout": 1},
        results_dir=str(tmp_path), progress="none")
    bad = _attempts(out.run_dir)["qa-local-01"]
    assert bad.status == "eval_error" and bad.error_kind == "eval_timeout"  # the engine's deadline this time
    assert "The symbol is Au." in bad.extra["scoring"]["prompt"] and bad.extra["scoring"]["model"] == "scripted"
