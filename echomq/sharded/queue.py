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
from typing import Iterable

from .. import ids, keyspace
from ..checks import MAX_MS, check_claim, check_int, check_pairs, enqueue_items
from ..cluster import node_of
from ..errors import UNAVAILABLE, translate, translated
from ..queue import DEFAULT_LEASE_MS, Queue, Reaped
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
        self.prefix = keyspace.prefix(name)  # names the logical queue only; it holds no keys
        self._where: dict[str, int] = {}     # job id -> shard, for jobs claimed here and not settled
        self.turns = ShardTurns(self.shards, client)  # which shard the next claim asks

    def __repr__(self) -> str:
        return f"<ShardedQueue {self.name} x{len(self.shards)}>"

    # -- placement ----------------------------------------------------------
    def shard_index(self, *, lane: str | None = None, job_id: str | None = None) -> int:
        """The shard a job goes to: its lane's, else its id's."""
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
                delay_ms: int | None = None) -> tuple[str, str]:
        job_id = ids.mint("JOB") if job_id is None else job_id
        return self.shard_for(lane=lane, job_id=job_id).enqueue(payload, job_id=job_id, lane=lane,
                                                                 delay_ms=delay_ms)

    def enqueue_many(self, items: Iterable) -> list[tuple[str, str]]:
        """As Queue.enqueue_many: every item validated first, then one
        pipeline (one batch per node)."""
        batch = NodeBatch(self.client)
        job_ids = []
        for payload, job_id, lane, delay_ms in enqueue_items(items):
            job_id = job_id or ids.mint("JOB")  # minted here: the id may choose the shard
            job_ids.append(self.shard_for(lane=lane, job_id=job_id).add_enqueue(
                batch, payload, job_id=job_id, lane=lane, delay_ms=delay_ms))
        out = []
        for job_id, reply in zip(job_ids, batch.run()):
            if isinstance(reply, Exception):
                raise translate(reply)
            out.append((job_id, Queue.parse_enqueue(reply)))
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

    def parse_claim(self, reply) -> list:
        jobs = []
        for i, ask, raw in reply:
            got = self.shards[i].parse_claim(raw)
            self.turns.answered(i, len(got), ask)
            self._where.update((job.id, i) for job in got)
            jobs += got
        return jobs

    def claim_batch(self, n: int, *, lease_ms: int = DEFAULT_LEASE_MS, consumer: str | None = None) -> list:
        """Lease up to ``n`` ready jobs from the shards, in turn."""
        check_claim(n, lease_ms, consumer)
        self.turns.restart()  # a direct claim looks everywhere, from the next shard in turn
        jobs = []
        while len(jobs) < n:  # shards that ran short are dropped from the hot set
            batch = self.batch()
            self.add_claim(batch, n - len(jobs), lease_ms=lease_ms, consumer=consumer)
            reply = batch.run()
            if not reply or (not isinstance(reply[0], Exception) and not reply[0]):
                break
            if isinstance(reply[0], Exception):
                raise translate(reply[0])
            jobs += self.parse_claim(reply[0])
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
        return self._merged("pending_ids", limit, lambda job_id: job_id)

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
        """The next claims may find work on ``shards`` (a wake-up)."""
        self.turns.mark_hot(shards)

    def has_hot(self) -> bool:
        """Whether any shard may have work, as far as this process knows."""
        return self.turns.has_hot()
