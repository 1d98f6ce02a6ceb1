"""A node that refuses a node actor is asked again after a doubling, capped delay, not every rescan."""

from __future__ import annotations

from agentcompass.environments.ray.rescan_backoff import RescanBackoff


def test_a_refusing_node_is_asked_again_after_a_doubling_capped_delay() -> None:
    b = RescanBackoff(first_s=5, cap_s=300)
    assert b.due("n1", 0.0)
    assert b.refused("n1", "no docker", 0.0) == (5, True)
    assert not b.due("n1", 4.9) and b.due("n1", 5.0)
    delays = [b.refused("n1", "no docker", 0.0)[0] for _ in range(8)]
    assert delays == [10, 20, 40, 80, 160, 300, 300, 300]
    assert not b.due("n1", 299.0) and b.due("n1", 300.0)
    assert b.due("n2", 0.0)  # another node (or the same node back under a new id) is asked at once


def test_a_new_reason_or_a_join_starts_the_delay_over() -> None:
    b = RescanBackoff(first_s=5, cap_s=300)
    for _ in range(4):
        b.refused("n1", "no docker", 0.0)
    assert b.refused("n1", "daemon hung", 0.0) == (5, True)
    assert b.refused("n1", "daemon hung", 0.0) == (10, False)
    b.joined("n1")
    assert b.due("n1", 0.0) and b.refused_nodes() == 0
    assert b.refused("n1", "daemon hung", 0.0) == (5, True)
