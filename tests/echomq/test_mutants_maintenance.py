"""reap, requeue and the shared bounds (wake tokens, dead-letter retention,
argument error texts), asserting exact key state. Written against survivors
of ``python -m bench.mutate`` (seed 11). On Valkey and on Redis 7.0
(``any_server``)."""
from __future__ import annotations

import pytest

from echomq import ArgumentError, Queue, ids

from .helpers import snapshot

WAKE_MAX = 32  # docs/echomq.md: the wake list holds at most 32 tokens
KEEP_DEAD = 10_000  # docs/echomq.md, Retention: by default the last 10,000 dead jobs


@pytest.fixture
def q(any_server):
    return Queue("t", any_server)


# -- reap: a lane's active count -------------------------------------------

def test_reaping_a_laned_lease_frees_its_slot_under_the_lane_limit(q, any_server):
    """A lane limited to one active job: its job's worker dies, the reaper
    returns the job, and the lane's active count goes back to 0, so the lane
    is on the ring again and the job is claimed again (not stuck at the limit)."""
    lane = ids.mint("PLR")
    q.lanes.limit(lane, 1)
    a, _ = q.enqueue(b"a", lane=lane)
    b, _ = q.enqueue(b"b", lane=lane)
    first = q.claim(lease_ms=60_000)
    assert first.id == a
    assert q.lanes.info(lane)["active"] == 1 and q.lanes.ring() == []
    assert q.claim(lease_ms=60_000) is None  # at its limit

    any_server.zadd(q.k_active, {a: 0})  # its worker died; the lease ran out
    reaped = q.reap(max_stalls=2)
    assert (reaped.returned, reaped.dead) == (1, 0)
    assert q.lanes.info(lane) == {"lane": lane, "depth": 2, "active": 0, "paused": False, "limit": 1,
                                  "rate": None, "cooling": False}
    assert q.lanes.ring() == [lane]
    assert any_server.zcard(q.k_active) == 0

    again = q.claim(lease_ms=60_000)
    assert (again.id, again.attempts) == (a, 2)
    assert q.lanes.info(lane)["active"] == 1 and q.lanes.ring() == []
    assert q.complete(a, again.attempts) is True
    assert q.claim(lease_ms=60_000).id == b


def test_reaping_a_laned_lease_to_dead_frees_its_slot(q, any_server):
    lane = ids.mint("PLR")
    q.lanes.limit(lane, 1)
    a, _ = q.enqueue(b"poison", lane=lane)
    b, _ = q.enqueue(b"next", lane=lane)
    assert q.claim(lease_ms=60_000).id == a
    any_server.zadd(q.k_active, {a: 0})
    reaped = q.reap(max_stalls=0)
    assert (reaped.returned, reaped.dead) == (0, 1)
    assert q.job(a)["state"] == "dead"
    assert q.lanes.info(lane)["active"] == 0 and q.lanes.ring() == [lane]
    assert q.claim(lease_ms=60_000).id == b


def test_reaping_a_flat_lease_touches_no_lane(q, any_server):
    jid, _ = q.enqueue(b"x")
    q.claim(lease_ms=60_000)
    any_server.zadd(q.k_active, {jid: 0})
    assert q.reap().returned == 1
    assert q.keys() == sorted(q.prefix + k for k in ("events", "job:" + jid, "meta", "pending", "wake"))
    assert any_server.zrange(q.k_pending, 0, -1) == [jid.encode()]


# -- requeue: the row loses its death -------------------------------------

def dead_job(q, payload=b"x"):
    jid, _ = q.enqueue(payload)
    job = q.claim(lease_ms=60_000)
    while job.id != jid:  # (another job enqueued before this one)
        job = q.claim(lease_ms=60_000)
    assert q.retry(jid, job.attempts, max_attempts=1, error="boom") == "dead"
    assert q.job(jid)["died"] > 0
    return jid


@pytest.mark.parametrize("others", [0, 2])
def test_requeue_clears_the_time_of_death_on_the_row(q, any_server, others):
    """With other dead jobs beside it or alone in the dead set: the requeued
    row is pending with no ``died``, the dead set keeps exactly the others."""
    kept = [dead_job(q) for _ in range(others)]
    jid = dead_job(q)
    q.requeue_dead(jid)
    row = any_server.hgetall(q.job_key(jid))
    assert b"died" not in row
    assert (row[b"state"], row[b"base"], row[b"stalled"], row[b"attempts"]) == (b"pending", b"1", b"0", b"1")
    assert any_server.type(q.k_dead) == (b"zset" if others else b"none")
    assert sorted(any_server.zrange(q.k_dead, 0, -1)) == sorted(k.encode() for k in kept)
    found = q.find(jid)
    assert (found["state"], found["finished"]) == ("pending", None)
    assert [d["id"] for d in q.dead_jobs()] == kept[::-1]
    assert q.counts()["dead"] == others and q.counts()["pending"] == 1


# -- wake tokens: at most WAKE_MAX -----------------------------------------

def test_resume_pushes_exactly_wake_max_tokens(q, any_server):
    q.pause()
    assert any_server.llen(q.k_wake) == 0
    q.resume()
    assert any_server.lrange(q.k_wake, 0, -1) == [b"1"] * WAKE_MAX
    q.resume()  # the list stays at the cap
    assert any_server.llen(q.k_wake) == WAKE_MAX


def test_enqueues_leave_at_most_wake_max_tokens(q, any_server):
    q.enqueue_many([b"x"] * (WAKE_MAX - 1))
    assert any_server.llen(q.k_wake) == WAKE_MAX - 1
    q.enqueue_many([b"x"] * 3)
    assert any_server.llen(q.k_wake) == WAKE_MAX
    assert q.counts()["pending"] == WAKE_MAX + 2


# -- retention: the dead set's default count bound ---------------------------

def test_the_dead_set_keeps_the_last_ten_thousand_by_default(q, any_server):
    """No retention set: after KEEP_DEAD dead jobs one more death trims the
    oldest, row and all, and the set holds exactly KEEP_DEAD."""
    q.enqueue_many([b"x"] * KEEP_DEAD)
    leased = q.claim_batch(KEEP_DEAD, lease_ms=60_000)
    assert len(leased) == KEEP_DEAD
    any_server.zadd(q.k_active, {j.id: 0 for j in leased})  # every worker died
    assert q.reap(max_stalls=0, limit=KEEP_DEAD).dead == KEEP_DEAD
    assert any_server.zcard(q.k_dead) == KEEP_DEAD  # at the bound: nothing trimmed
    oldest = min(j.id for j in leased)  # all died in one ms: the lowest id goes first

    last = dead_job(q)
    assert any_server.zcard(q.k_dead) == KEEP_DEAD
    assert any_server.zscore(q.k_dead, last) is not None
    assert any_server.zscore(q.k_dead, oldest) is None
    assert not any_server.exists(q.job_key(oldest))
    assert q.counts()["dead"] == KEEP_DEAD and q.counts()["dead_total"] == KEEP_DEAD + 1


# -- argument errors: the quoted prefix ------------------------------------

@pytest.mark.parametrize("script,keys,rest", [
    ("pause", ("meta",), ("1",)),
    ("reap", ("active", "dead"), ("2", "10")),
])
def test_a_bad_prefix_is_quoted_to_forty_bytes(q, any_server, script, keys, rest):
    """The EMQARG text quotes the first 40 bytes of the bad prefix, no more,
    no less (sent past the Python checks, as another runtime might)."""
    bad = "emq:{" + "abcdefghij" * 13 + "}:"  # 130 characters: too long a name
    before = snapshot(any_server, q)
    with pytest.raises(ArgumentError) as err:
        q._run(script, tuple(q.prefix + k for k in keys), (bad, *rest))
    assert str(err.value) == f'EMQARG prefix: want emq:{{<queue>}}:, got "{bad[:40]}"'
    assert snapshot(any_server, q) == before
    short = "emq:{t}"
    with pytest.raises(ArgumentError) as err:
        q._run(script, tuple(q.prefix + k for k in keys), (short, *rest))
    assert str(err.value) == 'EMQARG prefix: want emq:{<queue>}:, got "emq:{t}"'
