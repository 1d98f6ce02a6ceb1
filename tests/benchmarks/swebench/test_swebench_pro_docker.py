"""``swebench_pro`` end to end on Docker with the scripted model, on a self-made instance in the official
shape (tests/benchmarks/swebench/pro_instance.py): the gold patch resolves it, no patch does not, and a patch that
tries to forge the result (a result json where the official evaluator reads it, a no-op parser, a ``python``
that writes an all-PASSED result) does not."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

import agentcompass
from agentcompass.records import TaskDetail

from ...environments.conftest import containers_of, run_in_thread
from . import pro_instance as pro


@pytest.fixture(scope="module")
def pro_image(base_image: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The instance image (built once, then cached by the hash of its context)."""
    from agentcompass.environments.docker.provider import DockerProvider
    from agentcompass.interfaces import ComponentContext, ImageRecipe

    context = tmp_path_factory.mktemp("pro-image")
    tag = pro.build_context(base_image, context)
    ref = f"{pro.IMAGE_REPOSITORY}:{tag}"

    async def build() -> str:
        provider = DockerProvider({"image": base_image}, ComponentContext(run_id="pro-image-build"))
        try:
            return await provider.ensure_image(ref, ImageRecipe(context_dir=str(context)))
        finally:
            await provider.aclose()

    run_in_thread(build, timeout=900)
    return tag


def _turns(patch: str) -> list[str]:
    if not patch:
        return ["<submit></submit>"]
    b64 = base64.b64encode(patch.encode()).decode()
    return [f"```bash\ncd /app && echo {b64} | base64 -d | git apply -v\n```", "<submit>done</submit>"]


def _run(tmp_path: Path, run_id: str, tag: str, patch: str) -> tuple[Any, dict[str, Any], Any]:
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    dataset = data / "swebench_pro.jsonl"
    dataset.write_text(json.dumps(pro.row(tag)) + "\n")
    scripts = tmp_path / "scripts"
    if not scripts.exists():
        pro.scripts_dir(scripts)
    script = [{"match": "add() subtracts", "turns": _turns(patch)}]
    out = agentcompass.run_evaluation(
        "swebench_pro", "shell_agent", "scripted", "docker", model_params={"script": script, "bundled": False},
        benchmark_params={"scripts_dir": str(scripts), "image_repository": pro.IMAGE_REPOSITORY,
                          "eval_timeout": 300},
        environment_params={"cache_level": "instance"}, run_id=run_id, results_dir=str(tmp_path),
        data_dir=str(data), progress="none")
    assert out.run_dir is not None
    [path] = (out.run_dir / "details").glob("*.json")
    attempt = msgspec.json.decode(path.read_bytes(), type=TaskDetail).attempts["1"]
    return out, attempt.extra["eval_raw_data"], attempt


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_gold_resolves_empty_and_forged_do_not(pro_image: str, docker_run_id: str, tmp_path: Path) -> None:
    gold, raw, attempt = _run(tmp_path, f"{docker_run_id}-gold", pro_image, pro.GOLD_PATCH)
    assert gold.status == "completed" and gold.counts.errors == 0, gold.errors_by_kind
    assert gold.metrics["pass@1"] == 1.0 and attempt.correct is True, raw
    assert raw["completed"] is True and raw["resolved"] is True and raw["timed_out"] is False
    assert raw["returncode"] == 0 and raw["parser_returncode"] == 0
    assert raw["fail_to_pass"] == {"success": [pro.F2P], "failure": []}
    assert raw["pass_to_pass"] == {"success": [pro.P2P], "failure": []}
    assert {"name": pro.F2P, "status": "PASSED"} in raw["tests"]

    empty, raw, attempt = _run(tmp_path, f"{docker_run_id}-empty", pro_image, "")
    assert empty.status == "completed" and empty.metrics["pass@1"] == 0.0 and attempt.correct is False
    # the tests still ran on the base commit, as the official script runs them after a failed apply
    assert raw["completed"] is True and raw["resolved"] is False and raw["returncode"] == 1
    assert raw["fail_to_pass"] == {"success": [], "failure": [pro.F2P]}
    assert raw["pass_to_pass"] == {"success": [pro.P2P], "failure": []}

    forged, raw, attempt = _run(tmp_path, f"{docker_run_id}-forge", pro_image, pro.FORGE_PATCH)
    assert forged.status == "completed" and forged.metrics["pass@1"] == 0.0 and attempt.correct is False
    assert "FORGE-ATTEMPTED" in raw["stdout"] + raw["stderr"]  # the forging code did run in the run container
    assert raw["completed"] is True and raw["resolved"] is False
    assert {"name": pro.F2P, "status": "FAILED"} in raw["tests"]
    assert raw["fail_to_pass"]["failure"] == [pro.F2P]
    for name in ("gold", "empty", "forge"):
        assert containers_of(f"{docker_run_id}-{name}") == []
