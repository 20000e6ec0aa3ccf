"""Adaptive concurrency, the Consumer's default (concurrency=None): handler
threads are added while jobs wait and the handlers block on I/O, never for
a handler that only computes; and a worker wakes the fetcher only when it
has a cycle to send, so a busy consumer claims and acks in batches."""
from __future__ import annotations

import threading

import pytest

from echomq import Consumer, Queue
from echomq.consumer import MAX_THREADS

from .test_consumer import Running, wait_for


class Overlap:
    """Counts the handlers running at once; ``most`` is the peak."""

    def __init__(self):
        self.lock = threading.Lock()
        self.now = self.most = 0

    def __enter__(self):
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)

    def __exit__(self, *exc):
        with self.lock:
            self.now -= 1


@pytest.fixture
def q(r):
    return Queue("conc", r)


def test_a_handler_that_waits_on_valkey_gets_more_threads(q, r):
    """Jobs keep coming (topped up by 2,000 while fewer than 1,000 wait)
    until the consumer runs MAX_THREADS threads. On a machine whose cores
    are busy a round trip often finds its answer already there (the thread
    was preempted after sending), so a probe says "did not sleep" more
    often and growth takes more jobs: the test waits for it, up to 60 s,
    rather than counting on it within a fixed number of jobs."""
    overlap = Overlap()
    sent = [0]

    def handler(job):
        with overlap:
            r.incr("work")  # a round trip: the thread sleeps until the answer

    def top_up():
        if q.counts()["pending"] < 1000:
            q.enqueue_many([b"x"] * 2000)
            sent[0] += 2000

    top_up()
    with Running(Consumer(q, handler)) as c:
        wait_for(lambda: top_up() or c.concurrency == MAX_THREADS, timeout=60, what="MAX_THREADS threads")
        wait_for(lambda: q.counts()["completed"] == sent[0], what="every job done")
    assert c.concurrency == c.stats["threads"] == MAX_THREADS
    assert overlap.most > 1 and int(r.get("work")) == sent[0]


def test_a_handler_that_only_computes_keeps_one_thread(q):
    overlap = Overlap()

    def handler(job):
        with overlap:
            sum(i * i for i in range(2_000))  # CPU only: more threads would take turns for the GIL

    q.enqueue_many([b"x"] * 2000)
    with Running(Consumer(q, handler)) as c:
        wait_for(lambda: q.counts()["completed"] == 2000, what="2000 completions")
    assert overlap.most == 1 and c.concurrency == 1 and "threads" not in c.stats


def test_a_given_concurrency_is_kept(q, r):
    overlap = Overlap()

    def handler(job):
        with overlap:
            r.incr("work")

    q.enqueue_many([b"x"] * 1000)
    with Running(Consumer(q, handler, concurrency=2)) as c:
        wait_for(lambda: q.counts()["completed"] == 1000, what="1000 completions")
    assert overlap.most <= 2 and c.concurrency == 2 and "threads" not in c.stats


class Counting(Queue):
    """A Queue that counts the batches (round trips) the consumer sends."""

    batches = 0

    def batch(self):
        self.batches += 1
        return super().batch()


def test_one_thread_acks_and_claims_in_batches_not_per_job(r):
    """With one thread and a prefetch of 32, the fetcher must not send a
    cycle for each job (as it did when 'acks waiting, nothing running'
    held between every two jobs of a full run queue)."""
    q = Counting("conc", r)
    q.enqueue_many([b"x"] * 640)
    with Running(Consumer(q, lambda job: None, concurrency=1, prefetch=32)):
        wait_for(lambda: q.counts()["completed"] == 640, what="640 completions")
    assert q.batches < 640 / 4
