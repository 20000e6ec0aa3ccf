"""Unique jobs (issue 21): a live job holding a unique key makes another
enqueue with it answer the holder's id as a duplicate and write nothing; the
key is released on every terminal state, and only by its holder. On Valkey
and Redis 7.0 (``any_server``)."""
import time

import pytest

from echomq import ArgumentError, Cancelled, Queue, WrongState, ids

from .helpers import snapshot


@pytest.fixture
def q(any_server):
    return Queue("t", any_server)


def ukey(q, key="user:1"):
    return f"{q.prefix}unique:{key}"


@pytest.mark.parametrize("state", ["pending", "scheduled", "active"])
def test_a_duplicate_writes_nothing_and_answers_the_holder(q, any_server, state):
    holder, _ = q.enqueue(b"first", unique_key="user:1", unique_ttl_ms=60_000,
                          delay_ms=60_000 if state == "scheduled" else None)
    if state == "active":
        assert q.claim(lease_ms=60_000).id == holder
    assert q.job(holder)["state"] == state and q.job(holder)["unique"] == "user:1"
    assert any_server.get(ukey(q)) == holder.encode() and 0 < any_server.pttl(ukey(q)) <= 60_000
    before = snapshot(any_server, q)
    assert q.enqueue(b"second", unique_key="user:1") == (holder, "duplicate")
    assert q.enqueue(b"third", unique_key="user:1", lane=ids.mint("PLR"), priority=3) == (holder, "duplicate")
    assert q.enqueue_many([{"payload": b"4th", "unique_key": "user:1"}]) == [(holder, "duplicate")]
    assert snapshot(any_server, q) == before


def _complete(q, any_server, jid):
    job = q.claim(lease_ms=60_000)
    assert q.complete(job.id, job.attempts)


def _complete_batch(q, any_server, jid):
    job = q.claim(lease_ms=60_000)
    assert q.complete_many([(job.id, job.attempts)]) == [True]


def _dead_by_retry(q, any_server, jid):
    job = q.claim(lease_ms=60_000)
    assert q.retry(job.id, job.attempts, max_attempts=1, error="boom") == "dead"


def _dead_by_reap(q, any_server, jid):
    q.claim(lease_ms=60_000)
    any_server.zadd(q.k_active, {jid: 0})
    assert q.reap(max_stalls=0).dead == 1


def _removed(q, any_server, jid):
    assert q.remove(jid) == "pending"


def _removed_while_active(q, any_server, jid):
    q.claim(lease_ms=60_000)
    assert q.remove(jid) == "active"


def _cancelled(q, any_server, jid):
    assert q.cancel(jid) == "cancelled"


def _cancelled_while_active(q, any_server, jid):
    job = q.claim(lease_ms=60_000)
    assert q.cancel(jid) == "cancelling"
    assert any_server.exists(ukey(q))  # still leased: still held
    with pytest.raises(Cancelled):
        q.extend(jid, job.attempts)  # the heartbeat drops it


def _cancelled_and_reaped(q, any_server, jid):
    q.claim(lease_ms=60_000)
    q.cancel(jid)
    any_server.zadd(q.k_active, {jid: 0})
    q.reap()


ENDINGS = [_complete, _complete_batch, _dead_by_retry, _dead_by_reap, _removed, _removed_while_active,
           _cancelled, _cancelled_while_active, _cancelled_and_reaped]


@pytest.mark.parametrize("ending", ENDINGS, ids=[f.__name__[1:] for f in ENDINGS])
def test_the_key_is_released_on_every_terminal_state(q, any_server, ending):
    jid, _ = q.enqueue(b"x", unique_key="user:1")
    assert any_server.pttl(ukey(q)) == -1  # no TTL asked: held until the job ends
    ending(q, any_server, jid)
    assert not any_server.exists(ukey(q))
    again, status = q.enqueue(b"y", unique_key="user:1")
    assert status == "enqueued" and again != jid


def test_a_retry_keeps_the_key(q, any_server):
    jid, _ = q.enqueue(b"x", unique_key="user:1")
    job = q.claim(lease_ms=60_000)
    assert q.retry(jid, job.attempts, delay_ms=60_000, max_attempts=3, error="later") == "scheduled"
    assert q.enqueue(b"y", unique_key="user:1") == (jid, "duplicate")


def test_after_its_ttl_the_key_is_free_and_the_first_job_does_not_release_the_new_holder(q, any_server):
    first, _ = q.enqueue(b"x", unique_key="user:1", unique_ttl_ms=30)
    deadline = time.monotonic() + 5
    while any_server.exists(ukey(q)) and time.monotonic() < deadline:
        time.sleep(0.005)  # the server expires the key: nothing to await but the key itself
    second, status = q.enqueue(b"y", unique_key="user:1", unique_ttl_ms=60_000)
    assert status == "enqueued" and second != first
    job = q.claim(lease_ms=60_000)
    assert job.id == first and q.complete(first, job.attempts)
    assert any_server.get(ukey(q)) == second.encode()  # released only by its holder


def test_a_key_naming_a_job_that_is_gone_is_free(q, any_server):
    any_server.set(ukey(q), ids.mint("JOB"))
    jid, status = q.enqueue(b"x", unique_key="user:1")
    assert status == "enqueued" and any_server.get(ukey(q)) == jid.encode()


@pytest.mark.parametrize("kw", [{"unique_key": ""}, {"unique_key": "a b"}, {"unique_key": "x" * 201},
                                {"unique_key": "é"}, {"unique_key": 5}, {"unique_ttl_ms": 1000},
                                {"unique_key": "k", "unique_ttl_ms": 0}, {"unique_key": "k", "unique_ttl_ms": -1},
                                {"unique_key": "k", "unique_ttl_ms": 1.5}])
def test_bad_unique_arguments_are_refused_and_nothing_is_written(q, kw):
    with pytest.raises(ArgumentError):
        q.enqueue(b"x", **kw)
    assert q.keys() == []


def test_a_unique_enqueue_writes_exactly_the_row_the_set_and_the_key(q, any_server):
    jid, _ = q.enqueue(b"x", unique_key="user:1", unique_ttl_ms=60_000, priority=2)
    state = snapshot(any_server, q)
    assert set(state) == {q.job_key(jid), q.k_pending, q.k_wake, ukey(q), q.k_events}
    assert [(e.type, e.job) for e in q.events("0")] == [("enqueued", jid)]
    row = state[q.job_key(jid)][1]
    assert {k: v for k, v in row.items() if k != b"created"} == {
        b"state": b"pending", b"attempts": b"0", b"payload": b"x", b"priority": b"2", b"unique": b"user:1",
        b"unique_ttl": b"60000"}  # the TTL too, for a requeue to take the key again with it
    assert state[q.k_pending] == ("zset", [(jid.encode(), -2.0)])
    assert any_server.get(ukey(q)) == jid.encode()


def _dead(q, jid):
    job = q.claim(lease_ms=60_000)
    assert job.id == jid and q.retry(jid, job.attempts, max_attempts=1, error="boom") == "dead"


@pytest.mark.parametrize("ttl", [None, 60_000])
def test_a_requeued_dead_job_retakes_its_free_key(q, any_server, ttl):
    """requeue.lua's exact state when the job's key is free: the job is
    ready again as a requeue makes it (row, pending set, wake token, event)
    and holds its key again, with the TTL its enqueue gave (none: until it
    ends), so a second enqueue with the key is a duplicate until the
    requeued job ends, which releases the key."""
    jid, _ = q.enqueue(b"x", unique_key="user:1", unique_ttl_ms=ttl)
    _dead(q, jid)
    assert not any_server.exists(ukey(q))  # dead-lettering released it
    before = snapshot(any_server, q)
    q.requeue_dead(jid)
    after = snapshot(any_server, q)

    row = dict(before[q.job_key(jid)][1])
    del row[b"died"]
    row.update({b"state": b"pending", b"base": b"1", b"stalled": b"0"})
    expected = {k: v for k, v in before.items() if k not in (q.k_dead, q.k_events)}
    expected.update({q.job_key(jid): ("hash", row), q.k_pending: ("zset", [(jid.encode(), 0.0)]),
                     q.k_wake: ("list", before.get(q.k_wake, ("list", []))[1] + [b"1"]),
                     ukey(q): ("string", after[ukey(q)][1])})
    assert {k: v for k, v in after.items() if k != q.k_events} == expected
    assert any_server.get(ukey(q)) == jid.encode()
    pttl = any_server.pttl(ukey(q))
    assert pttl == -1 if ttl is None else 0 < pttl <= ttl
    assert [(e.type, e.job) for e in q.events("0")][-1] == ("requeued", jid)
    assert q.job(jid).get("unique_ttl") == ttl

    state = snapshot(any_server, q)
    assert q.enqueue(b"y", unique_key="user:1") == (jid, "duplicate")  # held again: nothing written
    assert snapshot(any_server, q) == state
    job = q.claim(lease_ms=60_000)
    assert job.id == jid and q.complete(jid, job.attempts)
    assert not any_server.exists(ukey(q))  # released at its end
    again, status = q.enqueue(b"z", unique_key="user:1")
    assert status == "enqueued" and again != jid


def test_a_requeue_whose_key_another_live_job_holds_is_refused_and_changes_nothing(q, any_server):
    """While another live job holds the dead job's key, requeueing it would
    run a second job with the key: WrongState naming the holder, and not one
    key changes. Once the holder ends, the requeue goes through and takes the key."""
    jid, _ = q.enqueue(b"x", unique_key="user:1")
    _dead(q, jid)
    holder, status = q.enqueue(b"y", unique_key="user:1", unique_ttl_ms=60_000)
    assert status == "enqueued"
    before = snapshot(any_server, q)
    with pytest.raises(WrongState, match=f"unique key user:1 is held by live job {holder}"):
        q.requeue_dead(jid)
    assert snapshot(any_server, q) == before
    assert 0 < any_server.pttl(ukey(q)) <= 60_000  # the holder's TTL untouched

    job = q.claim(lease_ms=60_000)
    assert job.id == holder and q.complete(holder, job.attempts)
    q.requeue_dead(jid)
    assert q.job(jid)["state"] == "pending" and any_server.get(ukey(q)) == jid.encode()
    assert any_server.pttl(ukey(q)) == -1  # its own enqueue asked for no TTL


def test_a_requeue_retakes_a_key_that_names_a_job_that_is_gone(q, any_server):
    jid, _ = q.enqueue(b"x", unique_key="user:1")
    _dead(q, jid)
    any_server.set(ukey(q), ids.mint("JOB"))  # a holder whose row is gone: the key is free
    q.requeue_dead(jid)
    assert any_server.get(ukey(q)) == jid.encode()
