"""The coordinator's connection to a Ray cluster: where an auth token is found; Ray Client is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentcompass._errors import ConfigError
from agentcompass.environments import ray_cluster


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

