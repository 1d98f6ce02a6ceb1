"""A model answering 200 with an endless body: the engine reads at most ``max_response_bytes`` of it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from agentcompass import ConfigError
from agentcompass.models.clients.openai_chat import OpenAIChatClient
from tests.conftest import REPO, start_server_process, stop_process

# runs the engine and reports its peak RSS (KiB) as the last line
_MEASURE = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:]); "
            "print('RC', r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_a_huge_200_body_is_cut_at_the_cap_and_classified(tmp_path: Path, stream: bool) -> None:
    proc, url = start_server_process("--fault", "huge=1")  # 1 GiB per answer, generated on the fly
    try:
        env = dict(os.environ, PYTHONPATH=str(REPO))
        params = {"retries": 0, "stream": stream}
        res = subprocess.run(
            [sys.executable, "-c", _MEASURE, sys.executable, "-m", "agentcompass.cli", "run", "shell_tasks",
             "openai_chat", "scripted", "--model-base-url", url, "--model-params", json.dumps(params),
             "--benchmark-params", '{"limit": 1}', "--results-dir", str(tmp_path), "--progress", "none"],
            capture_output=True, text=True, timeout=280, env=env)
    finally:
        stop_process(proc)
    _, rc, peak_kib = res.stdout.strip().splitlines()[-1].split()
    details = list(tmp_path.rglob("details/*.json"))
    assert len(details) == 1, (res.stdout[-2000:], res.stderr[-2000:])
    detail = json.loads(details[0].read_text())
    kinds = {a["error_kind"] for a in detail["attempts"].values()}
    assert kinds == {"model_response_too_large"}, kinds
    assert sum(p.stat().st_size for p in tmp_path.rglob("*") if p.is_file()) < 5 << 20
    assert int(peak_kib) < 400 * 1024, f"engine peak RSS {int(peak_kib) >> 10} MiB"
    assert int(rc) == 1


async def test_the_cap_is_a_model_param(scripted_base_url: str) -> None:
    from agentcompass import ModelError

    proc, url = start_server_process("--fault", "huge=1")
    try:
        async with OpenAIChatClient("scripted", url, params={"max_response_bytes": 1 << 20}) as client:
            with pytest.raises(ModelError) as info:
                await client.complete([{"role": "user", "content": "hi"}])
    finally:
        stop_process(proc)
    assert info.value.kind == "model_response_too_large" and "1048576" in str(info.value)


@pytest.mark.parametrize("value", [0, -1, float("nan"), True, "big", 1 << 40])
def test_max_response_bytes_is_validated(value: object) -> None:
    with pytest.raises(ConfigError) as info:
        OpenAIChatClient("m", "http://127.0.0.1:9/v1", params={"max_response_bytes": value})
    assert info.value.field == "model_params.max_response_bytes"


@pytest.mark.parametrize("buffered", [1 << 20, 32 << 20], ids=["buffer-below-cap", "buffer-above-cap"])
@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_the_gateway_cuts_a_relayed_answer_at_the_cap(stream: bool, buffered: int) -> None:
    from agentcompass.models.adaptive import AdaptiveLimiter
    from agentcompass.models.gateway.envelope import EnvelopeSigner
    from agentcompass.models.gateway.server import Gateway, Upstream
    from tests.fixtures_scripted import running_scripted_server

    from .gateway_helpers import FAST_RETRIES, KEY

    cap = 2 << 20
    async with running_scripted_server({}, faults={"huge": 1.0}) as server:
        gw = Gateway(EnvelopeSigner(), revoke_grace_s=0.3, max_buffered_bytes=buffered)
        await gw.start()
        try:
            gw.add_upstream(Upstream(request="req", model_id="scripted", base_url=server.base_url or "", api_key=None,
                                     api_protocol="openai-chat", limiter=AdaptiveLimiter("test", 4),
                                     policy=FAST_RETRIES, timeout_s=30.0, max_response_bytes=cap))
            assert gw.base_url is not None
            grant = gw.open_grant(KEY)
            url = gw.url_for(gw.base_url, grant) + "/chat/completions"
            got = 0
            async with httpx.AsyncClient(timeout=60) as http:
                with pytest.raises(httpx.HTTPError):
                    async with http.stream("POST", url, headers={"Authorization": f"Bearer {grant.api_key}"},
                                           json={"model": "m", "stream": stream,
                                                 "messages": [{"role": "user", "content": "hi"}]}) as resp:
                        assert resp.status_code == 200
                        async for chunk in resp.aiter_raw():
                            got += len(chunk)
        finally:
            await gw.aclose()
    assert got <= cap + (1 << 20), got


def test_one_step_cannot_make_a_detail_file_huge(tmp_path: Path) -> None:
    from agentcompass.engine.detail_caps import STEP_TEXT_LIMIT
    from agentcompass.engine.redact import Redactor
    from agentcompass.engine.run_dir import RunDir
    from agentcompass.records import AttemptRecord, Step, TaskDetail, ToolCall, Trajectory

    big = "x" * (40 << 20)
    step = Step(index=1, content=big, observation=big, tool_calls=[ToolCall(id="1", name="sh", arguments=big)])
    detail = TaskDetail(task_id="t", k=1, attempts={"1": AttemptRecord(
        status="completed", final_answer=big, trajectory=Trajectory(steps=[step]))})
    run_dir = RunDir(tmp_path, Redactor([]))
    (tmp_path / "details").mkdir()
    run_dir.write_detail(detail)
    [written] = (tmp_path / "details").iterdir()
    assert written.stat().st_size < 5 * STEP_TEXT_LIMIT + (1 << 20)
    assert "characters omitted" in written.read_text()
