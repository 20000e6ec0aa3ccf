"""The Python API refuses bad arguments with a typed error before it sends
anything: views (limits, minutes), batch calls (pairs, items) and branded
ids. A plain Queue and a ShardedQueue answer the same way."""
from __future__ import annotations

import pytest

from echomq import ArgumentError, EchoMQError, InvalidName, Queue, ShardedQueue, ids
from echomq.queue import MAX_BATCH, MAX_MINUTES

JOB = "JOB0KHTOWnGLuC"


@pytest.fixture(params=["queue", "sharded"])
def q(request, r):
    return Queue("t", r) if request.param == "queue" else ShardedQueue("t", r, shards=3)


def commands(r) -> int:
    return sum(v["calls"] for k, v in r.info("commandstats").items() if k != "cmdstat_config|resetstat")


@pytest.mark.parametrize("view", ["dead_jobs", "active_jobs", "scheduled_jobs", "pending_ids", "completed_jobs"])
@pytest.mark.parametrize("limit", [0, -1, MAX_BATCH + 1, 2**70, 1.5, "10", None, True])
def test_a_listing_refuses_a_bad_limit_before_asking_valkey(q, r, view, limit):
    r.config_resetstat()
    with pytest.raises(ArgumentError, match="limit"):
        getattr(q, view)(limit)
    assert commands(r) == 0


@pytest.mark.parametrize("minutes", [0, -3, MAX_MINUTES + 1, 2**70, "60", 2.0])
def test_per_minute_refuses_a_bad_span_before_asking_valkey(q, r, minutes):
    r.config_resetstat()
    with pytest.raises(ArgumentError, match="minutes"):
        q.per_minute(minutes)
    assert commands(r) == 0


def test_per_minute_answers_the_span_asked(q):
    assert len(q.per_minute(5)) == 5 and len(q.per_minute(MAX_MINUTES)) == MAX_MINUTES


@pytest.mark.parametrize("items", ["abc", b"abc", {"payload": b"x"}])
def test_enqueue_many_refuses_one_string_or_mapping(q, r, items):
    with pytest.raises(ArgumentError, match="iterable of items"):
        q.enqueue_many(items)
    assert q.counts()["pending"] == 0 and r.dbsize() == 0


def test_enqueue_many_refuses_an_item_without_a_payload_and_sends_nothing(q, r):
    with pytest.raises(ArgumentError, match="needs a payload"):
        q.enqueue_many([b"ok", {"job_id": JOB}])
    assert r.dbsize() == 0


@pytest.mark.parametrize("method", ["complete_many", "extend_many"])
@pytest.mark.parametrize("pairs", [JOB, [JOB], [(JOB,)], [(JOB, 1, 2)], [(JOB, 0)], [("nope", 1)], [(JOB, "1")],
                                   {JOB: 1}])
def test_batch_calls_refuse_anything_but_id_token_pairs(q, r, method, pairs):
    kwargs = {"lease_ms": 1000} if method == "extend_many" else {}
    r.config_resetstat()
    with pytest.raises(ArgumentError):
        getattr(q, method)(pairs, **kwargs)
    assert commands(r) == 0


@pytest.mark.parametrize("call", [lambda: ids.parse("nope"), lambda: ids.encode("abc", 1),
                                  lambda: ids.encode("JOB", -1), lambda: ids.set_node(5000)])
def test_ids_raise_typed_errors_that_are_still_value_errors(call):
    with pytest.raises(EchoMQError) as err:
        call()
    assert isinstance(err.value, ValueError)
    assert isinstance(err.value, (InvalidName, ArgumentError))


@pytest.mark.parametrize("call", [
    lambda q: q.enqueue(b"x", priority=101),
    lambda q: q.enqueue(b"x", unique_key="a b"),
    lambda q: q.enqueue(b"x", unique_ttl_ms=5),
    lambda q: q.enqueue_many([{"payload": b"x", "priority": -101}]),
    lambda q: q.set_rate_limit(0, 1000),
    lambda q: q.set_rate_limit(5, None),
    lambda q: q.lanes.set_rate(ids.mint("PLR"), 5, 0),
    lambda q: q.schedule("s", cron="every minute"),
    lambda q: q.schedule("s", every_ms=0),
    lambda q: q.schedule("s", cron="* * * * *", tz="Nowhere/Else"),
    lambda q: q.schedule("s", cron="0 0 30 2 *"),  # parses, never fires
    lambda q: q.schedule("bad name", every_ms=1000),
    lambda q: q.unschedule("bad name"),
    lambda q: q.pause_schedule(""),
    lambda q: q.fire_schedules(limit=0),
])
def test_issue_21_arguments_are_refused_before_asking_valkey(q, r, call):
    """Priorities, unique keys, rate limits and schedules: a plain Queue and
    a ShardedQueue refuse a bad one with a typed error and send nothing."""
    r.config_resetstat()
    with pytest.raises(ArgumentError):
        call(q)
    assert commands(r) == 0


# --- issue 22: events, progress, wait, flows ----------------------------------------
@pytest.mark.parametrize("call", [
    lambda q: q.events("soon"),
    lambda q: q.events("0", count=0),
    lambda q: q.events("0", count=MAX_BATCH + 1),
    lambda q: q.events("0", block_ms=-1),
    lambda q: q.events("0", block_ms=1.5),
    lambda q: q.events("0", reader="a b"),
    lambda q: q.events("0", reader=""),
    lambda q: q.recent_events(0),
    lambda q: q.recent_events(10, types=["done"]),
    lambda q: q.recent_events(10, types="claimed"),
    lambda q: q.recent_events(10, lane="PLR"),
    lambda q: q.recent_events(10, job=ids.mint("GES")),
    lambda q: q.set_events(-1),
    lambda q: q.set_events(2.5),
    lambda q: q.wait(JOB, 0),
    lambda q: q.wait(JOB, float("nan")),
    lambda q: q.wait("JOB", 1),
    lambda q: q.progress(JOB, 1, float("nan")),
    lambda q: q.progress(JOB, 1, "x" * 2000),
    lambda q: q.progress(JOB, 1, {1, 2}),
    lambda q: q.progress(JOB, 0, 1),
    lambda q: q.progress(JOB, "1", 1),
    lambda q: q.set_result(JOB, 0, 1),
    lambda q: q.set_result(JOB, 1, "x" * 70_000),
    lambda q: q.enqueue_flow(b"p", []),
    lambda q: q.enqueue_flow(b"p", 5),
    lambda q: q.enqueue_flow(b"p", None),
    lambda q: q.enqueue_flow(b"p", [b"a"], on_child_failure="maybe"),
    lambda q: q.enqueue_flow({"payload": b"p", "job_id": JOB}, [{"payload": b"a", "job_id": JOB}]),
    lambda q: q.enqueue_flow(b"p", [{"payload": b"a", "priority": 3}]),
])
def test_issue22_calls_refuse_bad_arguments_before_asking_valkey(q, r, call):
    r.config_resetstat()
    with pytest.raises(ArgumentError):
        call(q)
    assert commands(r) == 0
