"""Unique jobs (issue 21): a live job holding a unique key makes another
enqueue with it answer the holder's id as a duplicate and write nothing; the
key is released on every terminal state, and only by its holder. On a
ShardedQueue the key and the id meet on one shard. On Valkey and Redis 7.0
(``any_server``)."""
import time
import zlib

import pytest

from echomq import ArgumentError, Cancelled, Queue, ShardedQueue, WrongState, ids

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


# -- a ShardedQueue: the id and the key meet on one shard -----------------------------------------

def key_on(sq, shard: int, start: int = 0) -> str:
    """A unique key whose shard (its CRC32) is ``shard``."""
    n = start
    while zlib.crc32(f"k{n}".encode()) % len(sq.shards) != shard:  # the key's shard, as docs/echomq.md says
        n += 1
    return f"k{n}"


def id_on(sq, shard: int) -> str:
    """A fresh JOB id whose own shard is ``shard``."""
    while True:
        jid = ids.mint("JOB")
        if sq.shard_index(job_id=jid) == shard:
            return jid


def all_keys(sq, any_server) -> dict:
    """Every key of every shard with its value (the queue's whole state)."""
    return {s.name: snapshot(any_server, s) for s in sq.shards}


def rows_of(sq, any_server, jid) -> list[str]:
    """The shards holding a row of ``jid``."""
    return [s.name for s in sq.shards if any_server.exists(s.job_key(jid))]


@pytest.fixture
def sq(any_server):
    return ShardedQueue("t", any_server, shards=4)


def test_a_sharded_unique_job_gets_an_id_of_its_keys_shard_so_the_id_stays_the_idempotency_key(sq, any_server):
    """Without a lane a unique job lives on its key's shard, and the id minted
    for it is one of that shard: so a later enqueue of that id, with no key
    or another key of that shard, meets the row and answers "duplicate"."""
    for shard in range(4):
        key = key_on(sq, shard)
        jid, status = sq.enqueue(b"x", unique_key=key)
        assert status == "enqueued"
        before = all_keys(sq, any_server)
        assert sq.enqueue(b"again", job_id=jid) == (jid, "duplicate")  # not a second copy on the id's shard
        assert sq.shard_index(job_id=jid) == shard and rows_of(sq, any_server, jid) == [sq.shards[shard].name]
        assert sq.enqueue(b"again", job_id=jid, unique_key=key_on(sq, shard, start=10_000)) == (jid, "duplicate")
        assert sq.enqueue(b"dup", unique_key=key) == (jid, "duplicate")  # the key keeps its meaning
        assert sq.enqueue_many([{"payload": b"y", "job_id": jid},
                                {"payload": b"z", "unique_key": key}]) == [(jid, "duplicate"), (jid, "duplicate")]
        assert all_keys(sq, any_server) == before and sq.locate(jid) is sq.shards[shard]
    assert sq.counts()["pending"] == 4


def test_a_sharded_unique_job_with_an_id_of_another_shard_is_refused_and_nothing_is_written(sq, any_server):
    """An explicit id whose shard is not its key's would live on two shards
    (the id's and the key's): refused, typed, nothing written, even when the
    same call's other items are good."""
    k0, k1 = key_on(sq, 0), key_on(sq, 1)
    x = id_on(sq, 0)
    assert sq.enqueue(b"x", job_id=x, unique_key=k0) == (x, "enqueued")
    before = all_keys(sq, any_server)
    for call in (lambda: sq.enqueue(b"x", job_id=x, unique_key=k1),
                 lambda: sq.enqueue(b"x", job_id=id_on(sq, 2), unique_key=k1, delay_ms=5),
                 lambda: sq.enqueue_many([b"fine", {"payload": b"x", "job_id": x, "unique_key": k1}])):
        with pytest.raises(ArgumentError, match="shard"):
            call()
        assert all_keys(sq, any_server) == before
    # the id stays one job, the key one holder
    assert sq.enqueue(b"x", job_id=x) == (x, "duplicate")
    assert sq.enqueue(b"y", job_id=id_on(sq, 0), unique_key=k0) == (x, "duplicate")
    assert rows_of(sq, any_server, x) == [sq.shards[0].name] and sq.counts()["pending"] == 1
    # a lane places the job (the key is unique among that lane's shard's lanes): any id goes
    lane = ids.mint("PLR")
    jid = id_on(sq, (sq.shard_index(lane=lane) + 1) % 4)
    assert sq.enqueue(b"l", job_id=jid, lane=lane, unique_key=k1) == (jid, "enqueued")


def test_mint_job_id_answers_an_id_an_enqueue_with_that_key_takes(sq, any_server):
    key = key_on(sq, 3)
    assert sq.shard_index(unique_key=key) == 3 and sq.shard_index(unique_key=key, lane=ids.mint("PLR")) is not None
    jid = sq.mint_job_id(unique_key=key)
    assert ids.brand_of(jid) == "JOB" and sq.shard_index(job_id=jid) == 3
    assert sq.enqueue(b"x", job_id=jid, unique_key=key) == (jid, "enqueued")
    assert ids.brand_of(sq.mint_job_id()) == "JOB"
    for bad in ("", "a b", 5, "x" * 201):
        with pytest.raises(ArgumentError):
            sq.mint_job_id(unique_key=bad)
