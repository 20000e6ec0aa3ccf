"""Every script checks every argument before its first write.

For each script: a valid call on a queue with state it would change, then
every ARGV position (and every KEYS position, and the arity) replaced by bad
values, sent straight to the script (``Queue._run``, past the Python checks,
as another runtime might). Each must answer EMQARG (EMQKIND for a well-formed
id of another brand) and leave every key of the server exactly as it was.
Runs on Valkey and on Redis 7.0 (``any_server``).
"""
from __future__ import annotations

import math

import pytest
import redis

from echomq import ArgumentError, KindError, Queue, ids
from echomq.queue import MAX_BATCH, MAX_COUNT, MAX_MS, MAX_PROGRESS, MAX_TEXT, MAX_TOKEN
from echomq.schedules import tick_job_id
from echomq.scripts import LIMITS, NAMES, load

NOT_INTEGERS = ["", "abc", "nan", "NaN", "inf", "-inf", "Infinity", "-1", "1e400", "1e3", "1.5", "0x10",
                " 1", "1 ", "01", "+1", str(10**30), "9" * 16, "1\x00"]
BAD_IDS = ["", "JOB", "a:b}{c", "JOB0KHTOWnGL}C", "JOBAzL8n0Y58m8", "job0KHTOWnGLuC", "JOB0KHTOWnGLuC0",
           "JOB0KHTOWnGLu", "1", "nan", "JOB0KHTOWnGL:C", "JOB0KHTOWnGLu\n"]
BAD_PREFIXES = ["", "emq:{t}", "emq:{emq}:", "emq:{a b}:", "emq:{t}:x", "emq:{" + "x" * 129 + "}:",
                "emq:{other}:", "emq:{a:b}{c}:", "emq:t:", "EMQ:{t}:"]


def everything(client) -> dict:
    """Every key on the server with its full value."""
    out = {}
    for key in sorted(client.keys("*")):
        kind = client.type(key).decode()
        if kind == "hash":
            out[key] = dict(client.hgetall(key))
        elif kind == "zset":
            out[key] = client.zrange(key, 0, -1, withscores=True)
        elif kind == "list":
            out[key] = client.lrange(key, 0, -1)
        elif kind == "set":
            out[key] = sorted(client.smembers(key))
        elif kind == "stream":  # the event stream: every entry, ids included
            out[key] = client.xrange(key)
        else:
            out[key] = client.get(key)
    return out


def bad_values(kind):
    """(value, expected error) pairs for an argument of this kind."""
    if kind == "P":
        return [(v, ArgumentError) for v in BAD_PREFIXES]
    if kind in ("id", "lane", "lane?", "csr?"):
        vals = [(v, ArgumentError) for v in BAD_IDS if not (v == "" and kind in ("lane?", "csr?"))]
        if kind == "id":
            vals.append((ids.mint("PLR"), KindError))
        return vals
    if kind == "token":
        return [(v, ArgumentError) for v in NOT_INTEGERS + ["0", str(MAX_TOKEN + 1)]]
    if kind == "text":
        return [("x" * (MAX_TEXT + 1), ArgumentError)]
    if kind == "flag":
        return [(v, ArgumentError) for v in ["", "2", "yes", "true", "01", "-1"]]
    if kind == "op":
        return [(v, ArgumentError) for v in ["", "PAUSE", "drop", "limit "]]
    if kind == "policy":
        return [(v, ArgumentError) for v in ["", "FAIL", "ignore ", "skip", "1"]]
    if kind in ("json", "json_text"):  # progress (1 KB) / result (MAX_TEXT) values
        limit = MAX_PROGRESS if kind == "json" else MAX_TEXT
        return [(v, ArgumentError) for v in ["", "{", "not json", "[1,", '"' + "x" * limit + '"']]
    if kind == "priority":  # a signed integer in [-100, 100]
        return [(v, ArgumentError) for v in ["", "abc", "nan", "1.5", "+1", "-0", "01", "-01", "101", "-101",
                                             "1e2", " 1", "--1", "1000", "-"]]
    if kind == "unique?":
        return [(v, ArgumentError) for v in ["a b", "x" * (LIMITS["MAX_UNIQUE"] + 1), "é", "a\x00", "{k}", "k\n"]]
    if kind == "name":  # a schedule name
        return [(v, ArgumentError) for v in ["", "a b", "x" * 65, "a:b", "é", "a\n"]]
    if kind == "kind":
        return [(v, ArgumentError) for v in ["", "EVERY", "cron ", "every\x00"]]
    if kind == "tz":
        return [(v, ArgumentError) for v in ["", "a b", "x" * (LIMITS["MAX_CRON"] + 1), "../x", "UTC\n"]]
    if kind == "tick":
        return [(v, ArgumentError) for v in NOT_INTEGERS + ["0", "1704067199999", str(LIMITS["MAX_TICK"] + 1)]]
    if kind == "stamp?":  # a schedule declaration's stamp, or ''
        return [(v, ArgumentError) for v in ["a b", "a-b", "x" * 65, "é", "a\n", "{s}"]]
    if kind == "zero":  # '0' where an argument is unused
        return [(v, ArgumentError) for v in ["", "1", "00", "x"]]
    if kind == "worker":  # a Django task's worker id
        return [(v, ArgumentError) for v in ["", "a,b", ",", "w" * (LIMITS["MAX_WORKER"] + 1)]]
    if kind == "time":  # an ISO 8601 time in a task's record
        return [(v, ArgumentError) for v in ["", "2026-01-02", "2026-01-02 03:04:05", "1767323045678", "now",
                                             "2026-01-02T03:04:05 ", "2026-01-02T03:04:05\n", "2026-1-02T03:04:05",
                                             "２０２６-01-02T03:04:05", "2026-01-02T03:04:05." + "0" * 21]]
    if kind == "fill":  # a task's payload fields, for a start to fill in
        return [(v, ArgumentError) for v in ["", "{", "[]", "null", "5", '"x"', '{"attempt":"1"}', '{"return":"5"}',
                                             '{"args":1}', '{"args":null}', '{"args":["x"]}', ' {"args":"[]"}']]
    if kind == "status":  # how a task's attempt ended
        return [(v, ArgumentError) for v in ["", "RUNNING", "successful", "SUCCESSFUL ", "DONE"]]
    if kind == "empty":  # '' where the rest of the call says there is no value
        return [(v, ArgumentError) for v in ["[]", "x", " "]]
    if kind == "json_value":  # any JSON text
        return [(v, ArgumentError) for v in ["", "{", "not json", "[1,"]]
    if kind == "json_array":
        return [(v, ArgumentError) for v in ["", "{", "{}", '{"a":"b"}', "5", "[1,"]]
    if isinstance(kind, tuple):  # an integer in [lo, hi]
        lo, hi = kind
        vals = NOT_INTEGERS + [str(hi + 1)] + ([str(lo - 1)] if lo > 0 else [])
        return [(v, ArgumentError) for v in vals]
    assert kind == "any", kind
    return []


class World:
    """A queue with a job in every state, so a valid call of any script
    would change something."""

    def __init__(self, client):
        self.client = client
        self.q = q = Queue("t", client)
        self.lane = ids.mint("PLR")
        self.scheduled, _ = q.enqueue(b"later", delay_ms=60_000)
        q.enqueue(b"laned", lane=self.lane)
        self.active = q.claim(lease_ms=60_000)  # the laned job
        self.expired_job, _ = q.enqueue(b"expired", lane=self.lane)
        expired = q.claim(lease_ms=60_000)
        client.zadd(q.k_active, {expired.id: 0})  # its lease ran out: reap would move it
        dead, _ = q.enqueue(b"dead")
        d = q.claim(lease_ms=60_000)
        assert d.id == dead
        q.retry(d.id, d.attempts, delay_ms=0, max_attempts=1, error="boom")
        self.dead = dead
        self.pending, _ = q.enqueue(b"flat")
        self.due, _ = q.enqueue(b"due", delay_ms=60_000)
        client.zadd(q.k_schedule, {self.due: 0})  # due now: promote would move it
        q.schedule("tick", every_ms=1000, payload=b"t")  # due now: a fire would enqueue
        self.seq = q.schedules()[0]["seq"]
        s, us = client.time()
        self.tick = (s - 2) * 1000
        client.hset(f"{q.prefix}sched:tick", "next", self.tick)
        client.zadd(f"{q.prefix}schedules", {"tick": self.tick})
        q.schedule("other", every_ms=1000)  # a schedule to pause

    def call(self, name):
        """A valid (keys, args, kinds) for script ``name``."""
        q, a = self.q, self.active
        P = q.prefix
        token = str(a.attempts)
        fenced = ((q.job_key(a.id), q.k_active), [P, a.id, token], ["P", "id", "token"])
        new = ids.mint("JOB")
        return {
            "enqueue": ((q.job_key(new), q.k_pending, q.k_schedule), [P, new, b"p", self.lane, "0", "5", "u:1", "1000"],
                        ["P", "id", "any", "lane?", (0, MAX_MS), "priority", "unique?", (0, MAX_MS)]),
            "claim": ((q.k_pending, q.k_active, q.k_ring, q.k_meta), [P, "1000", "1", ids.mint("CSR")],
                      ["P", (1, MAX_MS), (1, MAX_BATCH), "csr?"]),
            "complete": fenced,
            "complete_batch": ((q.k_active, q.k_meta), [P, a.id, token], ["P", "id", "token"]),
            "retry": ((q.job_key(a.id), q.k_active, q.k_schedule, q.k_dead), [P, a.id, token, "0", "3", "err"],
                      ["P", "id", "token", (0, MAX_MS), (1, MAX_COUNT), "text"]),
            "extend": ((q.job_key(a.id), q.k_active), [P, a.id, token, "1000"],
                       ["P", "id", "token", (1, MAX_MS)]),
            "release": fenced,
            "reap": ((q.k_active, q.k_dead), [P, "2", "100"], ["P", (0, MAX_COUNT), (1, MAX_BATCH)]),
            "promote": ((q.k_schedule,), [P, "100"], ["P", (1, MAX_BATCH)]),
            "requeue": ((q.job_key(self.dead), q.k_dead), [P, self.dead], ["P", "id"]),
            "remove": ((q.job_key(self.pending), q.k_pending, q.k_active, q.k_schedule, q.k_dead),
                       [P, self.pending], ["P", "id"]),
            "cancel": ((q.job_key(self.pending), q.k_pending, q.k_schedule), [P, self.pending], ["P", "id"]),
            "lane": ((f"{P}g:{self.lane}:meta",), [P, self.lane, "limit", "2"], ["P", "lane", "op", (0, MAX_COUNT)]),
            "pause": ((q.k_meta,), [P, "1"], ["P", "flag"]),
            "counts": ((q.k_pending, q.k_active, q.k_schedule, q.k_dead, q.k_meta, q.k_lanes, q.k_ring), [P], ["P"]),
            "progress": (fenced[0], fenced[1] + ['{"done":1}'], fenced[2] + ["json"]),
            "result": (fenced[0], fenced[1] + ['{"sum":3}'], fenced[2] + ["json_text"]),
            "wait": ((q.job_key(self.pending),), [P, self.pending], ["P", "id"]),
            "enqueue_flow": ((q.job_key(new),), [P, new, b"parent", self.lane, "fail", ids.mint("JOB"), b"child", ""],
                             ["P", "id", "any", "lane?", "policy", "id", "any", "lane?"]),
            "rate": ((q.k_meta,), [P, "2", "1000"], ["P", (0, MAX_COUNT), (0, MAX_MS)]),
            "lane_rate": ((f"{P}g:{self.lane}:meta",), [P, self.lane, "2", "1000"],
                          ["P", "lane", (0, MAX_COUNT), (0, MAX_MS)]),
            "schedule_set": ((f"{P}sched:tick", f"{P}schedules", f"{P}sched_numbers"),
                             [P, "tick", "every", "2000", "UTC", b"p", self.lane, "-3", "2", str(self.tick + 60_000),
                              "4", "3", "SCH0KHTOWnGLuC:0003"],
                             ["P", "name", "kind", (1, MAX_MS), "tz", "any", "lane?", "priority",
                              (0, LIMITS["MAX_CATCH_UP"]), "tick", (1, 1024), (0, 3), "stamp?"]),
            "schedule_op": ((f"{P}sched:other", f"{P}schedules", f"{P}sched_numbers"), [P, "other", "pause", "0"],
                            ["P", "name", "op", "zero"]),
            "schedule_fire": ((f"{P}sched:tick", f"{P}schedules"),
                              [P, "tick", "1", str(self.tick), str(self.tick + 1000), str(self.tick),
                               tick_job_id(self.seq, self.tick)],
                              ["P", "name", (1, MAX_TOKEN), "tick", "tick", "tick", "id"]),
        }[name]


def refused(world, name, keys, args, expected):
    before = everything(world.client)
    with pytest.raises(expected) as info:
        if name in NAMES:
            world.q._run(name, keys, args)
        else:  # the Django tasks backend's scripts, beside the bundle
            load(name)(world.client, keys, args)
    assert type(info.value) is expected, (name, args, info.value)
    assert str(info.value).startswith("EMQKIND" if expected is KindError else "EMQARG"), info.value
    assert everything(world.client) == before, (name, args)


@pytest.mark.parametrize("name", NAMES)
def test_every_bad_argument_is_refused_before_any_write(any_server, name):
    world = World(any_server)
    keys, args, kinds = world.call(name)
    assert len(args) == len(kinds)
    tried = 0
    for pos, kind in enumerate(kinds):
        for value, expected in bad_values(kind):
            bad = list(args)
            bad[pos] = value
            refused(world, name, keys, bad, expected)
            tried += 1
    for pos in range(len(keys)):  # a key that is not the one the arguments name
        wrong = list(keys)
        wrong[pos] = keys[pos] + "x" if pos else "emq:{other}:" + keys[pos].split(":", 2)[2]
        refused(world, name, wrong, args, ArgumentError)
    if name != "complete_batch":  # arity (complete_batch: an odd pair count is refused below)
        refused(world, name, keys, args[:-1], ArgumentError)
        refused(world, name, keys, args + ["extra"], ArgumentError)
    else:
        refused(world, name, keys, args + [world.active.id], ArgumentError)
        refused(world, name, keys, args[:1], ArgumentError)
    assert tried >= len(kinds) - kinds.count("any")
    # The valid call itself still works (the bad ones were refused, not the script broken).
    world.q._run(name, keys, args)


NOW = "2026-01-02T03:04:05.678901+00:00"


def task_calls(world) -> dict:
    """The Django tasks backend's two scripts: a valid (keys, args, kinds)
    for each status a finish may write, and a start, on the leased job of
    ``world`` with a result record each would change."""
    q, a = world.q, world.active
    P, token, record = q.prefix, str(a.attempts), f"{q.prefix}task:{a.id}"
    world.client.hset(record, mapping={"status": "RUNNING", "attempt": token, "args": "[]", "kwargs": "{}",
                                       "errors": "[]", "workers": "w:1"})
    head, kinds = [P, a.id, token, "86400000"], ["P", "id", "token", (1, MAX_MS)]
    return {
        "task_start": ((record, q.job_key(a.id)), [P, a.id, token, "w:2", NOW, "86400000", '{"task":"m.t"}'],
                       ["P", "id", "token", "worker", "time", (1, MAX_MS), "fill"]),
        "SUCCESSFUL": ((record,), head + ["SUCCESSFUL", "", NOW, '{"n":1}'],
                       kinds + ["status", "empty", "time", "json_value"]),
        "FAILED": ((record,), head + ["FAILED", '[{"e":1}]', NOW, ""], kinds + ["status", "json_array", "time", "empty"]),
        "READY": ((record,), head + ["READY", '[{"e":1}]', "", ""], kinds + ["status", "json_array", "empty", "empty"]),
    }


@pytest.mark.parametrize("call", ["task_start", "SUCCESSFUL", "FAILED", "READY"])
def test_the_task_result_scripts_refuse_every_bad_argument_before_any_write(any_server, call):
    """task_start and task_finish (lua/, loaded by the Django tasks backend)
    hold to the bundle's standard: every argument, key and the arity."""
    world = World(any_server)
    keys, args, kinds = task_calls(world)[call]
    name = "task_start" if call == "task_start" else "task_finish"
    assert len(args) == len(kinds)
    for pos, kind in enumerate(kinds):
        for value, expected in bad_values(kind):
            bad = list(args)
            bad[pos] = value
            refused(world, name, keys, bad, expected)
    for pos in range(len(keys)):
        wrong = list(keys)
        wrong[pos] = keys[pos] + "x" if pos else "emq:{other}:" + keys[pos].split(":", 2)[2]
        refused(world, name, wrong, args, ArgumentError)
        wrong[pos] = world.q.job_key(world.active.id) if keys[pos].endswith(f"task:{world.active.id}") else \
            f"{world.q.prefix}task:{world.active.id}"  # the other key of the same job
        refused(world, name, wrong, args, ArgumentError)
    refused(world, name, keys, args[:-1], ArgumentError)
    refused(world, name, keys, args + ["extra"], ArgumentError)
    assert load(name)(any_server, keys, args) not in (0, None)  # the valid call itself is accepted


@pytest.mark.parametrize("name, pos, value", [
    ("enqueue", 6, ""),   # a unique TTL (1000 at 7) with no unique key
    ("rate", 1, "0"),     # jobs 0 with per_ms 1000: clear needs both 0
    ("rate", 2, "0"),
    ("lane_rate", 2, "0"),
    ("lane_rate", 3, "0"),
    ("schedule_set", 3, "x" * (LIMITS["MAX_CRON"] + 1)),  # as a cron spec: too long
    ("schedule_set", 3, "* * * *\n *"),
    ("schedule_set", 10, "2"),  # a seq_step of 2 under seq_offset 3
])
def test_arguments_that_only_fail_together_are_refused(any_server, name, pos, value):
    world = World(any_server)
    keys, args, _ = world.call(name)
    args = list(args)
    args[pos] = value
    if name == "schedule_set":
        args[2] = "cron"
    refused(world, name, keys, args, ArgumentError)


def test_enqueue_takes_the_contracts_five_arguments_too(any_server):
    world = World(any_server)
    q = world.q
    keys, args, _ = world.call("enqueue")
    assert q._run("enqueue", keys, args[:5]) == 1
    refused(world, "enqueue", (q.job_key(ids.mint("JOB")), q.k_pending, q.k_schedule), args[:6], ArgumentError)


def test_a_bad_id_later_in_a_batch_changes_none_of_the_batch(any_server):
    world = World(any_server)
    q, a = world.q, world.active
    before = everything(any_server)
    with pytest.raises(ArgumentError):
        q._run("complete_batch", (q.k_active, q.k_meta), [q.prefix, a.id, str(a.attempts), "JOBnope", "1"])
    assert everything(any_server) == before


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, -1, 1.5, 5.0, "5", "soon", True, None,
                                 10**30, 2**63])
def test_the_python_api_refuses_bad_numbers_before_sending(bad):
    """Pointed at a closed port, so a call that got past the checks would
    raise Unavailable: every one raises ArgumentError instead."""
    dead = redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.2)
    q = Queue("ok", dead)
    jid = ids.mint("JOB")
    calls = [
        lambda: q.enqueue(b"x", delay_ms=bad),
        lambda: q.enqueue_many([{"payload": b"x", "delay_ms": bad}]),
        lambda: q.claim(lease_ms=bad),
        lambda: q.claim_batch(bad),
        lambda: q.retry(jid, 1, delay_ms=bad),
        lambda: q.retry(jid, 1, max_attempts=bad),
        lambda: q.retry(jid, bad),
        lambda: q.complete(jid, bad),
        lambda: q.complete_many([(jid, bad)]),
        lambda: q.extend(jid, 1, lease_ms=bad),
        lambda: q.extend(jid, bad),
        lambda: q.extend_many([(jid, 1)], lease_ms=bad),
        lambda: q.release(jid, bad),
        lambda: q.reap(max_stalls=bad),
        lambda: q.reap(limit=bad),
        lambda: q.promote(limit=bad),
        lambda: q.lanes.limit(ids.mint("PLR"), bad),
        lambda: q.set_retention(completed=bad),
        lambda: q.completed_jobs(bad),
        lambda: q.enqueue(b"x", priority=bad),
        lambda: q.enqueue(b"x", unique_key="k", unique_ttl_ms=bad),
        lambda: q.set_rate_limit(bad, 1000),
        lambda: q.set_rate_limit(10, bad),
        lambda: q.lanes.set_rate(ids.mint("PLR"), 10, bad),
        lambda: q.schedule("s", every_ms=bad),
        lambda: q.schedule("s", cron="* * * * *", catch_up=bad),
        lambda: q.schedule("s", cron="* * * * *", priority=bad),
        lambda: q.fire_schedules(limit=bad),
    ]
    for i, call in enumerate(calls):
        # None: no delay, no lane limit, bound unchanged, default priority / TTL, clear the limit
        if bad is None and i in (0, 1, 16, 17, 19, 20, 21, 23, 24, 25, 26):
            continue
        if bad == -1 and i in (19, 26):  # a valid priority
            continue
        with pytest.raises(ArgumentError):
            call()


def test_python_and_lua_share_the_limits():
    """The limits are named once (lua/include/args.lua); Python reads them."""
    from echomq.scripts import LUA_DIR

    text = (LUA_DIR / "include" / "args.lua").read_text()
    assert f"local MAX_MS = {MAX_MS}" in text and f"local MAX_TOKEN = {MAX_TOKEN}" in text


def test_bounds_are_inclusive(any_server):
    """A value exactly at a bound is accepted (the refusals above start one past it)."""
    world = World(any_server)
    q, a = world.q, world.active
    keys, args, _ = world.call("retry")
    args[3], args[4], args[5] = str(MAX_MS), str(MAX_COUNT), "e" * MAX_TEXT
    assert q._run("retry", keys, args) == b"scheduled"
    assert len(any_server.hget(q.job_key(a.id), "last_error")) == MAX_TEXT
    jid = ids.mint("JOB")
    assert q._run("enqueue", (q.job_key(jid), q.k_pending, q.k_schedule), [q.prefix, jid, b"", "", str(MAX_MS)]) == 2


def test_a_list_of_pairs_checked_at_once_is_refused_exactly_when_one_by_one_is():
    """check_pairs takes a list of (str, int) tuples in a few passes at once
    (a consumer's acks); a tuple of the same pairs is checked one by one.
    Both answer the same for every bad id and token, at any position."""
    from echomq.checks import check_pairs

    good = [(ids.mint("JOB"), 1), (ids.mint("JOB"), MAX_TOKEN), ("JOBAzL8n0Y58m7", 2)]
    bad_items = [(bad, 1) for bad in BAD_IDS + [None, 7, b"JOB0KHTOWnGLuC", "USR0KHTOWnGLuC"]]
    bad_items += [(good[0][0], bad) for bad in (0, -1, MAX_TOKEN + 1, True, 1.0, "1", None)]
    bad_items += [(good[0][0],), (good[0][0], 1, 2), [good[0][0], 1], good[0][0]]
    assert check_pairs(list(good), "t") == check_pairs(tuple(good), "t") == good
    at_once = list(good)  # tokens 1 and MAX_TOKEN, the largest id: the list itself comes back, checked at once
    assert check_pairs(at_once, "t") is at_once
    for bad in bad_items:
        for at in range(len(good) + 1):
            pairs = good[:at] + [bad] + good[at:]
            one_by_one = at_once = None
            try:
                one_by_one = check_pairs(tuple(pairs), "t")
            except ArgumentError as exc:
                one_by_one = type(exc)
            try:
                at_once = check_pairs(pairs, "t")
            except ArgumentError as exc:
                at_once = type(exc)
            assert at_once == one_by_one, (bad, at, at_once, one_by_one)
