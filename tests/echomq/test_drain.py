"""Consumer.drain() / echomq.testing.drain (issue 21): every job ready now
and those that become ready while it runs, then it returns, never parked."""
import threading

import pytest

from echomq import Queue, Retry, ShardedQueue, ids
from echomq.testing import drain


@pytest.fixture(params=["queue", "sharded"])
def q(request, r):
    return Queue("d", r) if request.param == "queue" else ShardedQueue("d", r, shards=3)


def returns(fn, timeout=20.0):
    """Run fn in a thread; its result, asserting it returned (a drain that
    parked would sit out its 60 s beat)."""
    out = []
    t = threading.Thread(target=lambda: out.append(fn()), daemon=True)
    t.start()
    t.join(timeout)
    assert not t.is_alive(), "drain did not return"
    return out[0]


def test_drain_runs_ready_jobs_and_zero_delay_retries_then_returns(q):
    lane = ids.mint("PLR")
    q.enqueue_many([b"flat"] * 10 + [{"payload": b"lane", "lane": lane}] * 10)
    later, _ = q.enqueue(b"later", delay_ms=60_000)
    seen = []

    def handler(job):
        seen.append(job.id)
        if job.payload == b"lane" and job.attempts == 1:
            raise Retry("once more", delay_ms=0)

    stats = returns(lambda: drain(q, handler, concurrency=4, beat_ms=60_000))
    assert stats["completed"] == 20 and stats["retried"] == 10
    assert len(seen) == 30
    c = q.counts()
    assert (c["pending"], c["active"], c["scheduled"], c["completed"]) == (0, 0, 1, 20)
    assert q.find(later)["state"] == "scheduled"  # not due: left for later


def test_drain_dead_letters_a_failing_job_within_one_run_with_no_backoff(q):
    jid, _ = q.enqueue(b"boom")
    stats = returns(lambda: drain(q, lambda job: 1 / 0, max_attempts=3, backoff=lambda attempt: 0,
                                  beat_ms=60_000))
    assert (stats["retried"], stats["dead"]) == (2, 1)
    assert q.find(jid)["state"] == "dead"


def test_drain_of_an_empty_or_paused_queue_returns_at_once(q):
    assert returns(lambda: drain(q, lambda job: None, beat_ms=60_000))["completed"] == 0
    q.enqueue(b"x")
    q.pause()
    assert returns(lambda: drain(q, lambda job: None, beat_ms=60_000))["completed"] == 0
    q.resume()
    assert returns(lambda: drain(q, lambda job: None, beat_ms=60_000))["completed"] == 1
