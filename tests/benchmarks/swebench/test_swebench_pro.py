"""The ``swebench_pro`` benchmark without docker: the dataset from a Hub stand-in and the run scripts from a
file-host stand-in into data_dir, then offline from there; the fail-fast errors without them; params; what
the agent sees."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path
from typing import Any

import msgspec
import pytest

from agentcompass._errors import ConfigError
from agentcompass.benchmarks.swebench.pro import SWEBenchPro
from agentcompass.interfaces import ComponentContext
from agentcompass.registry import BUILTINS

from ...standins.file_host import FileHost
from ...standins.hf_hub import HubStandIn
from .test_pro import pro_row
from .test_pro_scripts import COMMIT, IID, repo_tarball

# our own stand-in tarballs; PEP 706 filters where this Python has them (not Debian 12's 3.11.2)
SAFE_EXTRACT: dict[str, Any] = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}

PRO = "ScaleAI/SWE-bench_Pro"


def _parquet(rows: list[dict[str, Any]]) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), buf)
    return buf.getvalue()


def _row(**over: Any) -> dict[str, Any]:
    return pro_row(**{"instance_id": IID, **over})


def test_swebench_pro_is_a_builtin_benchmark() -> None:
    assert BUILTINS["benchmark"]["swebench_pro"] == "agentcompass.benchmarks.swebench.pro:SWEBenchPro"


def test_without_data_it_fails_fast_naming_the_file_and_columns(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="dataset not found") as err:
        SWEBenchPro({"hub": False}, ComponentContext(data_dir=str(tmp_path)))
    msg = str(err.value)
    assert str(tmp_path / "swebench_pro.jsonl") in msg and "selected_test_files_to_run" in msg
    assert err.value.field == "data_dir"
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ConfigError, match="HF_HUB_OFFLINE") as err:
        SWEBenchPro({}, ComponentContext(data_dir=str(tmp_path)))
    assert PRO in str(err.value)


def test_hub_and_scripts_download_then_offline_from_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "data"
    with HubStandIn() as hub, FileHost() as host:
        hub.add_dataset(PRO, {"data/test-00000-of-00001.parquet": _parquet([_row()])})
        host.files["/pro.tar.gz"] = repo_tarball()
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        bench = SWEBenchPro({"scripts_commit": COMMIT, "scripts_url": host.url + "/pro.tar.gz"},
                            ComponentContext(data_dir=str(data), environment="docker"))
        assert host.requests == ["/pro.tar.gz"] and bench.source.repo == PRO
    # both stand-ins are gone: everything now comes from data_dir
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # the cached copy is found again for the same scripts_url (never for the default source, see test_pro_scripts)
    again = SWEBenchPro({"scripts_commit": COMMIT, "scripts_url": host.url + "/pro.tar.gz", "scripts_download": False},
                        ComponentContext(data_dir=str(data)))
    [task] = again.load_tasks()
    assert task.task_id == IID and task.category == "NodeBB/NodeBB"
    assert task.ground_truth["fail_to_pass"][0] == "test/translator.js | Translator shim should translate"
    prepared = again.prepare(task.public())
    assert prepared.workdir == "/app" and prepared.image == f"jefzda/sweap-images:{_row()['dockerhub_tag']}"
    assert prepared.prompt.startswith("Translator breaks\n\nRequirements:\n- must translate")
    blob = json.dumps(msgspec.to_builtins(prepared))
    assert "diff --git" not in blob and "Translator shim should translate" not in blob
    assert again.eval_timeout == 3600.0 and again.scripts.missing([IID]) == []


def test_an_instance_without_run_scripts_is_refused_up_front(tmp_path: Path) -> None:
    f = tmp_path / "pro.jsonl"
    f.write_text(json.dumps(_row(instance_id="instance_other__x-1")))
    scripts = tmp_path / "scripts"
    with tarfile.open(fileobj=io.BytesIO(repo_tarball()), mode="r:gz") as tar:
        tar.extractall(scripts, **SAFE_EXTRACT)
    root = next(scripts.iterdir())
    with pytest.raises(ConfigError, match="instance_other__x-1") as err:
        SWEBenchPro({"dataset_file": str(f), "scripts_dir": str(root)}, ComponentContext(data_dir=str(tmp_path)))
    assert err.value.field == "benchmark.params.scripts_dir"


@pytest.mark.parametrize(("params", "field"), [
    ({"scripts_commit": "main"}, "benchmark.params.scripts_commit"),
    ({"scripts_url": "file:///etc/passwd"}, "benchmark.params.scripts_url"),
    ({"image_namespace": "x"}, None),
    ({"scripts_download": "maybe"}, None),
])
def test_bad_params_are_named(tmp_path: Path, params: dict[str, Any], field: str | None) -> None:
    f = tmp_path / "pro.jsonl"
    f.write_text(json.dumps(_row()))
    with pytest.raises(ConfigError) as err:
        SWEBenchPro({"dataset_file": str(f), "scripts_download": False, **params},
                    ComponentContext(data_dir=str(tmp_path)))
    assert next(iter(params)) in str(err.value)
    if field:
        assert err.value.field == field


def test_without_scripts_and_download_off_the_error_says_what_to_provide(tmp_path: Path) -> None:
    f = tmp_path / "pro.jsonl"
    f.write_text(json.dumps(_row()))
    with pytest.raises(ConfigError, match="scripts_dir") as err:
        SWEBenchPro({"dataset_file": str(f), "scripts_download": False}, ComponentContext(data_dir=str(tmp_path)))
    assert "scaleapi/SWE-bench_Pro-os" in str(err.value)
