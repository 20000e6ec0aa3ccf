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

A shard whose claim came back short because of a rate limit (its reply's
waits: its share of the queue's window is full, or its lanes cool) is
*held* until its window reopens: no claim goes to it before then, whatever
marks it hot, and then it is hot again. A wake-up on it ends a lanes' hold
(the new job may be on another lane, or flat), not a queue window's, which
nothing can be claimed through. When no shard may have work now, the
claim's reply carries the waits of the held ones (:meth:`ShardTurns.waits`),
as a plain queue's claim carries its own: the consumer waits for the
first window to reopen rather than park a whole beat.
"""
from __future__ import annotations

import math
import random
import threading
import time

from ..cluster import pipeline as cluster_pipeline
from ..errors import translate, translated

STICKY_CYCLES = 4  # claim cycles a consumer stays on one shard that answers full
COOLING_LOOK = 100  # cooling lanes a probe looks at, as a claim does (lua/include/rate.lua)


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
        # shard -> (monotonic time its rate window reopens, whether it is the
        # queue's window (True) or the first cooling lane's (False))
        self._held: dict[int, tuple[float, bool]] = {}

    def _read(self, commands: list) -> list:
        with translated():
            r = cluster_pipeline(self.client, commands)
        failed = next((x for x in r if isinstance(x, Exception)), None)
        if failed is not None:
            raise translate(failed)
        return r

    def probe(self, candidates: list[int]) -> list[int]:
        """Which of ``candidates`` have work, ready or held back only by a
        rate window, and are not paused: flat jobs (which the shard's share
        of the queue's window may hold back), a servable lane, or a lane
        cooling off the ring (``emq:{q}:cooling``) that holds a ready job and
        is not paused -- what makes the shard's claim answer a wait. One
        read-only round trip, nothing taken; two more only for shards whose
        one work may be cooling lanes (:meth:`_cooling_with_jobs`)."""
        commands = []
        for i in candidates:
            s = self.shards[i]
            cooling = s.prefix + "cooling"
            commands += [(("ZCARD", s.k_pending), s.k_pending), (("LLEN", s.k_ring), s.k_ring),
                         (("ZCARD", cooling), cooling), (("HGET", s.k_meta, "paused"), s.k_meta)]
        r = self._read(commands)
        busy, cooling_only = set(), []
        for n, i in enumerate(candidates):
            pending, ring, cools, paused = r[4 * n: 4 * n + 4]
            if paused == b"1":
                continue
            if pending or ring:
                busy.add(i)
            elif cools:
                cooling_only.append(i)
        if cooling_only:
            busy.update(self._cooling_with_jobs(cooling_only))
        return [i for i in candidates if i in busy]

    def _cooling_with_jobs(self, shards: list[int]) -> list[int]:
        """Which of ``shards`` have a cooling lane that holds a ready job and
        is not paused, as the shard's claim looks for one (``rate_lane_wait``
        in lua/include/rate.lua): among the COOLING_LOOK lanes that reopen
        first, or, when none of them does and more cool, counted as having
        one (the claim answers the last one's reopening then, to look
        again). Two read-only round trips: the lanes, then each one's."""
        r = self._read([(("ZRANGE", self.shards[i].prefix + "cooling", 0, COOLING_LOOK),
                         self.shards[i].prefix + "cooling") for i in shards])
        out, commands, asked = [], [], []
        for i, lanes in zip(shards, r):
            if len(lanes) > COOLING_LOOK:
                out.append(i)  # more than the claim looks at: it answers a wait
                continue
            prefix = self.shards[i].prefix
            for lane in lanes:
                lane = lane.decode()
                pk, mk = f"{prefix}g:{lane}:pending", f"{prefix}g:{lane}:meta"
                commands += [(("ZCARD", pk), pk), (("HGET", mk, "paused"), mk)]
                asked.append(i)
        if commands:
            r = self._read(commands)
            out += {i for n, i in enumerate(asked) if r[2 * n] and r[2 * n + 1] != b"1"}
        return out

    def _reopen(self) -> None:
        """(Under the lock.) Held shards whose window has reopened are hot again."""
        if self._held:
            now = time.monotonic()
            for i, (until, _) in list(self._held.items()):
                if until <= now:
                    del self._held[i]
                    self._hot.add(i)

    def _open(self) -> set[int]:
        """(Under the lock, after _reopen.) The hot shards not held."""
        return self._hot.difference(self._held) if self._held else self._hot

    def plan(self, n: int) -> list[tuple[int, int]]:
        """(shard, how many) to ask for ``n`` jobs: all from one shard, the
        current one while it may stay, else the next hot one. When several
        shards may have work and the next is not known to have some (its
        last claim here answered full), they are probed first, so the claim
        goes to one that has some."""
        with self._lock:
            self._reopen()
            hot_now = self._open()
            i = self._current
            if i is not None and i in hot_now and self._stay < STICKY_CYCLES:
                self._stay += 1
                return [(i, n)]
            size = len(self.shards)
            hot = [j for j in ((self.cursor + k) % size for k in range(size)) if j in hot_now]
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

    def answered(self, i: int, got: int, asked: int, queue_wait_ms: int = 0, lane_wait_ms: int = 0) -> None:
        """Shard ``i`` answered ``got`` jobs to a claim of ``asked``, with
        its reply's rate-limit waits (see :class:`~echomq.queue.ClaimedJobs`):
        a short answer with a wait holds the shard until then."""
        with self._lock:
            if got < asked:
                self._hot.discard(i)
                self._full.discard(i)
                wait = queue_wait_ms or lane_wait_ms
                if wait > 0:
                    self._held[i] = (time.monotonic() + wait / 1000, bool(queue_wait_ms))
                else:
                    self._held.pop(i, None)
            else:
                self._full.add(i)
                self._held.pop(i, None)

    def waits(self) -> tuple[int, int]:
        """(queue_wait_ms, lane_wait_ms) for a sharded claim's reply, as a
        plain queue's claim answers them: both 0 while a shard may have work
        now (the next claim asks it); else ``queue_wait_ms`` until the first
        window reopens when every shard's share of the queue's window is
        full (nothing can be claimed before then), or ``lane_wait_ms`` until
        the first held shard reopens (a wake-up may come before: a new job
        on a shard not held); (0, 0) when none is held."""
        with self._lock:
            self._reopen()
            if not self._held or self._open():
                return 0, 0
            first = min(until for until, _ in self._held.values())
            ms = max(1, math.ceil((first - time.monotonic()) * 1000))
            if len(self._held) == len(self.shards) and all(whole for _, whole in self._held.values()):
                return ms, 0
            return 0, ms

    def restart(self) -> None:
        """Look everywhere again, from the next shard in turn, no shard held
        (a direct claim; a changed rate limit)."""
        with self._lock:
            self._hot = set(range(len(self.shards)))
            self._held.clear()
            self._current = None

    def mark_hot(self, shards) -> None:
        """``shards`` may have work (a held one waits for its window still)."""
        with self._lock:
            self._hot.update(shards)

    def woken(self, shards) -> None:
        """A wake token came from each of ``shards``: new work may be ready
        there, so each is hot, and a hold for cooling lanes ends (a hold for
        the queue's window stays: nothing can be claimed through it)."""
        with self._lock:
            for i in shards:
                self._hot.add(i)
                held = self._held.get(i)
                if held is not None and not held[1]:
                    del self._held[i]

    def has_hot(self) -> bool:
        """Whether a shard may have work now (hot, not held)."""
        with self._lock:
            self._reopen()
            return bool(self._open())
