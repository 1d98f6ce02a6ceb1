"""When ``ray_docker``'s rescan asks a node that refused (no Docker, a dead or hung daemon) again: after a delay
that doubles with each refusal for the same reason, capped, instead of placing a new node actor (a new worker
process) on it every rescan. A node that joins, a new node id (the node came back) or a new reason starts over.
"""

from __future__ import annotations

import msgspec

from ...common.backoff import NO_JITTER, backoff_delay


class Refusal(msgspec.Struct):
    """A node's last refusal: why, how many in a row, and when it may be asked again (monotonic seconds)."""

    reason: str
    count: int
    retry_at: float


class RescanBackoff:
    """Per node id: whether the rescan asks the node now."""

    def __init__(self, first_s: float = 5.0, cap_s: float = 300.0) -> None:
        self.first_s = first_s
        self.cap_s = cap_s
        self._refusals: dict[str, Refusal] = {}

    def due(self, node_id: str, now: float) -> bool:
        """Whether the node may be asked at ``now``."""
        r = self._refusals.get(node_id)
        return r is None or now >= r.retry_at

    def refused(self, node_id: str, reason: str, now: float) -> tuple[float, bool]:
        """Record a refusal at ``now``; (the delay before it is asked again, whether the reason is new)."""
        r = self._refusals.get(node_id)
        new = r is None or r.reason != reason
        count = 1 if new or r is None else r.count + 1
        delay = backoff_delay(count, self.first_s, self.cap_s, jitter=NO_JITTER)
        self._refusals[node_id] = Refusal(reason=reason, count=count, retry_at=now + delay)
        return delay, new

    def joined(self, node_id: str) -> None:
        """The node took an actor: forget its refusals."""
        self._refusals.pop(node_id, None)

    def refused_nodes(self) -> int:
        """Nodes whose last answer was a refusal."""
        return len(self._refusals)


__all__ = ["Refusal", "RescanBackoff"]
