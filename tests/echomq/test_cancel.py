"""Queue.cancel on each state, asserting the exact state left behind, on
Valkey and Redis 7.0."""
from __future__ import annotations

import pytest

from echomq import JobNotFound, Queue, WrongState, ids


@pytest.fixture
def q(any_server):
    return Queue("cx", any_server)


def leftovers(q):
    """Keys of the queue other than the settings, wake list, event stream and the chart's buckets."""
    return {k for k in q.keys() if ":minute:" not in k} - {q.k_meta, q.k_wake, q.k_events}


@pytest.mark.parametrize("laned", [False, True])
def test_cancel_a_pending_job_removes_it_and_its_lane(q, laned):
    lane = ids.mint("PLR") if laned else None
    jid, _ = q.enqueue(b"x", lane=lane)
    assert q.cancel(jid) == "cancelled"
    c = q.counts()
    assert (c["pending"], c["lanes"], c["ring"], c["cancelled"]) == (0, 0, 0, 1)
    assert q.find(jid) is None and leftovers(q) == set()
    assert q.claim(lease_ms=1000) is None


def test_cancel_one_of_a_lanes_jobs_keeps_the_rest_served(q):
    lane = ids.mint("PLR")
    first, _ = q.enqueue(b"1", lane=lane)
    second, _ = q.enqueue(b"2", lane=lane)
    assert q.cancel(first) == "cancelled"
    assert q.lanes.depth(lane) == 1 and q.lanes.ring() == [lane]
    assert q.claim(lease_ms=1000).id == second


def test_cancel_a_scheduled_job(q):
    jid, _ = q.enqueue(b"x", delay_ms=60_000, lane=ids.mint("PLR"))
    assert q.cancel(jid) == "cancelled"
    assert q.counts()["scheduled"] == 0 and leftovers(q) == set()


def test_cancel_an_active_job_marks_it_and_keeps_its_lease(q, any_server):
    lane = ids.mint("PLR")
    jid, _ = q.enqueue(b"x", lane=lane)
    job = q.claim(lease_ms=60_000)
    deadline = any_server.zscore(q.k_active, jid)
    assert q.cancel(jid) == "cancelling"
    assert q.cancel(jid) == "cancelling"  # idempotent
    row = q.job(jid)
    assert row["state"] == "active" and row["cancel"] == "1" and any_server.zscore(q.k_active, jid) == deadline
    assert q.counts()["cancelled"] == 0  # not yet: its worker has not heard
    # Its worker gone, the lease runs out: reap drops it instead of re-running it.
    any_server.zadd(q.k_active, {jid: 0})
    assert q.reap() == 0
    c = q.counts()
    assert (c["pending"], c["active"], c["cancelled"], c["lanes"]) == (0, 0, 1, 0)
    assert leftovers(q) == set() and job.attempts == 1


def test_cancel_refuses_dead_and_unknown_jobs(q):
    jid, _ = q.enqueue(b"x")
    job = q.claim(lease_ms=60_000)
    q.retry(jid, job.attempts, max_attempts=1, error="boom")
    with pytest.raises(WrongState):
        q.cancel(jid)
    assert q.find(jid)["state"] == "dead"
    with pytest.raises(JobNotFound):
        q.cancel(ids.mint("JOB"))
