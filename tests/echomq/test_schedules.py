"""Schedules (issue 21): the grid (croniter for cron), the catch_up plan,
the scripts' exact state, each tick enqueued once (a compare-and-set on the
cursor, a JOB id per tick), and two reaper processes racing over a restart.
Scripts run on Valkey and Redis 7.0 (``any_server``)."""
import itertools
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

from echomq import ArgumentError, InvalidName, Queue, Reaper, ShardedQueue, ids
from echomq.schedules import Cron, Every, grid, plan, tick_job_id
from echomq.scripts import BUNDLE

from .helpers import server_ms, snapshot

ROOT = Path(__file__).resolve().parents[2]
PAUSED = 9999999999999  # a paused schedule's score (lua/include/sched.lua)


@pytest.fixture
def q(any_server):
    return Queue("t", any_server)


def ms(text: str) -> int:
    return int(datetime.fromisoformat(text).timestamp() * 1000)


# -- the grid and the plan (no server) -----------------------------------------
def test_every_ticks_on_the_epochs_multiples():
    g = grid(every_ms=60_000)
    t = ms("2026-05-01T10:00:00+00:00")
    assert (g.after(t), g.after(t + 1), g.at_or_before(t + 59_999), g.before(t)) == (t + 60_000, t + 60_000, t,
                                                                                    t - 60_000)


def test_month_and_day_names_are_not_mistaken_for_a_random_field():
    g = grid(cron="0 9 * apr,mar fri")
    assert g.after(ms("2026-04-01T00:00:00+00:00")) == ms("2026-04-03T09:00:00+00:00")


def test_cron_ticks_in_its_time_zone_through_a_dst_change():
    g = grid(cron="0 3 * * *", tz="Europe/Paris")
    assert g.after(ms("2026-01-10T12:00:00+00:00")) == ms("2026-01-11T02:00:00+00:00")  # CET
    assert g.after(ms("2026-07-10T12:00:00+00:00")) == ms("2026-07-11T01:00:00+00:00")  # CEST
    assert g.at_or_before(ms("2026-01-11T02:00:00+00:00")) == ms("2026-01-11T02:00:00+00:00")
    assert g.before(ms("2026-01-11T02:00:00+00:00")) == ms("2026-01-10T02:00:00+00:00")
    secs = grid(cron="* * * * * */15")  # croniter's sixth field: seconds
    assert secs.after(ms("2026-01-01T00:00:01+00:00")) == ms("2026-01-01T00:00:15+00:00")


@pytest.mark.parametrize("catch_up, fired", [(0, [5]), (2, [3, 4, 5]), (10, [1, 2, 3, 4, 5])])
def test_a_late_pass_fires_the_latest_tick_and_at_most_catch_up_missed_ones(catch_up, fired):
    g = Every(1000)
    ticks, nxt = plan(g, expect=1000, now=5500, catch_up=catch_up)
    assert ticks == [t * 1000 for t in fired] and nxt == 6000


def test_an_on_time_pass_fires_the_one_due_tick():
    assert plan(Cron("*/5 * * * *", timezone.utc), ms("2026-01-01T10:05:00+00:00"),
                ms("2026-01-01T10:05:00.400+00:00"), 0) == (
        [ms("2026-01-01T10:05:00+00:00")], ms("2026-01-01T10:10:00+00:00"))


@pytest.mark.parametrize("kw", [{"cron": "nope"}, {"cron": "61 * * * *"}, {"cron": "* * * *"}, {"cron": ""},
                                {"cron": "* * * * *\n"}, {"every_ms": 0}, {"every_ms": -5}, {"every_ms": 1.5},
                                {"every_ms": 10**12}, {"cron": "* * * * *", "tz": "Mars/Olympus"},
                                {"cron": "* * * * *", "tz": "../etc/passwd"}, {"every_ms": 1000, "tz": "Europe/Paris"},
                                {}, {"cron": "* * * * *", "every_ms": 1000},
                                {"cron": "0 0 30 2 *"}, {"cron": "0 0 31 4,6,9,11 *", "tz": "Europe/Paris"},
                                {"cron": "R * * * *"}, {"cron": "0 r * * *"}, {"cron": "R/5 * * * *"},
                                {"cron": "0 0 * * fri,R"}, {"cron": "H * * * *"}])
def test_a_bad_definition_is_refused_and_stores_nothing(q, any_server, kw):
    with pytest.raises(ArgumentError):
        q.schedule("s", **kw)
    assert q.keys() == []


@pytest.mark.parametrize("bad", [{"name": ""}, {"name": "a b"}, {"name": "x" * 65}, {"name": "a:b"},
                                 {"catch_up": -1}, {"catch_up": 1001}, {"priority": 101}, {"lane": "nope"},
                                 {"payload": 5}])
def test_bad_options_are_refused_and_store_nothing(q, bad):
    kw = {"name": "s", "every_ms": 1000, **bad}
    with pytest.raises((ArgumentError, InvalidName)):
        q.schedule(kw.pop("name"), **kw)
    assert q.keys() == []


# -- the scripts: exact state ---------------------------------------------------
def test_schedule_set_stores_the_definition_and_the_first_tick(q, any_server):
    lane = ids.mint("PLR")
    before = server_ms(any_server)
    assert q.schedule("tick", every_ms=60_000, payload=b"p", lane=lane, priority=3, catch_up=2) == "created"
    state = snapshot(any_server, q)
    row = state[f"{q.prefix}sched:tick"][1]
    first = int(row[b"next"])
    assert before < first <= server_ms(any_server) + 60_000 and first % 60_000 == 0
    assert row == {b"kind": b"every", b"spec": b"60000", b"tz": b"UTC", b"payload": b"p", b"lane": lane.encode(),
                   b"priority": b"3", b"catch_up": b"2", b"next": str(first).encode(), b"rev": b"1", b"seq": b"1"}
    assert state[f"{q.prefix}schedules"] == ("zset", [(b"tick", float(first))])
    assert state[q.k_meta] == ("hash", {b"sched_seq": b"1"})
    assert state[f"{q.prefix}sched_numbers"] == ("zset", [(b"tick", 1.0)])
    assert set(state) == {f"{q.prefix}sched:tick", f"{q.prefix}schedules", f"{q.prefix}sched_numbers", q.k_meta}


def test_declaring_the_same_schedule_again_changes_nothing_even_when_paused(q, any_server):
    q.schedule("tick", cron="*/5 * * * *", payload=b"p")
    assert q.pause_schedule("tick")
    before = snapshot(any_server, q)
    assert q.schedule("tick", cron="*/5 * * * *", payload=b"p") == "unchanged"
    assert snapshot(any_server, q) == before
    assert q.schedules()[0]["paused"] and q.schedules()[0]["next_ms"] is None


def test_a_changed_definition_replaces_it_and_keeps_its_record_and_pause(q, any_server):
    q.schedule("tick", every_ms=1000)
    key = f"{q.prefix}sched:tick"
    any_server.hset(key, mapping={"last": 1, "last_job": "JOB0000000000x"})
    q.pause_schedule("tick")
    assert q.schedule("tick", every_ms=2000, payload=b"new") == "replaced"
    row = any_server.hgetall(key)
    assert (row[b"spec"], row[b"payload"], row[b"rev"], row[b"seq"], row[b"last"], row[b"paused"]) == (
        b"2000", b"new", b"2", b"1", b"1", b"1")
    assert any_server.zscore(f"{q.prefix}schedules", "tick") == PAUSED


def test_pause_resume_and_remove(q, any_server):
    q.schedule("tick", every_ms=60_000)
    z = f"{q.prefix}schedules"
    cursor = any_server.zscore(z, "tick")
    running = snapshot(any_server, q)
    assert q.resume_schedule("tick") and snapshot(any_server, q) == running  # resuming a running one: nothing
    assert q.pause_schedule("tick") and any_server.zscore(z, "tick") == PAUSED
    assert q.fire_schedules() == 0
    assert q.resume_schedule("tick")
    assert any_server.zscore(z, "tick") >= cursor and not any_server.hexists(f"{q.prefix}sched:tick", "paused")
    assert q.unschedule("tick") and q.keys() == [q.k_meta]
    assert not q.unschedule("tick") and not q.pause_schedule("tick") and not q.resume_schedule("tick")


def make_due(q, client, name: str, behind: int):
    """Move schedule ``name``'s cursor ``behind`` ticks of 1 s into the past."""
    now = server_ms(client)
    cursor = (now // 1000 - behind) * 1000
    client.hset(f"{q.prefix}sched:{name}", "next", cursor)
    client.zadd(f"{q.prefix}schedules", {name: cursor})
    return cursor, now


def test_a_pass_fires_at_most_limit_schedules_the_soonest_first_and_the_next_pass_the_rest(q, any_server):
    now = server_ms(any_server)
    for i in range(5):  # minutely, so none falls due again while the test runs
        q.schedule(f"s{i}", every_ms=60_000)
        cursor = (now // 60_000 - 5 + i) * 60_000  # s0 the longest overdue
        any_server.hset(f"{q.prefix}sched:s{i}", "next", cursor)
        any_server.zadd(f"{q.prefix}schedules", {f"s{i}": cursor})
    assert q.fire_schedules(limit=3) == 3
    assert sorted(s["name"] for s in q.schedules() if s["last_ms"] is not None) == ["s0", "s1", "s2"]
    assert q.fire_schedules(limit=3) == 2 and q.counts()["pending"] == 5
    assert q.fire_schedules(limit=3) == 0


@pytest.mark.parametrize("catch_up", [0, 2])
def test_a_fire_enqueues_the_planned_ticks_with_their_ids_and_moves_the_cursor(q, any_server, catch_up):
    lane = ids.mint("PLR")
    q.schedule("tick", every_ms=1000, payload=b"t", lane=lane, priority=4, catch_up=catch_up)
    cursor, now = make_due(q, any_server, "tick", 5)
    assert q.fire_schedules() == catch_up + 1
    row = any_server.hgetall(f"{q.prefix}sched:tick")
    last, nxt = int(row[b"last"]), int(row[b"next"])
    assert now // 1000 * 1000 <= last < nxt and nxt == last + 1000
    fired = [last - 1000 * k for k in range(catch_up, -1, -1)]
    job_ids = [tick_job_id(1, t) for t in fired]
    assert row[b"last_job"] == job_ids[-1].encode()
    assert any_server.zrange(f"{q.prefix}g:{lane}:pending", 0, -1, withscores=True) == [
        (j.encode(), -4.0) for j in job_ids]
    job = q.job(job_ids[0])
    assert (job["state"], job["payload"], job["lane"], job["priority"], job["sched"], job["attempts"]) == (
        "pending", b"t", lane, "4", "tick", 0)
    assert any_server.zscore(f"{q.prefix}schedules", "tick") == nxt
    before = snapshot(any_server, q, jobs_only=True)
    assert q.fire_schedules() == 0  # not due any more
    assert snapshot(any_server, q, jobs_only=True) == before


def fire_call(q, name, rev, expect, nxt, *ticks, seq=1):
    keys = (f"{q.prefix}sched:{name}", f"{q.prefix}schedules")
    pairs = [x for t in ticks for x in (t, tick_job_id(seq, max(t, ids.EPOCH_MS)))]
    return BUNDLE["schedule_fire"](q.client, keys, (q.prefix, name, rev, expect, nxt, *pairs))


def test_a_fire_with_a_stale_cursor_or_revision_changes_nothing(q, any_server):
    q.schedule("tick", every_ms=1000)
    cursor, now = make_due(q, any_server, "tick", 3)
    assert fire_call(q, "tick", 1, cursor, cursor + 1000, cursor) == [tick_job_id(1, cursor).encode()]
    q.complete(*(lambda j: (j.id, j.attempts))(q.claim(lease_ms=60_000)))  # its job is gone: only the cursor guards
    before = snapshot(any_server, q)
    assert fire_call(q, "tick", 1, cursor, cursor + 1000, cursor) == 0  # the racing reaper's late call
    assert fire_call(q, "tick", 2, cursor + 1000, cursor + 2000, cursor + 1000) == 0  # another revision
    q.pause_schedule("tick")
    paused = snapshot(any_server, q)
    assert fire_call(q, "tick", 1, cursor + 1000, cursor + 2000, cursor + 1000) == 0
    assert snapshot(any_server, q) == paused and before != paused
    assert fire_call(q, "gone", 1, cursor, cursor + 1000, cursor) == 0


def test_a_tick_whose_job_exists_is_not_enqueued_again(q, any_server):
    q.schedule("tick", every_ms=1000, payload=b"new")
    cursor, now = make_due(q, any_server, "tick", 1)
    jid = tick_job_id(1, cursor)
    q.enqueue(b"old", job_id=jid)
    assert fire_call(q, "tick", 1, cursor, cursor + 1000, cursor) == []
    assert q.job(jid)["payload"] == b"old" and "sched" not in q.job(jid)
    assert int(any_server.hget(f"{q.prefix}sched:tick", "next")) == cursor + 1000


@pytest.mark.parametrize("shape", ["future", "falling", "before_expect", "next_not_after", "too_many", "wrong_id"])
def test_a_fire_refuses_ticks_it_cannot_fire_and_changes_nothing(q, any_server, shape):
    q.schedule("tick", every_ms=1000)
    cursor, now = make_due(q, any_server, "tick", 3)
    args = {"future": (cursor, now + 60_000, cursor, now + 50_000),
            "falling": (cursor, cursor + 5000, cursor + 1000, cursor),
            "before_expect": (cursor, cursor + 5000, cursor - 1000),
            "next_not_after": (cursor, cursor, cursor),
            "too_many": (cursor, now + 2000, *range(cursor, cursor + 1002)),
            "wrong_id": (cursor, cursor + 1000, cursor)}[shape]
    before = snapshot(any_server, q)
    with pytest.raises(ArgumentError):
        fire_call(q, "tick", 1, *args, seq=2 if shape == "wrong_id" else 1)  # its seq is 1
    assert snapshot(any_server, q) == before


def test_a_stored_cron_that_never_fires_is_left_alone_and_the_others_fire(q, any_server, caplog):
    """A definition refused at schedule() ("0 0 30 2 *", February 30) that is
    stored anyway (an older version, a hand edit): the reaper's pass logs it,
    changes nothing of it, fires the others, and returns; resuming it is
    the same ArgumentError that schedule() answers."""
    q.schedule("ok", every_ms=1000)
    q.schedule("never", cron="0 0 1 1 *")
    any_server.hset(f"{q.prefix}sched:never", "spec", "0 0 30 2 *")
    make_due(q, any_server, "never", 1)
    make_due(q, any_server, "ok", 1)
    before = any_server.hgetall(f"{q.prefix}sched:never")
    assert Reaper([q]).run_once()["t"]["fired"] == 1
    assert any_server.hgetall(f"{q.prefix}sched:never") == before
    assert "never" in caplog.text and q.counts()["pending"] == 1
    q.pause_schedule("never")
    with pytest.raises(ArgumentError, match="never fires"):
        q.resume_schedule("never")
    assert [s["paused"] for s in q.schedules() if s["name"] == "never"] == [True]


def test_a_sharded_queue_refuses_a_cron_that_never_fires_and_stores_nothing(r):
    sq = ShardedQueue("t", r, shards=3)
    sq.schedule("s", cron="0 0 1 1 *", lane=ids.mint("PLR"))  # an older definition, on its lane's shard
    before = sorted(sq.keys())
    with pytest.raises(ArgumentError, match="never fires"):
        sq.schedule("s", cron="0 0 30 2 *")
    assert sorted(sq.keys()) == before and [s["cron"] for s in sq.schedules()] == ["0 0 1 1 *"]


def test_the_reaper_pass_fires_due_schedules(q, any_server):
    q.schedule("tick", every_ms=1000)
    make_due(q, any_server, "tick", 1)
    assert Reaper([q]).run_once()["t"]["fired"] == 1
    assert q.counts()["pending"] == 1


def test_the_tick_id_in_lua_is_the_python_one_at_the_extremes(q, any_server):
    """The script splits the 63-bit value in two exact parts; compare it
    with Python's at the largest schedule number and the last tick."""
    any_server.hset(q.k_meta, "sched_seq", 2097152 * 7 - 1)
    q.schedule("a", every_ms=1000)
    q.schedule("b", every_ms=1000)
    assert [s["seq"] for s in sorted(q.schedules(), key=lambda s: s["name"])] == [0, 1]  # numbers wrap at 2^21
    any_server.hset(f"{q.prefix}sched:a", "seq", 2097151)  # the largest
    for name, seq in (("a", 2097151), ("b", 1)):
        cursor, now = make_due(q, any_server, name, 1)
        assert fire_call(q, name, 1, cursor, cursor + 1000, cursor, seq=seq) == [tick_job_id(seq, cursor).encode()]
    assert tick_job_id(2097151, 3903090455551) == "JOB" + ids.MAX_PAYLOAD


def test_no_minted_id_is_a_ticks_id():
    """A tick's id has the sequence's top bit set; a minter never sets it,
    whatever its node, however many ids it mints in one millisecond."""
    t = [ids.EPOCH_MS * 1_000_000 + 10_000 * 1_000_000]
    for node in (0, 1023):
        m = ids.Minter(node=node, clock=lambda: t[0])
        minted = {m.next_n() for _ in range(5000)}  # three milliseconds' worth: it borrows ahead
        ms0 = 10_000
        ticks = {ids.parse(tick_job_id(seq, ids.EPOCH_MS + ms0 + d))[1]
                 for seq in (0, 1, 2047, 2048, node << 11, (node << 11) | 2047, 2097151) for d in range(4)}
        assert not minted & ticks
    assert {ids.parse(tick_job_id(seq, ids.EPOCH_MS))[1] for seq in range(4096)} == {
        (s >> 11) << 12 | 2048 | (s & 2047) for s in range(4096)}  # one id per number: no two schedules alike


def test_a_number_a_live_schedule_holds_is_never_given_again(q, any_server):
    """After the counter wraps (2^21 creations), the numbers live schedules
    hold are skipped; a removed schedule's number is free again."""
    assert q.schedule("keep", every_ms=1000) == "created"  # number 1
    any_server.hset(q.k_meta, "sched_seq", 2097151)        # as after 2^21 - 1 creations
    for name in ("a", "b", "c"):
        q.schedule(name, every_ms=1000)
    seqs = {row["name"]: row["seq"] for row in q.schedules()}
    assert seqs == {"keep": 1, "a": 0, "b": 2, "c": 3}
    assert q.unschedule("a") and any_server.zscore(f"{q.prefix}sched_numbers", "a") is None
    any_server.hset(q.k_meta, "sched_seq", 2097151)
    q.schedule("d", every_ms=1000)
    assert {row["name"]: row["seq"] for row in q.schedules()}["d"] == 0


def test_a_schedule_stored_before_the_numbers_is_numbered_again_when_declared(q, any_server):
    """A row stored by an older version has a number the numbers zset does
    not give it, maybe another schedule's: declaring it again (as a Django
    worker does at every start) numbers it afresh, keeping its cursor."""
    q.schedule("a", every_ms=1000)
    q.schedule("b", every_ms=1000)
    any_server.hset(f"{q.prefix}sched:b", "seq", 1)         # as the old per-shard counters left it: a's number
    any_server.zrem(f"{q.prefix}sched_numbers", "b")
    cursor = int(any_server.hget(f"{q.prefix}sched:b", "next"))
    assert q.schedule("b", every_ms=1000) == "replaced"
    row = {r["name"]: r for r in q.schedules()}["b"]
    assert row["seq"] not in (1, 2) and row["cursor"] == cursor and row["rev"] == 2
    assert q.schedule("b", every_ms=1000) == "unchanged"


def test_when_every_number_is_held_a_new_schedule_is_refused_and_nothing_changes(r):
    sq = ShardedQueue("t", r, shards=1024)  # a shard's class holds 2^21 / 1024 = 2048 numbers
    shard = sq.shards[sq._schedule_shard("late", None)]
    r.zadd(f"{shard.prefix}sched_numbers", {f"s{k}": k for k in range(2048)})
    before = snapshot(r, shard)
    with pytest.raises(ArgumentError, match="every schedule number"):
        shard.schedule("late", every_ms=1000)
    assert snapshot(r, shard) == before


def test_schedules_on_different_shards_never_share_a_tick_id(r):
    """Each shard numbers its schedules in its own class (k * S + i), so two
    schedules ticking at the same millisecond on two shards make two jobs,
    and each is settled on its own shard (the review's repro: one job
    left leased, to run twice)."""
    sq = ShardedQueue("t", r, shards=4)
    names = [f"s{i}" for i in range(12)]
    for name in names:
        assert sq.schedule(name, every_ms=1000) == "created"
    rows = sq.schedules()
    holders = {row["name"]: next(s for s in sq.shards if s.schedules() and
                                 any(x["name"] == row["name"] for x in s.schedules())) for row in rows}
    assert len(set(map(id, holders.values()))) > 1  # the names spread over the shards
    seqs = [row["seq"] for row in rows]
    assert len(set(seqs)) == len(seqs)
    assert all(row["seq"] % 4 == sq.shards.index(holders[row["name"]]) for row in rows)
    tick = (server_ms(r) // 1000 - 2) * 1000
    for name, shard in holders.items():
        r.hset(f"{shard.prefix}sched:{name}", "next", tick)
        r.zadd(f"{shard.prefix}schedules", {name: tick})
    assert sq.fire_schedules() == len(names)
    jobs = sq.claim_batch(100, lease_ms=60_000)
    assert len({j.id for j in jobs}) == len(jobs) == len(names)
    for job in jobs:
        assert sq.complete(job.id, job.attempts)
    assert sum(s.counts()["active"] + s.counts()["pending"] for s in sq.shards) == 0


def test_a_reaper_that_loses_the_race_between_its_reads_skips_quietly(q, any_server, monkeypatch, caplog):
    """The pass reads the due names, then their rows; a reaper that fires
    in between has moved the cursor past now. The late pass skips the row
    (no refused call, no ERROR in the log) and the tick ran once."""
    import echomq.schedules as schedules

    q.schedule("tick", every_ms=1000)
    make_due(q, any_server, "tick", 2)
    real = schedules.listing

    def rival_first(queue, names=None):
        monkeypatch.setattr(schedules, "listing", real)
        assert schedules.fire(Queue("t", any_server)) == 1  # the other reaper, between our two reads
        return real(queue, names)

    monkeypatch.setattr(schedules, "listing", rival_first)
    with caplog.at_level("DEBUG", logger="echomq.schedules"):
        assert schedules.fire(q) == 0
    assert not [rec for rec in caplog.records if rec.levelname in ("ERROR", "WARNING")], caplog.text
    assert q.counts()["pending"] == 1


def test_concurrent_reapers_fire_each_tick_once(q, any_server):
    q.schedule("tick", every_ms=1000, catch_up=1000)
    make_due(q, any_server, "tick", 50)
    barrier = threading.Barrier(6)
    totals = []

    def reaper():
        barrier.wait()
        totals.append(sum(q.fire_schedules() for _ in range(5)))

    threads = [threading.Thread(target=reaper) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(totals) == q.counts()["pending"] >= 51


@pytest.mark.slow
def test_two_reaper_processes_racing_over_a_restart_enqueue_each_tick_once(valkey_server, r, tmp_path):
    """Two reaper processes fire one schedule (every 50 ms, catch_up high,
    so no tick is skipped) while a consumer process completes each tick's
    job at once (so the job's row is gone and only the cursor stands
    between a late reaper and a second run). One reaper is SIGKILLed
    mid-race and started again. Every tick on the grid from the first to
    the last ran exactly once."""
    q = Queue("race", r)
    q.schedule("beat", every_ms=50, catch_up=1000)
    first, seq = q.schedules()[0]["cursor"], q.schedules()[0]["seq"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def reaper():
        return subprocess.Popen([sys.executable, "-m", "tests.echomq.reaper_proc", "--url", valkey_server.url,
                                 "--queue", "race", "--interval-ms", "3"], cwd=ROOT, env=env)

    def fired_at_least(n, timeout=20):
        deadline = time.monotonic() + timeout
        while int(r.get("fired") or 0) < n and time.monotonic() < deadline:
            time.sleep(0.01)
        assert int(r.get("fired") or 0) >= n

    consumer = subprocess.Popen([sys.executable, "-m", "tests.echomq.worker_proc", "--url", valkey_server.url,
                                 "--queue", "race", "--beat-ms", "100"], cwd=ROOT, env=env,
                                stderr=subprocess.DEVNULL)
    procs = [reaper(), reaper()]
    try:
        fired_at_least(10)
        procs[0].send_signal(signal.SIGKILL)
        procs[0].wait(10)
        fired_at_least(int(r.get("fired")) + 10)
        procs[0] = reaper()
        fired_at_least(int(r.get("fired")) + 10)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(10)
    # The SIGKILLed reaper may have fired a pass it never counted: the
    # schedule's own record says which ticks were fired.
    last = q.schedules()[0]["last_ms"]
    grid_ids = {tick_job_id(seq, t) for t in range(first, last + 1, 50)}
    deadline = time.monotonic() + 20
    while int(r.get("effects") or 0) < len(grid_ids) and time.monotonic() < deadline:
        time.sleep(0.01)
    consumer.terminate()
    consumer.wait(10)
    runs = [j.decode() for j in r.lrange("runs", 0, -1)]
    assert len(runs) == len(set(runs)) == int(r.get("effects"))  # none twice
    assert set(runs) == grid_ids  # every tick from the first to the last, nothing off the grid
    assert len(grid_ids) >= 30


def _interleavings(a: int, b: int) -> list[str]:
    """Every order of a steps of A and b steps of B, as strings of 'A' and 'B'."""
    return ["".join("A" if i in at else "B" for i in range(a + b)) for at in itertools.combinations(range(a + b), a)]


def test_two_declarations_with_different_lanes_at_once_leave_the_newer_copy_in_every_order(r):
    """Two processes declare schedule s at once, each with its own lane, so
    on two shards. In every order of their steps (mint the stamp, store the
    stamped copy, remove older copies elsewhere, withdraw its own if a newer
    one is elsewhere) one copy stays, the later stamp's. Storing then
    removing the other shards' copies unconditionally left none when both
    stored before either removed; without the withdrawal, a declaration
    that minted first but stored last left two."""
    sq = ShardedQueue("t", r, shards=4)
    lanes = {}
    while len(lanes) < 2:  # two lanes on two different shards
        lane = ids.mint("PLR")
        lanes.setdefault(sq.shard_index(lane=lane), lane)
    (_, lane_a), (_, lane_b) = sorted(lanes.items())
    orders = list(_interleavings(4, 4))
    assert len(orders) == 70
    for order in orders:
        for swap in (False, True):  # which declaration takes the lower shard
            r.flushdb()
            lane = {"A": lane_a, "B": lane_b} if not swap else {"A": lane_b, "B": lane_a}
            every = {"A": 1000, "B": 2000}
            steps = {who: sq._declaring("s", lane[who], {"every_ms": every[who]}) for who in "AB"}
            for who in order:  # a declaration's first step mints its stamp: the one to go first is older
                next(steps[who], None)
            for gen in steps.values():
                assert next(gen, None) is None  # four steps at most
            newer = "B" if order[0] == "A" else "A"
            held = [(i, s) for i, shard in enumerate(sq.shards) for s in shard.schedules()]
            assert [(i, s["lane"], s["every_ms"]) for i, s in held] == [
                (sq.shard_index(lane=lane[newer]), lane[newer], every[newer])], (order, swap, held)


def test_a_declaration_moves_a_schedule_to_its_new_lanes_shard_and_keeps_one_copy(r):
    sq = ShardedQueue("t", r, shards=4)
    lanes = {}
    while len(lanes) < 2:
        lane = ids.mint("PLR")
        lanes.setdefault(sq.shard_index(lane=lane), lane)
    (i1, l1), (i2, l2) = lanes.items()
    assert sq.schedule("s", every_ms=1000, lane=l1) == "created"
    assert sq.schedule("s", every_ms=1000, lane=l2) == "created"  # a new copy, on l2's shard
    assert [(sq.shards.index(sh), s["lane"]) for sh in sq.shards for s in sh.schedules()] == [(i2, l2)]
    assert sq.schedule("s", every_ms=1000, lane=l2) == "unchanged"
    assert sq.schedule("s", every_ms=1000) in ("created", "replaced")  # no lane: the name's shard
    assert len(sq.schedules()) == 1
