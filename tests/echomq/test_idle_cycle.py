"""A consumer between idle and busy: the batch window, acks sent by a worker
while the fetcher parks, and the wake tokens a short claim makes stale.

At a moderate rate (a job every few ms) these decide what each job costs:
without them every job was a wake-up, a claim of one, a handler call of one,
a doorbell and an ack round trip of its own."""
import threading
import time

import pytest

from echomq import ArgumentError, Consumer, Queue
from echomq.consumer import Observer

from .test_consumer import Running, wait_for


@pytest.fixture
def q(r):
    return Queue("idle", r)


def _calls(r, command: str) -> int:
    return int(r.info("commandstats").get(f"cmdstat_{command}", {}).get("calls", 0))


# -- the wake list ---------------------------------------------------------------
def test_a_short_claim_empties_the_wake_list_a_full_one_does_not(q, r):
    for i in range(3):
        q.enqueue(b"x%d" % i)
    assert r.llen(q.k_wake) == 3
    assert len(q.claim_batch(2, lease_ms=60_000)) == 2  # full: one job is still ready
    assert r.llen(q.k_wake) == 3
    assert len(q.claim_batch(5, lease_ms=60_000)) == 1  # short: nothing left ready, every token stale
    assert r.llen(q.k_wake) == 0
    q.enqueue(b"later")  # work made ready afterwards pushes its own token
    assert r.llen(q.k_wake) == 1


def test_a_paused_queue_keeps_its_wake_tokens(q, r):
    q.enqueue(b"x")
    q.pause()
    assert q.claim_batch(5, lease_ms=60_000) == []
    assert r.llen(q.k_wake) >= 1  # the job is still ready once resumed
    q.resume()
    assert [j.payload for j in q.claim_batch(5, lease_ms=60_000)] == [b"x"]


# -- the batch window ----------------------------------------------------------
def test_jobs_streaming_in_are_gathered_by_the_window(q):
    calls, done = [], threading.Event()

    def handle_many(jobs):
        calls.append([j.payload for j in jobs])
        if sum(map(len, calls)) == 6:
            done.set()
        return [None] * len(jobs)

    # A long window, so a slow machine still enqueues all five inside it; a
    # 3 s beat, so only the wake tokens can have ended the parks.
    with Running(Consumer(q, handler_many=handle_many, batch_window_ms=500, beat_ms=3_000)) as c:
        wait_for(lambda: c._parked, what="the consumer to park")
        q.enqueue(b"first")  # after a quiet spell: claimed at once, alone
        wait_for(lambda: calls and c._parked, what="the first job handled and the consumer parked again")
        for i in range(5):  # close behind it: a stream, so the window gathers them
            q.enqueue(b"j%d" % i)
        assert done.wait(10)
        wait_for(lambda: q.counts()["completed"] == 6, what="six completions")
    assert calls == [[b"first"], [b"j0", b"j1", b"j2", b"j3", b"j4"]]
    assert c.stats["windows"] == 1


def test_a_job_after_a_quiet_spell_pays_no_window(q):
    handled = threading.Event()
    window = 1.0

    def handle_many(jobs):
        handled.set()
        return [None] * len(jobs)

    with Running(Consumer(q, handler_many=handle_many, batch_window_ms=int(window * 1000), beat_ms=3_000)) as c:
        wait_for(lambda: c._parked, what="the consumer to park")
        sent = time.monotonic()
        q.enqueue(b"alone")
        assert handled.wait(10)
        took = time.monotonic() - sent
    assert took < window / 2 and c.stats["windows"] == 0, took


def test_a_busy_consumer_does_not_wait(q):
    """The window only follows a park: jobs already waiting are claimed at once."""
    sizes = []

    def handle_many(jobs):
        sizes.append(len(jobs))
        return [None] * len(jobs)

    q.enqueue_many([b"x%d" % i for i in range(120)])
    with Running(Consumer(q, handler_many=handle_many, batch=50, batch_window_ms=1_000, beat_ms=3_000)) as c:
        wait_for(lambda: q.counts()["completed"] == 120, timeout=5, what="120 completions, without a window")
    assert sum(sizes) == 120 and c.stats["windows"] == 0


def test_the_window_is_for_handler_many_and_bounded(q):
    with pytest.raises(ArgumentError):
        Consumer(q, lambda job: None, batch_window_ms=5)
    for bad in (-1, 1_001, 2.5, True):
        with pytest.raises(ArgumentError):
            Consumer(q, handler_many=lambda jobs: [None] * len(jobs), batch_window_ms=bad)
    assert Consumer(q, handler_many=lambda jobs: [None] * len(jobs)).batch_window_ms == 0


# -- acks while the fetcher parks ------------------------------------------------
def test_a_worker_acks_for_the_parked_fetcher_without_ringing_it(q, r):
    """The fetcher parked after its claim found nothing more; the worker
    that finishes sends the ack itself (one complete_batch), so no doorbell
    push, no wake-up of the fetcher and no empty claim."""
    release, handled, settled = threading.Event(), threading.Event(), threading.Event()

    class Settled(Observer):
        def settled(self, consumer, job, outcome):
            settled.set()

    def handle_many(jobs):
        handled.set()
        release.wait(10)
        return [None] * len(jobs)

    with Running(Consumer(q, handler_many=handle_many, beat_ms=3_000, observer=Settled())) as c:
        wait_for(lambda: c._parked, what="the consumer to park")
        q.enqueue(b"x")
        assert handled.wait(10)
        wait_for(lambda: c._parked, what="the fetcher to park again while the job runs")
        pushes, evals = _calls(r, "lpush"), _calls(r, "evalsha")
        release.set()
        assert settled.wait(2), "the ack was not sent (the beat is 3 s)"
        assert c._parked
        assert _calls(r, "lpush") == pushes  # no doorbell
        assert _calls(r, "evalsha") == evals + 1  # the complete_batch, and no claim
        assert q.counts()["completed"] == 1
    assert c.stats["completed"] == 1
