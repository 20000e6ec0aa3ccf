"""Fair lanes: per-key sub-queues served in turn from the ring.

A lane is named by a branded id (a codemojex lane is the player's ``PLR``
id). ``Queue.enqueue(..., lane=L)`` puts a job on lane L; claims rotate the
ring of servable lanes one step per job, so a lane with ten thousand jobs
delays another lane's single job by at most one claim.
"""
from __future__ import annotations

from . import keyspace
from .checks import MAX_COUNT, check_int
from .errors import ArgumentError, translated
from .rates import rate_args, rate_view

_mapped = translated()  # a view decorated with it raises typed errors


class Lanes:
    def __init__(self, queue):
        self.queue = queue

    def _op(self, lane: str, op: str, value: int = 0) -> bool:
        key = keyspace.lane_key(self.queue.name, lane, "meta")
        return self.queue._run("lane", (key,), (self.queue.prefix, lane, op, value)) == 1

    def pause(self, lane: str) -> None:
        """Stop serving ``lane``; its jobs stay ready and keep their order."""
        self._op(lane, "pause")

    def resume(self, lane: str) -> None:
        self._op(lane, "resume")

    def limit(self, lane: str, max_active: int | None) -> None:
        """Serve at most ``max_active`` jobs of the lane at once, 1 or more
        (None: no limit). 0 is refused: the script reads it as "no limit",
        the opposite of what it says; to serve none, ``pause`` the lane."""
        if max_active is not None:
            if max_active == 0 and isinstance(max_active, int) and not isinstance(max_active, bool):
                raise ArgumentError("lane limit 0 would serve the lane without limit; pause the lane to serve "
                                    "none, or give None for no limit")
            check_int(max_active, "lane limit", 1, MAX_COUNT)
        self._op(lane, "limit", max_active or 0)

    def set_rate(self, lane: str, jobs: int | None, per_ms: int | None = None) -> None:
        """Claim at most ``jobs`` jobs of ``lane`` per window of ``per_ms``
        (server clock, every consumer); ``None`` clears it. A lane whose
        window is full leaves the ring until it reopens, so the other lanes
        are served meanwhile."""
        jobs, per_ms = rate_args(jobs, per_ms)
        key = keyspace.lane_key(self.queue.name, lane, "meta")
        self.queue._run("lane_rate", (key,), (self.queue.prefix, lane, jobs, per_ms))

    @_mapped
    def depth(self, lane: str) -> int:
        """Ready jobs waiting on the lane."""
        return self.queue.client.zcard(keyspace.lane_key(self.queue.name, lane))

    @_mapped
    def active_counts(self) -> dict[str, int]:
        """Leased jobs per lane, read from the queue's active set and the
        rows' lanes: O(leased jobs). Only a lane with a limit keeps a count
        of its own (lua/include/lanes.lua); this serves the others."""
        c = self.queue.client
        leased = c.zrange(self.queue.k_active, 0, -1)
        pipe = c.pipeline(transaction=False)
        for jid in leased:
            pipe.hget(self.queue.prefix + "job:" + jid.decode(), "lane")
        counts: dict[str, int] = {}
        for lane in pipe.execute() if leased else ():
            if lane:
                counts[lane.decode()] = counts.get(lane.decode(), 0) + 1
        return counts

    @_mapped
    def info(self, lane: str) -> dict:
        """The lane's depth, leased jobs, pause, limit and rate window. Its
        active count is the lane's own under a limit, else counted from the
        active set (``active_counts``)."""
        return self._info(lane, None)

    def _info(self, lane: str, active_counts: dict[str, int] | None) -> dict:
        c = self.queue.client
        meta = c.hgetall(keyspace.lane_key(self.queue.name, lane, "meta"))
        meta = {k.decode(): v.decode() for k, v in meta.items()}
        rate = None
        if "rate_jobs" in meta:
            rate = rate_view([meta.get(f) for f in ("rate_jobs", "rate_ms", "rate_start", "rate_count")],
                             self.queue.server_time_ms())
        if "limit" in meta:
            active = int(meta.get("active", 0))
        else:
            active = (self.active_counts() if active_counts is None else active_counts).get(lane, 0)
        return {"lane": lane, "depth": self.depth(lane), "active": active,
                "paused": meta.get("paused") == "1",
                "limit": int(meta["limit"]) if "limit" in meta else None,
                "rate": rate, "cooling": meta.get("cooling") == "1"}

    @_mapped
    def names(self) -> list[str]:
        return sorted(m.decode() for m in self.queue.client.smembers(self.queue.k_lanes))

    @_mapped
    def ring(self) -> list[str]:
        """Lanes that can be served now, in the order they will be."""
        return [m.decode() for m in self.queue.client.lrange(self.queue.k_ring, 0, -1)]

    @_mapped
    def deepest(self, n: int = 10) -> list[dict]:
        """The ``n`` lanes with the most ready jobs (``n`` in 1..MAX_COUNT)."""
        check_int(n, "n (lanes)", 1, MAX_COUNT)
        names = self.names()
        pipe = self.queue.client.pipeline(transaction=False)
        for lane in names:
            pipe.zcard(keyspace.lane_key(self.queue.name, lane))
        depths = sorted(zip(pipe.execute(), names), reverse=True)[:n]
        active = self.active_counts() if depths else {}
        return [self._info(lane, active) for _, lane in depths]
