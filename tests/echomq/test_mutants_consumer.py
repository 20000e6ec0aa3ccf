"""The consumer's backoff jitter and what it reports for a cancelled job.

Written against survivors of ``python -m bench.mutate`` (seed 11): a jitter
that used a third of the delay instead of half (still inside the bounds the
older test checks, but never reaching the full delay), and a refused
complete of a cancelled job that was counted but never told to the observer.
"""
from __future__ import annotations

import threading

import pytest

from echomq import Consumer, Queue
from echomq.consumer import Observer, exponential_backoff

from .test_consumer import Running, wait_for


@pytest.mark.parametrize("base_ms,cap_ms,attempt,delay", [(4, 100, 1, 4), (4, 100, 2, 8), (4, 10, 5, 10),
                                                          (7, 100, 1, 7)])
def test_equal_jitter_spans_half_to_all_of_the_delay(base_ms, cap_ms, attempt, delay):
    """"Equal jitter": half the delay fixed (delay // 2), plus a uniform
    0..delay // 2, so every whole value from delay // 2 to twice that comes
    up (the full delay when it is even), and no other."""
    backoff = exponential_backoff(base_ms=base_ms, cap_ms=cap_ms)
    seen = {backoff(attempt) for _ in range(600)}
    half = delay // 2
    assert seen == set(range(half, 2 * half + 1))


class Recorder(Observer):
    def __init__(self):
        self.settled_as = []

    def settled(self, consumer, job, outcome):
        self.settled_as.append((job.id, outcome))


def test_a_complete_refused_as_cancelled_is_reported_to_the_observer(r):
    """The job is cancelled while its handler runs (the heartbeat, every
    lease/3 = 20 s, has not told it yet): the handler returns, the complete
    is refused with EMQCANCELLED, and the observer hears "cancelled"."""
    q = Queue("mc", r)
    started, gate = threading.Event(), threading.Event()

    def handler(job):
        started.set()
        assert gate.wait(10)

    jid, _ = q.enqueue(b"x")
    seen = Recorder()
    with Running(Consumer(q, handler, observer=seen, lease_ms=60_000, beat_ms=50)) as c:
        assert started.wait(10)
        assert q.cancel(jid) == "cancelling"
        gate.set()
        wait_for(lambda: c.stats["cancelled"] == 1, what="the refused complete")
    # stopped and joined: whatever the consumer reported, it has reported
    assert seen.settled_as == [(jid, "cancelled")]
    assert c.stats["completed"] == 0
    counts = q.counts()
    assert (counts["cancelled"], counts["completed"], counts["active"]) == (1, 0, 0)
    assert q.find(jid) is None and not r.exists(q.job_key(jid))


def test_a_worker_woken_in_the_park_runs_every_job_its_claim_brought(r):
    """The park handed to an idle worker thread (_park_for_fetcher): on the
    wake it claims into every free slot, keeps the first job and puts the
    rest on the run queue (seed 7 survivor: the rest left in hand, leased
    and heart-beaten but never run). One thread and a prefetch of 4: the
    five jobs enqueued at once come back in that one claim."""
    from echomq.consumer import _TAKEN

    q = Queue("mk", r)
    ran = []
    with Running(Consumer(q, lambda job: ran.append(job.id), concurrency=1, prefetch=4)) as c:
        wait_for(lambda: c._parked and c._handover is _TAKEN, what="the worker parked for the fetcher")
        jids = [jid for jid, _ in q.enqueue_many([b"a", b"b", b"c", b"d", b"e"])]
        assert [q.wait(jid, 10) for jid in jids] == ["completed"] * 5
        assert c.stats["worker_wakes"] == 1
    assert sorted(ran) == sorted(jids) and len(ran) == 5
