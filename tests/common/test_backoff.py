"""``backoff_delay``: the one formula every retry loop waits by (deterministic with a seeded rng)."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from agentcompass.common.backoff import FULL_JITTER, HALF_JITTER, NO_JITTER, Jitter, backoff_delay
from agentcompass.environments.ray.rescan_backoff import RescanBackoff
from agentcompass.models.retry import RetryPolicy

PACKAGE = Path(__file__).resolve().parents[2] / "agentcompass"


def test_without_jitter_it_doubles_from_base_up_to_cap() -> None:
    assert [backoff_delay(n, 5.0, 300.0, jitter=NO_JITTER) for n in range(1, 9)] == [5, 10, 20, 40, 80, 160, 300, 300]


def test_a_huge_attempt_number_is_the_cap_not_an_overflow() -> None:
    assert backoff_delay(10_000, 0.5, 30.0, jitter=NO_JITTER) == 30.0
    assert backoff_delay(2**40, 0.5, float("inf"), jitter=NO_JITTER) == 0.5 * 2.0**62  # no OverflowError


@pytest.mark.parametrize(("jitter", "low", "high"), [(FULL_JITTER, 0.0, 1.0), (HALF_JITTER, 0.5, 1.0),
                                                      (Jitter(0.5, 1.5), 0.5, 1.5)])
def test_jitter_spreads_the_delay_over_its_range(jitter: Jitter, low: float, high: float) -> None:
    rng = random.Random(7)
    for attempt, delay in [(1, 0.2), (3, 0.8), (9, 2.0)]:
        waits = [backoff_delay(attempt, 0.2, 2.0, jitter=jitter, rng=rng) for _ in range(400)]
        assert all(low * delay <= w <= high * delay for w in waits)
        span = (high - low) * delay
        assert min(waits) < low * delay + 0.1 * span and max(waits) > high * delay - 0.1 * span


def test_the_same_seed_gives_the_same_waits() -> None:
    a, b = random.Random(3), random.Random(3)
    assert [backoff_delay(n, 0.5, 30.0, rng=a) for n in range(1, 20)] == \
        [backoff_delay(n, 0.5, 30.0, rng=b) for n in range(1, 20)]


def test_retry_after_is_a_floor_when_it_is_a_finite_number() -> None:
    rng = random.Random(0)
    assert backoff_delay(1, 0.5, 30.0, retry_after=12.0, rng=rng) == 12.0
    assert 4.0 <= backoff_delay(4, 1.0, 30.0, retry_after=0.5, rng=rng) <= 8.0  # the backoff is longer: it wins
    for odd in (float("nan"), float("inf")):
        assert backoff_delay(1, 0.5, 30.0, retry_after=odd, jitter=NO_JITTER) == 0.5


def test_attempts_count_from_one() -> None:
    with pytest.raises(ValueError, match="attempt"):
        backoff_delay(0, 1.0, 10.0)


def test_the_callers_keep_their_schedules() -> None:
    # the ray rescan: exact doubling from first_s, capped, no jitter
    rescan = RescanBackoff(first_s=5.0, cap_s=30.0)
    assert [rescan.refused("n1", "no docker", 0.0)[0] for _ in range(5)] == [5.0, 10.0, 20.0, 30.0, 30.0]
    # model calls: full jitter under min(max_wait, max_backoff); Retry-After plus a first-failure jitter, capped
    policy = RetryPolicy(backoff=0.5, max_wait=3.0, max_backoff=2.0)
    rng = random.Random(5)
    assert all(0 <= policy.wait_s(6, None, rng) <= 2.0 for _ in range(200))
    assert all(10.0 <= RetryPolicy(backoff=0.5).wait_s(1, 10.0, rng) <= 10.5 for _ in range(200))


def test_no_retry_loop_has_a_formula_of_its_own() -> None:
    """Every exponential wait in the package is ``backoff_delay``'s (the acceptance grep, as a test)."""
    own = PACKAGE / "common" / "backoff.py"
    found = [f"{p.relative_to(PACKAGE)}:{i}: {line.strip()}"
             for p in sorted(PACKAGE.rglob("*.py")) if p != own
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if re.search(r"\b2(\.0)? \*\* |\*\* *\(?(attempt|count|failures|try_no)", line.split("#")[0])]
    assert not found, "exponential backoff outside agentcompass/common/backoff.py:\n" + "\n".join(found)
