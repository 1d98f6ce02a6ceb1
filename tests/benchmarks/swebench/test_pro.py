"""SWE-bench Pro rows, image names, patch cleaning and the run step's entry script, as the official
evaluator builds them."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from agentcompass._errors import ConfigError
from agentcompass.benchmarks.swebench.pro_instances import (
    entry_script,
    env_exports,
    image_name,
    image_tag,
    normalize_pro_instance,
    problem_statement,
    strip_binary_hunks,
)

IID = "instance_NodeBB__NodeBB-00c70ce7b0541cfc94afe567921d7668cdc8f4ac-vnan"


def pro_row(**over: Any) -> dict[str, Any]:
    """A row as the Hub's ScaleAI/SWE-bench_Pro stores it (list columns as Python list literals)."""
    row: dict[str, Any] = {
        "instance_id": IID, "repo": "NodeBB/NodeBB", "base_commit": "ae3fa85f40db0dca83d19dda1afb96064dffcc83",
        "problem_statement": "Translator breaks", "requirements": "- must translate", "interface": "No new interfaces",
        "repo_language": "js", "patch": "diff --git a/a.js b/a.js\n",
        "test_patch": "diff --git a/test/x.js b/test/x.js\n",
        "fail_to_pass": "['test/translator.js | Translator shim should translate', \"test/user.js | it's\"]",
        "pass_to_pass": "[]", "selected_test_files_to_run": "['test/translator.js', 'test/user.js']",
        "before_repo_set_cmd": "git reset --hard abc\ngit clean -fd\ngit checkout abc -- test/translator.js",
        "dockerhub_tag": "nodebb.nodebb-NodeBB__NodeBB-00c70ce7b0541cfc94afe567921d7668cdc8f4ac",
    }
    row.update(over)
    return row


def test_list_literals_are_read_as_data() -> None:
    inst = normalize_pro_instance(pro_row(), "hub")
    assert inst["fail_to_pass"] == ["test/translator.js | Translator shim should translate", "test/user.js | it's"]
    assert inst["FAIL_TO_PASS"] == inst["fail_to_pass"] and inst["pass_to_pass"] == []
    assert inst["selected_test_files_to_run"] == ["test/translator.js", "test/user.js"]
    assert normalize_pro_instance(pro_row(pass_to_pass='["a"]'), "hub")["pass_to_pass"] == ["a"]  # JSON too
    assert normalize_pro_instance(pro_row(pass_to_pass=["b"]), "hub")["pass_to_pass"] == ["b"]


@pytest.mark.parametrize("bad", ["__import__('os').system('true')", "[1, 2]", "not a list"])
def test_anything_but_a_list_of_strings_is_refused_never_run(bad: str) -> None:
    with pytest.raises(ConfigError, match="fail_to_pass"):
        normalize_pro_instance(pro_row(fail_to_pass=bad), "hub")


def test_missing_fields_and_bad_commits_are_named() -> None:
    row = pro_row()
    del row["selected_test_files_to_run"]
    with pytest.raises(ConfigError, match="selected_test_files_to_run"):
        normalize_pro_instance(row, "hub")
    with pytest.raises(ConfigError, match="base_commit"):
        normalize_pro_instance(pro_row(base_commit="HEAD; rm -rf /"), "hub")


def test_missing_text_fields_are_empty_like_the_official_fillna() -> None:
    row = pro_row()
    del row["before_repo_set_cmd"], row["dockerhub_tag"]
    inst = normalize_pro_instance(row | {"requirements": None}, "hub")
    assert inst["before_repo_set_cmd"] == "" and inst["requirements"] == ""


def test_problem_statement_carries_requirements_and_interfaces() -> None:
    text = problem_statement(normalize_pro_instance(pro_row(), "hub"))
    assert text == ("Translator breaks\n\nRequirements:\n- must translate\n\n"
                    "New interfaces introduced:\nNo new interfaces")


def test_image_is_the_dockerhub_tag_else_the_official_naming() -> None:
    inst = normalize_pro_instance(pro_row(), "hub")
    assert image_name(inst) == f"jefzda/sweap-images:{inst['dockerhub_tag']}"
    assert image_name(inst, "mirror.local/pro") == f"mirror.local/pro:{inst['dockerhub_tag']}"
    no_tag = inst | {"dockerhub_tag": ""}
    assert image_tag(no_tag) == "nodebb.nodebb-NodeBB__NodeBB-00c70ce7b0541cfc94afe567921d7668cdc8f4ac"
    element = {"instance_id": "instance_element-hq__element-web-aaaa-vnan", "repo": "element-hq/element-web"}
    assert image_tag(element) == "element-hq.element-element-hq__element-web-aaaa"
    special = {"instance_id": "instance_element-hq__element-web-ec0f940ef0e8e3b61078f145f34dc40d1938e6c5-vnan",
               "repo": "element-hq/element-web"}
    assert image_tag(special).endswith("-vnan") and image_tag(special).startswith("element-hq.element-web-")
    long = {"instance_id": "instance_o__r-" + "f" * 40 + "-v" + "e" * 120, "repo": "O/R"}
    assert len(image_tag(long)) == 128 and image_tag(long).startswith("o.r-o__r-")


def test_binary_hunks_are_dropped_text_hunks_kept() -> None:
    text = "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-x\n+y\n"
    binary = "diff --git a/i.png b/i.png\nindex 1..2\nBinary files a/i.png and b/i.png differ\n"
    literal = "diff --git a/j.bin b/j.bin\nnew file mode 100644\nGIT binary patch\nliteral 3\nabc\n"
    assert strip_binary_hunks(text + binary + literal + text) == text + text
    assert strip_binary_hunks("") == ""


def test_env_lines_become_exports() -> None:
    base = 'FROM node:18\nENV SETUP=\'{ "a": 1 }\'\nRUN echo ENV\n  ENV LANG en_US.UTF-8\n'
    assert env_exports([base, "ENV X=1"]) == ["export SETUP='{ \"a\": 1 }'", "export LANG en_US.UTF-8",
                                              "export X=1"]


def test_entry_script_matches_the_official_steps() -> None:
    inst = normalize_pro_instance(pro_row(), "hub")
    script = entry_script(inst, ["export A=1"])
    lines = [line for line in script.splitlines() if line and not line.startswith("#")]
    base = inst["base_commit"]
    assert lines == ["export A=1", "cd /app", f"git reset --hard {base}", f"git checkout {base}",
                     "git apply -v /workspace/patch.diff", "git checkout abc -- test/translator.js",
                     "bash /workspace/run_script.sh test/translator.js,test/user.js "
                     "> /workspace/stdout.log 2> /workspace/stderr.log"]


def test_entry_script_runs_on_after_a_failed_apply_and_exits_with_the_run_scripts_code(tmp_path: Path) -> None:
    # the official script has no `set -e`: a patch that does not apply still gets its tests run (on the base)
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "patch.diff").write_text("garbage\n")
    (ws / "run_script.sh").write_text('echo "args=$*"; echo err >&2; exit 7\n')
    inst = normalize_pro_instance(pro_row(before_repo_set_cmd=""), "hub")
    script = entry_script(inst, workspace=str(ws)).replace("cd /app", f"cd {tmp_path}")
    script = script.replace(f"git reset --hard {inst['base_commit']}", "true").replace(
        f"git checkout {inst['base_commit']}", "true")
    res = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert res.returncode == 7
    assert (ws / "stdout.log").read_text() == "args=test/translator.js,test/user.js\n"
    assert (ws / "stderr.log").read_text() == "err\n"
