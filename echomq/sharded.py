"""ShardedQueue: one logical queue over S ordinary queues, for a cluster.

A :class:`~echomq.Queue` lives in one hash slot, so one Valkey core runs all
its scripts. ``ShardedQueue(name, client, shards=S)`` spreads a queue over S
queues ("shards"), each with its own hash tag, so a cluster serves them on
different primaries. It answers the ``Queue`` API:

* **placement** -- a job on a lane goes to the lane's shard (a stable CRC32
  of the lane), so one player's jobs stay on one shard, in order, and the
  ring's fairness holds inside each shard; a job without a lane goes to the
  shard of its JOB id. Either way an enqueue repeated with the same id and
  lane reaches the same shard, so the id stays the idempotency key.
* **names** -- shard ``i`` is the queue ``<name>.<i>`` (or ``<name>.<i>-<k>``,
  the first ``k`` whose slot falls in the ``i``-th S-th of the slot space),
  so S shards spread evenly over any cluster whose primaries split the slots
  evenly, and every process derives the same names from (name, S).
* **claims and acks** go to the shards that hold the jobs, in one round
  trip: on a cluster, one plain pipeline per node (``NodeBatch``; a
  redirection is followed through the cluster client). A consumer claims
  from one shard per cycle and stays on it for a few cycles while it answers
  full (so acks and claim mostly share a shard and a node), then moves on in
  turn, so no shard starves.
* **parking** -- ``BLPOP`` cannot span slots, so an idle consumer sends one
  ``BLPOP <shard wake list>`` per shard on its own connection, all at once,
  and waits in ``select()`` for the first answer (or its own doorbell, a
  local socket pair); the still-blocked calls are ended with ``CLIENT
  UNBLOCK`` so no other wake token is taken while the consumer is busy.

Changing S for a live queue is a drain-and-switch (docs/scaling.md): jobs
stay where they were enqueued, so stop admitting, drain, then switch.
"""
from __future__ import annotations

import functools
import heapq
import inspect
import logging
import random
import selectors
import socket
import threading
import zlib
from typing import Iterable, Mapping


from . import ids, keyspace
from .cluster import TRANSIENT_ERRORS, is_cluster, pipeline_by_node
from .cluster import pipeline as cluster_pipeline
from . import events as _events
from .errors import ArgumentError, InvalidName, JobNotFound
from .errors import UNAVAILABLE, Unavailable
from .errors import translate as _typed
from .queue import (DEFAULT_LEASE_MS, MAX_BATCH, MAX_COUNT, MAX_MS, MAX_PROGRESS, MAX_TEXT, Queue, Reaped, _json_value,
                    check_int, check_items, check_pairs, check_seconds)
from .scripts import Batch

log = logging.getLogger("echomq.sharded")

MAX_SHARDS = 1024


STICKY_CYCLES = 4  # claim cycles a consumer stays on one shard that answers full (see _plan)


@functools.lru_cache(maxsize=64)
def shard_names(name: str, shards: int) -> tuple[str, ...]:
    """The S shard queue names of ``name``, each in its own S-th of the slots."""
    keyspace.check_queue(name)
    if not isinstance(shards, int) or isinstance(shards, bool) or not 1 <= shards <= MAX_SHARDS:
        raise InvalidName(f"shards must be an integer from 1 to {MAX_SHARDS}, got {shards!r}")
    out = []
    for i in range(shards):
        lo, hi = i * keyspace_slots() // shards, (i + 1) * keyspace_slots() // shards
        for k in range(100_000):
            cand = f"{name}.{i}" if k == 0 else f"{name}.{i}-{k}"
            # Keep off the range's edges: a cluster's even split may round a
            # boundary slot to the neighbouring primary.
            if lo < keyspace.slot("{" + cand + "}") < hi - 1 or shards > 4096:
                out.append(keyspace.check_queue(cand))
                break
    return tuple(out)


def keyspace_slots() -> int:
    return 16384


def _crc(text: str) -> int:
    return zlib.crc32(text.encode())


class _Claimed(list):
    """A sharded claim's reply: (shard index, how many asked, raw reply)."""


class NodeBatch(Batch):
    """A :class:`~echomq.scripts.Batch` that, on a cluster, sends each node's
    calls as one plain pipeline (``cluster.pipeline_by_node``); a call the
    node could not run goes again through the cluster pipeline, which follows
    redirections. On one node it is a Batch."""

    def _send(self, calls) -> list:
        if not is_cluster(self.client) or not all(keys for _, keys, _ in calls):
            return super()._send(calls)
        commands = [(("EVALSHA", script.sha, len(keys), *keys, *args), keys[0]) for script, keys, args in calls]
        return pipeline_by_node(self.client, commands, lambda idx: Batch._send(self, [calls[i] for i in idx]))


class ShardedBatch:
    """Script calls on many shards in one pipelined round trip, answered as
    *logical* calls: a sharded ``complete_batch`` or ``claim`` made of one
    call per shard answers once, so a consumer reads it like a Queue's."""

    def __init__(self, client):
        self.inner = NodeBatch(client)
        self.logical: list[tuple] = []  # (combine, [(inner index, meta)])

    def __len__(self) -> int:
        return len(self.logical)

    def part(self, add) -> int:
        """Run ``add(inner_batch)`` (one Queue.add_* call); its inner index."""
        before = len(self.inner)
        add(self.inner)
        assert len(self.inner) == before + 1
        return before

    def add(self, combine, parts) -> None:
        self.logical.append((combine, parts))

    def run(self) -> list:
        replies = self.inner.run()
        return [combine([(meta, replies[i]) for i, meta in parts]) for combine, parts in self.logical]


def _single(parts):
    return parts[0][1]


class ShardedQueue:
    """S queues behind the :class:`~echomq.Queue` API (see the module doc)."""

    def __init__(self, name: str, client, shards: int):
        self.name = keyspace.check_queue(name)
        self.client = client
        self.shards = [Queue(n, client) for n in shard_names(name, shards)]
        self.prefix = keyspace.prefix(name)  # names the logical queue only; it holds no keys
        self._where: dict[str, int] = {}     # job id -> shard, for jobs claimed here and not settled
        self._lock = threading.Lock()
        self._hot = set(range(len(self.shards)))  # shards that may have ready jobs
        self._cursor = random.randrange(len(self.shards))  # consumers start apart
        self._current: int | None = None  # the shard this process claims from now
        self._stay = 0                    # claim cycles spent on it in a row
        self._full: set[int] = set()      # shards whose last claim here answered full

    def __repr__(self) -> str:
        return f"<ShardedQueue {self.name} x{len(self.shards)}>"

    # -- placement ----------------------------------------------------------
    def shard_index(self, *, lane: str | None = None, job_id: str | None = None) -> int:
        """The shard a job goes to: its lane's, else its id's."""
        if lane:
            return _crc(keyspace.check_lane(lane)) % len(self.shards)
        return _crc(keyspace.check_job_id(job_id)) % len(self.shards)

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
        try:
            found = pipe.execute()
        except TRANSIENT_ERRORS as exc:
            raise Unavailable(f"Valkey unavailable: {type(exc).__name__}: {exc}") from exc
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
        calls = []
        for item in check_items(items, "enqueue_many"):
            if isinstance(item, Mapping):
                if "payload" not in item:
                    raise ArgumentError(f"an enqueue_many item needs a payload: {item!r}")
                job_id = item.get("job_id") or ids.mint("JOB")
                lane = item.get("lane")
                shard = self.shard_for(lane=lane, job_id=job_id)
                calls.append((shard, shard._enqueue_call(item["payload"], job_id, lane, item.get("delay_ms"))))
            else:
                job_id = ids.mint("JOB")
                shard = self.shard_for(job_id=job_id)
                calls.append((shard, shard._enqueue_call(item, job_id, None, None)))
        batch = NodeBatch(self.client)
        for _, (_, keys, args) in calls:
            batch.add("enqueue", keys, args)
        out = []
        for (_, (job_id, _, _)), reply in zip(calls, batch.run()):
            if isinstance(reply, Exception):
                raise _typed(reply)
            out.append((job_id, Queue._STATUS[reply]))
        return out

    # -- the lease ------------------------------------------------------------
    def batch(self) -> ShardedBatch:
        return ShardedBatch(self.client)

    batch_answers = staticmethod(Queue.batch_answers)

    def _probe(self, candidates: list[int]) -> list[int]:
        """Which of ``candidates`` have ready work (flat jobs or a servable
        lane, and not paused): one read-only round trip, nothing taken."""
        commands = []
        for i in candidates:
            s = self.shards[i]
            commands += [(("ZCARD", s.k_pending), s.k_pending), (("LLEN", s.k_ring), s.k_ring),
                         (("HGET", s.k_meta, "paused"), s.k_meta)]
        try:
            r = cluster_pipeline(self.client, commands)
        except TRANSIENT_ERRORS as exc:
            raise Unavailable(f"Valkey unavailable: {type(exc).__name__}: {exc}") from exc
        failed = next((x for x in r if isinstance(x, Exception)), None)
        if failed is not None:
            raise _typed(failed)
        return [i for n, i in enumerate(candidates)
                if (r[3 * n] or r[3 * n + 1]) and r[3 * n + 2] != b"1"]

    def _plan(self, n: int) -> list[tuple[int, int]]:
        """(shard, how many) to ask for ``n`` jobs: all from one shard.

        A consumer stays on its shard for up to STICKY_CYCLES cycles while
        that shard answers full claims, then moves on to the next hot shard
        from a cursor that starts at a random shard per process. Staying
        keeps a cycle's acks (the jobs of the last claims) and its claim on
        one shard, so a cycle costs one complete_batch and one claim, as on a
        plain queue, and on a cluster it goes to one node. Moving on bounds
        what another shard waits. When several shards may have work and the
        next is not known to have some (its last claim here answered full),
        they are probed first (one read-only round trip), so the claim goes
        to one that has some."""
        with self._lock:
            i = self._current
            if i is not None and i in self._hot and self._stay < STICKY_CYCLES:
                self._stay += 1
                return [(i, n)]
            size = len(self.shards)
            hot = [j for j in ((self._cursor + k) % size for k in range(size)) if j in self._hot]
            known = bool(hot) and hot[0] in self._full
        if len(hot) > 1 and not known:
            busy = self._probe(hot)
            with self._lock:
                self._hot.difference_update(set(hot) - set(busy))
            hot = busy
        with self._lock:
            if not hot:
                self._current = None
                return []
            i = hot[0]
            self._current, self._stay = i, 1
            self._cursor = (i + 1) % len(self.shards)
        return [(i, n)]

    def add_claim(self, batch: ShardedBatch, n: int, *, lease_ms: int, **kw) -> None:
        parts = []
        for i, ask in self._plan(n):
            parts.append((batch.part(lambda b, s=self.shards[i], k=ask: s.add_claim(b, k, lease_ms=lease_ms, **kw)),
                          (i, ask)))

        def combine(replies):
            ok = _Claimed((i, ask, raw) for (i, ask), raw in replies if not isinstance(raw, Exception))
            failed = [raw for _, raw in replies if isinstance(raw, Exception)]
            if failed:
                with self._lock:  # try those again next cycle
                    self._hot.update(i for (i, _), raw in replies if isinstance(raw, Exception))
                if not ok:
                    return failed[0]
                log.warning("sharded %s: %d shard claim(s) failed: %s", self.name, len(failed), failed[0])
            return ok

        batch.add(combine, parts)

    def parse_claim(self, reply) -> list:
        jobs = []
        for i, ask, raw in reply:
            got = self.shards[i].parse_claim(raw)
            with self._lock:
                if len(got) < ask:
                    self._hot.discard(i)
                    self._full.discard(i)
                else:
                    self._full.add(i)
            self._where.update((job.id, i) for job in got)
            jobs += got
        return jobs

    def claim_batch(self, n: int, *, lease_ms: int = DEFAULT_LEASE_MS, consumer: str | None = None) -> list:
        """Lease up to ``n`` ready jobs from the shards, in turn."""
        Queue._claim_call(self.shards[0], n, lease_ms, consumer)  # validates n, lease_ms and consumer
        with self._lock:
            self._hot = set(range(len(self.shards)))  # a direct claim looks everywhere
            self._current = None                       # and takes the next shard in turn
        jobs = []
        while len(jobs) < n:  # shards that ran short are dropped from the hot set
            batch = self.batch()
            self.add_claim(batch, n - len(jobs), lease_ms=lease_ms, consumer=consumer)
            reply = batch.run()
            if not reply or (not isinstance(reply[0], Exception) and not reply[0]):
                break
            if isinstance(reply[0], Exception):
                raise _typed(reply[0])
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
            raise _typed(reply)
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
            shard = self.locate(job_id)
            batch.add("extend", *shard._extend_args(job_id, attempts, lease_ms))
        return [_typed(r) if isinstance(r, Exception) else r for r in batch.run()]

    # -- maintenance -------------------------------------------------------------
    def _each(self, name: str, keys, args) -> list:
        """One script call per shard, one pipeline; errors raised typed."""
        batch = NodeBatch(self.client)
        for s in self.shards:
            batch.add(name, keys(s), args(s))
        out = batch.run()
        for r in out:
            if isinstance(r, Exception):
                raise _typed(r)
        return out

    def reap(self, *, max_stalls: int = 2, limit: int = 1000) -> Reaped:
        check_int(max_stalls, "max_stalls", 0, MAX_COUNT)
        check_int(limit, "limit", 1, MAX_BATCH)
        replies = self._each("reap", lambda s: (s.k_active, s.k_dead), lambda s: (s.prefix, max_stalls, limit))
        return Reaped(sum(r[0] for r in replies), sum(r[1] for r in replies))

    def promote(self, *, limit: int = 1000) -> int:
        check_int(limit, "limit", 1, MAX_BATCH)
        return sum(self._each("promote", lambda s: (s.k_schedule,), lambda s: (s.prefix, limit)))

    def pause(self) -> None:
        self._each("pause", lambda s: (s.k_meta,), lambda s: (s.prefix, "1"))

    def resume(self) -> None:
        self._each("pause", lambda s: (s.k_meta,), lambda s: (s.prefix, "0"))

    def requeue_dead(self, job_id: str) -> None:
        self.locate(job_id).requeue_dead(job_id)

    def remove(self, job_id: str) -> str | None:
        return self.locate(job_id).remove(job_id)

    @property
    def lanes(self):
        return ShardedLanes(self)

    # -- views ---------------------------------------------------------------------
    def shard_counts(self) -> list[dict]:
        """Each shard's counts, with its name and the node that serves it."""
        replies = self._each("counts", lambda s: (s.k_pending, s.k_active, s.k_schedule, s.k_dead, s.k_meta,
                                                  s.k_lanes, s.k_ring), lambda s: (s.prefix,))
        from .cluster import node_of

        out = []
        for s, reply in zip(self.shards, replies):
            counts = dict(zip(Queue._COUNT_FIELDS, (int(v) for v in reply)))
            counts["paused"] = bool(counts["paused"])
            out.append({"name": s.name, "node": node_of(self.client, s.k_meta), "counts": counts})
        return out

    def counts(self) -> dict:
        rows = [r["counts"] for r in self.shard_counts()]
        out = {k: sum(r[k] for r in rows) for k in Queue._COUNT_FIELDS if k != "paused"}
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

    def __getattr__(self, name):
        # A Queue method not wrapped here (one added to Queue later) that
        # takes a job id first goes to the shard holding that job.
        attr = getattr(Queue, name, None)
        if name.startswith("_") or not callable(attr):
            raise AttributeError(name)
        params = list(inspect.signature(attr).parameters)
        if len(params) >= 2 and params[1] == "job_id":
            return lambda job_id, *a, **kw: getattr(self.locate(job_id), name)(job_id, *a, **kw)
        raise AttributeError(f"ShardedQueue does not offer Queue.{name} yet (it is not a per-job call)")

    def parking(self) -> "ShardParking":
        """What a Consumer of this queue parks on (see the module doc)."""
        return ShardParking(self)

    def mark_hot(self, shards: Iterable[int]) -> None:
        with self._lock:
            self._hot.update(shards)

    def has_hot(self) -> bool:
        return bool(self._hot)

    # --- issue 22: events, progress, wait, flows ---
    # Each shard keeps its own stream, waiters and flows; these answer for the
    # whole queue. (children_results takes a job id first and reaches its
    # shard through __getattr__ above.)
    def progress(self, job_id: str, attempts: int, value) -> bool:
        """As :meth:`Queue.progress` (the value checked before the job is looked for)."""
        _json_value(value, "progress", MAX_PROGRESS)
        return self.locate(job_id).progress(job_id, attempts, value)

    def set_result(self, job_id: str, attempts: int, value) -> bool:
        _json_value(value, "result", MAX_TEXT)
        return self.locate(job_id).set_result(job_id, attempts, value)

    def set_events(self, maxlen: int | None) -> None:
        """As :meth:`Queue.set_events`, on every shard (each caps its own stream)."""
        for shard in self.shards:
            shard.set_events(maxlen)

    def events(self, after: str = "$", *, block_ms: int | None = None, count: int = 100):
        """Every shard's events, each shard's in its order, interleaved by
        time (:func:`echomq.events.merged`). An event's ``cursor`` names a
        position in every shard: pass it as ``after`` to resume."""
        _events.check_cursor(after, len(self.shards))
        if block_ms is not None:
            check_int(block_ms, "block_ms", 0, MAX_MS)
        return _events.merged(self.shards, after, block_ms=block_ms, count=check_int(count, "count", 1, MAX_BATCH))

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
        shard (its lane's, else its id's), so every step stays one script."""
        item = dict(parent) if isinstance(parent, Mapping) else {"payload": parent}
        item.setdefault("job_id", None)
        if item["job_id"] is None:
            item["job_id"] = ids.mint("JOB")
        shard = self.shard_for(lane=item.get("lane"), job_id=item["job_id"])
        return shard.enqueue_flow(item, children, on_child_failure=on_child_failure)


class ShardedLanes:
    """The lanes API over the shards: a lane's calls go to its shard."""

    def __init__(self, queue: ShardedQueue):
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

    def names(self) -> list[str]:
        return sorted(n for s in self.queue.shards for n in s.lanes.names())

    def ring(self) -> list[str]:
        return [n for s in self.queue.shards for n in s.lanes.ring()]

    def deepest(self, n: int = 10) -> list[dict]:
        rows = [row for s in self.queue.shards for row in s.lanes.deepest(n)]
        return sorted(rows, key=lambda r: -r["depth"])[:n]


class ShardParking:
    """A consumer's wait for work on any shard of a sharded queue.

    ``wait(t)`` sends ``BLPOP <wake list> t`` for every shard at once, each on
    a connection of its own to the node serving the shard, and ``select()``s
    on those sockets and a local doorbell. The first answer (a wake token,
    or the doorbell rung by a worker that finished a job) ends the wait; the
    other calls are ended with ``CLIENT UNBLOCK`` (they answer nil, so they
    take no token). The woken shards are marked hot for the next claim; a
    wait that times out marks every shard hot (a sweep, as a plain queue's
    consumer looks again every beat). Idle, that is one round of S blocked
    calls per beat: no polling."""

    def __init__(self, queue: ShardedQueue):
        self.queue = queue
        self._rx, self._tx = socket.socketpair()
        self._rx.setblocking(False)
        self._tx.setblocking(False)
        self._conns: dict[int, tuple] = {}  # shard -> (node name, node client, connection, client id)

    def ring(self) -> None:
        try:
            self._tx.send(b"x")
        except (BlockingIOError, OSError):
            pass  # already rung

    def _node_client(self, key: str):
        from .cluster import node_client

        return node_client(self.queue.client, key)

    def _conn(self, i: int):
        shard = self.queue.shards[i]
        name, node = self._node_client(shard.k_wake)
        held = self._conns.get(i)
        if held is not None and held[0] == name:
            return held
        if held is not None:
            self._drop(i)
        conn = node.connection_pool.get_connection()
        conn.send_command("CLIENT", "ID")
        cid = conn.read_response()
        self._conns[i] = held = (name, node, conn, cid)
        return held

    def _drop(self, i: int) -> None:
        name, node, conn, _ = self._conns.pop(i)
        conn.disconnect()
        node.connection_pool.release(conn)

    def close(self) -> None:
        for i in list(self._conns):
            self._drop(i)

    def _drain_doorbell(self) -> bool:
        rung = False
        while True:
            try:
                if not self._rx.recv(64):
                    return rung
                rung = True
            except BlockingIOError:
                return rung

    def wait(self, timeout_s: float) -> list[int]:
        """Block until a shard may have work, the doorbell rings, or the
        timeout; answers the shards woken (all of them after a timeout)."""
        q = self.queue
        if q.has_hot() or self._drain_doorbell():
            return []
        try:
            return self._wait(timeout_s)
        except (*UNAVAILABLE, OSError):
            self.close()  # the topology may have changed: reconnect next time
            q.mark_hot(range(len(q.shards)))
            raise Unavailable("a shard's node went away while parked") from None

    def _wait(self, timeout_s: float) -> list[int]:
        q = self.queue
        n = len(q.shards)
        pending = {}
        sel = selectors.DefaultSelector()
        try:
            for i in range(n):
                name, node, conn, cid = self._conn(i)
                conn.send_command("BLPOP", q.shards[i].k_wake, f"{timeout_s:.3f}")
                pending[i] = (node, conn, cid)
                sel.register(conn._sock, selectors.EVENT_READ, i)
            sel.register(self._rx, selectors.EVENT_READ, None)
            woken, rung = [], False
            ready = sel.select(timeout_s + 2.0)
            for key, _ in ready:
                if key.data is None:
                    rung = True
                    continue
                i = key.data
                node, conn, _ = pending.pop(i)
                if conn.read_response() is not None:
                    woken.append(i)
            if pending and not ready:
                log.warning("sharded %s: no answer from %d parked calls", q.name, len(pending))
            # End the others: one CLIENT UNBLOCK each, pipelined per node; an
            # unblocked BLPOP answers nil (if it had just taken a token, the
            # token is kept as a wake-up of that shard).
            by_node: dict[int, tuple] = {}
            for i, (node, conn, cid) in pending.items():
                by_node.setdefault(id(node), (node, []))[1].append(cid)
            for node, cids in by_node.values():
                pipe = node.pipeline(transaction=False)
                for cid in cids:
                    pipe.execute_command("CLIENT", "UNBLOCK", cid)
                pipe.execute()
            for i, (node, conn, cid) in pending.items():
                if conn.read_response() is not None:
                    woken.append(i)
        finally:
            sel.close()
        if rung:
            self._drain_doorbell()
        if woken:
            q.mark_hot(woken)
        elif not rung:
            q.mark_hot(range(n))  # a whole beat and nothing: look everywhere once
        return woken
