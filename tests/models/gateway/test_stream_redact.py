"""StreamRedactor: a secret cut anywhere by chunk borders never passes, and nothing else is held for long."""

from __future__ import annotations

import json

import pytest

from agentcompass.engine.redact import Redactor
from agentcompass.models.gateway.body_budget import BodyLease, ByteBudget
from agentcompass.models.gateway.stream_redact import StreamRedactor

KEY = "sk-live-AbCdEfGhIjKlMnOpQrStUvWxYz012345"
QUOTED = "sk-\"q\"uoted-key-0123456789"  # its JSON-escaped form differs from it


def _relay(body: bytes, cuts: list[int]) -> bytes:
    sr = StreamRedactor(Redactor([KEY, QUOTED]))
    out = b""
    prev = 0
    for c in [*cuts, len(body)]:
        out += sr.feed(body[prev:c])
        prev = c
    return out + sr.flush()


def test_every_single_cut_and_every_pair_of_cuts_masks_the_key() -> None:
    body = f'data: {{"echo": "Bearer {KEY}", "q": {json.dumps(QUOTED)}}}\n\n'.encode()
    whole = Redactor([KEY, QUOTED]).bytes(body)
    assert KEY.encode() not in whole and whole.count(b"***") == 2
    for i in range(len(body) + 1):
        assert _relay(body, [i]) == whole, i
        for j in range(i, min(i + 50, len(body) + 1)):
            assert _relay(body, [i, j]) == whole, (i, j)


def test_a_byte_at_a_time_is_masked_and_text_without_secrets_is_not_held() -> None:
    body = (b"x" * 10 + KEY.encode() + b"y" * 10) * 3
    assert _relay(body, list(range(1, len(body)))) == (b"x" * 10 + b"***" + b"y" * 10) * 3
    sr = StreamRedactor(Redactor([KEY]))
    assert sr.feed(b"data: hello\n\n") == b"data: hello\n\n"  # nothing that could start a key: all of it at once
    assert sr.feed(b"partial sk-li") == b"partial "  # maybe a key: held
    assert sr.feed(b"ke a cat") == b"sk-like a cat"  # it was not


def test_a_stream_ending_inside_a_key_masks_the_part_it_had() -> None:
    sr = StreamRedactor(Redactor([KEY]))
    assert sr.feed(b"echo " + KEY[:20].encode()) == b"echo "
    assert sr.flush() == b"***"


def test_no_secrets_passes_chunks_unchanged() -> None:
    sr = StreamRedactor(Redactor([]))
    assert sr.feed(b"sk-") == b"sk-" and sr.flush() == b""


def test_a_lease_takes_what_fits_and_gives_it_all_back() -> None:
    budget = ByteBudget(100)
    a, b = BodyLease(budget), BodyLease(budget)
    assert a.grow_to(60) and a.grow_to(70) and not b.grow_to(40) and b.grow_to(30)
    assert budget.used == 100 and b.held == 30
    a.release()
    a.release()
    assert budget.used == 30
    b.release()
    assert budget.used == 0


@pytest.mark.parametrize("limit", [0, -1, True, 1.5])
def test_a_budget_refuses_a_limit_that_is_no_positive_integer(limit: object) -> None:
    with pytest.raises(ValueError, match="limit"):
        ByteBudget(limit)  # type: ignore[arg-type]
