"""Adaptive prefetch, the Consumer's default: it claims ahead while handlers
are short, never for slow ones, and hands back what waits behind a handler
that turned slow so another consumer runs it."""
from __future__ import annotations

import threading
import time

import pytest

from echomq import Consumer, Queue
from echomq.consumer import PREFETCH_MAX

from .test_consumer import Running, wait_for


@pytest.fixture
def q(r):
    return Queue("pf", r)


def test_the_window_grows_for_short_handlers(q):
    q.enqueue_many([b"x"] * 3000)
    with Running(Consumer(q, lambda job: None, concurrency=4)) as c:
        wait_for(lambda: q.counts()["completed"] == 3000, what="3000 completions")
    assert c.adaptive and 8 <= c.stats["prefetch_peak"] <= PREFETCH_MAX


def test_slow_handlers_get_no_prefetch(q):
    """Each handler reads how many jobs are leased when it starts: with one
    thread and 150 ms handlers, never more than the one it runs."""
    seen = []

    def slow(job):
        seen.append(q.counts()["active"])
        time.sleep(0.15)  # the handler's work

    q.enqueue_many([b"x"] * 8)
    with Running(Consumer(q, slow, concurrency=1)) as c:
        wait_for(lambda: q.counts()["completed"] == 8, what="8 slow jobs")
    assert seen == [1] * 8 and c.stats["prefetch_peak"] == 0


def test_jobs_waiting_behind_a_slow_handler_go_to_another_consumer(q):
    """A (one thread) prefetches while its jobs are short, then one job blocks
    its only thread: the jobs A claimed ahead are handed back and B runs
    them while A's thread is still blocked."""
    gate = threading.Event()
    fast = [jid for jid, _ in q.enqueue_many([b"fast"] * 300)]
    q.enqueue(b"gate")
    fast += [jid for jid, _ in q.enqueue_many([b"fast"] * 100)]
    done = set()

    def handler(job):
        if job.payload == b"gate":
            gate.wait(60)
        else:
            time.sleep(0.001)
            done.add(job.id)

    with Running(Consumer(q, handler, concurrency=1, name="A")) as a:
        wait_for(lambda: a._started and a.stats["shed"] > 0, what="A to hand back its prefetched jobs")
        with Running(Consumer(q, handler, concurrency=1, prefetch=0, name="B")):
            wait_for(lambda: len(done) == 400, what="every fast job, with A's thread still blocked")
            assert not gate.is_set()
            gate.set()
            wait_for(lambda: q.counts()["completed"] == 401, what="the gate job")
    assert done == set(fast)
