"""The queue API: one method per transition of ``lua/``, plus read-only views.

A ``Queue`` is cheap: a name, a redis-py client (``redis.Redis`` or
``redis.cluster.RedisCluster``, created with ``decode_responses=False``) and
the queue's key names. Every argument is checked here, against the same
rules the scripts check again (``lua/include/args.lua``), before anything is
sent: a bad one raises ``ArgumentError`` (``InvalidName`` for names and ids).
Every call the queue sends maps redis-py's errors to typed ones
(``errors.translate``): ``Unavailable`` when Valkey cannot be reached.
"""
from __future__ import annotations

import json
import re
from typing import Iterable

from . import events as _events
from . import flows as _flows
from . import ids, keyspace
from . import schedules as _schedules
from .checks import (MAX_BATCH, MAX_COUNT, MAX_MS, MAX_PROGRESS, MAX_TEXT, MAX_TOKEN, check_claim, check_int,
                     check_items, check_json, check_pairs, check_payload, check_seconds,
                     enqueue_items)  # the limits and checks are also importable from here
from .checks import check_token as _token
from .errors import ArgumentError, Cancelled, EchoMQError, StaleToken, translated
from .rates import rate_args, rate_view
from .scripts import LIMITS
from .job import Job
from .lanes import Lanes
from .parking import Parking
from .scripts import BUNDLE, Batch

DEFAULT_LEASE_MS = 30_000
MAX_PRIORITY, MAX_UNIQUE = LIMITS["MAX_PRIORITY"], LIMITS["MAX_UNIQUE"]
UNIQUE_KEY = re.compile(r"[A-Za-z0-9._:@/+=-]{1,%d}" % MAX_UNIQUE)
STATES = ("pending", "active", "scheduled", "dead", "completed")

MAX_MINUTES = 7 * 24 * 60  # per_minute looks back at most a week


def check_unique_key(unique_key) -> str:
    """A unique key as the scripts take it (``lua/include/unique.lua``); ArgumentError otherwise."""
    unique_key = keyspace._text(unique_key, "unique_key")
    if not UNIQUE_KEY.fullmatch(unique_key):
        raise ArgumentError(f"unique_key must be 1 to {MAX_UNIQUE} of [A-Za-z0-9._:@/+=-], got {unique_key[:80]!r}")
    return unique_key


def _text(b) -> str | None:
    return b.decode() if isinstance(b, bytes) else b


_mapped = translated()  # a view decorated with it raises typed errors


def _json_or_text(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return text


class Reaped(int):
    """reap()'s answer: the number of expired leases handled, with the split."""

    def __new__(cls, returned: int, dead: int):
        self = super().__new__(cls, returned + dead)
        self.returned, self.dead = returned, dead
        return self


class ClaimedJobs(list):
    """A claim's jobs. ``queue_wait_ms``: the queue's rate limit cut the
    claim short while a job is still ready, and nothing can be claimed for
    that long; ``lane_wait_ms``: it came back short while a cooling lane
    holds a ready job (not paused), the first such reopening then (both 0
    when no rate limit holds a ready job back: a full window with nothing
    ready behind it is no wait)."""

    queue_wait_ms = 0
    lane_wait_ms = 0


class Queue:
    #: (step, offset) of the numbers schedule_set gives new schedules (a tick's
    #: JOB id holds its schedule's number): a ShardedQueue's shard i of S
    #: takes (S, i), so no two shards of one queue number schedules alike.
    schedule_numbers = (1, 0)

    def __init__(self, name: str, client):
        self.name = keyspace.check_queue(name)
        self.client = client
        self.prefix = keyspace.prefix(name)
        k = self.prefix
        self.k_pending, self.k_active = k + "pending", k + "active"
        self.k_schedule, self.k_dead = k + "schedule", k + "dead"
        self.k_ring, self.k_wake = k + "ring", k + "wake"
        self.k_meta, self.k_lanes = k + "meta", k + "lanes"

    def __repr__(self) -> str:
        return f"<Queue {self.name}>"

    # -- plumbing ---------------------------------------------------------
    def _run(self, name: str, keys, args):
        return BUNDLE[name](self.client, keys, args)  # raises typed errors

    def job_key(self, job_id: str, lane: str | None = None) -> str:
        """The row key of ``job_id`` (``lane`` is where a ShardedQueue looks; one queue holds every lane)."""
        return keyspace.job_key(self.name, job_id)

    # -- admission --------------------------------------------------------
    def _enqueue_call(self, payload, job_id, lane, delay_ms, priority=None, unique_key=None,
                      unique_ttl_ms=None):
        payload = check_payload(payload)
        job_id = ids.mint("JOB") if job_id is None else job_id
        jk = self.job_key(job_id)  # validates shape and the JOB brand
        lane = "" if lane is None else keyspace.check_lane(lane)
        delay = 0 if delay_ms is None else check_int(delay_ms, "delay_ms", 0, MAX_MS)
        keys = (jk, self.k_pending, self.k_schedule)
        args = (self.prefix, job_id, payload, lane, delay)
        if priority is None and unique_key is None and unique_ttl_ms is None:
            return job_id, keys, args  # the contract's five arguments
        priority = 0 if priority is None else check_int(priority, "priority", -MAX_PRIORITY, MAX_PRIORITY)
        ttl = 0 if unique_ttl_ms is None else check_int(unique_ttl_ms, "unique_ttl_ms", 1, MAX_MS)
        if unique_key is None:
            if ttl:
                raise ArgumentError("unique_ttl_ms needs a unique_key")
            unique_key = ""
        else:
            unique_key = check_unique_key(unique_key)
        return job_id, keys, args + (priority, unique_key, ttl)

    _STATUS = {0: "duplicate", 1: "enqueued", 2: "scheduled"}

    @classmethod
    def enqueued(cls, job_id: str, reply) -> tuple[str, str]:
        """(id, status) from an enqueue reply: a unique key's holder answers
        its own id as the duplicate."""
        if isinstance(reply, bytes):
            return reply.decode(), "duplicate"
        return job_id, cls._STATUS[reply]

    def enqueue(self, payload, *, job_id: str | None = None, lane: str | None = None,
                delay_ms: int | None = None, priority: int | None = None, unique_key: str | None = None,
                unique_ttl_ms: int | None = None) -> tuple[str, str]:
        """Admit a job. The JOB id is the idempotency key: enqueueing an id
        that exists changes nothing and answers ``"duplicate"``.

        ``priority`` (-100..100, default 0): higher is claimed first within
        its lane (or the flat set); equal priorities keep admission order.
        ``unique_key``: while a job holding the key is pending, scheduled or
        active (and for at most ``unique_ttl_ms``, when given), another
        enqueue with it writes nothing and answers that job's id and
        ``"duplicate"``; the key is released when the job completes, is
        dead-lettered, removed or cancelled."""
        job_id, keys, args = self._enqueue_call(payload, job_id, lane, delay_ms, priority, unique_key,
                                                unique_ttl_ms)
        return self.enqueued(job_id, self._run("enqueue", keys, args))

    def add_enqueue(self, batch: Batch, payload, *, job_id: str | None = None, lane: str | None = None,
                    delay_ms: int | None = None, priority: int | None = None, unique_key: str | None = None,
                    unique_ttl_ms: int | None = None) -> str:
        """Add one enqueue to ``batch`` (checked now); answers the job id."""
        job_id, keys, args = self._enqueue_call(payload, job_id, lane, delay_ms, priority, unique_key,
                                                unique_ttl_ms)
        batch.add("enqueue", keys, args)
        return job_id

    @classmethod
    def parse_enqueue(cls, reply) -> str:
        """An enqueue's reply as :meth:`enqueue` answers it: "enqueued", "scheduled" or "duplicate"
        (a unique key's holder answers its id: see :meth:`enqueued`)."""
        return "duplicate" if isinstance(reply, bytes) else cls._STATUS[reply]

    def enqueue_many(self, items: Iterable) -> list[tuple[str, str]]:
        """Admit many jobs in one pipelined round trip. Each item is a payload
        or a mapping with ``payload`` and optional ``job_id``, ``lane``,
        ``delay_ms``, ``priority``, ``unique_key``, ``unique_ttl_ms``. Every
        item is validated before anything is sent."""
        batch = Batch(self.client)
        job_ids = [self.add_enqueue(batch, payload, job_id=job_id, lane=lane, delay_ms=delay_ms, **options)
                   for payload, job_id, lane, delay_ms, options in enqueue_items(items)]
        out = []
        for job_id, reply in zip(job_ids, batch.run()):
            if isinstance(reply, Exception):
                raise reply
            out.append(self.enqueued(job_id, reply))
        return out

    # -- the lease --------------------------------------------------------
    def _claim_call(self, n: int, lease_ms: int, consumer: str | None = None):
        consumer = check_claim(n, lease_ms, consumer)
        return ((self.k_pending, self.k_active, self.k_ring, self.k_meta),
                (self.prefix, lease_ms, n, consumer))

    def parse_claim(self, reply) -> ClaimedJobs:
        """The jobs in a claim reply (from a Batch with :meth:`add_claim`),
        with the rate limits' waits when the reply ends with them."""
        claimed, name = Job._claimed, self.name
        jobs = ClaimedJobs([
            claimed(reply[i].decode(), reply[i + 1], int(reply[i + 2]), reply[i + 3].decode() or None, name, self)
            for i in range(0, len(reply) - 3, 4)
        ])
        if len(reply) % 4 == 1:
            jobs.queue_wait_ms, jobs.lane_wait_ms = int(reply[-1][0]), int(reply[-1][1])
        return jobs

    def claim_batch(self, n: int, *, lease_ms: int = DEFAULT_LEASE_MS, consumer: str | None = None) -> list[Job]:
        """Lease up to ``n`` ready jobs (flat first, then lanes in turn).
        ``consumer`` (a branded id) is kept on the row for the job's record."""
        return self.parse_claim(self._run("claim", *self._claim_call(n, lease_ms, consumer)))

    def claim(self, *, lease_ms: int = DEFAULT_LEASE_MS, consumer: str | None = None) -> Job | None:
        jobs = self.claim_batch(1, lease_ms=lease_ms, consumer=consumer)
        return jobs[0] if jobs else None

    def _fenced_keys(self, job_id: str):
        return (self.job_key(job_id), self.k_active)

    def complete(self, job_id: str, attempts: int) -> bool:
        """Finish a job. True when completed, False when the row was already
        gone; raises StaleToken when ``attempts`` no longer holds the lease,
        Cancelled when the job was cancelled meanwhile."""
        return self._run("complete", self._fenced_keys(job_id), (self.prefix, job_id, _token(attempts))) == 1

    # Adding transitions to a Batch (one round trip for many calls).
    def batch(self) -> Batch:
        return Batch(self.client)

    def add_complete(self, batch: Batch, job_id: str, attempts: int) -> None:
        batch.add("complete", self._fenced_keys(job_id), (self.prefix, job_id, _token(attempts)))

    def _retry_args(self, job_id, attempts, delay_ms, max_attempts, error):
        check_int(delay_ms, "delay_ms", 0, MAX_MS)
        check_int(max_attempts, "max_attempts", 1, MAX_COUNT)
        error = str(error)[:2000].encode("utf-8", "replace")[:MAX_TEXT]
        keys = (self.job_key(job_id), self.k_active, self.k_schedule, self.k_dead)
        return keys, (self.prefix, job_id, _token(attempts), delay_ms, max_attempts, error)

    def add_retry(self, batch: Batch, job_id: str, attempts: int, *, delay_ms: int, max_attempts: int,
                  error: str) -> None:
        batch.add("retry", *self._retry_args(job_id, attempts, delay_ms, max_attempts, error))

    def add_release(self, batch: Batch, job_id: str, attempts: int) -> None:
        batch.add("release", self._fenced_keys(job_id), (self.prefix, job_id, _token(attempts)))

    def add_claim(self, batch: Batch, n: int, *, lease_ms: int, consumer: str | None = None) -> None:
        batch.add("claim", *self._claim_call(n, lease_ms, consumer))

    def add_complete_batch(self, batch: Batch, pairs) -> None:
        """Add one ``complete_batch`` call for many (job_id, token) pairs."""
        args = [self.prefix]
        for job_id, attempts in check_pairs(pairs, "complete_batch"):
            args += (job_id.encode(), b"%d" % attempts)  # as bytes: what redis-py would send, made cheaper
        if not 1 <= (len(args) - 1) // 2 <= MAX_BATCH:
            raise ArgumentError(f"complete_batch takes 1 to {MAX_BATCH} jobs, got {(len(args) - 1) // 2}")
        batch.add("complete_batch", (self.k_active, self.k_meta), args)

    @staticmethod
    def batch_answers(reply) -> list:
        """complete_batch's codes as complete_many answers them: True
        (completed), False (gone), or a StaleToken / Cancelled instance."""
        return [True if code == 1 else False if code == 0
                else Cancelled("EMQCANCELLED the job was cancelled") if code == -2
                else StaleToken("EMQSTALE token does not hold the job")
                for code in reply]

    def complete_many(self, pairs: Iterable[tuple[str, int]]) -> list:
        """Complete many jobs in one script call. Each answer is True
        (completed), False (gone) or a StaleToken / Cancelled instance
        (not completed)."""
        pairs = check_pairs(pairs, "complete_many")
        if not pairs:
            return []
        batch = self.batch()
        self.add_complete_batch(batch, pairs)
        reply = batch.run()[0]
        if isinstance(reply, Exception):
            raise reply
        return self.batch_answers(reply)

    _GONE = 0  # every fenced script's "no such row" reply (lua/include/replies.lua)

    def retry(self, job_id: str, attempts: int, *, delay_ms: int = 0, max_attempts: int = 3,
              error: str = "") -> str:
        """Fail a job: ``"scheduled"`` to run again after ``delay_ms``, or
        ``"dead"`` once it has had ``max_attempts``; ``"gone"`` if no row."""
        reply = self._run("retry", *self._retry_args(job_id, attempts, delay_ms, max_attempts, error))
        return "gone" if reply == self._GONE else _text(reply)

    def _extend_args(self, job_id, attempts, lease_ms):
        return self._fenced_keys(job_id), (self.prefix, job_id, _token(attempts), lease_ms)

    def add_extend(self, batch: Batch, job_id: str, attempts: int, *, lease_ms: int) -> None:
        check_int(lease_ms, "lease_ms", 1, MAX_MS)
        batch.add("extend", *self._extend_args(job_id, attempts, lease_ms))

    def extend(self, job_id: str, attempts: int, *, lease_ms: int = DEFAULT_LEASE_MS) -> int:
        """Heartbeat: the new lease deadline (server ms), 0 if the row is gone.
        Raises Cancelled when the job was cancelled (it is dropped now)."""
        check_int(lease_ms, "lease_ms", 1, MAX_MS)
        return self._run("extend", *self._extend_args(job_id, attempts, lease_ms))

    def extend_many(self, pairs: Iterable[tuple[str, int]], *, lease_ms: int) -> list:
        """Extend many leases in one round trip; answers as :meth:`extend`,
        with StaleToken / Cancelled instances in place of raising."""
        check_int(lease_ms, "lease_ms", 1, MAX_MS)
        batch = self.batch()
        for job_id, attempts in check_pairs(pairs, "extend_many"):
            batch.add("extend", *self._extend_args(job_id, attempts, lease_ms))
        return batch.run()

    def release(self, job_id: str, attempts: int) -> bool:
        """Hand back an unstarted job: ready again, not counted as an attempt."""
        return self._run("release", self._fenced_keys(job_id), (self.prefix, job_id, _token(attempts))) == 1

    def cancel(self, job_id: str) -> str:
        """Cancel a job: ``"cancelled"`` when it was pending or scheduled (it is
        gone now); ``"cancelling"`` when it is leased: it is marked, its worker
        hears of it at its next heartbeat (``job.cancelled``), and its late
        complete is refused. JobNotFound when there is no row, WrongState for
        a dead job."""
        keys = (self.job_key(job_id), self.k_pending, self.k_schedule)
        return _text(self._run("cancel", keys, (self.prefix, job_id)))

    # -- maintenance ------------------------------------------------------
    def _reap_call(self, max_stalls: int, limit: int):
        check_int(max_stalls, "max_stalls", 0, MAX_COUNT)
        check_int(limit, "limit", 1, MAX_BATCH)
        return (self.k_active, self.k_dead), (self.prefix, max_stalls, limit)

    def reap(self, *, max_stalls: int = 2, limit: int = 1000) -> Reaped:
        """Return expired leases to their ready sets; dead-letter jobs that
        stalled more than ``max_stalls`` times. One bounded pass."""
        return Reaped(*self._run("reap", *self._reap_call(max_stalls, limit)))

    def add_reap(self, batch: Batch, *, max_stalls: int = 2, limit: int = 1000) -> None:
        """Add one reap pass to ``batch``; its reply is ``[returned, dead]`` (see :class:`Reaped`)."""
        batch.add("reap", *self._reap_call(max_stalls, limit))

    def _promote_call(self, limit: int):
        check_int(limit, "limit", 1, MAX_BATCH)
        return (self.k_schedule,), (self.prefix, limit)

    def promote(self, *, limit: int = 1000) -> int:
        """Move due scheduled jobs to their ready sets. One bounded pass."""
        return self._run("promote", *self._promote_call(limit))

    def add_promote(self, batch: Batch, *, limit: int = 1000) -> None:
        """Add one promote pass to ``batch``; its reply is the number moved."""
        batch.add("promote", *self._promote_call(limit))

    def pause(self) -> None:
        self._run("pause", (self.k_meta,), (self.prefix, "1"))

    def resume(self) -> None:
        self._run("pause", (self.k_meta,), (self.prefix, "0"))

    def add_pause(self, batch: Batch, paused: bool = True) -> None:
        """Add a pause (or, with ``paused=False``, a resume) to ``batch``."""
        batch.add("pause", (self.k_meta,), (self.prefix, "1" if paused else "0"))

    def requeue_dead(self, job_id: str) -> None:
        """Give a dead job a fresh set of attempts (JobNotFound, WrongState).
        A job that held a unique key takes it again, with the TTL its
        enqueue gave; while another live job holds the key the requeue is
        refused (WrongState, naming the holder) and nothing changes."""
        self._run("requeue", (self.job_key(job_id), self.k_dead), (self.prefix, job_id))

    def remove(self, job_id: str) -> str | None:
        """Delete a job wherever it is; answers the state it was in, or None."""
        keys = (self.job_key(job_id), self.k_pending, self.k_active, self.k_schedule, self.k_dead)
        reply = self._run("remove", keys, (self.prefix, job_id))
        return None if reply == self._GONE else _text(reply)

    @property
    def lanes(self) -> Lanes:
        return Lanes(self)

    # -- rate limits (lua/rate.lua; enforced in claim, lua/include/rate.lua) ----
    def set_rate_limit(self, jobs: int | None, per_ms: int | None = None) -> None:
        """Claim at most ``jobs`` jobs of this queue per window of ``per_ms``,
        counted on the server clock across every consumer and host; ``None``
        clears the limit. A window opens at the first claim after the last
        one closed; setting a limit starts a fresh one. A consumer that
        reaches the limit parks until the window reopens."""
        jobs, per_ms = rate_args(jobs, per_ms)
        self._run("rate", (self.k_meta,), (self.prefix, jobs, per_ms))

    @_mapped
    def rate_limit(self) -> dict | None:
        """The queue's limit and its window now: ``jobs``, ``per_ms``,
        ``claimed`` (in the open window) and ``window_ms_left`` (0: no window
        is open); None when the queue has no limit."""
        fields = self.client.hmget(self.k_meta, "rate_jobs", "rate_ms", "rate_start", "rate_count")
        return rate_view(fields, self.server_time_ms()) if fields[0] is not None else None

    # -- schedules (echomq/schedules.py: the grid, catch_up, firing) ------------
    def schedule(self, name: str, *, cron: str | None = None, every_ms: int | None = None, payload=b"",
                 lane: str | None = None, tz: str = "UTC", catch_up: int = 0, priority: int = 0) -> str:
        """Create or replace a schedule: a job with ``payload`` (on ``lane``,
        at ``priority``) at each tick of ``cron`` (in time zone ``tz``) or
        every ``every_ms``; the Reaper pass fires the ticks. Answers
        "created", "replaced" or "unchanged"; a bad cron, interval or time
        zone is ArgumentError and nothing is stored."""
        return _schedules.set_schedule(self, name, cron=cron, every_ms=every_ms, payload=payload, lane=lane,
                                       tz=tz, catch_up=catch_up, priority=priority)

    def schedules(self) -> list[dict]:
        """Every schedule, soonest first (see :func:`echomq.schedules.listing`)."""
        return _schedules.listing(self)

    def unschedule(self, name: str) -> bool:
        """Remove a schedule (its jobs already enqueued stay); False if none."""
        return _schedules.op(self, name, "remove")

    def pause_schedule(self, name: str) -> bool:
        return _schedules.op(self, name, "pause")

    def resume_schedule(self, name: str) -> bool:
        """Fire again from the first tick after now (ticks missed while paused are not made up)."""
        return _schedules.op(self, name, "resume")

    def fire_schedules(self, *, limit: int = 1000) -> int:
        """Fire the due schedules (a Reaper pass does); answers the jobs enqueued."""
        check_int(limit, "limit", 1, MAX_BATCH)
        return _schedules.fire(self, limit=limit)

    # -- views ------------------------------------------------------------
    _COUNT_FIELDS = ("pending", "active", "scheduled", "dead", "completed", "dead_total",
                     "lanes", "ring", "paused", "cancelled", "retained", "waiting")

    def _counts_keys(self) -> tuple:
        return (self.k_pending, self.k_active, self.k_schedule, self.k_dead, self.k_meta, self.k_lanes, self.k_ring)

    def counts(self) -> dict:
        return self.parse_counts(self._run("counts", self._counts_keys(), (self.prefix,)))

    def add_counts(self, batch: Batch) -> None:
        """Add one ``counts`` call to ``batch`` (read with :meth:`parse_counts`)."""
        batch.add("counts", self._counts_keys(), (self.prefix,))

    @classmethod
    def parse_counts(cls, reply) -> dict:
        """A ``counts`` reply as :meth:`counts` answers it."""
        out = dict(zip(cls._COUNT_FIELDS, (int(v) for v in reply)))
        out["paused"] = bool(out["paused"])
        return out

    @_mapped
    def job(self, job_id: str) -> dict | None:
        """The job's row (payload as bytes, numbers as ints) with its lease
        deadline or run-at time when it has one; None when there is no row."""
        pipe = self.client.pipeline(transaction=False)
        pipe.hgetall(self.job_key(job_id))
        pipe.zscore(self.k_active, job_id)
        pipe.zscore(self.k_schedule, job_id)
        row, deadline, run_at = pipe.execute()
        if not row:
            return None
        out = {"id": job_id}
        for k, v in row.items():
            k = k.decode()
            out[k] = v if k == "payload" else v.decode(errors="replace")
        for k in ("attempts", "base", "stalled", "created", "died", "claimed", "children", "children_left",
                  "wait", "wait_seq", "unique_ttl"):
            if out.get(k):
                out[k] = int(out[k])
        for k in ("progress", "result"):  # JSON a handler left (progress.lua, result.lua)
            if k in out:
                out[k] = _json_or_text(out[k])
        if deadline is not None:
            out["lease_deadline"] = int(deadline)
        if run_at is not None:
            out["run_at"] = int(run_at)
        return out

    def _listing(self, key: str, limit: int, newest_first: bool) -> list[tuple[str, int]]:
        check_int(limit, "limit", 1, MAX_BATCH)
        fetch = self.client.zrevrange if newest_first else self.client.zrange
        return [(m.decode(), int(s)) for m, s in fetch(key, 0, limit - 1, withscores=True)]

    def _rows(self, pairs, score_name: str) -> list[dict]:
        pipe = self.client.pipeline(transaction=False)
        for job_id, _ in pairs:
            pipe.hmget(self.job_key(job_id), "attempts", "lane", "last_error", "stalled", "claimed",
                       "consumer", "created")
        out = []
        for (job_id, score), (att, lane, err, stalled, claimed, consumer, created) in zip(pairs, pipe.execute()):
            out.append({"id": job_id, score_name: score, "attempts": int(att or 0),
                        "lane": _text(lane), "last_error": _text(err), "stalled": int(stalled or 0),
                        "claimed": int(claimed) if claimed else None, "consumer": _text(consumer) or None,
                        "enqueued": int(created) if created else None})
        return out

    @_mapped
    def dead_jobs(self, limit: int = 100) -> list[dict]:
        """Dead-lettered jobs, newest first, with their last error."""
        return self._rows(self._listing(self.k_dead, limit, True), "died")

    @_mapped
    def active_jobs(self, limit: int = 100) -> list[dict]:
        """Leased jobs, soonest deadline first."""
        return self._rows(self._listing(self.k_active, limit, False), "lease_deadline")

    @_mapped
    def scheduled_jobs(self, limit: int = 100) -> list[dict]:
        """Delayed and retrying jobs, soonest first."""
        return self._rows(self._listing(self.k_schedule, limit, False), "run_at")

    @_mapped
    def pending_ids(self, limit: int = 100) -> list[str]:
        """The first ``limit`` jobs of the flat ready set in claim order:
        highest priority first, then oldest (lane jobs are the lanes')."""
        return [job_id for job_id, _ in self.pending_order(limit)]

    @_mapped
    def pending_order(self, limit: int = 100) -> list[tuple[str, tuple[int, str]]]:
        """As :meth:`pending_ids`, each with its claim-order key
        (-priority, id): what a sharded queue merges its shards' lists by."""
        check_int(limit, "limit", 1, MAX_BATCH)
        return [(m.decode(), (int(s), m.decode()))
                for m, s in self.client.zrange(self.k_pending, 0, limit - 1, withscores=True)]

    @_mapped
    def per_minute(self, minutes: int = 60) -> list[dict]:
        """Completed and dead counts for each of the last ``minutes`` minutes
        (server clock), oldest first."""
        check_int(minutes, "minutes", 1, MAX_MINUTES)
        secs, _ = self.client.time()
        now_min = int(secs) // 60
        pipe = self.client.pipeline(transaction=False)
        span = range(now_min - minutes + 1, now_min + 1)
        for m in span:
            pipe.hmget(f"{self.prefix}minute:{m}", "completed", "dead")
        return [{"minute": m, "completed": int(c or 0), "dead": int(d or 0)}
                for m, (c, d) in zip(span, pipe.execute())]

    # -- retention (lua/include/keep.lua) ------------------------------------
    def set_retention(self, *, completed: int | None = None, completed_ms: int | None = None,
                      dead: int | None = None, dead_ms: int | None = None) -> None:
        """Bound the records kept: the last ``completed`` completed jobs no
        older than ``completed_ms``, and dead jobs up to ``dead`` no older than
        ``dead_ms`` (older dead jobs are deleted). None leaves a bound as it is."""
        fields = {}
        for field, value, lo, hi in (("keep_completed", completed, 0, MAX_COUNT),
                                     ("keep_completed_ms", completed_ms, 1, MAX_MS),
                                     ("keep_dead", dead, 0, MAX_COUNT),
                                     ("keep_dead_ms", dead_ms, 1, MAX_MS)):
            if value is not None:
                fields[field] = check_int(value, field[5:], lo, hi)
        if fields:
            with translated():
                self.client.hset(self.k_meta, mapping=fields)

    @staticmethod
    def _record(job_id, raw) -> dict:
        rec = json.loads(raw)
        return {"id": _text(job_id), "state": "completed", "attempts": rec["attempts"],
                "lane": rec["lane"] or None, "consumer": rec["consumer"] or None,
                "enqueued": rec["enqueued"], "claimed": rec["claimed"], "finished": rec["finished"],
                "duration_ms": rec["finished"] - rec["claimed"], "last_error": None, "cancelling": False,
                "lease_deadline": None, "run_at": None, "payload": None}

    @_mapped
    def completed_jobs(self, limit: int = 100) -> list[dict]:
        """The most recently completed jobs, newest first: id, state
        ('completed'), attempts, lane, consumer, enqueued, claimed, finished
        (server ms) and duration_ms (finished - claimed)."""
        check_int(limit, "limit", 1, MAX_BATCH)
        job_ids = self.client.zrevrange(self.prefix + "done", 0, limit - 1)
        if not job_ids:
            return []
        raws = self.client.hmget(self.prefix + "done:rows", job_ids)
        return [self._record(jid, raw) for jid, raw in zip(job_ids, raws) if raw is not None]

    @_mapped
    def find(self, job_id: str) -> dict | None:
        """Any job by id, wherever it is: its row while it is pending, active,
        scheduled or dead, its record once completed (while retained); None
        when there is neither. Every answer has the same keys: id, state,
        attempts, lane, consumer, enqueued, claimed, finished, duration_ms,
        last_error (None where they do not apply), and ``cancelling`` for an
        active job an operator cancelled."""
        row = self.job(job_id)
        if row is None:
            raw = self.client.hget(self.prefix + "done:rows", job_id)
            return None if raw is None else self._record(job_id, raw)
        claimed = int(row["claimed"]) if row.get("claimed") else None
        finished = row.get("died")
        return {
            "id": job_id, "state": row["state"], "attempts": row.get("attempts", 0),
            "lane": row.get("lane") or None, "consumer": row.get("consumer") or None,
            "enqueued": row.get("created"), "claimed": claimed, "finished": finished,
            "duration_ms": None, "last_error": row.get("last_error"),
            "cancelling": row.get("cancel") == "1",
            "lease_deadline": row.get("lease_deadline"), "run_at": row.get("run_at"),
            "payload": row.get("payload"),
        }

    @_mapped
    def server_time_ms(self) -> int:
        secs, micros = self.client.time()
        return int(secs) * 1000 + int(micros) // 1000

    @_mapped
    def keys(self) -> list[str]:
        """Every key of this queue that exists now (SCAN; for tests and tools)."""
        return sorted(k.decode() for k in self.client.scan_iter(match=self.prefix.replace("{", "\\{").replace("}", "\\}") + "*", count=1000))

    @_mapped
    def wait_for_work(self, timeout_s: float) -> bool:
        """Park on the wake list (BLPOP) for up to ``timeout_s``; True if woken."""
        timeout_s = check_seconds(timeout_s, "timeout_s")
        return self.client.blpop([self.k_wake], timeout=timeout_s) is not None

    def parking(self, consumer: str) -> Parking:
        """Where ``consumer`` (its branded id) waits for work: the wake list
        and a doorbell of its own (see :mod:`echomq.parking`)."""
        return Parking(self, consumer)

    # --- issue 22: events, progress, wait, flows ---------------------------------
    @property
    def k_events(self) -> str:
        return self.prefix + "events"

    def set_events(self, maxlen: int | None) -> None:
        """Cap the event stream ``emq:{q}:events`` at about ``maxlen`` entries
        (approximate trimming: whole stream nodes go); 0 turns events off for
        this queue, None restores the default (``KEEP_EVENTS``)."""
        with translated():
            if maxlen is None:
                self.client.hdel(self.k_meta, "events")
            else:
                self.client.hset(self.k_meta, "events", check_int(maxlen, "maxlen", 0, MAX_COUNT))

    def events(self, after: str = "$", *, block_ms: int | None = None, count: int = 100,
               reader: str | None = None):
        """Iterate over :class:`~echomq.events.Event` s after ``after``: ``"$"``
        (only what happens from now on), ``"0"`` (everything kept) or the
        ``cursor`` of the last event seen, which resumes with nothing lost or
        repeated (``EventsLost`` if that position was trimmed away). Reads
        ``count`` per round trip; ends once caught up, or, with ``block_ms``,
        after waiting that long for more (0: for ever). ``reader`` names the
        reader for the lag metric (``echomq_events_reader_lag_seconds``).
        Reading holds no lease and changes no job."""
        _events.check_position(after)
        _events.check_reader(reader)
        if block_ms is not None:
            check_int(block_ms, "block_ms", 0, MAX_MS)
        return _events.tail(self, after, block_ms=block_ms, count=check_int(count, "count", 1, MAX_BATCH),
                            reader=reader)

    def _event_filter(self, limit, types, lane, job):
        check_int(limit, "limit", 1, MAX_BATCH)
        types = tuple(check_items(types or (), "types"))
        for kind in types:
            if kind not in _events.TYPES:
                raise ArgumentError(f"unknown event type {kind!r}; the types are {', '.join(_events.TYPES)}")
        return types, None if lane is None else keyspace.check_lane(lane), \
            None if job is None else keyspace.check_job_id(job)

    @_mapped
    def recent_events(self, limit: int = 100, *, types=None, lane: str | None = None, job: str | None = None,
                      scan: int | None = None) -> list:
        """The newest ``limit`` events of any of ``types`` on ``lane`` about
        ``job`` (None: any), newest first, looking at most ``scan`` entries
        back (None: the whole stream)."""
        types, lane, job = self._event_filter(limit, types, lane, job)
        if scan is not None:
            check_int(scan, "scan", 1, MAX_COUNT)
        return _events.recent(self, limit, types=types, lane=lane, job=job, scan=scan)

    @_mapped
    def event_history(self, job_id: str) -> list:
        """The job's events still in the stream, oldest first."""
        return _events.history(self, keyspace.check_job_id(job_id))

    @_mapped
    def event_stats(self) -> dict:
        """The stream's cap (0: off), length, entries added ever, newest id,
        and each named reader's position and lag in seconds."""
        out = _events.stats(self)
        out["readers"] = {name: {"position": pos, "lag_s": _events.lag_seconds(out["last_id"], pos)}
                          for name, pos in sorted(out["readers"].items())}
        return out

    def progress(self, job_id: str, attempts: int, value) -> bool:
        """Record a leased job's progress (JSON, at most 1 KB): on its row
        (``job()["progress"]``) and as a ``progress`` event. Fenced: StaleToken
        when ``attempts`` no longer holds the lease; False when the row is gone."""
        text = check_json(value, "progress", MAX_PROGRESS)
        return self._run("progress", self._fenced_keys(job_id), (self.prefix, job_id, _token(attempts), text)) == 1

    def set_result(self, job_id: str, attempts: int, value) -> bool:
        """Leave a leased job's result (JSON, at most 64 KB) for its flow's
        parent (``children_results``). Fenced as :meth:`progress`; no event."""
        text = check_json(value, "result", MAX_TEXT)
        return self._run("result", self._fenced_keys(job_id), (self.prefix, job_id, _token(attempts), text)) == 1

    def wait(self, job_id: str, timeout_s: float) -> str:
        """Block until the job ends and answer how: ``"completed"``,
        ``"dead"``, ``"cancelled"`` or ``"removed"``, at once for a job that
        ended already (completed while its record is kept, or dead). The
        script that ends the job tells the waiter; nothing polls. Works with
        events off. TimeoutError at the deadline; JobNotFound when there is
        neither a row nor a record."""
        self.job_key(job_id)
        return _events.wait(self, job_id, check_seconds(timeout_s, "timeout_s"))

    def enqueue_flow(self, parent, children, *, on_child_failure: str = "fail") -> _flows.Flow:
        """Admit ``children`` (ready at once) and ``parent``, which runs once
        every child has ended (see :mod:`echomq.flows`). Each is a payload or a
        mapping with ``payload`` and optional ``job_id`` and ``lane``. The
        parent's id is the idempotency key (``"duplicate"``: nothing changed);
        WrongState when a child's id exists already."""
        return self.admit_flow(*_flows.flow_call(self.prefix, parent, children, on_child_failure, MAX_BATCH))

    def admit_flow(self, parent_id: str, children: tuple[str, ...], args: list) -> _flows.Flow:
        """Run ``enqueue_flow.lua`` with what :func:`echomq.flows.flow_call`
        made for this queue (a ShardedQueue checks its other shards in between)."""
        reply = self._run("enqueue_flow", (self.job_key(parent_id),), args)
        return _flows.Flow(parent_id, children, "enqueued" if reply == 1 else "duplicate")

    @_mapped
    def children_results(self, job_id: str) -> dict:
        """How each child of flow parent ``job_id`` ended: {child id:
        {"state": "pending" | "completed" | "dead" | "cancelled" | "removed",
        "result": ... (completed), "error": ... (dead)}}; {} when it has none."""
        return _flows.parse_children(self.client.hgetall(self.prefix + "flow:" + keyspace.check_job_id(job_id)))


__all__ = ["Queue", "Job", "Reaped", "EchoMQError", "DEFAULT_LEASE_MS"]
