"""Hostile input, lost threads and the bugs a one-line change used to hide:
a bad Retry, a crashing consumer thread, resume's wake-up, requeue's stall
reset and the consumer's lost-lease bookkeeping."""
from __future__ import annotations

import logging
import math
import threading

import pytest

from echomq import Cancelled, Consumer, Queue, Reaper, Retry, StaleToken, ids
from echomq.consumer import ConsumerCrashed
from echomq.scripts import LUA_DIR

from .test_consumer import Running, wait_for


@pytest.fixture
def q(r):
    return Queue("hard", r)


# -- a handler's bad Retry costs neither the job nor a thread ----------------
@pytest.mark.parametrize("bad", [math.nan, math.inf, "soon", -5, 1.5, 10**30, True])
def test_a_bad_retry_delay_falls_back_to_the_backoff(q, bad):
    runs = []

    def handler(job):
        runs.append(job.attempts)
        if job.attempts < 3:
            raise Retry("not yet", delay_ms=bad)

    jid, _ = q.enqueue(b"x")
    reaper = Reaper([q])
    with Running(Consumer(q, handler, max_attempts=5, backoff=lambda n: 0)) as c:
        wait_for(lambda: (reaper.run_once(), q.counts()["completed"] == 1)[1], what="the job to complete")
        assert all(t.is_alive() for t in c._threads) and c._heartbeat.is_alive()
    assert runs == [1, 2, 3] and c.stats["retried"] == 2
    assert q.counts()["dead"] == 0 and q.find(jid)["state"] == "completed"


def test_a_handler_that_raises_systemexit_is_retried_not_a_dead_thread(q):
    def handler(job):
        if job.attempts == 1:
            raise SystemExit(3)

    q.enqueue(b"x")
    reaper = Reaper([q])
    with Running(Consumer(q, handler, backoff=lambda n: 0)) as c:
        wait_for(lambda: (reaper.run_once(), q.counts()["completed"] == 1)[1], what="the retried job")
        assert all(t.is_alive() for t in c._threads)
    assert c.stats["retried"] == 1


# -- no thread dies silently --------------------------------------------------
@pytest.mark.parametrize("part", ["worker", "fetcher", "heartbeat"])
def test_a_crashing_thread_is_logged_and_stops_the_consumer(q, part, caplog):
    c = Consumer(q, lambda job: None, lease_ms=300)

    def broken(*args, **kwargs):
        raise RuntimeError(f"bug in the {part}")

    if part == "worker":
        c._handle = broken
    elif part == "fetcher":
        c._settle = broken
    else:
        c._beat = broken
        c.handler = lambda job: c._stopping.wait(30)  # hold a job so the heartbeat has work
    q.enqueue(b"x")
    caplog.set_level(logging.ERROR, logger="echomq.consumer")
    errors = []

    def run():
        try:
            c.run()
        except ConsumerCrashed as exc:
            errors.append(exc)

    t = threading.Thread(target=run)
    t.start()
    t.join(30)
    assert not t.is_alive(), "the consumer did not stop after its thread crashed"
    assert len(errors) == 1 and isinstance(errors[0].__cause__, RuntimeError)
    crashed = [rec for rec in caplog.records if "crashed" in rec.getMessage()]
    assert crashed and crashed[0].exc_info and crashed[0].exc_info[0] is RuntimeError


# -- resume wakes every parked consumer ---------------------------------------
def test_resume_pushes_wake_max_tokens(q, r):
    q.pause()
    r.delete(q.k_wake)
    q.resume()
    wake_max = int((LUA_DIR / "include" / "wake.lua").read_text().split("local WAKE_MAX = ")[1].split()[0])
    assert r.llen(q.k_wake) == wake_max


def test_resume_wakes_a_consumer_parked_while_paused(q):
    got = threading.Event()
    q.pause()
    with Running(Consumer(q, lambda job: got.set(), beat_ms=30_000, prefetch=0)) as c:
        wait_for(lambda: c._parked, what="the consumer to park")
        q.enqueue(b"x")  # its wake token is used up while the queue is paused
        wait_for(lambda: c._parked and q.client.llen(q.k_wake) == 0, what="the consumer to park again")
        assert not got.is_set()
        q.resume()
        assert got.wait(5), "resume did not wake the parked consumer (its beat is 30 s)"


# -- requeue starts the stall count again --------------------------------------
def stall(q, r, max_stalls):
    job = q.claim(lease_ms=60_000)
    r.zadd(q.k_active, {job.id: 0})
    return q.reap(max_stalls=max_stalls)


def test_requeue_resets_the_stall_counter(q, r):
    jid, _ = q.enqueue(b"poison")
    assert stall(q, r, 1).returned == 1
    assert stall(q, r, 1).dead == 1
    q.requeue_dead(jid)
    assert q.job(jid)["stalled"] == 0
    assert stall(q, r, 1).returned == 1  # one stall after a requeue is within the limit again


# -- the consumer's lost-lease bookkeeping ------------------------------------
class CountingQueue(Queue):
    """Records what each heartbeat asked to extend."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.beats: list[list[str]] = []

    def extend_many(self, pairs, *, lease_ms):
        pairs = list(pairs)
        self.beats.append([jid for jid, _ in pairs])
        return super().extend_many(pairs, lease_ms=lease_ms)


def test_a_lost_lease_is_marked_once_and_the_handler_is_told(r):
    q = CountingQueue("lost", r)
    held, gate = {}, threading.Event()

    def handler(job):
        held[job.id] = job
        gate.wait(30)

    jid, _ = q.enqueue(b"lost")
    other, _ = q.enqueue(b"kept")  # keeps the heartbeat beating
    with Running(Consumer(q, handler, concurrency=2, lease_ms=300, prefetch=0)) as c:
        wait_for(lambda: len(held) == 2, what="both handlers to start")
        r.zadd(q.k_active, {jid: 0})  # the lease runs out (a long GC pause, say)
        assert q.reap() == 1
        thief = q.claim(lease_ms=60_000)  # and another worker claims the job
        assert thief.attempts == 2
        wait_for(lambda: held[jid].cancelled, what="the heartbeat to learn of the lost lease")
        seen = len(q.beats)
        wait_for(lambda: len(q.beats) >= seen + 3, what="three more heartbeats")
        assert all(jid not in beat and other in beat for beat in q.beats[seen:]), \
            "a lost lease is still being extended"
        assert c.stats["lost"] == 1 and not held[other].cancelled
        gate.set()
        wait_for(lambda: c.stats["stale"] == 1 and c.stats["completed"] == 1, what="the acks")
    assert q.counts()["completed"] == 1 and q.complete(thief.id, thief.attempts) is True


# -- the fence refuses a cancelled job's late result ---------------------------
@pytest.mark.parametrize("late", ["complete", "retry", "release", "extend"])
def test_a_cancelled_jobs_late_call_is_refused_and_it_is_gone(q, r, late):
    jid, _ = q.enqueue(b"x", lane=ids.mint("PLR"))
    job = q.claim(lease_ms=60_000)
    assert q.cancel(jid) == "cancelling"
    assert q.counts()["active"] == 1 and q.find(jid)["cancelling"] is True
    call = {"complete": lambda: q.complete(jid, job.attempts),
            "retry": lambda: q.retry(jid, job.attempts, error="late"),
            "release": lambda: q.release(jid, job.attempts),
            "extend": lambda: q.extend(jid, job.attempts)}[late]
    with pytest.raises(Cancelled):
        call()
    counts = q.counts()
    assert (counts["pending"], counts["active"], counts["scheduled"], counts["dead"]) == (0, 0, 0, 0)
    assert counts["completed"] == 0 and counts["cancelled"] == 1 and counts["lanes"] == 0
    assert q.find(jid) is None
    assert {k for k in q.keys() if ":minute:" not in k} <= {q.k_meta, q.k_wake, q.k_events}  # nothing left behind (the stream tells what happened)


def test_a_stale_worker_cannot_complete_a_reclaimed_job_even_after_cancel(q, r):
    jid, _ = q.enqueue(b"x")
    old = q.claim(lease_ms=60_000)
    r.zadd(q.k_active, {jid: 0})
    q.reap()
    q.claim(lease_ms=60_000)
    q.cancel(jid)
    with pytest.raises(StaleToken):
        q.complete(jid, old.attempts)


# -- one typed error for an outage --------------------------------------------
def test_every_call_maps_an_outage_to_unavailable():
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry as NoRetry

    from echomq import Unavailable

    dead = redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.2, retry=NoRetry(NoBackoff(), 0))
    q = Queue("down", dead)
    jid, lane = ids.mint("JOB"), ids.mint("PLR")
    calls = {
        "enqueue": lambda: q.enqueue(b"x"), "enqueue_many": lambda: q.enqueue_many([b"x"]),
        "claim": lambda: q.claim(), "complete": lambda: q.complete(jid, 1),
        "complete_many": lambda: q.complete_many([(jid, 1)]), "retry": lambda: q.retry(jid, 1),
        "extend_many": lambda: q.extend_many([(jid, 1)], lease_ms=1000), "reap": lambda: q.reap(),
        "promote": lambda: q.promote(), "cancel": lambda: q.cancel(jid), "remove": lambda: q.remove(jid),
        "counts": lambda: q.counts(), "job": lambda: q.job(jid), "find": lambda: q.find(jid),
        "completed_jobs": lambda: q.completed_jobs(), "dead_jobs": lambda: q.dead_jobs(),
        "per_minute": lambda: q.per_minute(), "set_retention": lambda: q.set_retention(completed=5),
        "lanes.info": lambda: q.lanes.info(lane), "lanes.pause": lambda: q.lanes.pause(lane),
        "wait_for_work": lambda: q.wait_for_work(0.1),
    }
    for name, call in calls.items():
        with pytest.raises(Unavailable):
            call()


def test_a_consumer_stops_a_cancelled_handler_and_counts_it_once(q):
    """In process: the heartbeat (lease 300 ms: a beat each 100 ms) tells the
    handler, which stops at job.check(); the other jobs complete as usual."""
    started, outcomes = threading.Event(), []

    def handler(job):
        if job.payload == b"long":
            started.set()
            try:
                while not job.wait_cancelled(0.01):
                    pass
                job.check()
            except Cancelled:
                outcomes.append("stopped")
                raise
            outcomes.append("finished")  # never: check() raised

    long_id, _ = q.enqueue(b"long")
    with Running(Consumer(q, handler, concurrency=2, lease_ms=300)) as c:
        assert started.wait(10)
        assert q.cancel(long_id) == "cancelling"
        q.enqueue_many([b"short"] * 5)
        wait_for(lambda: c.stats["cancelled"] == 1 and c.stats["completed"] == 5, what="the cancel and 5 jobs")
    assert outcomes == ["stopped"] and c.stats["cancelled"] == 1 and c.stats["retried"] == 0
    counts = q.counts()
    assert (counts["active"], counts["completed"], counts["cancelled"]) == (0, 5, 1)


def test_the_reaper_loop_reaps_until_stopped(q, r):
    jid, _ = q.enqueue(b"x")
    job = q.claim(lease_ms=60_000)
    r.zadd(q.k_active, {job.id: 0})  # its worker is gone
    reaper = Reaper([q], interval_ms=20)
    t = threading.Thread(target=reaper.run)
    t.start()
    try:
        wait_for(lambda: q.counts()["pending"] == 1, what="the running reaper to return the job")
        wait_for(lambda: reaper.passes >= 2, what="a second pass")
    finally:
        reaper.stop()
        t.join(10)
    assert not t.is_alive() and q.find(jid)["state"] == "pending"
