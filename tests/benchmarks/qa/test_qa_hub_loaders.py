"""The Hub-loaded QA benchmarks (hle, simpleqa, sealqa, frontierscience, gpqa_diamond): each loads a tiny copy served
in its real Hub layout by a local stand-in (``HF_ENDPOINT``), and without a reachable Hub fails within its bounded
wait with an error naming the dataset, ``HF_ENDPOINT`` and ``data_dir``. BrowseComp loads simple-evals' CSV from its
URL (a local file host in the tests), and its decrypted reference answers never reach the run directory."""

from __future__ import annotations

import csv
import io
import json
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import agentcompass
from agentcompass.benchmarks.qa.browsecomp import URL, BrowseComp, decrypt, encrypt
from agentcompass.benchmarks.qa.frontierscience import FrontierScience
from agentcompass.benchmarks.qa.gpqa_diamond import GPQADiamond
from agentcompass.benchmarks.qa.hle import HLE
from agentcompass.benchmarks.qa.judged import JudgedQA
from agentcompass.benchmarks.qa.sealqa import SealQA
from agentcompass.benchmarks.qa.simpleqa import SimpleQA
from agentcompass.common.hub import DatasetDownloadError
from agentcompass.interfaces import ComponentContext

from ...standins.file_host import FileHost
from ...standins.hf_hub import HubStandIn
from .test_judged_qa import _server as scripted_http

JUDGE = {"judge_model": {"id": "scripted"}}
CANARY = "BENCHMARK DATA SHOULD NEVER APPEAR AS PLAIN TEXT ONLINE. canary GUID test:0000"


def _csv(rows: list[dict[str, Any]]) -> bytes:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0]))
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue().encode()


def _parquet(rows: list[dict[str, Any]]) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), buf)
    return buf.getvalue()


def _jsonl(rows: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def hle_files() -> dict[str, bytes]:
    rows = [
        {"id": "6687ffb1091058ff19128813", "question": "What is 2+2?", "image": "", "image_preview": None,
         "answer": "4", "answer_type": "exactMatch", "author_name": "a", "rationale": "r", "rationale_image": None,
         "raw_subject": "Math", "category": "Math", "canary": "c"},
        {"id": "668825f80a642802bdfeadfa", "question": "Which is a prime?\nA. 4\nB. 7", "image": "",
         "image_preview": None, "answer": "B", "answer_type": "multipleChoice", "author_name": "a", "rationale": "r",
         "rationale_image": None, "raw_subject": "Math", "category": "Math", "canary": "c"},
        {"id": "66e8784d70625d8c7700315a", "question": "What is shown?", "image": "data:image/png;base64,iVBOR",
         "image_preview": None, "answer": "a cat", "answer_type": "exactMatch", "author_name": "a",
         "rationale": "r", "rationale_image": None, "raw_subject": "Biology", "category": "Biology/Medicine",
         "canary": "c"},
    ]
    return {"data/test-00000-of-00001.parquet": _parquet(rows)}


def browsecomp_files() -> dict[str, bytes]:
    rows = [{"problem": encrypt(q, CANARY), "answer": encrypt(a, CANARY), "problem_topic": t, "canary": CANARY}
            for q, a, t in [("Which football club won the 1994 cup after a penalty shoot-out?", "Ajax", "Sports"),
                            ("Name the author of the 1962 novel with a purple cover — 作者?", "Émile Zola", "Art")]]
    return {"browse_comp_test_set.csv": _csv(rows)}


def simpleqa_files() -> dict[str, bytes]:
    rows = [{"metadata": "{'topic': 'Science and technology', 'answer_type': 'Person', 'urls': ['https://x']}",
             "problem": "Who received the IEEE Frank Rosenblatt Award in 2010?", "answer": "Michio Sugeno"},
            {"metadata": "{'topic': 'Geography', 'answer_type': 'Place', 'urls': []}",
             "problem": "In which city is the Aalto University campus?", "answer": "Espoo"}]
    return {"simple_qa_test_set.csv": _csv(rows)}


def sealqa_files() -> dict[str, bytes]:
    row = {"canary": "c", "question": "How many moons does Saturn have as of 2025?", "answer": "274",
           "topic": "Science", "urls": ["https://example.org/a"], "freshness": "fast-changing",
           "question_types": ["temporal"], "effective_year": "2025", "search_results": "", "golden_doc": ""}
    hard = {**row, "question": "Which team won the 2024 cup?", "answer": "Team A", "topic": "Sports"}
    return {"seal-0.parquet": _parquet([row]), "seal-hard.parquet": _parquet([row, hard]),
            "longseal.parquet": _parquet([row])}


def frontierscience_files() -> dict[str, bytes]:
    oly = [{"problem": "Compute the pH of 0.1 M HCl. FINAL ANSWER: ...", "answer": "1", "subject": "chemistry",
            "task_group_id": "g1"}]
    research = [{"problem": "Derive the dispersion relation.", "answer": "Points: 10, Item: correct derivation.",
                 "subject": "physics", "task_group_id": "g2"}] * 2  # two identical rows, as in the real set
    return {"olympiad/test.jsonl": _jsonl(oly), "research/test.jsonl": _jsonl(research)}


def gpqa_files() -> dict[str, bytes]:
    cols = ["Pre-Revision Question", "Pre-Revision Correct Answer", "Question", "Correct Answer",
            "Incorrect Answer 1", "Incorrect Answer 2", "Incorrect Answer 3", "Record ID", "High-level domain",
            "Subdomain"]
    rows = [dict(zip(cols, ["", "", f"Question {n}?", f"right {n}", f"wrong {n}a", f"wrong {n}b", f"wrong {n}c",
                            f"rec{n:03d}ABC", "Physics", "Optics"], strict=True)) for n in range(4)]
    return {"gpqa_diamond.csv": _csv(rows), "gpqa_main.csv": _csv(rows)}


Case = tuple[type[JudgedQA], str, Callable[[], dict[str, bytes]], dict[str, Any]]
CASES: dict[str, Case] = {
    "hle": (HLE, "cais/hle", hle_files, {}),
    "simpleqa": (SimpleQA, "basicv8vc/SimpleQA", simpleqa_files, {}),
    "sealqa": (SealQA, "vtllms/sealqa", sealqa_files, {"subset": "seal_hard"}),
    "frontierscience": (FrontierScience, "openai/frontierscience", frontierscience_files, {}),
    "gpqa_diamond": (GPQADiamond, "Idavidrein/gpqa", gpqa_files, {}),
}


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[HubStandIn]:
    with HubStandIn() as stand_in:
        monkeypatch.setenv("HF_ENDPOINT", stand_in.url)
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        monkeypatch.delenv("HF_TOKEN", raising=False)
        yield stand_in


def _load(name: str, tmp_path: Path, **extra: Any) -> JudgedQA:
    cls, _, _, params = CASES[name]
    return cls({**JUDGE, **params, **extra}, ComponentContext(data_dir=str(tmp_path)))


def test_hle_loads_the_text_questions_from_the_hub_layout(hub: HubStandIn, tmp_path: Path) -> None:
    commit = hub.add_dataset("cais/hle", hle_files())
    bench = _load("hle", tmp_path)
    tasks = {t.task_id: t for t in bench.load_tasks()}
    assert sorted(tasks) == ["6687ffb1091058ff19128813", "668825f80a642802bdfeadfa"]  # the image question skipped
    mc = tasks["668825f80a642802bdfeadfa"]
    assert mc.ground_truth["letter"] == "B" and mc.input["kind"] == "multiple_choice"
    assert "Answer: <the letter" in mc.input["prompt"] and mc.category == "Math"
    assert bench.source["commit"] == commit and bench.source["repo"] == "cais/hle"
    assert len(_load("hle", tmp_path, text_only=False).items) == 3


BC_PATH = "/simple-evals/browse_comp_test_set.csv"


def _browsecomp(tmp_path: Path, url: str, **extra: Any) -> BrowseComp:
    return BrowseComp({**JUDGE, "url": url, **extra}, ComponentContext(data_dir=str(tmp_path)))


def test_browsecomp_reads_from_simple_evals_published_csv_by_default() -> None:
    assert URL == "https://openaipublic.blob.core.windows.net/simple-evals/browse_comp_test_set.csv"
    assert BrowseComp.Params().url == URL  # type: ignore[call-arg]


def test_browsecomp_downloads_and_decrypts_the_encrypted_csv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    with FileHost() as host:
        host.files[BC_PATH] = browsecomp_files()["browse_comp_test_set.csv"]
        bench = _browsecomp(tmp_path, host.url + BC_PATH)
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
        again = _browsecomp(tmp_path, host.url + BC_PATH)  # from the cache, no second download
        assert host.requests == [BC_PATH]
    tasks = bench.load_tasks()
    assert [t.task_id for t in tasks] == ["browsecomp-0000", "browsecomp-0001"]
    assert tasks[0].input["question"] == "Which football club won the 1994 cup after a penalty shoot-out?"
    assert "Exact Answer:" in tasks[0].input["prompt"]
    assert tasks[0].ground_truth["answer"] == "Ajax" and tasks[1].ground_truth["answer"] == "Émile Zola"
    assert tasks[1].category == "Art" and len(again.items) == 2
    assert bench.source["kind"] == "url" and bench.source["url"].endswith(BC_PATH) and len(bench.source["sha256"]) == 64


def test_browsecomp_download_fails_within_its_deadline_naming_the_url(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    with FileHost() as host:  # a host that trickles a byte every 0.3 s: each read is quick, the whole is not
        host.files[BC_PATH] = browsecomp_files()["browse_comp_test_set.csv"]
        host.drip[BC_PATH] = 0.3
        with pytest.raises(DatasetDownloadError) as err:
            _browsecomp(tmp_path, host.url + BC_PATH, download_timeout=1)
    assert BC_PATH in str(err.value) and "within 1s" in str(err.value) and "url param" in str(err.value)
    assert not list((tmp_path / "url").glob("*/*.csv"))  # nothing half-written left in the cache


def test_browsecomp_offline_without_a_cached_copy_names_the_url(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(agentcompass.ConfigError) as err:
        _browsecomp(tmp_path, URL)
    assert URL in str(err.value) and "HF_HUB_OFFLINE" in str(err.value)


def test_browsecomp_never_writes_the_decrypted_answer_to_the_run_dir(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    # the judge over HTTP: its reply (naming the reference answer, as judges do) is not in the run's params
    verdict = "extracted_final_answer: PSV\nreasoning: the correct answer is Ajax, not PSV\ncorrect: no\nconfidence: 80"
    with FileHost() as host, scripted_http({"bundled": False, "fallback": verdict}) as server:
        judge = {"id": "scripted", "base_url": server.base_url, "api_key": "judge-key"}
        host.files[BC_PATH] = browsecomp_files()["browse_comp_test_set.csv"]
        out = agentcompass.run_evaluation(
            "browsecomp", "openai_chat", "scripted", "local",
            model_params={"bundled": False, "fallback": "Exact Answer: PSV"},
            benchmark_params={"limit": 1, "url": host.url + BC_PATH, "judge_model": judge},
            data_dir=str(tmp_path / "data"), results_dir=str(tmp_path / "results"), progress="none")
    assert out.status == "completed", out.error
    assert out.metrics["incorrect"] == 1  # graded: the judge saw the answer
    files = [f for f in (tmp_path / "results").rglob("*") if f.is_file()]
    assert files and not [f for f in files if b"Ajax" in f.read_bytes()]
    detail = next(f for f in files if f.parent.name == "details").read_text()
    assert "prompt_sha256" in detail and "[reference answer]" in detail


def test_browsecomp_decryption_is_simple_evals_xor_with_the_canary_sha256() -> None:
    # fixed vector: base64(plaintext XOR sha256("key") repeated), computed independently of our helpers
    import base64
    import hashlib

    key = hashlib.sha256(b"key").digest()
    plain = ("x" * 40).encode()
    cipher = base64.b64encode(bytes(b ^ key[i % 32] for i, b in enumerate(plain))).decode()
    assert decrypt(cipher, "key") == "x" * 40
    assert encrypt("x" * 40, "key") == cipher


def test_simpleqa_loads_the_csv_with_its_topics(hub: HubStandIn, tmp_path: Path) -> None:
    hub.add_dataset("basicv8vc/SimpleQA", simpleqa_files())
    tasks = _load("simpleqa", tmp_path).load_tasks()
    assert [(t.task_id, t.category, t.ground_truth["answer"]) for t in tasks] == [
        ("simpleqa-0000", "Science and technology", "Michio Sugeno"), ("simpleqa-0001", "Geography", "Espoo")]


def test_sealqa_loads_the_chosen_subset(hub: HubStandIn, tmp_path: Path) -> None:
    hub.add_dataset("vtllms/sealqa", sealqa_files())
    tasks = _load("sealqa", tmp_path).load_tasks()
    assert [t.task_id for t in tasks] == ["sealqa/seal_hard/000", "sealqa/seal_hard/001"]
    assert tasks[1].ground_truth["answer"] == "Team A" and tasks[1].category == "Sports"
    assert [p.rsplit("/", 1)[-1] for p in hub.downloads()] == ["seal-hard.parquet"]  # that file, only once


def test_frontierscience_loads_both_tracks_with_their_graders(hub: HubStandIn, tmp_path: Path) -> None:
    hub.add_dataset("openai/frontierscience", frontierscience_files())
    bench = _load("frontierscience", tmp_path)
    tasks = bench.load_tasks()
    assert [(t.task_id, t.category, t.input["kind"]) for t in tasks] == [
        ("olympiad-000", "olympiad/chemistry", "short"), ("research-000", "research/physics", "rubric"),
        ("research-001", "research/physics", "rubric")]
    assert bench.grader_for("rubric").name == "rubric" and bench.grader_for("short").name == "verdict"


def test_gpqa_shuffles_the_choices_deterministically_per_task(hub: HubStandIn, tmp_path: Path) -> None:
    hub.add_dataset("Idavidrein/gpqa", gpqa_files())
    first = _load("gpqa_diamond", tmp_path).load_tasks()
    again = _load("gpqa_diamond", tmp_path / "other").load_tasks()
    assert [t.input["prompt"] for t in first] == [t.input["prompt"] for t in again]
    letters = [t.ground_truth["letter"] for t in first]
    for t in first:
        assert f"{t.ground_truth['letter']}) right " in t.input["question"]
    assert len(set(letters)) > 1  # not always the same position
    other_seed = _load("gpqa_diamond", tmp_path, shuffle_seed=7).load_tasks()
    assert [t.input["question"] for t in other_seed] != [t.input["question"] for t in first]


def test_gpqa_runs_end_to_end_graded_by_the_letter(hub: HubStandIn, tmp_path: Path) -> None:
    hub.add_dataset("Idavidrein/gpqa", gpqa_files())
    tasks = _load("gpqa_diamond", tmp_path).load_tasks()
    right = tasks[0].ground_truth["letter"]
    wrong = next(x for x in "ABCD" if x != tasks[1].ground_truth["letter"])
    script = [{"match": "Question 0?", "turns": [f"Reasoning...\nAnswer: {right}"]},
              {"match": "Question 1?", "turns": [f"Answer: {wrong}"]}]
    out = agentcompass.run_evaluation("gpqa_diamond", "openai_chat", "scripted", "local",
                                      model_params={"bundled": False, "script": script},
                                      benchmark_params={"sample_ids": [tasks[0].task_id, tasks[1].task_id]},
                                      data_dir=str(tmp_path), results_dir=str(tmp_path / "results"), progress="none")
    assert out.status == "completed", out.error
    assert (out.metrics["correct"], out.metrics["incorrect"]) == (1, 1)


def _black_hole() -> socket.socket:
    """A port that accepts connections (the kernel's backlog) and never answers: a Hub out of reach."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    return sock


@pytest.mark.parametrize("name", list(CASES))
def test_without_a_reachable_hub_the_loader_fails_within_its_wait_naming_the_dataset(
        name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = CASES[name][1]
    hole = _black_hole()
    try:
        endpoint = f"http://127.0.0.1:{hole.getsockname()[1]}"
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        with pytest.raises(DatasetDownloadError) as err:
            _load(name, tmp_path, hub_timeout=1)
    finally:
        hole.close()
    text = str(err.value)
    assert repo in text and endpoint in text and "HF_ENDPOINT" in text and "data_dir" in text
    assert "within 1s" in text


@pytest.mark.parametrize("name", list(CASES))
def test_offline_without_a_cached_copy_is_a_config_error_naming_the_dataset(
        name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(agentcompass.ConfigError) as err:
        _load(name, tmp_path)
    assert CASES[name][1] in str(err.value) and "HF_HUB_OFFLINE" in str(err.value)


def test_a_downloaded_copy_is_used_without_the_hub(hub: HubStandIn, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    hub.add_dataset("basicv8vc/SimpleQA", simpleqa_files())
    assert len(_load("simpleqa", tmp_path).items) == 2
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert len(_load("simpleqa", tmp_path).items) == 2


def test_a_gated_dataset_the_hub_does_not_show_names_hf_token(hub: HubStandIn, tmp_path: Path) -> None:
    with pytest.raises(DatasetDownloadError) as err:  # the stand-in answers 401 RepoNotFound, as the Hub does
        _load("gpqa_diamond", tmp_path)
    assert "Idavidrein/gpqa" in str(err.value) and "HF_TOKEN" in str(err.value)


@pytest.mark.parametrize("points", [50, -1, float("nan"), 0])
def test_frontierscience_success_points_must_be_within_the_rubric(points: float, tmp_path: Path) -> None:
    with pytest.raises(agentcompass.ConfigError) as err:  # before any download
        _load("frontierscience", tmp_path, success_points=points)
    assert err.value.field == "benchmark.params.success_points"
