"""Signed API-key envelopes: only genuine, unexpired envelopes of an open try get through the gateway."""

from __future__ import annotations

import base64
import time

import httpx
import pytest

from agentcompass.models.gateway.envelope import AttemptKey, EnvelopeError, EnvelopeSigner, is_envelope
from tests.fixtures_scripted import running_scripted_server

from ..gateway_helpers import KEY, running_gateway

BODY = {"model": "m", "messages": [{"role": "user", "content": "hello"}]}


def _tamper_payload(envelope: str, **change: object) -> str:
    import json

    prefix, payload, sig = envelope.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims.update(change)
    raw = base64.urlsafe_b64encode(json.dumps(claims, separators=(",", ":")).encode()).rstrip(b"=").decode()
    return f"{prefix}.{raw}.{sig}"


def test_an_envelope_verifies_and_carries_its_attempt() -> None:
    signer = EnvelopeSigner()
    env = signer.issue("run-1", KEY, 60)
    assert is_envelope(env) and env.count(".") == 2
    claims = signer.verify(env)
    assert claims.key == KEY and claims.run == "run-1" and claims.exp > time.time()


@pytest.mark.parametrize("case", ["other_secret", "payload", "signature", "truncated", "garbage", "expired"])
def test_forged_tampered_or_expired_envelopes_do_not_verify(case: str) -> None:
    signer = EnvelopeSigner()
    good = signer.issue("run-1", KEY, 60)
    bad = {
        "other_secret": EnvelopeSigner().issue("run-1", KEY, 60),
        "payload": _tamper_payload(good, task="another-task"),
        "signature": good[:-2] + ("AA" if not good.endswith("AA") else "BB"),
        "truncated": good.rsplit(".", 1)[0],
        "garbage": "acw1..",
        "expired": signer.issue("run-1", KEY, -1),
    }[case]
    with pytest.raises(EnvelopeError) as info:
        signer.verify(bad)
    assert info.value.reason == ("expired" if case == "expired" else
                                 "malformed" if case in ("truncated", "garbage") else "bad_signature")


async def test_gateway_refuses_forged_expired_and_ended_envelopes_with_401() -> None:
    signer = EnvelopeSigner()
    async with running_scripted_server() as server, running_gateway(server.base_url or "", signer=signer) as gw:
        grant = gw.open_grant(KEY, run_id="run-1", envelope_ttl_s=60)
        assert grant.envelope is not None
        url = f"{gw.base_url}/v1/chat/completions"
        candidates = {
            "forged": EnvelopeSigner().issue("run-1", KEY, 60),
            "tampered": _tamper_payload(grant.envelope, att=2),
            "expired": signer.issue("run-1", KEY, -5),
            "never_granted": signer.issue("run-1", AttemptKey("req", "task-9", 1, 1), 60),
        }
        async with httpx.AsyncClient(timeout=10) as http:
            for name, token in candidates.items():
                r = await http.post(url, json=BODY, headers={"Authorization": f"Bearer {token}"})
                assert r.status_code == 401, name
                err = r.json()["error"]
                assert err["code"] in ("invalid_api_key", "expired_api_key") and token not in r.text, name
            ok = await http.post(url, json=BODY, headers={"Authorization": f"Bearer {grant.envelope}"})
            assert ok.status_code == 200, ok.text
            await gw.close_grant(KEY)
            ended = await http.post(url, json=BODY, headers={"Authorization": f"Bearer {grant.envelope}"})
            assert ended.status_code == 401 and ended.json()["error"]["code"] == "expired_api_key"


async def test_a_valid_envelope_is_attributed_to_its_own_attempt() -> None:
    first, second = AttemptKey("req", "task-a", 1, 1), AttemptKey("req", "task-b", 2, 1)
    async with running_scripted_server() as server, running_gateway(server.base_url or "") as gw:
        g1 = gw.open_grant(first, envelope_ttl_s=60)
        g2 = gw.open_grant(second, envelope_ttl_s=60)
        async with httpx.AsyncClient(timeout=10) as http:
            for _ in range(2):  # envelopes also work as Anthropic-style x-api-key
                r = await http.post(f"{gw.base_url}/v1/chat/completions", json=BODY,
                                    headers={"x-api-key": g2.api_key})
                assert r.status_code == 200
        assert (await gw.close_grant(first)).calls == 0
        assert (await gw.close_grant(second)).calls == 2
        assert gw.url_for("http://h:1", g1) == "http://h:1/v1"  # envelopes need no route token in the URL
