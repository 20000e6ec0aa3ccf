"""Priorities (issue 21): higher first within a lane or the flat set, equal
ones in admission order, lanes served in turn whatever their priorities, and
a job keeps its priority through every way back to ready. On Valkey and
Redis 7.0 (``any_server``), with exact state where a script writes it."""
import pytest

from echomq import ArgumentError, Queue, ids

from .helpers import snapshot


@pytest.fixture
def q(any_server):
    return Queue("t", any_server)


def test_a_priority_is_the_ready_score_and_a_field_of_the_row(q, any_server):
    jid, status = q.enqueue(b"x", priority=7)
    default, _ = q.enqueue(b"y")
    state = snapshot(any_server, q)
    assert status == "enqueued"
    assert state[q.k_pending] == ("zset", [(jid.encode(), -7.0), (default.encode(), 0.0)])
    row = state[q.job_key(jid)][1]
    assert (row[b"state"], row[b"priority"], row[b"attempts"]) == (b"pending", b"7", b"0")
    assert b"priority" not in state[q.job_key(default)][1]  # a default job's row is as it always was


@pytest.mark.parametrize("lane", [False, True])
def test_higher_first_and_equal_priorities_in_admission_order(q, lane):
    where = {"lane": ids.mint("PLR")} if lane else {}
    prios = [0, 5, -5, 5, 0, 100, -100, 5]
    admitted = [q.enqueue(str(i).encode(), priority=p, **where)[0] for i, p in enumerate(prios)]
    claimed = [j.id for j in q.claim_batch(len(prios), lease_ms=60_000)]
    expect = [admitted[i] for i in sorted(range(len(prios)), key=lambda i: (-prios[i], i))]
    assert claimed == expect


def test_a_lane_of_top_priority_jobs_does_not_starve_another_lane(q):
    hot, cold = ids.mint("PLR"), ids.mint("PLR")
    q.enqueue_many([{"payload": b"hot", "lane": hot, "priority": 100}] * 30)
    q.enqueue_many([{"payload": b"cold", "lane": cold, "priority": -100}] * 3)
    lanes = [q.claim(lease_ms=60_000).lane for _ in range(6)]
    assert lanes == [hot, cold] * 3  # the ring alternates: priority orders a lane, not the ring


def test_delayed_retried_reaped_released_and_requeued_jobs_keep_their_priority(q, any_server):
    lane = ids.mint("PLR")
    key = f"{q.prefix}g:{lane}:pending"
    q.enqueue(b"low", lane=lane, priority=-1)
    jid, status = q.enqueue(b"high", lane=lane, priority=9, delay_ms=60_000)
    assert status == "scheduled"
    any_server.zadd(q.k_schedule, {jid: 0})
    assert q.promote() == 1 and any_server.zscore(key, jid) == -9  # delayed

    job = q.claim(lease_ms=60_000)
    assert job.id == jid
    assert q.retry(jid, job.attempts, delay_ms=0, max_attempts=5, error="x") == "scheduled"
    q.promote()
    assert any_server.zscore(key, jid) == -9  # retried

    job = q.claim(lease_ms=60_000)
    any_server.zadd(q.k_active, {jid: 0})
    assert q.reap().returned == 1 and any_server.zscore(key, jid) == -9  # reaped

    job = q.claim(lease_ms=60_000)
    assert q.release(jid, job.attempts) and any_server.zscore(key, jid) == -9  # released

    job = q.claim(lease_ms=60_000)
    assert q.retry(jid, job.attempts, max_attempts=1, error="dead") == "dead"
    q.requeue_dead(jid)
    assert any_server.zscore(key, jid) == -9  # requeued
    assert [j.payload for j in q.claim_batch(2, lease_ms=60_000)] == [b"high", b"low"]


@pytest.mark.parametrize("bad", [101, -101, 1.5, "1", True, float("nan")])
def test_a_priority_outside_the_range_is_refused_and_nothing_is_written(q, any_server, bad):
    with pytest.raises(ArgumentError):
        q.enqueue(b"x", priority=bad)
    with pytest.raises(ArgumentError):
        q.enqueue_many([b"ok", {"payload": b"x", "priority": bad}])
    assert q.keys() == []


@pytest.mark.parametrize("lane", [False, True])
def test_the_oldest_ready_age_finds_the_oldest_job_behind_higher_priorities(q, any_server, lane):
    """echomq_queue_oldest_pending_age_seconds: a ready set's first member
    is its highest priority's oldest, not the oldest job; the age is the
    oldest job's whatever the priorities ahead of it (and is not read off
    the priority-shifted score)."""
    from echomq.metrics import oldest_pending_age_s

    where = {"lane": ids.mint("PLR")} if lane else {}
    old, _ = q.enqueue(b"old", priority=-3, **where)
    for p in (9, 0, 9, 100, -2):
        q.enqueue(b"new", priority=p, **where)
    any_server.hset(q.job_key(old), "created", q.server_time_ms() - 120_000)  # admitted two minutes ago
    assert 119 <= oldest_pending_age_s(q) < 130
    any_server.hset(q.job_key(old), "created", q.server_time_ms() - 1_000)
    assert oldest_pending_age_s(q) < 10
