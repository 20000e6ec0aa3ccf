"""Rate limits (issue 21): fixed windows on the server clock, enforced in
claim.lua for the queue and per lane; a full lane cools off the ring and
comes back; a consumer that reaches the queue's limit waits for the window
instead of spinning, and the limit holds across consumer processes. A
ShardedQueue's claims answer the same waits, so its consumer follows the
windows; a split window past MAX_MS is refused."""
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from echomq import ArgumentError, Consumer, Queue, ShardedQueue, ids
from echomq.checks import MAX_MS
from echomq.queue import ClaimedJobs
from echomq.scripts import BUNDLE

from ..games.procs import wait_for
from .helpers import server_ms, snapshot

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def q(any_server):
    return Queue("t", any_server)


def raw_claim(q, n):
    return BUNDLE["claim"](q.client, *q._claim_call(n, 60_000))


def test_without_a_limit_the_claim_reply_is_as_before(q):
    q.enqueue_many([b"x"] * 3)
    assert len(raw_claim(q, 2)) == 8 and len(raw_claim(q, 5)) == 4  # no tail, even when short


def test_the_queue_window_caps_claims_and_says_when_it_reopens(q, any_server):
    q.set_rate_limit(3, 60_000)
    assert any_server.hmget(q.k_meta, "rate_jobs", "rate_ms") == [b"3", b"60000"]
    q.enqueue_many([b"x"] * 10)
    before = server_ms(any_server)
    got = q.claim_batch(10, lease_ms=60_000)
    assert len(got) == 3 and 59_000 <= got.queue_wait_ms <= 60_000 and got.lane_wait_ms == 0
    start, used = any_server.hmget(q.k_meta, "rate_start", "rate_count")
    assert before <= int(start) <= server_ms(any_server) and used == b"3"
    assert q.rate_limit()["claimed"] == 3 and q.rate_limit()["jobs"] == 3

    state = snapshot(any_server, q, jobs_only=True)
    refused = q.claim_batch(10, lease_ms=60_000)
    assert refused == [] and refused.queue_wait_ms > 0
    assert snapshot(any_server, q, jobs_only=True) == state  # a claim the window refuses writes nothing

    any_server.hset(q.k_meta, "rate_start", int(start) - 60_001)  # the window has passed
    assert len(q.claim_batch(2, lease_ms=60_000)) == 2  # not cut: no wait
    assert any_server.hget(q.k_meta, "rate_count") == b"2"
    last = q.claim_batch(10, lease_ms=60_000)
    assert len(last) == 1 and last.queue_wait_ms > 0


def test_clearing_the_limit_restores_plain_claims(q, any_server):
    q.set_rate_limit(1, 60_000)
    q.enqueue_many([b"x"] * 4)
    assert len(q.claim_batch(4, lease_ms=60_000)) == 1
    q.set_rate_limit(None)
    assert q.rate_limit() is None
    assert not any_server.hexists(q.k_meta, "rate_jobs") and not any_server.hexists(q.k_meta, "rate_count")
    assert len(raw_claim(q, 10)) == 12


def test_a_lane_whose_window_fills_cools_off_the_ring_and_comes_back(q, any_server):
    slow, fast = ids.mint("PLR"), ids.mint("PLR")
    q.lanes.set_rate(slow, 2, 60_000)
    assert any_server.hget(q.k_meta, "lane_rates") == b"1"
    for _ in range(4):
        q.enqueue(b"s", lane=slow)
        q.enqueue(b"f", lane=fast)
    got = q.claim_batch(10, lease_ms=60_000)
    assert sorted(j.lane == slow for j in got) == [False] * 4 + [True] * 2
    assert 0 < got.lane_wait_ms <= 60_000 and got.queue_wait_ms == 0
    meta = f"{q.prefix}g:{slow}:meta"
    start = int(any_server.hget(meta, "rate_start"))
    assert any_server.hget(meta, "cooling") == b"1"
    assert any_server.zrange(q.prefix + "cooling", 0, -1, withscores=True) == [(slow.encode(), start + 60_000)]
    assert q.lanes.ring() == [] and q.lanes.info(slow)["cooling"] and q.lanes.depth(slow) == 2

    any_server.zadd(q.prefix + "cooling", {slow: 0})  # its window has passed
    any_server.hset(meta, "rate_start", start - 60_001)
    again = q.claim_batch(10, lease_ms=60_000)
    assert [j.lane for j in again] == [slow, slow]
    # two more fill the new window: cooling again, until that one ends
    new_start = int(any_server.hget(meta, "rate_start"))
    assert new_start >= start and any_server.hget(meta, "rate_count") == b"2"
    assert any_server.zscore(q.prefix + "cooling", slow) == new_start + 60_000


def test_clearing_a_lane_rate_rerings_a_cooling_lane_and_forgets_it(q, any_server):
    lane = ids.mint("PLR")
    q.lanes.set_rate(lane, 1, 60_000)
    q.enqueue_many([{"payload": b"x", "lane": lane}] * 2)
    job = q.claim(lease_ms=60_000)
    assert q.lanes.ring() == []
    q.lanes.set_rate(lane, None)
    assert q.lanes.ring() == [lane] and not any_server.exists(q.prefix + "cooling")
    assert not any_server.hexists(q.k_meta, "lane_rates")
    second = q.claim(lease_ms=60_000)
    for j in (job, second):
        q.complete(j.id, j.attempts)
    assert lane not in q.lanes.names()  # nothing left: no job, no setting


@pytest.mark.parametrize("args", [(0, 1000), (1, 0), (-1, 10), (1.5, 10), (None, 10), (10, None), ("3", 1000),
                                  (10**7, 1000), (1, 10**12)])
def test_bad_limits_are_refused_and_change_nothing(q, any_server, args):
    lane = ids.mint("PLR")
    for call in (lambda: q.set_rate_limit(*args), lambda: q.lanes.set_rate(lane, *args)):
        with pytest.raises(ArgumentError):
            call()
    assert q.keys() == []


def test_a_consumer_at_the_limit_waits_for_the_window_and_does_not_spin(r):
    q = Queue("rated", r)
    q.set_rate_limit(5, 300)
    q.enqueue_many([b"x"] * 20)
    r.config_resetstat()
    stats = Consumer(q, lambda job: None, concurrency=2).drain()
    assert stats["completed"] == 20 and stats["rate_waits"] >= 3
    claims = r.info("commandstats")["cmdstat_evalsha"]["calls"]
    assert claims < 40, claims  # about 15 measured: a few round trips a window, not a loop
    done = sorted(rec["claimed"] for rec in q.completed_jobs(20))
    assert all(done[i + 10] - done[i] >= 300 for i in range(len(done) - 10))


def _run_until(consumer, done: threading.Event, timeout: float) -> bool:
    """Run ``consumer`` in a thread until ``done`` is set (or ``timeout``); answers whether it was."""
    t = threading.Thread(target=consumer.run, daemon=True)
    t.start()
    try:
        return done.wait(timeout)
    finally:
        consumer.stop()
        t.join(10)


def test_the_queue_window_is_waited_for_not_a_cooling_lanes_longer_one(r):
    """A claim cut by the queue's window (200 ms) while a lane cools for
    30 s holding a ready job answers both waits; the consumer waits the
    queue's, so the flat jobs keep coming at the limit (it used to sleep
    the lane's 30 s)."""
    q = Queue("rated", r)
    lane = ids.mint("PLR")
    q.lanes.set_rate(lane, 1, 30_000)
    q.enqueue_many([{"payload": b"l", "lane": lane}] * 2)
    first = q.claim(lease_ms=60_000)
    assert first.lane == lane and q.complete(first.id, first.attempts)  # the lane cools, one job held
    q.set_rate_limit(2, 200)
    q.enqueue_many([b"flat"] * 10)
    flat, all_flat = [], threading.Event()

    def handler(job):
        if job.lane is None:
            flat.append(job.id)
            if len(flat) == 10:
                all_flat.set()

    assert _run_until(Consumer(q, handler, concurrency=4, beat_ms=60_000), all_flat, 15), len(flat)
    done = sorted(rec["claimed"] for rec in q.completed_jobs(20) if rec["lane"] is None)
    assert done[-1] - done[0] < 5_000 and all(done[i + 2] - done[i] >= 200 for i in range(len(done) - 2))


def test_a_limit_cleared_while_a_consumer_waits_out_its_window_is_seen_within_a_beat(r):
    q = Queue("rated", r)
    q.set_rate_limit(1, 60_000)
    q.enqueue_many([b"x"] * 3)
    handler, seen, all_done = counting(3)
    c = Consumer(q, handler, beat_ms=500)
    t = threading.Thread(target=c.run, daemon=True)
    t.start()
    try:
        wait_for(lambda: c.stats["rate_waits"] >= 1, timeout=10, what="the consumer to wait out the window")
        q.set_rate_limit(None)  # the other two may run now
        assert all_done.wait(20), seen  # a minute's window, had the wait not been cut at a beat
    finally:
        c.stop()
        t.join(10)


@pytest.mark.slow
def test_the_limit_holds_across_two_consumer_processes(valkey_server, r):
    """Two consumer processes on one rate-limited queue: every run of 2 x
    jobs + 1 consecutive claims (server clock, from the completed records)
    spans at least a window, both processes claim, and they wait rather
    than spin. Each process holds at most two jobs at a time (no prefetch,
    20 ms handlers), so neither takes a whole window in one claim; with
    claims of eight, one process woke first in every window about one run
    in sixteen on a loaded machine and the other never claimed."""
    jobs, per_ms, total = 8, 250, 48
    q = Queue("rate2", r)
    q.set_rate_limit(jobs, per_ms)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-m", "tests.echomq.worker_proc", "--url", valkey_server.url,
                               "--queue", "rate2", "--concurrency", "2", "--prefetch", "0",
                               "--sleep-ms", "20", "--beat-ms", "200"],
                              cwd=ROOT, env=env, stderr=subprocess.DEVNULL) for _ in range(2)]
    try:
        # Both processes must be up before the jobs exist: on a slow machine
        # one process could otherwise start late and find the queue drained.
        wait_for(lambda: r.llen("ready") == len(procs), timeout=30, what="both consumer processes to start")
        r.config_resetstat()
        q.enqueue_many([b"x"] * total)
        deadline = time.monotonic() + 30
        while int(r.get("effects") or 0) < total and time.monotonic() < deadline:
            time.sleep(0.05)
        assert int(r.get("effects") or 0) == total
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(10)
    records = q.completed_jobs(total)
    claimed = sorted(rec["claimed"] for rec in records)
    assert len(claimed) == total
    assert all(claimed[i + 2 * jobs] - claimed[i] >= per_ms for i in range(total - 2 * jobs))
    assert claimed[-1] - claimed[0] >= (total // jobs - 2) * per_ms
    assert len({rec["consumer"] for rec in records}) == 2
    calls = r.info("commandstats")["cmdstat_evalsha"]["calls"]
    assert calls < 400, calls  # about 195 measured (claims of two); a consumer that spun would send thousands


def test_the_rate_script_writes_exactly_the_limit(q, any_server):
    """rate.lua's exact state: the queue's limit in meta (and wake tokens for
    parked consumers); a lane's in its meta, counted in lane_rates; clearing
    leaves nothing of either behind."""
    q.set_rate_limit(3, 1000)
    state = snapshot(any_server, q)
    assert state == {q.k_meta: ("hash", {b"rate_jobs": b"3", b"rate_ms": b"1000"}),
                     q.k_wake: ("list", [b"1"] * 32)}
    lane = ids.mint("PLR")
    q.lanes.set_rate(lane, 2, 500)
    state = snapshot(any_server, q)
    assert state[f"{q.prefix}g:{lane}:meta"] == ("hash", {b"rate_jobs": b"2", b"rate_ms": b"500"})
    assert state[q.k_lanes] == ("set", [lane.encode()])
    assert state[q.k_meta] == ("hash", {b"rate_jobs": b"3", b"rate_ms": b"1000", b"lane_rates": b"1"})
    q.lanes.set_rate(lane, 4, 500)  # changing a lane's limit does not count it twice
    assert any_server.hget(q.k_meta, "lane_rates") == b"1"
    q.set_rate_limit(None)
    q.lanes.set_rate(lane, None)
    assert set(snapshot(any_server, q)) == {q.k_wake}


@pytest.mark.parametrize("concurrency", [1, 4])
@pytest.mark.parametrize("where", ["queue", "lane"])
def test_a_drain_under_a_long_window_returns_right_after_its_last_job(r, where, concurrency):
    """5 jobs per 10 s and 5 jobs: the window never holds a ready job back,
    so the drain runs the 5 and returns at once instead of sitting out the
    window before its last, empty claim (the claim answers no wait when
    nothing is ready)."""
    q = Queue("rated", r)
    lane = ids.mint("PLR") if where == "lane" else None
    if lane:
        q.lanes.set_rate(lane, 5, 10_000)
    else:
        q.set_rate_limit(5, 10_000)
    q.enqueue_many([{"payload": b"x", "lane": lane}] * 5)
    began = time.monotonic()
    stats = Consumer(q, lambda job: None, concurrency=concurrency, beat_ms=60_000).drain()
    took = time.monotonic() - began
    assert stats["completed"] == 5 and stats["rate_waits"] == 0
    assert took < 5, took  # did not wait out the 10 s window (about 0.01 s measured)
    assert q.counts()["pending"] == 0


def test_the_claim_answers_the_queue_wait_only_while_a_ready_job_is_held_back(q, any_server):
    """claim.lua's exact state under the queue's limit: a claim the window
    cuts short answers {queue_wait_ms, 0} only when a ready job is left
    behind (flat, or on a lane on the ring); when nothing is left ready, it
    answers the jobs alone, and a claim that finds nothing answers [] and
    writes nothing, however full the window."""
    q.set_rate_limit(2, 60_000)
    a, b = (jid for jid, _ in q.enqueue_many([b"a", b"b"]))
    before = server_ms(any_server)
    reply = raw_claim(q, 5)
    assert reply[0::4] == [a.encode(), b.encode()] and len(reply) == 8  # both, no tail: nothing held back
    state = snapshot(any_server, q)
    start = int(state[q.k_meta][1][b"rate_start"])
    assert before <= start <= server_ms(any_server)
    assert state[q.k_meta] == ("hash", {b"rate_jobs": b"2", b"rate_ms": b"60000", b"rate_start": str(start).encode(),
                                        b"rate_count": b"2"})
    assert q.k_wake not in state  # a short claim empties the wake list

    assert raw_claim(q, 5) == []  # the window is full but nothing is ready: no wait
    assert snapshot(any_server, q) == state

    c, _ = q.enqueue(b"c")  # now a ready job is held back by the window
    state = snapshot(any_server, q, jobs_only=True)
    [[qwait, lwait]] = raw_claim(q, 5)
    assert 0 < qwait <= start + 60_000 - before and lwait == 0
    assert snapshot(any_server, q) == state  # writes nothing (and empties the wake list)

    lane = ids.mint("PLR")  # a held-back job on a lane on the ring counts too
    q.remove(c)
    d, _ = q.enqueue(b"d", lane=lane)
    [[qwait, lwait]] = raw_claim(q, 5)
    assert 0 < qwait <= 60_000 and lwait == 0
    q.lanes.pause(lane)  # a paused lane's job is held back by the pause, not the window
    state = snapshot(any_server, q, jobs_only=True)
    assert raw_claim(q, 5) == []
    assert snapshot(any_server, q, jobs_only=True) == state


def test_the_claim_answers_a_lane_wait_only_while_a_cooling_lane_holds_a_ready_job(q, any_server):
    """claim.lua's exact state under a lane's limit: the lane cools when its
    window fills, whether or not it holds more; the claim answers
    {0, lane_wait_ms} only while a cooling lane holds a ready job it would
    serve but for the window (not a paused one). Resuming a cooling lane
    that holds jobs pushes a wake token, so a parked consumer learns the wait."""
    lane = ids.mint("PLR")
    q.lanes.set_rate(lane, 1, 60_000)
    a, _ = q.enqueue(b"a", lane=lane)
    reply = raw_claim(q, 5)
    assert reply[0::4] == [a.encode()] and len(reply) == 4  # the lane cooled empty: no tail
    meta = f"{q.prefix}g:{lane}:meta"
    state = snapshot(any_server, q)
    start = int(any_server.hget(meta, "rate_start"))
    assert state[meta] == ("hash", {b"rate_jobs": b"1", b"rate_ms": b"60000", b"rate_start": str(start).encode(),
                                    b"rate_count": b"1", b"cooling": b"1"})
    assert state[q.prefix + "cooling"] == ("zset", [(lane.encode(), start + 60_000.0)])
    assert raw_claim(q, 5) == []
    assert snapshot(any_server, q) == state

    b, _ = q.enqueue(b"b", lane=lane)  # now the window holds a ready job back
    state = snapshot(any_server, q, jobs_only=True)
    [[qwait, lwait]] = raw_claim(q, 5)
    assert qwait == 0 and 0 < lwait <= 60_000
    assert snapshot(any_server, q) == state

    q.lanes.pause(lane)
    state = snapshot(any_server, q, jobs_only=True)
    assert raw_claim(q, 5) == []  # paused: the window holds nothing back
    assert snapshot(any_server, q) == state
    q.lanes.resume(lane)
    assert any_server.lrange(q.k_wake, 0, -1) == [b"1"]  # cooling, not servable: yet a parked consumer looks
    [[qwait, lwait]] = raw_claim(q, 5)
    assert qwait == 0 and 0 < lwait <= 60_000


def test_the_lane_wait_looks_at_the_first_100_cooling_lanes(q, any_server):
    """A short claim looks for a cooling lane that holds a ready job among
    the 100 that reopen first: 100 that cooled empty hold nothing back; with
    a 101st, it cannot tell, and answers the 100th's reopening (to look
    again then) rather than a wait of 0 that could strand a held job."""
    lanes = sorted(ids.mint("PLR") for _ in range(101))
    for lane in lanes:
        q.lanes.set_rate(lane, 1, 60_000)
    q.enqueue_many([{"payload": b"x", "lane": lane} for lane in lanes[:100]])
    reply = raw_claim(q, 200)
    assert len(reply) == 400  # 100 jobs, no tail: every cooling lane is empty
    assert any_server.zcard(q.prefix + "cooling") == 100
    q.enqueue(b"x", lane=lanes[100])
    reply = raw_claim(q, 200)
    assert len(reply) == 5 and reply[-1][0] == 0 and 0 < reply[-1][1] <= 60_000
    assert raw_claim(q, 1)[-1][1] > 0  # the 101st lane cooled too: still conservative


# -- a ShardedQueue: the limit split over the shards, the waits of its claims ---------------------

def counting(n: int):
    """(handler, ids seen, an Event set once ``n`` jobs were handled)."""
    seen, done = [], threading.Event()

    def handler(job):
        seen.append(job.id)
        if len(seen) == n:
            done.set()
    return handler, seen, done


def id_on(sq, shard: int) -> str:
    """A fresh JOB id whose shard is ``shard`` (flat jobs go to their id's)."""
    while True:
        jid = ids.mint("JOB")
        if sq.shard_index(job_id=jid) == shard:
            return jid


def lane_on(sq, shard: int) -> str:
    while True:
        lane = ids.mint("PLR")
        if sq.shard_index(lane=lane) == shard:
            return lane


@pytest.fixture
def sq(any_server):
    return ShardedQueue("t", any_server, shards=3)


def test_a_sharded_claim_answers_its_shards_waits_as_a_queue_does(sq, any_server):
    """The waits of the shards a claim asked come back on the ClaimedJobs:
    queue_wait_ms once every shard's window is full (nothing can be claimed
    before the first reopens), lane_wait_ms the first reopening otherwise."""
    sq.set_rate_limit(3, 60_000)  # one job per shard per window
    sq.enqueue_many([{"payload": b"x", "job_id": id_on(sq, i % 3)} for i in range(6)])
    got = sq.claim_batch(10, lease_ms=60_000)
    assert isinstance(got, ClaimedJobs) and len(got) == 3
    assert 59_000 <= got.queue_wait_ms <= 60_000 and got.lane_wait_ms == 0
    state = {s.name: snapshot(any_server, s, jobs_only=True) for s in sq.shards}
    refused = sq.claim_batch(10, lease_ms=60_000)
    assert refused == [] and isinstance(refused, ClaimedJobs) and 58_000 <= refused.queue_wait_ms <= 60_000
    assert {s.name: snapshot(any_server, s, jobs_only=True) for s in sq.shards} == state

    sq.set_rate_limit(None)
    for j in got:
        sq.complete(j.id, j.attempts)
    rest = sq.claim_batch(10, lease_ms=60_000)
    assert len(rest) == 3 and (rest.queue_wait_ms, rest.lane_wait_ms) == (0, 0)
    for j in rest:
        sq.complete(j.id, j.attempts)

    lane = lane_on(sq, 1)
    sq.lanes.set_rate(lane, 1, 60_000)
    sq.enqueue_many([{"payload": b"l", "lane": lane}] * 2 + [{"payload": b"f", "job_id": id_on(sq, 2)}])
    got = sq.claim_batch(10, lease_ms=60_000)
    assert sorted(j.payload for j in got) == [b"f", b"l"]
    assert got.queue_wait_ms == 0 and 59_000 <= got.lane_wait_ms <= 60_000  # shard 1's lane cools


@pytest.mark.parametrize("shards", [2, 8])
def test_a_sharded_limit_whose_split_window_is_longer_than_max_ms_is_refused(any_server, shards):
    """With fewer jobs than shards each shard gets one job per
    ceil(per_ms * S / jobs): past MAX_MS (a year) that would be capped and
    the shards together would allow more than the limit, so it is refused
    and no shard's limit changes."""
    sq = ShardedQueue("t", any_server, shards=shards)
    sq.set_rate_limit(shards * 2, 1000)
    before = {s.name: snapshot(any_server, s) for s in sq.shards}
    longest = MAX_MS // shards
    for jobs, per_ms in ((1, longest + 1), (1, MAX_MS), (shards - 1, MAX_MS * (shards - 1) // shards + 1)):
        with pytest.raises(ArgumentError, match="shards") as refused:
            sq.set_rate_limit(jobs, per_ms)
        assert f"at most {MAX_MS * jobs // shards}" in str(refused.value)
        assert {s.name: snapshot(any_server, s) for s in sq.shards} == before
    sq.set_rate_limit(1, longest)  # the longest that splits exactly
    assert [s.rate_limit()["per_ms"] for s in sq.shards] == [longest * shards] * shards
    assert max(s.rate_limit()["per_ms"] for s in sq.shards) <= MAX_MS


@pytest.mark.parametrize("limit", ["queue", "lanes"])
def test_a_sharded_consumer_under_a_limit_claims_as_the_windows_reopen(r, limit):
    """Not a parked beat per window: the consumer (beat 5 s) learns from the
    shards' claims when their windows reopen and claims then. 8 jobs per
    shard at 2 per 300 ms take 4 windows: the claims span 3 to a few of
    them (server clock), far less than the beats a parking consumer sits out."""
    sq = ShardedQueue("rated", r, shards=3)
    if limit == "queue":
        sq.set_rate_limit(6, 300)
        items = [{"payload": b"x", "job_id": id_on(sq, i % 3)} for i in range(24)]
    else:
        lanes = [lane_on(sq, i) for i in range(3)]
        for lane in lanes:
            sq.lanes.set_rate(lane, 2, 300)
        items = [{"payload": b"x", "lane": lanes[i % 3]} for i in range(24)]
    sq.enqueue_many(items)
    handler, seen, done = counting(24)
    consumer = Consumer(sq, handler, concurrency=2, beat_ms=5_000)
    t = threading.Thread(target=consumer.run, daemon=True)
    t.start()
    try:
        assert done.wait(30), len(seen)
    finally:
        consumer.stop()
        t.join(30)
    assert consumer.stats["completed"] == 24
    for shard in sq.shards:
        claimed = sorted(rec["claimed"] for rec in shard.completed_jobs(100))
        assert len(claimed) == 8
        assert all(claimed[i + 4] - claimed[i] >= 300 for i in range(len(claimed) - 4))  # the limit holds
    claimed = sorted(rec["claimed"] for rec in sq.completed_jobs(100))
    assert 900 <= claimed[-1] - claimed[0] <= 2_500, claimed[-1] - claimed[0]


def test_a_sharded_consumer_waiting_for_a_cooling_lane_still_takes_new_work_on_that_shard_at_once(r):
    """A shard held for a lane that cools for a minute is not asked before
    then, unless a wake-up comes from it: a new flat job there runs at once
    (not a minute later), and the lane's second job waits for its window."""
    sq = ShardedQueue("held", r, shards=2)
    lane = lane_on(sq, 0)
    sq.lanes.set_rate(lane, 1, 60_000)
    sq.enqueue_many([{"payload": b"lane", "lane": lane}] * 2)
    ran, first, flat = [], threading.Event(), threading.Event()

    def handler(job):
        ran.append(job.payload)
        (first if job.payload == b"lane" else flat).set()

    consumer = Consumer(sq, handler, concurrency=1, beat_ms=60_000)
    t = threading.Thread(target=consumer.run, daemon=True)
    t.start()
    try:
        assert first.wait(10)
        deadline = time.monotonic() + 10
        while not consumer._parked and time.monotonic() < deadline:  # parked, for the lane's window
            time.sleep(0.005)
        assert consumer._parked
        sq.enqueue(b"flat", job_id=id_on(sq, 0))
        assert flat.wait(10), ran
    finally:
        consumer.stop()
        t.join(30)
    assert ran == [b"lane", b"flat"] and sq.lanes.depth(lane) == 1


@pytest.mark.parametrize("where", ["queue", "lane"])
def test_a_sharded_drain_under_a_long_window_returns_right_after_its_last_job(r, where):
    """As on a plain queue: windows that hold no ready job back keep no
    drain waiting. ready_shards() counts a shard whose one work is a cooling
    lane only while that lane holds a ready job and is not paused, as the
    shard's claim answers a wait only then."""
    sq = ShardedQueue("rated", r, shards=3)
    lanes = [lane_on(sq, i) for i in range(3)]
    if where == "lane":
        for lane in lanes:
            sq.lanes.set_rate(lane, 5, 10_000)
        items = [{"payload": b"x", "lane": lanes[i % 3]} for i in range(15)]
    else:
        sq.set_rate_limit(15, 10_000)  # 5 per shard
        items = [{"payload": b"x", "job_id": id_on(sq, i % 3)} for i in range(15)]
    sq.enqueue_many(items)
    began = time.monotonic()
    stats = Consumer(sq, lambda job: None, concurrency=4, beat_ms=60_000).drain()
    took = time.monotonic() - began
    assert stats["completed"] == 15 and stats["rate_waits"] == 0
    assert took < 5, took  # did not wait out the 10 s window
    assert sq.ready_shards() == []
    if where == "lane":
        assert all(r.zcard(s.prefix + "cooling") == 1 for s in sq.shards)  # cooled empty: nothing held back
        sq.enqueue(b"held", lane=lanes[1])
        assert sq.ready_shards() == [1]  # a cooling lane that holds a ready job
        sq.lanes.pause(lanes[1])
        assert sq.ready_shards() == []  # paused: the pause holds it, not the window


def test_a_sharded_consumer_sees_a_limit_cleared_elsewhere_within_a_beat(r):
    """Every shard held by its share of the window (1 per 20 s each): the
    consumer waits a beat at a time and then asks every shard again, so a
    limit cleared by another process is seen then, not when the holds end."""
    sq = ShardedQueue("held", r, shards=2)
    sq.set_rate_limit(1, 10_000)
    sq.enqueue_many([{"payload": b"x", "job_id": id_on(sq, i % 2)} for i in range(6)])
    handler, done, all_done = counting(6)
    c = Consumer(sq, handler, concurrency=2, beat_ms=300)
    t = threading.Thread(target=c.run, daemon=True)
    t.start()
    try:
        wait_for(lambda: len(done) == 2 and c.stats["rate_waits"] >= 1, timeout=10, what="both shares used")
        ShardedQueue("held", r, shards=2).set_rate_limit(None)  # another process
        assert all_done.wait(8), done  # the holds would have lasted 20 s
    finally:
        c.stop()
        t.join(10)


def test_a_sharded_drain_held_for_a_lane_finds_new_work_on_that_shard_within_a_beat(r):
    """A drain waits for a cooling lane's window deaf to wake-ups; after a
    beat it asks every shard again, so a job a handler put on another lane
    of the held shard runs then, not after the lane's window."""
    sq = ShardedQueue("held", r, shards=2)
    a, b = lane_on(sq, 0), lane_on(sq, 0)  # two lanes of shard 0
    sq.lanes.set_rate(a, 1, 4_000)
    sq.enqueue_many([{"payload": b"a1", "lane": a}, {"payload": b"a2", "lane": a}])
    began, ran = time.monotonic(), {}

    def handler(job):
        ran[job.payload] = time.monotonic() - began
        if job.payload == b"a1":
            sq.enqueue(b"b1", lane=b)

    stats = Consumer(sq, handler, concurrency=2, beat_ms=200).drain()
    assert stats["completed"] == 3 and list(ran) == [b"a1", b"b1", b"a2"], ran
    assert ran[b"b1"] < 2.0 <= 3.9 < ran[b"a2"], ran  # b1 within beats; a2 when the lane's window reopens
