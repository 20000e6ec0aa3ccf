"""ShardedQueue: one logical queue over S ordinary queues, for a cluster.

It answers the :class:`~echomq.Queue` API by sending each call to the shards
concerned, through the shards' own public builders (``add_claim``,
``add_complete_batch``, ``parse_claim``, ...): where a job goes is
:mod:`.placement`'s, the round trips :mod:`.batching`'s, which shard a claim
asks :mod:`.turns`'s and the idle wait :mod:`.parking`'s. Errors come out
typed (``errors.translate``), as from a Queue.
"""
from __future__ import annotations

import heapq
import logging
import zlib
from typing import Iterable, Mapping

from .. import ids, keyspace
from .. import events as _events
from .. import flows as _flows
from ..checks import (MAX_BATCH, MAX_MS, MAX_PROGRESS, MAX_TEXT, check_claim, check_int, check_json, check_pairs,
                      check_seconds, check_token, enqueue_items)
from ..cluster import node_of
from ..errors import UNAVAILABLE, ArgumentError, JobNotFound, WrongState, translate, translated
from ..queue import DEFAULT_LEASE_MS, ClaimedJobs, Queue, Reaped, check_unique_key
from ..rates import rate_args
from .. import schedules as _schedules
from ..schedules import check_name
from .batching import NodeBatch, ShardedBatch
from .lanes import ShardedLanes
from .parking import ShardParking
from .placement import shard_names, shard_of
from .turns import ShardTurns

log = logging.getLogger(__name__)


class _Claimed(list):
    """A sharded claim's reply: (shard index, how many asked, raw reply)."""


class ShardedQueue:
    """S queues behind the :class:`~echomq.Queue` API (see :mod:`echomq.sharded`)."""

    def __init__(self, name: str, client, shards: int):
        self.name = keyspace.check_queue(name)
        self.client = client
        self.shards = [Queue(n, client) for n in shard_names(name, shards)]
        for i, shard in enumerate(self.shards):  # schedule numbers (in tick ids) unique across the shards
            shard.schedule_numbers = (len(self.shards), i)
        self.prefix = keyspace.prefix(name)  # names the logical queue only; it holds no keys
        self._where: dict[str, int] = {}     # job id -> shard, for jobs claimed here and not settled
        self.turns = ShardTurns(self.shards, client)  # which shard the next claim asks

    def __repr__(self) -> str:
        return f"<ShardedQueue {self.name} x{len(self.shards)}>"

    # -- placement ----------------------------------------------------------
    def shard_index(self, *, lane: str | None = None, job_id: str | None = None,
                    unique_key: str | None = None) -> int:
        """The shard a job goes to: its lane's; else its unique key's (a
        CRC32 of the key); else its id's. Without a lane, a job with a key
        must have an id of the key's shard too (see :meth:`enqueue`)."""
        if unique_key is not None and not lane:
            return zlib.crc32(check_unique_key(unique_key).encode()) % len(self.shards)
        return shard_of(lane=lane, job_id=job_id, shards=len(self.shards))

    def shard_for(self, *, lane: str | None = None, job_id: str | None = None) -> Queue:
        return self.shards[self.shard_index(lane=lane, job_id=job_id)]

    def job_key(self, job_id: str, lane: str | None = None) -> str:
        """The row key where a job enqueued with this id (and lane) lives."""
        return self.shard_for(lane=lane, job_id=job_id).job_key(job_id)

    def locate(self, job_id: str) -> Queue:
        """The shard holding ``job_id``: known if claimed here, else found
        with one pipelined EXISTS per shard (the id's own shard when none has it)."""
        keyspace.check_job_id(job_id)
        where = self._where.get(job_id)
        if where is not None:
            return self.shards[where]
        pipe = self.client.pipeline(transaction=False)
        for shard in self.shards:
            pipe.exists(shard.job_key(job_id))
        with translated():
            found = pipe.execute()
        for shard, there in zip(self.shards, found):
            if there:
                return shard
        return self.shard_for(job_id=job_id)

    def _forget(self, job_id: str) -> None:
        self._where.pop(job_id, None)

    # -- admission ------------------------------------------------------------
    def enqueue(self, payload, *, job_id: str | None = None, lane: str | None = None,
                delay_ms: int | None = None, **options) -> tuple[str, str]:
        """As Queue.enqueue (``options``: priority, unique_key, unique_ttl_ms),
        on the job's shard: its lane's, else its id's.

        A job with a ``unique_key`` and no lane lives on the key's shard, so
        every enqueue of the key meets its holder there (a live holder
        answers its id and ``"duplicate"``), and on its id's shard, so the
        id stays the idempotency key across the shards (an id lives on one
        shard only): its id must be one of the key's shard. Without
        ``job_id`` one is minted for that shard (:meth:`mint_job_id`); an
        explicit ``job_id`` of another shard raises ArgumentError, nothing
        written -- admitting it would make it a second job of that id (on
        the key's shard and on the id's). Give such a job a lane, or an id
        from ``mint_job_id(unique_key=...)``. With a lane, the lane's shard
        holds the job and the key is unique among that shard's lanes."""
        shard, job_id = self._placed(lane, job_id, options.get("unique_key"))
        return shard.enqueue(payload, job_id=job_id, lane=lane, delay_ms=delay_ms, **options)

    def enqueue_many(self, items: Iterable) -> list[tuple[str, str]]:
        """As Queue.enqueue_many, each item placed as :meth:`enqueue` places
        it: every item validated first (one refused refuses the call,
        nothing written), then one pipeline (one batch per node)."""
        batch = NodeBatch(self.client)
        job_ids = []
        for payload, job_id, lane, delay_ms, options in enqueue_items(items):
            # minted here, when not given: the id chooses the shard
            shard, job_id = self._placed(lane, job_id, options.get("unique_key"))
            job_ids.append(shard.add_enqueue(batch, payload, job_id=job_id, lane=lane, delay_ms=delay_ms, **options))
        out = []
        for job_id, reply in zip(job_ids, batch.run()):
            if isinstance(reply, Exception):
                raise translate(reply)
            out.append(Queue.enqueued(job_id, reply))
        return out

    # -- the lease ------------------------------------------------------------
    def batch(self) -> ShardedBatch:
        return ShardedBatch(self.client)

    batch_answers = staticmethod(Queue.batch_answers)

    def add_claim(self, batch: ShardedBatch, n: int, *, lease_ms: int, **kw) -> None:
        parts = []
        for i, ask in self.turns.plan(n):
            parts.append((batch.part(lambda b, s=self.shards[i], k=ask: s.add_claim(b, k, lease_ms=lease_ms, **kw)),
                          (i, ask)))

        def combine(replies):
            ok = _Claimed((i, ask, raw) for (i, ask), raw in replies if not isinstance(raw, Exception))
            failed = [raw for _, raw in replies if isinstance(raw, Exception)]
            if failed:  # try those shards again next cycle
                self.turns.mark_hot(i for (i, _), raw in replies if isinstance(raw, Exception))
                if not ok:
                    return failed[0]
                log.warning("sharded %s: %d shard claim(s) failed: %s", self.name, len(failed), failed[0])
            return ok

        batch.add(combine, parts)

    def parse_claim(self, reply) -> ClaimedJobs:
        """The jobs of a sharded claim (:meth:`add_claim`), as
        :meth:`Queue.parse_claim` answers them, with the rate limits' waits
        of the shards (see :meth:`ShardTurns.waits`): 0 while a shard not
        held by a window may have work; else ``queue_wait_ms`` when every
        shard's share of the queue's window is full, until the first
        reopens, or ``lane_wait_ms`` until the first held shard reopens."""
        jobs = ClaimedJobs()
        for i, ask, raw in reply:
            got = self.shards[i].parse_claim(raw)
            self.turns.answered(i, len(got), ask, got.queue_wait_ms, got.lane_wait_ms)
            self._where.update((job.id, i) for job in got)
            jobs += got
        jobs.queue_wait_ms, jobs.lane_wait_ms = self.turns.waits()
        return jobs

    def claim_batch(self, n: int, *, lease_ms: int = DEFAULT_LEASE_MS, consumer: str | None = None) -> ClaimedJobs:
        """Lease up to ``n`` ready jobs from the shards, in turn; a short
        answer carries the waits as :meth:`parse_claim`'s."""
        check_claim(n, lease_ms, consumer)
        self.turns.restart()  # a direct claim looks everywhere, from the next shard in turn
        jobs = ClaimedJobs()
        while len(jobs) < n:  # shards that ran short are dropped from the hot set
            batch = self.batch()
            self.add_claim(batch, n - len(jobs), lease_ms=lease_ms, consumer=consumer)
            reply = batch.run()
            if not reply or (not isinstance(reply[0], Exception) and not reply[0]):
                break
            if isinstance(reply[0], Exception):
                raise translate(reply[0])
            jobs += self.parse_claim(reply[0])
        jobs.queue_wait_ms, jobs.lane_wait_ms = self.turns.waits() if len(jobs) < n else (0, 0)
        return jobs

    def claim(self, *, lease_ms: int = DEFAULT_LEASE_MS, consumer: str | None = None):
        jobs = self.claim_batch(1, lease_ms=lease_ms, consumer=consumer)
        return jobs[0] if jobs else None

    def _group(self, pairs) -> dict[int, list[tuple[int, str, int]]]:
        groups: dict[int, list] = {}
        where = self._where  # jobs claimed here: known without a lookup (ids checked by the shard's call)
        for pos, (job_id, attempts) in enumerate(pairs):
            i = where.get(job_id)
            if i is None:
                i = self.shards.index(self.locate(job_id))
            group = groups.get(i)
            if group is None:
                groups[i] = group = []
            group.append((pos, job_id, attempts))
        return groups

    def add_complete_batch(self, batch: ShardedBatch, pairs) -> None:
        pairs = list(pairs)
        parts = []
        for i, items in self._group(pairs).items():
            idx = batch.part(lambda b, s=self.shards[i], it=items: s.add_complete_batch(
                b, [(jid, att) for _, jid, att in it]))
            parts.append((idx, [(pos, jid) for pos, jid, _ in items]))

        def combine(replies):
            out = [0] * len(pairs)
            failed = next((raw for _, raw in replies if isinstance(raw, Exception)), None)
            for positions, raw in replies:
                if isinstance(raw, Exception):
                    continue  # those jobs stay known: the acks are sent again
                for (pos, jid), code in zip(positions, raw):
                    out[pos] = code
                    if failed is None:
                        self._forget(jid)
            return failed if failed is not None else out

        batch.add(combine, parts)

    def _settling(self, job_id: str):
        """A combine for one job's settling call: the job is forgotten only
        once the call answered (a lost connection sends it again, and the
        consumer must still know where the job lives without asking)."""
        def combine(parts):
            reply = parts[0][1]
            if not isinstance(reply, UNAVAILABLE):
                self._forget(job_id)
            return reply
        return combine

    def add_retry(self, batch: ShardedBatch, job_id: str, attempts: int, **kw) -> None:
        shard = self.locate(job_id)
        batch.add(self._settling(job_id), [(batch.part(lambda b: shard.add_retry(b, job_id, attempts, **kw)), None)])

    def add_release(self, batch: ShardedBatch, job_id: str, attempts: int) -> None:
        shard = self.locate(job_id)
        batch.add(self._settling(job_id), [(batch.part(lambda b: shard.add_release(b, job_id, attempts)), None)])

    def _one(self, add):
        batch = self.batch()
        add(batch)
        reply = batch.run()[0]
        if isinstance(reply, Exception):
            raise translate(reply)
        return reply

    def complete(self, job_id: str, attempts: int) -> bool:
        done = self.locate(job_id).complete(job_id, attempts)
        self._forget(job_id)
        return done

    def complete_many(self, pairs) -> list:
        pairs = check_pairs(pairs, "complete_many")
        if not pairs:
            return []
        return self.batch_answers(self._one(lambda b: self.add_complete_batch(b, pairs)))

    def retry(self, job_id: str, attempts: int, **kw) -> str:
        answer = self.locate(job_id).retry(job_id, attempts, **kw)
        self._forget(job_id)
        return answer

    def release(self, job_id: str, attempts: int) -> bool:
        answer = self.locate(job_id).release(job_id, attempts)
        self._forget(job_id)
        return answer

    def extend(self, job_id: str, attempts: int, *, lease_ms: int = DEFAULT_LEASE_MS) -> int:
        return self.locate(job_id).extend(job_id, attempts, lease_ms=lease_ms)

    def extend_many(self, pairs, *, lease_ms: int) -> list:
        check_int(lease_ms, "lease_ms", 1, MAX_MS)
        pairs = check_pairs(pairs, "extend_many")
        batch = NodeBatch(self.client)
        for job_id, attempts in pairs:
            self.locate(job_id).add_extend(batch, job_id, attempts, lease_ms=lease_ms)
        return [translate(r) if isinstance(r, Exception) else r for r in batch.run()]

    def cancel(self, job_id: str) -> str:
        """As :meth:`Queue.cancel`, on the shard holding the job."""
        return self.locate(job_id).cancel(job_id)

    # -- maintenance -------------------------------------------------------------
    def _each(self, add) -> list:
        """``add(shard, batch)`` for every shard, one pipeline; errors raised typed."""
        batch = NodeBatch(self.client)
        for s in self.shards:
            add(s, batch)
        out = batch.run()
        for r in out:
            if isinstance(r, Exception):
                raise translate(r)
        return out

    def reap(self, *, max_stalls: int = 2, limit: int = 1000) -> Reaped:
        replies = self._each(lambda s, b: s.add_reap(b, max_stalls=max_stalls, limit=limit))
        return Reaped(sum(r[0] for r in replies), sum(r[1] for r in replies))

    def promote(self, *, limit: int = 1000) -> int:
        return sum(self._each(lambda s, b: s.add_promote(b, limit=limit)))

    def pause(self) -> None:
        self._each(lambda s, b: s.add_pause(b))

    def resume(self) -> None:
        self._each(lambda s, b: s.add_pause(b, False))

    def requeue_dead(self, job_id: str) -> None:
        self.locate(job_id).requeue_dead(job_id)

    def remove(self, job_id: str) -> str | None:
        return self.locate(job_id).remove(job_id)

    @property
    def lanes(self) -> ShardedLanes:
        return ShardedLanes(self)

    # -- views ---------------------------------------------------------------------
    def shard_counts(self) -> list[dict]:
        """Each shard's counts, with its name and the node that serves it."""
        replies = self._each(lambda s, b: s.add_counts(b))
        return [{"name": s.name, "node": node_of(self.client, s.k_meta), "counts": Queue.parse_counts(reply)}
                for s, reply in zip(self.shards, replies)]

    def counts(self) -> dict:
        rows = [r["counts"] for r in self.shard_counts()]
        out = {k: sum(r[k] for r in rows) for k in rows[0] if k != "paused"}
        out["paused"] = any(r["paused"] for r in rows)
        return out

    def job(self, job_id: str) -> dict | None:
        return self.locate(job_id).job(job_id)

    def _merged(self, method: str, limit: int, key, reverse: bool = False) -> list:
        rows = [getattr(s, method)(limit) for s in self.shards]
        merged = heapq.merge(*rows, key=key, reverse=reverse)
        return [row for _, row in zip(range(limit), merged)]

    def dead_jobs(self, limit: int = 100) -> list[dict]:
        return self._merged("dead_jobs", limit, lambda r: r["died"], reverse=True)

    def active_jobs(self, limit: int = 100) -> list[dict]:
        return self._merged("active_jobs", limit, lambda r: r["lease_deadline"])

    def scheduled_jobs(self, limit: int = 100) -> list[dict]:
        return self._merged("scheduled_jobs", limit, lambda r: r["run_at"])

    def pending_ids(self, limit: int = 100) -> list[str]:
        """The shards' flat ready jobs in claim order: highest priority first,
        then oldest (a claim takes each shard's in that order)."""
        return [job_id for job_id, _ in self.pending_order(limit)]

    def pending_order(self, limit: int = 100) -> list[tuple[str, tuple[int, str]]]:
        return self._merged("pending_order", limit, lambda row: row[1])

    def per_minute(self, minutes: int = 60) -> list[dict]:
        per = [s.per_minute(minutes) for s in self.shards]
        return [{"minute": rows[0]["minute"], "completed": sum(r["completed"] for r in rows),
                 "dead": sum(r["dead"] for r in rows)} for rows in zip(*per)]

    def server_time_ms(self) -> int:
        return self.shards[0].server_time_ms()

    # -- retention --------------------------------------------------------------
    def set_retention(self, **bounds) -> None:
        """As :meth:`Queue.set_retention`, on every shard (each keeps its own records)."""
        for shard in self.shards:
            shard.set_retention(**bounds)

    def completed_jobs(self, limit: int = 100) -> list[dict]:
        return self._merged("completed_jobs", limit, lambda r: r["finished"], reverse=True)

    def find(self, job_id: str) -> dict | None:
        """As :meth:`Queue.find`: the shard that holds the row, else any
        shard's completed record (a finished lane job lives on its lane's shard)."""
        found = self.locate(job_id).find(job_id)
        if found is not None:
            return found
        for shard in self.shards:
            found = shard.find(job_id)
            if found is not None:
                return found
        return None

    def keys(self) -> list[str]:
        return sorted(k for s in self.shards for k in s.keys())

    # -- the consumer's idle wait ------------------------------------------------
    def parking(self, consumer: str) -> ShardParking:
        """Where a consumer of this queue waits for work: every shard's wake
        list at once and a local doorbell (:mod:`.parking`); ``consumer`` is
        not needed, as the doorbell is not a key."""
        return ShardParking(self)

    def mark_hot(self, shards: Iterable[int]) -> None:
        """The next claims may find work on ``shards`` (a look that found
        some); one held by a rate window is asked once the window reopens."""
        self.turns.mark_hot(shards)

    def has_hot(self) -> bool:
        """Whether any shard may have work now, as far as this process knows."""
        return self.turns.has_hot()

    def look_again(self) -> None:
        """A consumer waited a beat for a rate window, deaf to wake-ups: the
        holds this process knew of go, so its next claim asks every shard.
        A limit cleared or changed elsewhere, and new work on a shard held
        for its lanes or on an empty one, are seen within a beat; a window
        still full answers its wait again."""
        self.turns.restart()

    # --- issue 21: schedules, priorities, rate limits, unique jobs ---
    # Priorities need nothing here: a job's priority orders its own ready set,
    # on its own shard. The rest, and how each works across shards:

    def _placed(self, lane: str | None, job_id: str | None, unique_key: str | None) -> tuple[Queue, str]:
        """(shard, job id) of a job to enqueue (the id minted when None).

        With a lane: the lane's shard (a unique key is unique among the
        lanes of that shard). Without one: the id's shard, so an id is one
        job on one shard whatever else an enqueue of it says; with a unique
        key that must also be the key's shard, so every enqueue of the key
        meets its holder. So a minted id is minted for the key's shard, and
        an explicit id of another shard is refused (ArgumentError, before
        anything is sent): both rules cannot hold for it, and either broken
        would admit a second job (two of one id, or two holders of one key)."""
        if lane or unique_key is None:
            job_id = ids.mint("JOB") if job_id is None else job_id
            return self.shard_for(lane=lane, job_id=job_id), job_id
        home = self.shard_index(unique_key=unique_key)
        if job_id is None:
            return self.shards[home], self._mint_on(home)
        own = self.shard_index(job_id=job_id)
        if own != home:
            raise ArgumentError(
                f"{self!r}: a job with unique_key {unique_key!r} and no lane lives on its key's shard, "
                f"{self.shards[home].name}, and a job id on its own shard; {job_id} is one of "
                f"{self.shards[own].name}, so it would be a second job of that id. Leave job_id out (one of "
                f"the key's shard is minted), take one from mint_job_id(unique_key=...), or give the job a lane")
        return self.shards[home], job_id

    def _mint_on(self, i: int) -> str:
        """A fresh JOB id of shard ``i``: minted until one falls there
        (about S mints of a microsecond or two)."""
        n = len(self.shards)
        while True:
            job_id = ids.mint("JOB")
            if zlib.crc32(job_id.encode()) % n == i:
                return job_id

    def mint_job_id(self, *, unique_key: str | None = None) -> str:
        """A fresh JOB id; with ``unique_key``, one of the key's shard, which
        an enqueue with that key and no lane takes as its ``job_id`` (for an
        id needed before the job is admitted)."""
        if unique_key is None:
            return ids.mint("JOB")
        return self._mint_on(self.shard_index(unique_key=unique_key))

    def _schedule_shard(self, name: str, lane: str | None) -> int:
        """A schedule lives on its lane's shard, else on its name's: one
        shard holds its cursor and enqueues every tick (ticks are jobs of
        that shard, so each is fired atomically with its cursor)."""
        if lane:
            return self.shard_index(lane=lane)
        return zlib.crc32(check_name(name).encode()) % len(self.shards)

    def _holding(self, name: str) -> Queue | None:
        """The shard that holds schedule ``name``, or None."""
        check_name(name)
        pipe = self.client.pipeline(transaction=False)
        for shard in self.shards:
            pipe.exists(f"{shard.prefix}sched:{name}")
        with translated():
            found = pipe.execute()
        return next((s for s, there in zip(self.shards, found) if there), None)

    def schedule(self, name: str, *, lane: str | None = None, **definition) -> str:
        """As Queue.schedule, on the schedule's shard (see _schedule_shard).

        A copy left on another shard by an older definition (another lane)
        is removed, and one copy stays even when two processes declare the
        schedule with different lanes at once: each declaration is stamped
        (later ones stamp larger) and stores its stamp with its copy; then
        it removes the copies with older stamps on the other shards, and if
        one of them holds a newer stamp, withdraws its own copy (unless a
        newer declaration stamped it since). The newest declaration's copy
        stays; removing before storing would leave two, storing then
        removing unconditionally none."""
        *_, answer = self._declaring(name, lane, definition)
        return answer

    def _declaring(self, name: str, lane: str | None, definition: dict):
        """schedule()'s steps, one per ``next()`` (a test interleaves two
        declarations step by step): mint the stamp; store the stamped copy;
        remove older copies elsewhere; withdraw it if another shard holds a
        newer one. The last thing yielded is the stored copy's answer."""
        i = self._schedule_shard(name, lane)
        stamp = _schedules.new_stamp(i)
        yield None  # (minted: another declaration may store and finish before this one stores)
        answer = _schedules.set_schedule(self.shards[i], name, lane=lane, stamp=stamp, **definition)
        yield answer
        others = [shard for j, shard in enumerate(self.shards) if j != i]
        if -1 in _schedules.supersede(others, name, stamp):
            yield answer
            _schedules.supersede([self.shards[i]], name, stamp, withdraw=True)
        yield answer

    def schedules(self) -> list[dict]:
        rows = [row for shard in self.shards for row in shard.schedules()]
        return sorted(rows, key=lambda r: (r["next_ms"] is None, r["next_ms"] or 0, r["name"]))

    def _schedule_op(self, name: str, op: str) -> bool:
        shard = self._holding(name)
        return shard is not None and getattr(shard, op)(name)

    def unschedule(self, name: str) -> bool:
        return self._schedule_op(name, "unschedule")

    def pause_schedule(self, name: str) -> bool:
        return self._schedule_op(name, "pause_schedule")

    def resume_schedule(self, name: str) -> bool:
        return self._schedule_op(name, "resume_schedule")

    def fire_schedules(self, *, limit: int = 1000) -> int:
        check_int(limit, "limit", 1, MAX_BATCH)
        return sum(shard.fire_schedules(limit=limit) for shard in self.shards)

    def ready_shards(self) -> list[int]:
        """The shards with jobs to claim, now or once a rate window reopens
        (flat jobs, a servable lane, or a cooling lane that holds a ready
        job: see :meth:`ShardTurns.probe`), not paused; read-only. A
        draining consumer asks before it decides the queue is drained, so
        jobs held back only by a rate limit are still drained: its claims
        answer the waits, and it waits for the windows."""
        return self.turns.probe(list(range(len(self.shards))))

    def rate_shares(self, jobs: int, per_ms: int) -> list[tuple[int, int]]:
        """Each shard's (jobs, per_ms) under a queue-wide limit of ``jobs``
        per ``per_ms``: the limit is split evenly, since a claim runs on one
        shard's node and cannot count another's. With at least as many jobs
        as shards, shard i gets jobs // S (one more for the first jobs % S);
        with fewer, each gets one job per ceil(per_ms * S / jobs). So the
        shards together never claim more than the limit; a shard that has
        no work does not lend its share to the others. A split window
        longer than MAX_MS (a window's longest) raises ArgumentError: capped,
        the shards together would allow more than the limit."""
        n = len(self.shards)
        if jobs >= n:
            return [(jobs // n + (1 if i < jobs % n else 0), per_ms) for i in range(n)]
        per = -(-per_ms * n // jobs)
        if per > MAX_MS:
            raise ArgumentError(
                f"{self!r}: a limit of {jobs} per {per_ms} ms is split over {n} shards as 1 job per {per} ms "
                f"on each, longer than the longest window ({MAX_MS} ms), and a shorter one would let the "
                f"shards together claim more than {jobs}: with {jobs} job(s) per window per_ms must be at "
                f"most {MAX_MS * jobs // n} (or give at least {n} jobs, one per shard)")
        return [(1, per)] * n

    def set_rate_limit(self, jobs: int | None, per_ms: int | None = None) -> None:
        """As Queue.set_rate_limit, split over the shards (see rate_shares:
        every share is worked out, and checked, before the first is set)."""
        jobs, per_ms = rate_args(jobs, per_ms)
        shares = self.rate_shares(jobs, per_ms) if jobs else [(None, None)] * len(self.shards)
        for shard, (share, per) in zip(self.shards, shares):
            shard.set_rate_limit(share, per)
        self.turns.restart()  # the windows this process knew of are gone

    def rate_limit(self) -> dict | None:
        """The shards' limits summed: jobs and claimed over the longest
        share's window, with each shard's own view under ``shards``."""
        views = [s.rate_limit() for s in self.shards]
        if any(v is None for v in views):
            return None
        return {"jobs": sum(v["jobs"] for v in views), "per_ms": max(v["per_ms"] for v in views),
                "claimed": sum(v["claimed"] for v in views),
                "window_ms_left": max(v["window_ms_left"] for v in views), "shards": views}

    # --- issue 22: events, progress, wait, flows ---
    # Each shard keeps its own stream, waiters and flows; these answer for the
    # whole queue.
    def progress(self, job_id: str, attempts: int, value) -> bool:
        """As :meth:`Queue.progress` (the token and value checked before the job is looked for)."""
        check_token(attempts)
        check_json(value, "progress", MAX_PROGRESS)
        return self.locate(job_id).progress(job_id, attempts, value)

    def set_result(self, job_id: str, attempts: int, value) -> bool:
        check_token(attempts)
        check_json(value, "result", MAX_TEXT)
        return self.locate(job_id).set_result(job_id, attempts, value)

    def set_events(self, maxlen: int | None) -> None:
        """As :meth:`Queue.set_events`, on every shard (each caps its own stream)."""
        for shard in self.shards:
            shard.set_events(maxlen)

    def events(self, after: str = "$", *, block_ms: int | None = None, count: int = 100,
               reader: str | None = None):
        """As :meth:`Queue.events`, over every shard: each shard's events in
        its order, interleaved by time (:func:`echomq.events.merged`). An
        event's ``cursor`` names a position in every shard: pass it as
        ``after`` to resume. A named ``reader`` records its position in each
        shard's stream, so its lag shows per shard (``event_stats``)."""
        _events.check_cursor(after, len(self.shards))
        _events.check_reader(reader)
        if block_ms is not None:
            check_int(block_ms, "block_ms", 0, MAX_MS)
        return _events.merged(self.shards, after, block_ms=block_ms, count=check_int(count, "count", 1, MAX_BATCH),
                              reader=reader)

    def recent_events(self, limit: int = 100, **match) -> list:
        """As :meth:`Queue.recent_events`, over the shards, newest first."""
        rows = [s.recent_events(limit, **match) for s in self.shards]
        newest = heapq.merge(*rows, key=lambda e: (_events.id_key(e.id), e.index), reverse=True)
        return [e for _, e in zip(range(limit), newest)]

    def event_history(self, job_id: str) -> list:
        """The job's events, from the shard whose stream has them."""
        for shard in [self.locate(job_id)] + self.shards:
            found = shard.event_history(job_id)
            if found:
                return found
        return []

    def event_stats(self) -> dict:
        """Each shard's stream figures, summed; readers named per shard."""
        per = [(s.name, s.event_stats()) for s in self.shards]
        return {"maxlen": per[0][1]["maxlen"], "length": sum(st["length"] for _, st in per),
                "added": sum(st["added"] for _, st in per),
                "readers": {f"{name}/{r}": v for name, st in per for r, v in st["readers"].items()},
                "shards": dict(per)}

    def wait(self, job_id: str, timeout_s: float) -> str:
        """As :meth:`Queue.wait`: on the shard that holds the job's row, else
        on the one whose records say it completed."""
        check_seconds(timeout_s, "timeout_s")
        shard = self.locate(job_id)
        try:
            return shard.wait(job_id, timeout_s)
        except JobNotFound:
            for other in self.shards:
                if other is not shard and other.find(job_id) is not None:
                    return other.wait(job_id, timeout_s)
            raise

    def enqueue_flow(self, parent, children, *, on_child_failure: str = "fail"):
        """As :meth:`Queue.enqueue_flow`; the whole flow goes to the parent's
        shard (its lane's, else its id's), so every step stays one script.
        The ids are looked for on the other shards first (:meth:`_flow_ids_elsewhere`):
        a parent id found there is ``"duplicate"``, a child's is WrongState,
        and nothing is written; that look and the script are two steps (see
        :mod:`echomq.flows`)."""
        item = dict(parent) if isinstance(parent, Mapping) else {"payload": parent}
        item.setdefault("job_id", None)
        if item["job_id"] is None:
            item["job_id"] = ids.mint("JOB")
        shard = self.shard_for(lane=item.get("lane"), job_id=item["job_id"])
        pid, kids, args = _flows.flow_call(shard.prefix, item, children, on_child_failure, MAX_BATCH)
        found = self._flow_ids_elsewhere(shard, pid, kids)
        if found is None:
            return shard.admit_flow(pid, kids, args)
        where, job_id = found
        if job_id == pid:
            return _flows.Flow(pid, kids, "duplicate")
        raise WrongState(f"child {job_id} exists already on shard {where.name}: a flow admits new jobs only")

    def _flow_ids_elsewhere(self, home: Queue, pid: str, kids: tuple[str, ...]) -> tuple[Queue, str] | None:
        """(shard, id) of the flow's parent if any shard has a row with its
        id, else of a child that a shard other than ``home`` has (``home``'s
        script checks its own); None when none does. One pipeline: per
        shard, one EXISTS of the parent and one of all the children (one
        slot, one command); then, only when some shard has a child, one
        EXISTS per child there to name it."""
        pipe = self.client.pipeline(transaction=False)
        others = [s for s in self.shards if s is not home]
        pipe.exists(home.job_key(pid))
        for shard in others:
            pipe.exists(shard.job_key(pid))
            pipe.exists(*[shard.job_key(k) for k in kids])
        with translated():
            found = pipe.execute()
        for shard, there in zip([home] + others, found[0:1] + found[1::2]):
            if there:
                return shard, pid
        holding = [s for s, there in zip(others, found[2::2]) if there]
        if not holding:
            return None
        pipe = self.client.pipeline(transaction=False)
        for shard in holding:
            for k in kids:
                pipe.exists(shard.job_key(k))
        with translated():
            found = iter(pipe.execute())
        for shard in holding:
            for k in kids:
                if next(found):
                    return shard, k
        return None  # ended and gone since the first look: the ids are free

    def children_results(self, job_id: str) -> dict:
        """As :meth:`Queue.children_results`, from the flow parent's shard."""
        return self.locate(job_id).children_results(job_id)

