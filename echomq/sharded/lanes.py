"""Lanes on a sharded queue: a lane lives on one shard (its placement), so
each call about a lane goes to that shard's :class:`~echomq.lanes.Lanes`;
the listings gather every shard's."""
from __future__ import annotations

from ..checks import MAX_COUNT, check_int


class ShardedLanes:
    """The lanes API over the shards: a lane's calls go to its shard."""

    def __init__(self, queue):
        self.queue = queue

    def _of(self, lane: str):
        return self.queue.shard_for(lane=lane).lanes

    def pause(self, lane: str) -> None:
        self._of(lane).pause(lane)

    def resume(self, lane: str) -> None:
        self._of(lane).resume(lane)

    def limit(self, lane: str, max_active: int | None) -> None:
        self._of(lane).limit(lane, max_active)

    def depth(self, lane: str) -> int:
        return self._of(lane).depth(lane)

    def info(self, lane: str) -> dict:
        return self._of(lane).info(lane)

    def active_counts(self) -> dict[str, int]:
        """Leased jobs per lane, over every shard (a lane lives on one)."""
        out: dict[str, int] = {}
        for s in self.queue.shards:
            out.update(s.lanes.active_counts())
        return out

    def names(self) -> list[str]:
        return sorted(n for s in self.queue.shards for n in s.lanes.names())

    def ring(self) -> list[str]:
        return [n for s in self.queue.shards for n in s.lanes.ring()]

    def deepest(self, n: int = 10) -> list[dict]:
        check_int(n, "n (lanes)", 1, MAX_COUNT)  # before any shard is asked
        rows = [row for s in self.queue.shards for row in s.lanes.deepest(n)]
        return sorted(rows, key=lambda r: -r["depth"])[:n]

    def set_rate(self, lane: str, jobs: int | None, per_ms: int | None = None) -> None:
        """A lane's rate limit is exact: the lane lives on one shard (issue 21)."""
        self._of(lane).set_rate(lane, jobs, per_ms)
        self.queue.turns.restart()  # the windows this process knew of may be gone
