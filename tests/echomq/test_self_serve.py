"""Worker threads that claim for themselves while the queue is busy
(Consumer._serve_self, from SELF_SERVE_THREADS threads): a job one of them
claimed is never stuck behind a slow job of that thread, a stop hands back
what they claimed and had not started, and the fetcher takes over whenever
no thread claims."""
from __future__ import annotations

import threading

import pytest

from echomq import Consumer, Queue
from echomq.consumer import SELF_CLAIM, SELF_SERVE_THREADS

from .test_consumer import Running, wait_for


@pytest.fixture
def q(r):
    return Queue("self", r)


THREADS = SELF_SERVE_THREADS
AHEAD = THREADS * (SELF_CLAIM - 1)  # a fixed prefetch with which each thread claims SELF_CLAIM jobs


def test_jobs_behind_a_held_up_thread_are_run_by_another(q):
    """Two gate jobs in a row among fast ones, after the fetcher's first
    claim (THREADS + AHEAD jobs), so the threads claim them for
    themselves. Whichever thread claims a gate with jobs behind it is held
    up; those jobs must go to a thread that is free, so every fast job is
    done while both gates still block."""
    gate = threading.Event()
    fast = [jid for jid, _ in q.enqueue_many([b"fast"] * (THREADS + AHEAD + 100))]
    q.enqueue_many([b"gate", b"gate"])
    fast += [jid for jid, _ in q.enqueue_many([b"fast"] * 100)]
    done, lock = set(), threading.Lock()

    def handler(job):
        if job.payload == b"gate":
            gate.wait(60)
        else:
            with lock:
                done.add(job.id)

    with Running(Consumer(q, handler, concurrency=THREADS, prefetch=AHEAD)) as c:
        try:
            wait_for(lambda: len(done) == len(fast), what="every fast job, with both gates still blocking")
            wait_for(lambda: q.counts()["active"] == 2, what="the fast jobs' acks")
            assert not gate.is_set() and c.stats["unblocked"] >= 1
        finally:
            gate.set()
        wait_for(lambda: q.counts()["completed"] == len(fast) + 2, what="the gates")
    assert done == set(fast) and c.stats["completed"] == len(fast) + 2


def test_stop_hands_back_the_jobs_threads_claimed_for_themselves(q):
    """After the fetcher's first claim and as many jobs again, every
    handler blocks: each thread holds jobs it claimed and has not started.
    A stop hands all of them back; only the ones running stay leased until
    they finish."""
    gate = threading.Event()
    n, fast = 4 * (THREADS + AHEAD), 2 * (THREADS + AHEAD)
    q.enqueue_many([b"x"] * n)
    count, lock = [0], threading.Lock()

    def handler(job):
        with lock:
            count[0] += 1
            blocks = count[0] > fast
        if blocks:
            gate.wait(60)

    c = Consumer(q, handler, concurrency=THREADS, prefetch=AHEAD, grace_ms=60_000)
    t = threading.Thread(target=c.run)
    t.start()
    try:
        wait_for(lambda: count[0] == fast + THREADS, what="the fast jobs done and every thread blocked")
        assert c._waiting_own(), "no thread holds jobs it claimed (the test tests nothing)"
        c.stop()
        wait_for(lambda: q.counts()["pending"] == n - fast - THREADS and q.counts()["active"] == THREADS,
                 what="every claimed, unstarted job handed back")
    finally:
        gate.set()
        t.join(20)
    assert not t.is_alive()
    counts = q.counts()
    assert (counts["completed"], counts["pending"], counts["active"]) == (fast + THREADS, n - fast - THREADS, 0)


def test_the_fetcher_claims_when_no_thread_claims_for_itself(q):
    """The last claim came back full, yet every thread waits on the run
    queue (a thread's claim can come back full just as the fetcher parks,
    and a thread does not claim while it parks): the fetcher must claim,
    not leave the work to threads that are all waiting."""
    handled = threading.Event()
    with Running(Consumer(q, lambda job: handled.set(), concurrency=THREADS, beat_ms=200)) as c:
        wait_for(lambda: c._parked, what="the consumer to park")
        c._hot = True  # what that race leaves behind
        q.enqueue(b"x")
        assert handled.wait(5), "the job was not claimed"
        wait_for(lambda: q.counts()["completed"] == 1, what="its ack")
