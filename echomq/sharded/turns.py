"""Claim turns: which shard a consumer claims from next.

A consumer claims from one shard per cycle and stays on it for up to
STICKY_CYCLES cycles while it answers full claims, then moves on to the next
shard that may have work, from a cursor that starts at a random shard per
process. Staying keeps a cycle's acks (the jobs of the last claims) and its
claim on one shard, so a cycle costs one ``complete_batch`` and one ``claim``,
as on a plain queue, and on a cluster it goes to one node. Moving on bounds
what another shard waits, so no shard starves.

The *hot* set holds the shards that may have ready jobs: a claim that comes
back short takes its shard out, a wake-up (or a failed claim) puts it back.
"""
from __future__ import annotations

import random
import threading

from ..cluster import pipeline as cluster_pipeline
from ..errors import translate, translated

STICKY_CYCLES = 4  # claim cycles a consumer stays on one shard that answers full


class ShardTurns:
    """The claim turns of one ShardedQueue object (shared by its consumers)."""

    def __init__(self, shards: list, client):
        self.shards = shards  # the shard Queues
        self.client = client
        self._lock = threading.Lock()
        self._hot = set(range(len(shards)))   # shards that may have ready jobs
        self.cursor = random.randrange(len(shards))  # the next move starts here: consumers start apart
        self._current: int | None = None      # the shard this process claims from now
        self._stay = 0                        # claim cycles spent on it in a row
        self._full: set[int] = set()          # shards whose last claim here answered full

    def probe(self, candidates: list[int]) -> list[int]:
        """Which of ``candidates`` have ready work (flat jobs or a servable
        lane, and not paused): one read-only round trip, nothing taken."""
        commands = []
        for i in candidates:
            s = self.shards[i]
            commands += [(("ZCARD", s.k_pending), s.k_pending), (("LLEN", s.k_ring), s.k_ring),
                         (("HGET", s.k_meta, "paused"), s.k_meta)]
        with translated():
            r = cluster_pipeline(self.client, commands)
        failed = next((x for x in r if isinstance(x, Exception)), None)
        if failed is not None:
            raise translate(failed)
        return [i for n, i in enumerate(candidates)
                if (r[3 * n] or r[3 * n + 1]) and r[3 * n + 2] != b"1"]

    def plan(self, n: int) -> list[tuple[int, int]]:
        """(shard, how many) to ask for ``n`` jobs: all from one shard, the
        current one while it may stay, else the next hot one. When several
        shards may have work and the next is not known to have some (its
        last claim here answered full), they are probed first, so the claim
        goes to one that has some."""
        with self._lock:
            i = self._current
            if i is not None and i in self._hot and self._stay < STICKY_CYCLES:
                self._stay += 1
                return [(i, n)]
            size = len(self.shards)
            hot = [j for j in ((self.cursor + k) % size for k in range(size)) if j in self._hot]
            known = bool(hot) and hot[0] in self._full
        if len(hot) > 1 and not known:
            busy = self.probe(hot)
            with self._lock:
                self._hot.difference_update(set(hot) - set(busy))
            hot = busy
        with self._lock:
            if not hot:
                self._current = None
                return []
            i = hot[0]
            self._current, self._stay = i, 1
            self.cursor = (i + 1) % len(self.shards)
        return [(i, n)]

    def answered(self, i: int, got: int, asked: int) -> None:
        """Shard ``i`` answered ``got`` jobs to a claim of ``asked``."""
        with self._lock:
            if got < asked:
                self._hot.discard(i)
                self._full.discard(i)
            else:
                self._full.add(i)

    def restart(self) -> None:
        """Look everywhere again, from the next shard in turn (a direct claim)."""
        with self._lock:
            self._hot = set(range(len(self.shards)))
            self._current = None

    def mark_hot(self, shards) -> None:
        with self._lock:
            self._hot.update(shards)

    def has_hot(self) -> bool:
        return bool(self._hot)
