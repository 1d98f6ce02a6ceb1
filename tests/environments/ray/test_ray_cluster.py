"""The coordinator's connection to a Ray cluster: where an auth token is found, token mode applied even after Ray
was used in the process; Ray Client is refused, and an address nothing answers at within seconds."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from agentcompass._errors import ConfigError, EnvironmentError_
from agentcompass.environments.ray import cluster as ray_cluster


def test_a_token_is_found_where_ray_looks_for_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert ray_cluster.auth_token_source({}, home) is None
    assert ray_cluster.auth_token_source({"RAY_AUTH_TOKEN": "t0k"}, home) == "RAY_AUTH_TOKEN"
    token = tmp_path / "token"
    assert ray_cluster.auth_token_source({"RAY_AUTH_TOKEN_PATH": str(token)}, home) is None  # no file yet
    token.write_text("t0k")
    assert ray_cluster.auth_token_source({"RAY_AUTH_TOKEN_PATH": str(token)}, home) == "RAY_AUTH_TOKEN_PATH"
    (home / ".ray").mkdir(parents=True)
    (home / ".ray" / "auth_token").write_text("")
    assert ray_cluster.auth_token_source({}, home) is None  # empty: no token
    (home / ".ray" / "auth_token").write_text("t0k")
    assert ray_cluster.auth_token_source({}, home) == "~/.ray/auth_token"


async def test_a_ray_client_address_in_ray_address_is_refused_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import ray

    monkeypatch.setenv("RAY_ADDRESS", "ray://127.0.0.1:10001")
    with pytest.raises(ConfigError) as info:
        await ray_cluster.connect(None, timeout_s=10)
    assert info.value.field == "RAY_ADDRESS" and not ray.is_initialized()




@pytest.mark.parametrize("given", ["param", "env"])
async def test_an_address_nothing_answers_at_is_refused_at_once_naming_it(
        monkeypatch: pytest.MonkeyPatch, given: str) -> None:
    import ray

    with socket.socket() as s:  # a port of this host nobody listens on
        s.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{s.getsockname()[1]}"
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    if given == "env":
        monkeypatch.setenv("RAY_ADDRESS", address)
    with pytest.raises(EnvironmentError_) as info:
        await ray_cluster.connect(address if given == "param" else None, timeout_s=60)
    # refused by the engine's own check of the GCS port (Ray's connect retried ~20 s and said little)
    field = "environment.params.address" if given == "param" else "RAY_ADDRESS"
    assert f"cannot reach the Ray cluster at {address} ({field})" in str(info.value)
    assert not ray.is_initialized()

_REFRESH_PROBE = """
import os, sys
os.environ.pop("RAY_AUTH_MODE", None)
from ray._private.authentication.authentication_utils import is_token_auth_enabled
from ray._raylet import Config
from agentcompass.environments.ray.cluster import _enable_token_auth_if_token_found
Config.initialize("")  # Ray used in this process before the variable was set (a local cluster, a connection)
os.environ["RAY_AUTH_MODE"] = sys.argv[1]
before = is_token_auth_enabled()
_enable_token_auth_if_token_found("10.0.0.1:6379")
print(before, is_token_auth_enabled())
"""


@pytest.mark.parametrize(("mode", "expected"), [("token", "False True"), ("disabled", "False False")])
def test_ray_auth_mode_set_after_ray_was_used_in_the_process_still_applies(mode: str, expected: str) -> None:
    # CI: a two-node test's driver failed "RAY_AUTH_MODE is currently 'disabled'" with the variable set to token,
    # after an earlier test of the same worker process had used Ray without it
    out = subprocess.run([sys.executable, "-c", _REFRESH_PROBE, mode], capture_output=True, text=True, timeout=120,
                         stdin=subprocess.DEVNULL, env={k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split("\n")[-2] == expected
