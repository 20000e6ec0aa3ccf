"""retry.lua, exactly: the lease it ends and the stale reply it gives.

Written against survivors of ``python -m bench.mutate`` (seed 11): a retry
that left the job in ``active`` (so the reaper handed it out a second time)
and a stale reply that named the wrong argument as the token. On Valkey and
on Redis 7.0 (``any_server``).
"""
from __future__ import annotations

import pytest

from echomq import Queue, StaleToken, ids

from .helpers import snapshot


@pytest.fixture
def q(any_server):
    return Queue("t", any_server)


@pytest.mark.parametrize("lane", [None, "laned"])
def test_retry_ends_the_lease_and_the_job_is_delivered_once(q, any_server, lane):
    """After a retry the job is in the schedule and nowhere else: no lease in
    ``active``, so when the old lease's deadline passes the reaper has
    nothing to hand out; only promote brings the job back, once."""
    lane = ids.mint("PLR") if lane else None
    jid, _ = q.enqueue(b"x", lane=lane)
    job = q.claim(lease_ms=60_000)
    assert q.retry(jid, job.attempts, delay_ms=60_000, max_attempts=3, error="boom") == "scheduled"

    assert any_server.zscore(q.k_active, jid) is None
    assert any_server.zcard(q.k_active) == 0
    assert any_server.zscore(q.k_schedule, jid) is not None
    c = q.counts()
    assert (c["pending"], c["active"], c["scheduled"], c["dead"]) == (0, 0, 1, 0)
    assert [a["id"] for a in q.active_jobs()] == []
    assert "lease_deadline" not in q.job(jid)
    if lane:  # the lane's slot is free, and nothing of it is ready
        assert q.lanes.info(lane)["active"] == 0 and q.lanes.ring() == []

    # The old lease's deadline passes: nothing is leased, so nothing comes back.
    before = snapshot(any_server, q)
    any_server.zadd(q.k_active, {jid: 0}, xx=True)  # (only if it were still there)
    assert q.reap(max_stalls=5) == 0
    assert snapshot(any_server, q) == before
    assert q.claim(lease_ms=60_000) is None

    # Due now: promoted once and claimed once, with the next token.
    any_server.zadd(q.k_schedule, {jid: 0})
    assert q.promote() == 1
    again = q.claim(lease_ms=60_000)
    assert (again.id, again.attempts) == (jid, 2)
    assert q.claim(lease_ms=60_000) is None
    assert q.complete(jid, again.attempts) is True
    assert q.counts()["active"] == 0 and q.counts()["completed"] == 1


def test_retry_to_dead_ends_the_lease_too(q, any_server):
    jid, _ = q.enqueue(b"x")
    job = q.claim(lease_ms=60_000)
    assert q.retry(jid, job.attempts, delay_ms=5, max_attempts=1, error="last") == "dead"
    assert any_server.zcard(q.k_active) == 0
    assert any_server.zrange(q.k_dead, 0, -1) == [jid.encode()]
    assert q.reap(max_stalls=0) == 0
    assert q.job(jid)["state"] == "dead"


def test_a_stale_retry_names_the_token_it_was_given(q, any_server):
    """The EMQSTALE reply is the same for every fenced script: ``token <t>
    does not hold <id>`` with the caller's token, not another argument."""
    jid, _ = q.enqueue(b"x")
    first = q.claim(lease_ms=60_000)
    any_server.zadd(q.k_active, {jid: 0})  # its lease ran out
    assert q.reap() == 1
    second = q.claim(lease_ms=60_000)
    assert (first.attempts, second.attempts) == (1, 2)
    before = snapshot(any_server, q)
    with pytest.raises(StaleToken) as err:
        q.retry(jid, first.attempts, delay_ms=60_000, max_attempts=5, error="zombie")
    assert str(err.value) == f"EMQSTALE token 1 does not hold {jid}"
    assert snapshot(any_server, q) == before
    # the same words as complete's reply for the same stale token
    with pytest.raises(StaleToken) as err2:
        q.complete(jid, first.attempts)
    assert str(err2.value) == str(err.value)
