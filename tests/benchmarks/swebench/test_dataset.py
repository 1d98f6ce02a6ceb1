"""Loading SWE-bench instances from the user's files, and the errors that say what to provide."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentcompass._errors import ConfigError
from agentcompass.benchmarks.swebench.dataset import candidate_files, load_instances, read_instances_file, select


def _row(iid: str = "octo__demo-1", **over: object) -> dict[str, object]:
    row: dict[str, object] = {
        "instance_id": iid, "repo": "octo/demo", "base_commit": "a" * 40, "problem_statement": "it breaks",
        "patch": "diff --git a/x.py b/x.py\n", "test_patch": "diff --git a/tests/t.py b/tests/t.py\n",
        "FAIL_TO_PASS": json.dumps(["tests/t.py::test_a"]), "PASS_TO_PASS": ["tests/t.py::test_b"],
        "version": "1.0"}
    row.update(over)
    return row


def test_jsonl_rows_load_and_json_encoded_test_lists_become_lists(tmp_path: Path) -> None:
    f = tmp_path / "swebench_verified.jsonl"
    f.write_text("\n".join(json.dumps(_row(f"octo__demo-{i}")) for i in range(3)) + "\n\n")
    rows, source = load_instances("swebench_verified", str(tmp_path), hub=False)
    assert source.kind == "file" and source.path == str(f)
    assert [r["instance_id"] for r in rows] == ["octo__demo-0", "octo__demo-1", "octo__demo-2"]
    assert rows[0]["FAIL_TO_PASS"] == ["tests/t.py::test_a"]
    assert rows[0]["environment_setup_commit"] == "a" * 40


def test_hf_style_file_names_and_split_folders_are_found(tmp_path: Path) -> None:
    (tmp_path / "SWE-bench_Lite").mkdir()
    (tmp_path / "SWE-bench_Lite" / "test.json").write_text(json.dumps([_row()]))
    rows, source = load_instances("swebench_lite", str(tmp_path), hub=False)
    assert len(rows) == 1 and source.path.endswith("SWE-bench_Lite/test.json")
    assert tmp_path / "swebench_lite.jsonl" == candidate_files(tmp_path, "swebench_lite")[0]


def test_missing_dataset_error_names_the_file_to_provide(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        load_instances("swebench_verified", str(tmp_path), hub=False)
    msg = str(err.value)
    assert str(tmp_path / "swebench_verified.jsonl") in msg
    assert err.value.field == "data_dir"


def test_row_without_required_fields_is_refused_with_the_missing_names(tmp_path: Path) -> None:
    row = _row()
    del row["test_patch"], row["PASS_TO_PASS"]
    f = tmp_path / "x.jsonl"
    f.write_text(json.dumps(row))
    with pytest.raises(ConfigError, match="test_patch, PASS_TO_PASS"):
        read_instances_file(f)


def test_bad_json_line_is_reported_with_its_line_number(tmp_path: Path) -> None:
    f = tmp_path / "x.jsonl"
    f.write_text(json.dumps(_row()) + "\n{oops\n")
    with pytest.raises(ConfigError, match=r"x\.jsonl:2"):
        read_instances_file(f)


def test_select_keeps_dataset_order_and_refuses_unknown_ids() -> None:
    rows = [_row(f"octo__demo-{i}") for i in range(4)]
    assert [r["instance_id"] for r in select(rows, ["octo__demo-3", "octo__demo-1"], "b")] == \
        ["octo__demo-1", "octo__demo-3"]
    with pytest.raises(ConfigError, match="octo__nope-9"):
        select(rows, ["octo__nope-9"], "b")
