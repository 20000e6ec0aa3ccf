"""Lower bounds, cuts and replies the suite named but never pinned.

Written against survivors of ``python -m bench.mutate --n 30 --seed 7``
(echomq/*.py): ``per_minute(minutes=)``, a rate's ``per_ms`` and a handler's
``Retry(max_attempts=)`` whose lowest value (1) was refused when the bound
moved to 2; a retry's error cut at 2001 characters instead of 2000;
``set_result`` answering False for a recorded result; and ``translated()``
around a redis-py error that is not a ``RedisError``. A bad argument raises
ArgumentError before anything is sent: the queue's keys are compared whole
before and after.
"""
from __future__ import annotations

import pytest
import redis

from echomq import ArgumentError, Consumer, Queue, Retry, Unavailable, ids
from echomq.checks import MAX_COUNT, MAX_MS
from echomq.errors import translated
from echomq.queue import MAX_MINUTES

from .helpers import server_ms, snapshot

NOT_INTS = (0.5, 1.0, "1", True, None, float("nan"))


@pytest.fixture
def q(r):
    return Queue("bounds", r)


def everything(r, q) -> tuple:
    """The queue's keys with their values, and every key of the database."""
    return snapshot(r, q), sorted(r.keys("*"))


def refused(r, q, call, *bad) -> None:
    """``call(value)`` raises ArgumentError for each of ``bad`` and writes nothing."""
    before = everything(r, q)
    for value in bad:
        with pytest.raises(ArgumentError):
            call(value)
    assert everything(r, q) == before


def with_history(q) -> None:
    """A completed and a pending job, so a refused call has state to leave alone."""
    jid, _ = q.enqueue(b"done")
    job = q.claim(lease_ms=60_000)
    assert q.complete(jid, job.attempts) is True
    q.enqueue(b"waiting")


# -- per_minute(minutes): 1 .. MAX_MINUTES (a week) --------------------------------

def test_per_minute_of_one_minute_is_the_current_minute_alone(q, r):
    with_history(q)
    first = server_ms(r) // 60_000
    rows = q.per_minute(1)
    last = server_ms(r) // 60_000
    assert len(rows) == 1
    assert set(rows[0]) == {"minute", "completed", "dead"}
    assert first <= rows[0]["minute"] <= last
    assert rows[0]["dead"] == 0


def test_per_minute_reaches_back_a_week_and_no_further(q, r):
    rows = q.per_minute(MAX_MINUTES)
    assert len(rows) == MAX_MINUTES == 7 * 24 * 60
    assert [row["minute"] for row in rows] == list(range(rows[0]["minute"], rows[0]["minute"] + MAX_MINUTES))
    with_history(q)
    refused(r, q, q.per_minute, MAX_MINUTES + 1)


def test_per_minute_refuses_zero_and_non_integers(q, r):
    with_history(q)
    refused(r, q, q.per_minute, 0, -1, *NOT_INTS)


# -- rate limits: jobs 1 .. MAX_COUNT per per_ms 1 .. MAX_MS -------------------------

def test_a_rate_of_one_job_per_millisecond_is_accepted(q, r):
    q.set_rate_limit(1, per_ms=1)
    view = q.rate_limit()
    assert (view["jobs"], view["per_ms"]) == (1, 1)
    assert r.hmget(q.k_meta, "rate_jobs", "rate_ms") == [b"1", b"1"]


def test_a_rate_of_zero_jobs_or_zero_ms_is_refused_and_the_old_limit_stays(q, r):
    with_history(q)
    q.set_rate_limit(5, per_ms=1_000)
    refused(r, q, lambda per_ms: q.set_rate_limit(5, per_ms=per_ms), 0, -1, MAX_MS + 1, *NOT_INTS[:-2])
    refused(r, q, lambda jobs: q.set_rate_limit(jobs, per_ms=1_000), 0, -1, MAX_COUNT + 1)
    view = q.rate_limit()
    assert (view["jobs"], view["per_ms"]) == (5, 1_000)


def test_a_lane_rate_has_the_same_bounds(q, r):
    lane = ids.mint("PLR")
    q.enqueue(b"x", lane=lane)
    q.lanes.set_rate(lane, 1, per_ms=1)
    rate = q.lanes.info(lane)["rate"]
    assert (rate["jobs"], rate["per_ms"]) == (1, 1)
    refused(r, q, lambda per_ms: q.lanes.set_rate(lane, 1, per_ms=per_ms), 0, -1)
    refused(r, q, lambda jobs: q.lanes.set_rate(lane, jobs, per_ms=1), 0)
    rate = q.lanes.info(lane)["rate"]
    assert (rate["jobs"], rate["per_ms"]) == (1, 1)


# -- max_attempts: the consumer's (checked) and a handler's Retry (ignored when bad) --

def test_a_consumer_takes_max_attempts_one_and_refuses_zero(q, r):
    assert Consumer(q, lambda job: None, max_attempts=1).max_attempts == 1
    refused(r, q, lambda n: Consumer(q, lambda job: None, max_attempts=n), 0, -1, MAX_COUNT + 1, *NOT_INTS[:-2])


def drained(q, max_attempts, consumer_max=2) -> tuple[dict, list[int], dict]:
    """One job whose handler always raises Retry(delay_ms=0, max_attempts=...),
    drained (``Consumer.drain``: its retries too, on this thread) by a
    consumer allowing ``consumer_max``: its row, the attempts its handler
    saw, and the drain's stats (a crashed consumer raises from drain)."""
    jid, _ = q.enqueue(b"x")
    seen = []

    def handler(job):
        seen.append(job.attempts)
        raise Retry("again", delay_ms=0, max_attempts=max_attempts)

    stats = Consumer(q, handler, concurrency=1, max_attempts=consumer_max).drain()
    return q.job(jid), seen, stats


def test_a_handlers_retry_with_max_attempts_one_is_dead_after_one_run(q):
    row, seen, stats = drained(q, 1, consumer_max=3)
    assert row["state"] == "dead"
    assert seen == [1]  # the handler's 1, not the consumer's 3
    assert (stats["retried"], stats["dead"]) == (0, 1)


@pytest.mark.parametrize("bad", [0, -1, True, 1.0, MAX_COUNT + 1])
def test_a_handlers_bad_max_attempts_falls_back_to_the_consumers(q, bad):
    """Not an attempt count retry takes (0, a bool, a float, more than
    MAX_COUNT): the consumer's max_attempts (2) holds, and the bad value
    costs neither the job nor a thread. (MAX_COUNT + 1 used to pass, checked
    against MAX_MS, and the retry refusing it crashed the fetcher.)"""
    row, seen, stats = drained(q, bad, consumer_max=2)
    assert row["state"] == "dead"
    assert seen == [1, 2]
    assert (stats["retried"], stats["dead"]) == (1, 1)


def test_a_handlers_largest_max_attempts_is_taken(q):
    """MAX_COUNT, the most retry takes, is the handler's own: the job runs
    again after its second failure, where the consumer's 2 would have
    dead-lettered it."""
    jid, _ = q.enqueue(b"x")
    seen = []

    def handler(job):
        seen.append(job.attempts)
        if job.attempts < 3:
            raise Retry("again", delay_ms=0, max_attempts=MAX_COUNT)

    stats = Consumer(q, handler, concurrency=1, max_attempts=2).drain()
    assert seen == [1, 2, 3]
    assert (stats["retried"], stats["completed"]) == (2, 1)
    assert q.job(jid) is None  # completed (its row is gone)


# -- a retry's error: the first 2000 characters ---------------------------------

@pytest.mark.parametrize("error,kept", [
    ("e" * 2000, "e" * 2000),               # kept whole
    ("e" * 1999 + "XY", "e" * 1999 + "X"),  # 2001: the last one cut
    ("€" * 2001, "€" * 2000),               # characters, not bytes (6000 of UTF-8)
])
def test_a_retry_keeps_the_first_2000_characters_of_its_error(q, r, error, kept):
    jid, _ = q.enqueue(b"x")
    job = q.claim(lease_ms=60_000)
    assert q.retry(jid, job.attempts, max_attempts=1, error=error) == "dead"
    assert q.job(jid)["last_error"] == kept
    assert r.hget(q.job_key(jid), "last_error") == kept.encode()


def test_a_batched_retry_cuts_its_error_the_same_way(q, r):
    jid, _ = q.enqueue(b"x")
    job = q.claim(lease_ms=60_000)
    batch = q.batch()
    q.add_retry(batch, jid, job.attempts, delay_ms=0, max_attempts=1, error="e" * 1999 + "XY")
    assert batch.run() == [b"dead"]
    assert q.job(jid)["last_error"] == "e" * 1999 + "X"


# -- set_result: True when recorded, False once the row is gone -----------------

def test_set_result_answers_true_when_recorded_and_false_when_the_row_is_gone(q):
    jid, _ = q.enqueue(b"x")
    job = q.claim(lease_ms=60_000)
    assert job.set_result({"n": 1}) is True
    assert q.job(jid)["result"] == {"n": 1}
    assert q.set_result(jid, job.attempts, [2]) is True
    assert q.job(jid)["result"] == [2]
    assert q.complete(jid, job.attempts) is True
    assert q.set_result(jid, job.attempts, [3]) is False


# -- translated(): every redis-py error translate() maps ---------------------------

def test_a_slot_not_covered_is_unavailable_like_the_other_cluster_errors():
    """redis-py's SlotNotCoveredError (a cluster client whose slot map has no
    node for a key's slot, mid failover) is a RedisClusterException, not a
    RedisError; translate() maps it to Unavailable, and so must translated(),
    which wraps every call the core sends (Batch.run asks the slot map
    inside it), else it escapes as a raw redis-py error and a consumer,
    which reconnects on Unavailable only, crashes."""
    original = redis.exceptions.SlotNotCoveredError('Slot "1" is not covered by the cluster.')
    with pytest.raises(Unavailable) as info:
        with translated():
            raise original
    assert info.value.__cause__ is original
    assert "SlotNotCoveredError" in str(info.value)


def test_translated_leaves_other_errors_and_a_clean_exit_alone():
    for exc in (ValueError("not ours"), ArgumentError("ours already"), KeyboardInterrupt()):
        with pytest.raises(type(exc)) as info:
            with translated():
                raise exc
        assert info.value is exc
    with translated():
        pass
