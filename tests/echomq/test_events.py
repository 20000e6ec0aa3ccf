"""The event stream (emq:{q}:events): one event per job per transition, with
the right fields, written in the same script as the transition and never
for a refused call; the cap and off switch; resuming without loss or
repetition; blocking readers; the merge over a sharded queue's shards.
On Valkey and Redis 7.0 (``any_server``), and on the 3+3 cluster."""
from __future__ import annotations

import threading

import pytest

from echomq import EventsLost, Queue, ShardedQueue, StaleToken, ids
from echomq.errors import ArgumentError, Cancelled
from echomq.events import TYPES, last_id
from echomq.scripts import LIMITS

from .helpers import snapshot


@pytest.fixture
def q(any_server):
    return Queue("ev", any_server)


def seen(q, after="0"):
    """(type, job, lane, attempt, data) of every event after ``after``."""
    return [(e.type, e.job, e.lane, e.attempt, e.data) for e in q.events(after)]


def mark(q) -> str:
    """A cursor at the stream's end now: what follows is what a call wrote."""
    events = list(q.events("0"))
    return events[-1].cursor if events else "0"


def test_enqueue_and_a_duplicate(q, any_server):
    lane = ids.mint("PLR")
    now, _ = q.enqueue(b"x", lane=lane)
    later, _ = q.enqueue(b"y", delay_ms=60_000)
    run_at = int(any_server.zscore(q.k_schedule, later))
    assert seen(q) == [("enqueued", now, lane, 0, {}), ("enqueued", later, None, 0, {"run_at": run_at})]
    before = snapshot(any_server, q)
    assert q.enqueue(b"again", job_id=now) == (now, "duplicate")  # refused: no entry
    assert snapshot(any_server, q) == before


def test_a_claim_is_one_entry_with_an_event_per_job(q, any_server):
    lane = ids.mint("PLR")
    a, _ = q.enqueue(b"a")
    b, _ = q.enqueue(b"b", lane=lane)
    at = mark(q)
    csr = ids.mint("CSR")
    jobs = q.claim_batch(5, lease_ms=60_000, consumer=csr)
    deadline = int(any_server.zscore(q.k_active, a))
    events = list(q.events(at))
    assert [(e.type, e.job, e.lane, e.attempt, e.data) for e in events] == [
        ("claimed", a, None, 1, {"lease_deadline": deadline, "consumer": csr}),
        ("claimed", b, lane, 1, {"lease_deadline": deadline, "consumer": csr})]
    assert events[0].id == events[1].id and [e.index for e in events] == [0, 1]
    assert any_server.xlen(q.k_events) == 3  # two enqueues, one claim
    at = mark(q)
    assert q.claim_batch(5, lease_ms=60_000) == [] and seen(q, at) == []  # nothing claimed: nothing said
    assert {j.id for j in jobs} == {a, b}


def test_complete_one_and_a_batch(q, any_server):
    q.enqueue_many([b"a", b"b", b"c"])
    a, b, c = q.claim_batch(3, lease_ms=60_000)
    at = mark(q)
    assert q.complete(a.id, a.attempts)
    assert seen(q, at) == [("completed", a.id, None, 1, {})]
    at = mark(q)
    out = q.complete_many([(b.id, b.attempts), (c.id, c.attempts + 1), (a.id, a.attempts)])
    assert out[0] is True and isinstance(out[1], StaleToken) and out[2] is False
    assert seen(q, at) == [("completed", b.id, None, 1, {})]  # the stale and the gone one: nothing


@pytest.mark.parametrize("op", ["complete", "retry", "extend", "release", "progress"])
def test_a_stale_call_writes_no_event(q, any_server, op):
    q.enqueue(b"x")
    old = q.claim(lease_ms=60_000)
    any_server.zadd(q.k_active, {old.id: 0})
    q.reap()
    q.claim(lease_ms=60_000)
    before = snapshot(any_server, q)
    call = {"complete": lambda: q.complete(old.id, old.attempts),
            "retry": lambda: q.retry(old.id, old.attempts, error="late"),
            "extend": lambda: q.extend(old.id, old.attempts),
            "release": lambda: q.release(old.id, old.attempts),
            "progress": lambda: q.progress(old.id, old.attempts, 50)}[op]
    with pytest.raises(StaleToken):
        call()
    assert snapshot(any_server, q) == before


def test_retry_then_dead(q, any_server):
    lane = ids.mint("PLR")
    jid, _ = q.enqueue(b"x", lane=lane)
    job = q.claim(lease_ms=60_000)
    at = mark(q)
    q.retry(jid, job.attempts, delay_ms=5_000, max_attempts=2, error="boom\nTraceback ...")
    run_at = int(any_server.zscore(q.k_schedule, jid))
    assert seen(q, at) == [("retried", jid, lane, 1, {"run_at": run_at, "delay_ms": 5_000, "error": "boom"})]
    any_server.zadd(q.k_schedule, {jid: 0})
    at = mark(q)
    q.promote()
    assert seen(q, at) == [("promoted", jid, lane, 1, {})]
    job = q.claim(lease_ms=60_000)
    at = mark(q)
    q.retry(jid, job.attempts, max_attempts=2, error="x" * 500)
    assert seen(q, at) == [("dead", jid, lane, 2, {"error": "x" * 200})]
    at = mark(q)
    q.requeue_dead(jid)
    assert seen(q, at) == [("requeued", jid, lane, 2, {})]


def test_reap_stalled_and_dead(q, any_server):
    jid, _ = q.enqueue(b"x")
    for stall in (1, 2):
        job = q.claim(lease_ms=60_000)
        any_server.zadd(q.k_active, {jid: 0})
        at = mark(q)
        q.reap(max_stalls=1)
        want = ("stalled", jid, None, job.attempts, {"stalls": 1}) if stall == 1 else \
            ("dead", jid, None, job.attempts, {"stalls": 2, "error": "stalled 2 times"})
        assert seen(q, at) == [want]


def test_release_extend_and_the_quiet_scripts(q, any_server):
    jid, _ = q.enqueue(b"x", lane=ids.mint("PLR"))
    job = q.claim(lease_ms=60_000)
    at = mark(q)
    q.extend(jid, job.attempts, lease_ms=60_000)  # a heartbeat is not a transition
    q.lanes.pause(job.lane)
    q.lanes.resume(job.lane)
    q.pause()
    q.resume()
    q.counts()
    assert seen(q, at) == []
    q.release(jid, job.attempts)
    assert seen(q, at) == [("released", jid, job.lane, 1, {})]


def test_remove_and_cancel(q, any_server):
    a, _ = q.enqueue(b"a")
    b, _ = q.enqueue(b"b", delay_ms=60_000)
    at = mark(q)
    assert q.remove(a) == "pending" and q.remove(a) is None
    assert q.cancel(b) == "cancelled"
    assert seen(q, at) == [("removed", a, None, 0, {"was": "pending"}), ("cancelled", b, None, 0, {})]
    c, _ = q.enqueue(b"c")
    job = q.claim(lease_ms=60_000)
    at = mark(q)
    assert q.cancel(c) == "cancelling" and q.cancel(c) == "cancelling"  # marked once
    assert seen(q, at) == [("cancelling", c, None, 1, {})]
    with pytest.raises(Cancelled):
        q.extend(c, job.attempts)  # its worker hears of it: the job is dropped now
    assert seen(q, at)[1:] == [("cancelled", c, None, 1, {})]


def test_progress_is_an_event_and_on_the_row(q, any_server):
    jid, _ = q.enqueue(b"x")
    job = q.claim(lease_ms=60_000)
    at = mark(q)
    assert job.progress({"step": 2, "of": 5}) is True
    assert q.job(jid)["progress"] == {"step": 2, "of": 5}
    assert seen(q, at) == [("progress", jid, None, 1, {"value": {"step": 2, "of": 5}})]


def test_every_type_is_named(q):
    assert set(TYPES) == {"enqueued", "claimed", "completed", "retried", "dead", "stalled", "released", "promoted",
                          "requeued", "removed", "cancelling", "cancelled", "progress", "admitted"}


# -- the cap and the switch ------------------------------------------------------
def test_events_off_writes_no_stream(q, any_server):
    q.set_events(0)
    jid, _ = q.enqueue(b"x")
    job = q.claim(lease_ms=60_000)
    job.progress(1)
    q.complete(jid, job.attempts)
    assert not any_server.exists(q.k_events) and list(q.events("0")) == []
    assert q.event_stats()["maxlen"] == 0
    q.set_events(None)  # back to the default
    q.enqueue(b"y")
    assert any_server.xlen(q.k_events) == 1 and q.event_stats()["maxlen"] == LIMITS["KEEP_EVENTS"]


def test_the_cap_trims_approximately(q, any_server):
    q.set_events(100)
    for _ in range(5):
        q.enqueue_many([b"x"] * 200)
    assert 100 <= any_server.xlen(q.k_events) < 300  # whole stream nodes go (100 entries each)
    assert q.event_stats()["added"] == 1000


def test_a_bad_setting_in_meta_reads_as_the_default(q, any_server):
    """A script must never stop half-way through its writes: a cap someone
    wrote by hand that is not a whole number falls back to the default."""
    for bad in ("-1", "1.5", "lots", ""):
        any_server.hset(q.k_meta, "events", bad)
        jid, status = q.enqueue(b"x")
        assert status == "enqueued" and seen(q)[-1][:2] == ("enqueued", jid)


def test_set_events_checks_its_argument(q, any_server):
    for bad in (-1, 1.5, "10", True, LIMITS["MAX_COUNT"] + 1):
        with pytest.raises(ArgumentError):
            q.set_events(bad)
    assert not any_server.exists(q.k_meta)


# -- reading --------------------------------------------------------------------
def test_resuming_from_any_cursor_loses_and_repeats_nothing(q):
    q.enqueue_many([b"x"] * 7)
    jobs = q.claim_batch(4, lease_ms=60_000)
    q.complete_many([(j.id, j.attempts) for j in jobs[:3]])
    everything = list(q.events("0"))
    assert len(everything) == 7 + 4 + 3
    for k, event in enumerate(everything):  # inside a batch entry as well as between entries
        assert list(q.events(event.cursor)) == everything[k + 1:]
    got, cursor = [], "0"
    while True:  # a reader that takes two at a time and comes back later
        batch = [e for _, e in zip(range(2), q.events(cursor, count=1))]
        if not batch:
            break
        got += batch
        cursor = batch[-1].cursor
    assert got == everything


def test_dollar_means_from_now_on(q):
    q.enqueue(b"old")
    reader = q.events("$")
    jid, _ = q.enqueue(b"new")
    assert [(e.type, e.job) for e in reader] == [("enqueued", jid)]


def test_a_trimmed_position_is_reported_not_skipped(q, any_server):
    q.set_events(100)
    q.enqueue(b"first")
    first = list(q.events("0"))[0]
    for _ in range(4):
        q.enqueue_many([b"x"] * 100)
    with pytest.raises(EventsLost) as info:
        list(q.events(first.cursor))
    assert info.value.first == list(q.events("0"))[0].id


def test_bad_positions_are_refused_before_reading(q):
    for bad in ("", "now", "1-2-3", "-1-0", "1-0:x", "1-0:", 5, None, "$0"):
        with pytest.raises(ArgumentError):
            q.events(bad)
    for kw in ({"count": 0}, {"block_ms": -1}, {"reader": "a b"}, {"count": 1.5}):
        with pytest.raises(ArgumentError):
            q.events("0", **kw)


def test_a_blocked_reader_gets_what_happens_next(q, any_server):
    reader = q.events("$", block_ms=30_000)  # the position is taken here
    got = []
    thread = threading.Thread(target=lambda: got.append(next(reader)))
    thread.start()
    jid, _ = q.enqueue(b"x")
    thread.join(30)
    assert [(e.type, e.job) for e in got] == [("enqueued", jid)]
    reader.close()
    assert list(q.events(got[0].cursor, block_ms=1)) == []  # a wait that brings nothing ends it


def test_a_named_reader_reports_its_position_and_lag(q, any_server):
    q.enqueue(b"x")
    events = list(q.events("0", reader="dash"))
    stats = q.event_stats()
    assert stats["readers"]["dash"]["position"] == events[-1].cursor
    assert stats["readers"]["dash"]["lag_s"] == 0.0 and stats["length"] == 1


def test_history_and_recent(q):
    lane = ids.mint("PLR")
    a, _ = q.enqueue(b"a", lane=lane)
    b, _ = q.enqueue(b"b")
    jobs = q.claim_batch(2, lease_ms=60_000)
    assert [j.id for j in jobs] == [b, a]  # flat first, then the lanes
    for job in jobs:
        q.complete(job.id, job.attempts)
    assert [e.type for e in q.event_history(a)] == ["enqueued", "claimed", "completed"]
    assert [(e.type, e.job) for e in q.recent_events(2)] == [("completed", a), ("completed", b)]
    assert [e.job for e in q.recent_events(10, types=["claimed"])] == [a, b]  # newest first, in the entry too
    assert [e.type for e in q.recent_events(10, lane=lane)] == ["completed", "claimed", "enqueued"]
    assert [e.type for e in q.recent_events(10, job=b, types=["enqueued", "completed"])] == ["completed", "enqueued"]
    with pytest.raises(ArgumentError):
        q.recent_events(10, types=["finished"])


# -- a sharded queue --------------------------------------------------------------
def _sharded_run(sq):
    lanes = [ids.mint("PLR") for _ in range(8)]
    for i in range(24):
        sq.enqueue(b"x", lane=lanes[i % 8])
    jobs = sq.claim_batch(24, lease_ms=60_000)
    sq.complete_many([(j.id, j.attempts) for j in jobs])
    return jobs


def _check_merge(sq, jobs):
    everything = list(sq.events("0"))
    assert len(everything) == 3 * len(jobs)
    for shard in sq.shards:  # each shard's events in that shard's own order
        mine = [(e.id, e.index) for e in everything if e.queue == shard.name]
        assert mine == [(e.id, e.index) for e in shard.events("0")]
    for job in jobs:
        assert [e.type for e in everything if e.job == job.id] == ["enqueued", "claimed", "completed"]
    for k in (0, 5, len(everything) // 2, len(everything) - 1):
        assert list(sq.events(everything[k].cursor)) == everything[k + 1:]
    return everything


def test_a_sharded_queue_merges_its_shards(valkey_server):
    client = valkey_server.client()
    client.flushall()
    sq = ShardedQueue("evs", client, shards=4)
    _check_merge(sq, _sharded_run(sq))
    _named_merge(sq)
    _blocked_merge(sq)
    with pytest.raises(ArgumentError):
        sq.events("1-0")  # a plain id is not a cursor of 4 shards


def _named_merge(sq):
    """ShardedQueue.events takes Queue.events' reader name: it records the
    reader's position on every shard (lag 0 once caught up); a bad name is
    the same ArgumentError, refused before anything is read or written."""
    for bad in ("a b", "", "x" * 65, 5):
        with pytest.raises(ArgumentError):
            sq.events("0", reader=bad)
    assert not any(sq.client.exists(_readers_key(s)) for s in sq.shards)
    everything = list(sq.events("0", reader="dash"))
    stats = sq.event_stats()
    for shard in sq.shards:
        mine = [e for e in everything if e.queue == shard.name]
        row = stats["readers"][f"{shard.name}/dash"]
        assert row["position"] == (mine[-1].cursor.split(",")[sq.shards.index(shard)] if mine else "0")
        assert row["lag_s"] == 0.0
    for shard in sq.shards:  # a reader that starts at the end records the end
        shard.enqueue(b"more")
    assert list(sq.events("$", reader="tail")) == []
    for shard in sq.shards:
        assert sq.event_stats()["readers"][f"{shard.name}/tail"]["position"] == last_id(shard)


def _readers_key(shard):
    return shard.prefix + "events:readers"


def _blocked_merge(sq):
    """A blocked merged reader wakes for an event on any shard."""
    for shard in range(len(sq.shards)):
        reader = sq.events("$", block_ms=30_000)
        got = []
        thread = threading.Thread(target=lambda: got.append(next(reader)))
        thread.start()
        lane = next(lane for lane in iter(lambda: ids.mint("PLR"), None) if sq.shard_index(lane=lane) == shard)
        jid, _ = sq.enqueue(b"later", lane=lane)
        thread.join(30)
        reader.close()
        assert [(e.type, e.job, e.queue) for e in got] == [("enqueued", jid, sq.shards[shard].name)]


@pytest.fixture
def rc(valkey_cluster):
    client = valkey_cluster.client()
    client.flushall()
    yield client
    client.close()


def test_events_on_the_cluster(rc):
    q = Queue("evc", rc)
    jid, _ = q.enqueue(b"x")
    job = q.claim(lease_ms=60_000)
    job.progress("half")
    q.complete(jid, job.attempts)
    assert [e.type for e in q.events("0")] == ["enqueued", "claimed", "progress", "completed"]
    sq = ShardedQueue("evcs", rc, shards=6)
    everything = _check_merge(sq, _sharded_run(sq))
    assert len({e.queue for e in everything}) > 1
    _named_merge(sq)
    _blocked_merge(sq)
