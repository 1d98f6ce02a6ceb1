"""``swebench_multilingual``: official image names, per-repo parser and eval script, the language in the
metadata, offline loading from data_dir, the Hub download (stand-in), the fail-fast errors, and the bundled
``local`` instances (no docker here)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentcompass._errors import ConfigError
from agentcompass.benchmarks.swebench.benchmark import SWEBenchVerified
from agentcompass.benchmarks.swebench.multilingual import SWEBenchMultilingual
from agentcompass.benchmarks.swebench.multilingual_local import IMAGE_REPOSITORY, load_local_instances
from agentcompass.interfaces import ComponentContext

from ...standins.hf_hub import HubStandIn, swebench_parquet

MULTILINGUAL = "SWE-bench/SWE-bench_Multilingual"
TEST_FILE = "data/test-00000-of-00001.parquet"
GO_PATCH = ("diff --git a/context_test.go b/context_test.go\nindex 1111111..2222222 100644\n--- a/context_test.go\n"
            "+++ b/context_test.go\n@@ -1,1 +1,2 @@\n package gin\n+// more\n")


def _row(iid: str, repo: str = "gin-gonic/gin", version: str = "4003", **over: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "instance_id": iid, "repo": repo, "base_commit": "c" * 40, "problem_statement": f"bug in {iid}",
        "patch": "diff --git a/gin.go b/gin.go\n", "test_patch": GO_PATCH, "FAIL_TO_PASS": ["TestA"],
        "PASS_TO_PASS": ["TestB"], "version": version, "hints_text": "", "created_at": "2024-01-01T00:00:00Z"}
    row.update(over)
    return row


def _data_dir(tmp_path: Path, *rows: dict[str, Any]) -> str:
    (tmp_path / "swebench_multilingual.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(tmp_path)


def _ctx(data_dir: str) -> ComponentContext:
    return ComponentContext(environment="docker", data_dir=data_dir)


def test_offline_rows_get_official_images_language_and_the_repo_parser(tmp_path: Path) -> None:
    data = _data_dir(tmp_path, _row("gin-gonic__gin-4003"),
                     _row("caddyserver__caddy-6411", repo="caddyserver/caddy", version="6411"))
    bench = SWEBenchMultilingual({"sample_ids": ["gin-gonic__gin-4003"]}, _ctx(data))
    [task] = bench.load_tasks()
    assert task.metadata == {"repo": "gin-gonic/gin", "version": "4003", "language": "Go"}
    assert task.ground_truth["log_parser"] == "gotest"
    prepared = bench.prepare(task.public())
    assert prepared.image == "swebench/sweb.eval.x86_64.gin-gonic_1776_gin-4003:latest"
    assert prepared.workdir == "/testbed" and prepared.prompt == "bug in gin-gonic__gin-4003"
    assert bench.source.kind == "file"


def test_the_eval_script_runs_the_official_test_command_of_the_version(tmp_path: Path) -> None:
    spec = pytest.importorskip("swebench.harness.test_spec.test_spec")
    inst = _row("gin-gonic__gin-4003")
    bench = SWEBenchMultilingual({}, _ctx(_data_dir(tmp_path, inst)))
    script = bench.eval_script({**inst, "log_parser": "gotest"}, "/testbed")
    official = spec.make_test_spec(inst).eval_script
    between = [s.split(">>>>> Start Test Output'\n", 1)[1].split("\n: '>>>>> End Test Output", 1)[0]
               for s in (script, official)]
    assert between[0] == between[1] == 'go test . -v -run "TestMethodNotAllowedNoRoute"'
    assert "apply --verbose --reject - <<" in script


def test_a_row_with_its_own_eval_script_is_graded_with_it(tmp_path: Path) -> None:
    own = ("#!/bin/bash\nset -uxo pipefail\ncd /work\n: '>>>>> Start Test Output'\ngo test ./own -v\n"
           ": '>>>>> End Test Output'\n")
    inst = _row("gin-gonic__gin-4003", eval_script=own)
    bench = SWEBenchMultilingual({}, _ctx(_data_dir(tmp_path, inst)))
    [task] = bench.load_tasks()
    script = bench.eval_script({**inst, **task.ground_truth}, "/work")
    assert "\ngo test ./own -v\nac_test_rc=$?\n" in script and "TestMethodNotAllowedNoRoute" not in script
    assert "(cd /work && git -c safe.directory=/work apply --check - <<" in script  # the test patch guard
    assert bench.eval_script(_row("gin-gonic__gin-4003"), "/work") != script


def test_without_data_it_fails_fast_with_the_error_of_swebench_verified(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    with pytest.raises(ConfigError) as ours:
        SWEBenchMultilingual({"hub": False}, _ctx(str(empty)))
    with pytest.raises(ConfigError) as verified:
        SWEBenchVerified({"hub": False}, _ctx(str(empty)))
    assert ours.value.field == verified.value.field == "data_dir"
    assert str(empty / "swebench_multilingual.jsonl") in str(ours.value)
    assert str(ours.value) == str(verified.value).replace("swebench_verified", "swebench_multilingual").replace(
        "SWE-bench_Verified", "SWE-bench_Multilingual")


def test_unknown_version_or_parser_fails_at_construction_naming_the_field(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="gin-gonic/gin has no version '9999'") as err:
        SWEBenchMultilingual({}, _ctx(_data_dir(tmp_path, _row("gin-gonic__gin-9999", version="9999"))))
    assert err.value.field == "version" and "4003" in str(err.value)
    with pytest.raises(ConfigError, match="unknown log parser 'nonesuch'") as err:
        SWEBenchMultilingual({}, _ctx(_data_dir(tmp_path, _row("gin-gonic__gin-4003", log_parser="nonesuch"))))
    assert err.value.field == "log_parser"
    with pytest.raises(ConfigError, match="Allowed parameters: .*local") as err:
        SWEBenchMultilingual({"lokal": True}, _ctx(str(tmp_path)))


def test_the_hub_dataset_is_downloaded_into_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with HubStandIn() as hub:
        commit = hub.add_dataset(MULTILINGUAL, {TEST_FILE: swebench_parquet(
            [_row("gin-gonic__gin-4003"), _row("gin-gonic__gin-3741", version="3741")])})
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        bench = SWEBenchMultilingual({}, _ctx(str(tmp_path)))
        assert [t.task_id for t in bench.load_tasks()] == ["gin-gonic__gin-4003", "gin-gonic__gin-3741"]
        assert (bench.source.kind, bench.source.repo, bench.source.commit) == ("hub", MULTILINGUAL, commit)
        assert hub.downloads() == [f"/datasets/{MULTILINGUAL}/resolve/{commit}/{TEST_FILE}"]


def test_local_instances_are_bundled_with_a_build_recipe(tmp_path: Path) -> None:
    bench = SWEBenchMultilingual({"local": True}, _ctx(str(tmp_path)))
    tasks = bench.load_tasks()
    assert [t.task_id for t in tasks] == [i["instance_id"] for i in load_local_instances()]
    assert {t.metadata["language"] for t in tasks} == {"Go"}
    prepared = bench.prepare(tasks[0].public())
    assert prepared.image.startswith(IMAGE_REPOSITORY + ":") and prepared.image_recipe is not None
    dockerfile = (Path(prepared.image_recipe.context_dir) / "Dockerfile").read_text()
    assert "golang-go" in dockerfile and "agentcompass.recipe_hash" in dockerfile
    with pytest.raises(ConfigError, match="local or dataset_file") as err:
        SWEBenchMultilingual({"local": True, "dataset_file": str(tmp_path / "x.jsonl")}, _ctx(str(tmp_path)))
    assert err.value.field == "benchmark.params.local"
