"""Each transition of the Lua bundle, asserting exact state, on Valkey and on
Redis 7.0 (``any_server``)."""
import threading

import pytest

from echomq import JobNotFound, KindError, Queue, StaleToken, WrongState, ids
from echomq.scripts import BUNDLE

from .helpers import snapshot


@pytest.fixture
def q(any_server):
    return Queue("t", any_server)


def server_ms(client) -> int:
    s, us = client.time()
    return s * 1000 + us // 1000


def test_enqueue_writes_the_row_and_pending(q, any_server):
    jid, status = q.enqueue(b"payload")
    assert status == "enqueued"
    row = any_server.hgetall(q.job_key(jid))
    assert row[b"state"] == b"pending" and row[b"attempts"] == b"0" and row[b"payload"] == b"payload"
    assert any_server.zrange(q.k_pending, 0, -1, withscores=True) == [(jid.encode(), 0.0)]
    assert any_server.llen(q.k_wake) == 1


def test_duplicate_enqueue_leaves_the_row_untouched(q, any_server):
    jid, _ = q.enqueue(b"first")
    job = q.claim(lease_ms=60_000)
    before = snapshot(any_server, q)
    assert q.enqueue(b"second", job_id=jid) == (jid, "duplicate")
    assert q.enqueue(b"third", job_id=jid, lane=ids.mint("PLR")) == (jid, "duplicate")
    assert snapshot(any_server, q) == before
    assert job.payload == b"first"


def test_duplicate_enqueue_race_admits_once(q, any_server):
    jid = ids.mint("JOB")
    barrier = threading.Barrier(32)
    answers = []

    def racer(i):
        barrier.wait()
        answers.append(q.enqueue(f"p{i}".encode(), job_id=jid)[1])

    threads = [threading.Thread(target=racer, args=(i,)) for i in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(answers) == ["duplicate"] * 31 + ["enqueued"]
    assert any_server.zcard(q.k_pending) == 1
    assert q.counts()["pending"] == 1


def test_emqkind_writes_nothing(q, any_server):
    """The script refuses a non-JOB id itself (another runtime may skip our
    Python checks): an EMQKIND error and not a single key written."""
    gid = ids.mint("GES")
    keys = (f"{q.prefix}job:{gid}", q.k_pending, q.k_schedule)
    with pytest.raises(KindError):
        q._run("enqueue", keys, (q.prefix, gid, b"x", "", 0))
    assert any_server.keys("*") == []


def test_claim_increments_attempts_and_leases_on_the_server_clock(q, any_server):
    jid, _ = q.enqueue(b"x")
    before = server_ms(any_server)
    job = q.claim(lease_ms=5_000)
    after = server_ms(any_server)
    assert (job.id, job.payload, job.attempts, job.lane) == (jid, b"x", 1, None)
    row = any_server.hgetall(q.job_key(jid))
    assert row[b"state"] == b"active" and row[b"attempts"] == b"1"
    deadline = any_server.zscore(q.k_active, jid)
    assert before + 5_000 <= deadline <= after + 5_000
    assert any_server.zcard(q.k_pending) == 0
    assert q.claim(lease_ms=5_000) is None


def test_claim_takes_the_oldest_mint_first(q):
    minted = [ids.mint("JOB") for _ in range(20)]
    for jid in reversed(minted):
        q.enqueue(b"x", job_id=jid)
    assert [j.id for j in q.claim_batch(20, lease_ms=1000)] == minted


def test_a_claimed_batch_goes_into_a_skiplist_and_only_the_leases_stay(q, any_server):
    """claim puts a batch of 16+ leases into a skiplist (lua/include/skiplist.lua):
    a listpack active set costs O(k*m) per ZADD. The member that converts it
    is gone again; a smaller batch leaves the set as it is."""
    def encoding():
        return any_server.object("encoding", q.k_active)

    def leases():
        return sorted(m for m, _ in any_server.zrange(q.k_active, 0, -1, withscores=True))

    def finish(jobs):
        assert q.complete_many([(j.id, j.attempts) for j in jobs]) == [True] * len(jobs)
        assert not any_server.exists(q.k_active)  # emptied: the key goes, as before

    q.enqueue_many([b"x"] * 80)
    assert encoding() is None  # no leases yet
    first = q.claim_batch(15, lease_ms=60_000)
    assert encoding() == b"listpack"  # 15: left to the server
    finish(first)
    batch = q.claim_batch(16, lease_ms=60_000)
    assert encoding() == b"skiplist"  # a new set for 16 is made a skiplist at once
    more = q.claim_batch(3, lease_ms=60_000)
    assert encoding() == b"skiplist" and leases() == sorted(j.id.encode() for j in batch + more)
    finish(batch + more)
    small = q.claim_batch(3, lease_ms=60_000)
    assert encoding() == b"listpack"
    big = q.claim_batch(20, lease_ms=60_000)  # an existing listpack is converted
    assert encoding() == b"skiplist"
    assert leases() == sorted(j.id.encode() for j in small + big) and q.counts()["active"] == 23


@pytest.mark.parametrize("op", ["complete", "retry", "extend", "release"])
def test_stale_token_is_refused_and_changes_nothing(q, any_server, op):
    q.enqueue(b"x")
    first = q.claim(lease_ms=1)
    any_server.zadd(q.k_active, {first.id: 0})  # lease long gone
    assert q.reap() == 1
    second = q.claim(lease_ms=60_000)
    assert second.id == first.id and second.attempts == 2
    before = snapshot(any_server, q)
    call = {
        "complete": lambda: q.complete(first.id, first.attempts),
        "retry": lambda: q.retry(first.id, first.attempts, delay_ms=0, max_attempts=1, error="zombie"),
        "extend": lambda: q.extend(first.id, first.attempts, lease_ms=60_000),
        "release": lambda: q.release(first.id, first.attempts),
    }[op]
    with pytest.raises(StaleToken):
        call()
    assert snapshot(any_server, q) == before
    assert q.complete(second.id, second.attempts) is True


def test_a_reaped_but_unclaimed_job_refuses_the_old_token(q, any_server):
    q.enqueue(b"x")
    job = q.claim(lease_ms=1)
    any_server.zadd(q.k_active, {job.id: 0})
    q.reap()
    before = snapshot(any_server, q)
    with pytest.raises(StaleToken):
        q.complete(job.id, job.attempts)
    assert snapshot(any_server, q) == before


def test_complete_deletes_the_row_and_counts(q, any_server):
    jid, _ = q.enqueue(b"x")
    job = q.claim(lease_ms=60_000)
    assert q.complete(job.id, job.attempts) is True
    assert not any_server.exists(q.job_key(jid))
    assert any_server.zcard(q.k_active) == 0
    assert q.counts()["completed"] == 1
    assert q.complete(job.id, job.attempts) is False  # gone: a distinct, non-error answer
    assert q.per_minute(2)[-1]["completed"] == 1


def test_retry_schedules_then_dead_letters_at_max_attempts(q, any_server):
    jid, _ = q.enqueue(b"x")
    job = q.claim(lease_ms=60_000)
    before = server_ms(any_server)
    assert q.retry(jid, job.attempts, delay_ms=10_000, max_attempts=2, error="first") == "scheduled"
    row = q.job(jid)
    assert row["state"] == "scheduled" and row["last_error"] == "first"
    assert before + 10_000 <= row["run_at"] <= server_ms(any_server) + 10_000
    any_server.zadd(q.k_schedule, {jid: 0})  # make it due now
    assert q.promote() == 1
    job = q.claim(lease_ms=60_000)
    assert job.attempts == 2
    assert q.retry(jid, job.attempts, delay_ms=10_000, max_attempts=2, error="second") == "dead"
    row = q.job(jid)
    assert row["state"] == "dead" and row["last_error"] == "second"
    assert any_server.zscore(q.k_dead, jid) is not None
    assert q.counts()["dead"] == 1 and q.counts()["dead_total"] == 1
    assert [d["id"] for d in q.dead_jobs()] == [jid]


def test_requeue_dead_gives_fresh_attempts_but_keeps_the_fence(q, any_server):
    jid, _ = q.enqueue(b"x")
    job = q.claim(lease_ms=60_000)
    q.retry(jid, job.attempts, max_attempts=1, error="boom")
    pending_id, _ = q.enqueue(b"y")
    with pytest.raises(WrongState):
        q.requeue_dead(pending_id)  # only dead jobs can be requeued
    q.requeue_dead(jid)
    assert q.job(jid)["state"] == "pending" and any_server.zcard(q.k_dead) == 0
    again = q.claim(lease_ms=60_000)
    while again.id != jid:  # the "y" job is also pending
        again = q.claim(lease_ms=60_000)
    assert again.attempts == 2  # the token never goes down
    with pytest.raises(StaleToken):
        q.complete(jid, 1)
    assert q.retry(jid, again.attempts, max_attempts=1, error="again") == "dead"
    with pytest.raises(JobNotFound):
        q.requeue_dead(ids.mint("JOB"))


def test_extend_moves_the_deadline(q, any_server):
    q.enqueue(b"x")
    job = q.claim(lease_ms=1_000)
    first = any_server.zscore(q.k_active, job.id)
    deadline = q.extend(job.id, job.attempts, lease_ms=60_000)
    assert deadline == any_server.zscore(q.k_active, job.id) and deadline >= first + 59_000


def test_reap_returns_an_expired_lease_to_its_lane(q, any_server):
    lane = ids.mint("PLR")
    jid, _ = q.enqueue(b"x", lane=lane)
    job = q.claim(lease_ms=60_000)
    assert q.reap() == 0  # not expired yet
    any_server.zadd(q.k_active, {jid: 0})
    reaped = q.reap()
    assert (reaped, reaped.returned, reaped.dead) == (1, 1, 0)
    row = q.job(jid)
    assert row["state"] == "pending" and row["stalled"] == 1 and row["attempts"] == 1
    assert q.lanes.depth(lane) == 1 and q.lanes.ring() == [lane]
    assert q.claim(lease_ms=60_000).attempts == job.attempts + 1


def test_poison_job_is_dead_lettered_after_its_stall_limit(q, any_server):
    jid, _ = q.enqueue(b"poison", lane=ids.mint("PLR"))
    for stall in range(1, 4):
        job = q.claim(lease_ms=60_000)
        assert job is not None and job.id == jid
        any_server.zadd(q.k_active, {jid: 0})  # its worker died
        reaped = q.reap(max_stalls=2)
        if stall <= 2:
            assert reaped.returned == 1
        else:
            assert reaped.dead == 1
    row = q.job(jid)
    assert row["state"] == "dead" and "stalled 3 times" in row["last_error"]
    assert q.claim(lease_ms=60_000) is None
    assert q.counts()["dead"] == 1 and q.counts()["ring"] == 0


def test_promote_moves_due_jobs_only(q, any_server):
    lane = ids.mint("PLR")
    due, st = q.enqueue(b"due", lane=lane, delay_ms=60_000)
    later, _ = q.enqueue(b"later", delay_ms=60_000)
    assert st == "scheduled" and q.job(due)["state"] == "scheduled"
    assert q.claim(lease_ms=1000) is None
    any_server.zadd(q.k_schedule, {due: 0})
    assert q.promote() == 1
    assert q.job(due)["state"] == "pending" and q.job(later)["state"] == "scheduled"
    assert q.claim(lease_ms=1000).id == due


def test_release_hands_back_without_spending_an_attempt(q, any_server):
    jid, _ = q.enqueue(b"x")
    job = q.claim(lease_ms=60_000)
    assert q.release(jid, job.attempts) is True
    assert q.job(jid)["state"] == "pending"
    again = q.claim(lease_ms=60_000)
    assert again.attempts == 2
    # The released claim does not count: one real failure at max_attempts=2 retries.
    assert q.retry(jid, again.attempts, max_attempts=2, error="x") == "scheduled"


def test_remove_deletes_wherever_it_is(q, any_server):
    lane = ids.mint("PLR")
    a, _ = q.enqueue(b"a", lane=lane)
    b, _ = q.enqueue(b"b", lane=lane)
    assert q.remove(a) == "pending"
    job = q.claim(lease_ms=60_000)
    assert job.id == b
    assert q.remove(b) == "active"
    assert q.complete(b, job.attempts) is False
    assert q.remove(b) is None
    assert q.counts()["pending"] == 0 and q.counts()["active"] == 0 and q.lanes.ring() == []
    assert set(q.keys()) <= {q.k_meta, q.k_wake, q.k_events}  # no row, set or lane left behind


def test_remove_flat_jobs_in_every_state(q, any_server):
    pending, _ = q.enqueue(b"p")
    scheduled, _ = q.enqueue(b"s", delay_ms=60_000)
    assert q.remove(pending) == "pending" and q.remove(scheduled) == "scheduled"
    dead, _ = q.enqueue(b"d")
    job = q.claim(lease_ms=60_000)
    q.retry(dead, job.attempts, max_attempts=1, error="boom")
    assert q.remove(dead) == "dead"
    c = q.counts()
    assert (c["pending"], c["scheduled"], c["dead"]) == (0, 0, 0)
    assert {k for k in q.keys() if ":minute:" not in k} <= {q.k_meta, q.k_wake, q.k_events}


@pytest.mark.parametrize("op", ["reap", "promote"])
def test_a_pass_moves_at_most_limit_jobs(q, any_server, op):
    jids = [jid for jid, _ in q.enqueue_many([b"x"] * 3)]
    if op == "reap":
        for job in q.claim_batch(3, lease_ms=60_000):
            any_server.zadd(q.k_active, {job.id: 0})
        assert [q.reap(limit=1), q.reap(limit=1), q.reap(limit=5), q.reap(limit=1)] == [1, 1, 1, 0]
    else:
        for jid in jids:
            q.remove(jid)
            q.enqueue(b"x", job_id=jid, delay_ms=60_000)
            any_server.zadd(q.k_schedule, {jid: 0})
        assert [q.promote(limit=1), q.promote(limit=1), q.promote(limit=5), q.promote(limit=1)] == [1, 1, 1, 0]
    assert q.counts()["pending"] == 3


def test_pause_and_resume(q):
    q.enqueue(b"x")
    q.pause()
    assert q.counts()["paused"] and q.claim(lease_ms=1000) is None
    q.resume()
    assert q.claim(lease_ms=1000) is not None


def test_scripts_reload_after_script_flush(q, any_server):
    any_server.script_flush()
    q.enqueue(b"x")
    any_server.script_flush()
    job = q.claim_batch(1, lease_ms=60_000)[0]
    any_server.script_flush()
    assert q.complete_many([(job.id, job.attempts)]) == [True]
    any_server.script_flush()
    assert [s for _, s in q.enqueue_many([b"a", b"b"])] == ["enqueued", "enqueued"]


def test_complete_many_reports_each_job(q):
    q.enqueue_many([b"a", b"b", b"c"])
    a, b, c = q.claim_batch(3, lease_ms=60_000)
    q.complete(c.id, c.attempts)
    out = q.complete_many([(a.id, a.attempts), (b.id, b.attempts + 5), (c.id, c.attempts)])
    assert out[0] is True and isinstance(out[1], StaleToken) and out[2] is False


# The claim script of seed 004, verbatim: another runtime's claim. A job this
# library enqueued and that script claimed must complete here with its token.
SEED_CLAIM = """
local popped = redis.call('ZPOPMIN', KEYS[1])
if #popped == 0 then return {} end
local id = popped[1]
local jk = ARGV[1] .. id
local att = redis.call('HINCRBY', jk, 'attempts', 1)
redis.call('HSET', jk, 'state', 'active')
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), id)
return {id, redis.call('HGET', jk, 'payload'), att}
"""


def test_interop_with_the_seed_claim_script(q, any_server):
    jid, _ = q.enqueue(b"from python")
    claimed = any_server.eval(SEED_CLAIM, 2, q.k_pending, q.k_active, q.prefix + "job:", 60_000)
    assert claimed == [jid.encode(), b"from python", 1]
    with pytest.raises(StaleToken):
        q.complete(jid, 2)
    assert q.complete(jid, claimed[2]) is True
    assert q.counts()["completed"] == 1 and q.counts()["active"] == 0


def test_script_shas_are_known_up_front(any_server):
    for script in BUNDLE.values():
        assert any_server.script_load(script.source) == script.sha


def test_concurrent_reapers_return_each_job_once(q, any_server):
    lane = ids.mint("PLR")
    q.enqueue_many([{"payload": b"x", "lane": lane}] * 50 + [b"flat"] * 50)
    jobs = q.claim_batch(100, lease_ms=60_000)
    any_server.zadd(q.k_active, {j.id: 0 for j in jobs})  # every lease expired
    barrier = threading.Barrier(4)
    totals = []

    def reaper():
        barrier.wait()
        n = 0
        for _ in range(20):
            n += q.reap(limit=7)
        totals.append(n)

    threads = [threading.Thread(target=reaper) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(totals) == 100
    assert q.counts()["pending"] == 100 and q.counts()["active"] == 0
    assert any_server.zcard(q.k_pending) == 50 and q.lanes.depth(lane) == 50
    assert q.lanes.ring() == [lane]
