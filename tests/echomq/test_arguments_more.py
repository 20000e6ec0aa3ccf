"""Arguments the hostile-QA pass found untyped: a listing's ``n`` and the
event filter's ``types`` must refuse what is not theirs with ArgumentError
(never a TypeError from deep inside, never a silently odd answer), before
anything is asked of the server, on a plain and a sharded queue."""
from __future__ import annotations

import pytest

from echomq import ArgumentError, Queue, ShardedQueue

LANES = ["PLR0KHTOWnGLuC", "PLR0KHTOWnGLuD", "PLR0KHTOWnGLuE"]


@pytest.fixture(params=["queue", "sharded"])
def q(request, r):
    q = Queue("t", r) if request.param == "queue" else ShardedQueue("t", r, shards=3)
    for i, lane in enumerate(LANES):
        for _ in range(i + 1):
            q.enqueue(b"x", lane=lane)
    return q


def commands(r) -> int:
    return sum(v["calls"] for k, v in r.info("commandstats").items() if k != "cmdstat_config|resetstat")


@pytest.mark.parametrize("n", [0, -1, -2, 2**70, 1.5, float("nan"), float("inf"), "3", None, True, [], object()])
def test_deepest_refuses_a_bad_count_before_asking_valkey(q, r, n):
    r.config_resetstat()
    with pytest.raises(ArgumentError, match="lanes"):
        q.lanes.deepest(n)
    assert commands(r) == 0


def test_deepest_answers_the_deepest_lanes(q):
    assert [row["lane"] for row in q.lanes.deepest(2)] == LANES[::-1][:2]
    assert len(q.lanes.deepest()) == 3


@pytest.mark.parametrize("types", [-1, 5, 2**70, 1.5, float("nan"), True, object(), "pending", b"pending",
                                   {"pending": 1}])
def test_recent_events_refuses_types_that_are_not_a_list_of_types(q, r, types):
    r.config_resetstat()
    with pytest.raises(ArgumentError, match="types"):
        q.recent_events(10, types=types)
    assert commands(r) == 0


@pytest.mark.parametrize("item", [{"payload": b"x", "delay": 60_000}, {"payload": b"x", "Lane": LANES[0]},
                                  {"payload": b"x", "unique": "k"}, {"payload": b"x", 1: 2}])
def test_enqueue_many_refuses_an_item_key_it_does_not_know(q, r, item):
    """A misspelt option ("delay" for delay_ms) was dropped without a word
    and the job admitted at once; now nothing is sent."""
    r.config_resetstat()
    with pytest.raises(ArgumentError, match="enqueue_many item takes"):
        q.enqueue_many([{"payload": b"ok"}, item])
    assert commands(r) == 0


def test_enqueue_many_still_takes_every_documented_key(q):
    [(_, state)] = q.enqueue_many([{"payload": b"x", "job_id": "JOB0KHTOWnGLuC", "lane": LANES[0], "delay_ms": 0,
                                    "priority": 5, "unique_key": "k", "unique_ttl_ms": 1000}])
    assert state == "enqueued"


@pytest.mark.parametrize("queues", ["cm", b"cm", None, 5, [None], ["cm"], [object()]])
def test_a_reaper_refuses_what_is_not_a_list_of_queues(r, queues):
    """Reaper("cm") iterated the name's letters and failed at its first pass
    (an AttributeError); Reaper(None) was a TypeError."""
    from echomq import Reaper

    with pytest.raises(ArgumentError, match="Reaper"):
        Reaper(queues)


@pytest.mark.parametrize("tasks", [None, 5, "settle", [5], [None]])
def test_a_reaper_refuses_tasks_that_are_not_callables(r, tasks):
    from echomq import Reaper

    with pytest.raises(ArgumentError, match="Reaper tasks"):
        Reaper([Queue("t", r)], tasks=tasks)


def test_a_reaper_of_good_queues_and_tasks_runs(r):
    from echomq import Reaper

    report = Reaper([Queue("t", r), ShardedQueue("s", r, shards=2)], tasks=[lambda: 1]).run_once()
    assert set(report) == {"t", "s", "<lambda>"}


@pytest.mark.parametrize("shards", [[], [1], {}, True, 1.0, 2.0, "2", None])
def test_a_sharded_queue_refuses_a_shard_count_that_is_not_an_int(r, shards):
    """A list was a TypeError from the names' cache; True and 1.0 hit the
    cached names of 1 and were taken."""
    ShardedQueue("t", r, shards=1)
    ShardedQueue("t", r, shards=2)  # both in the cache
    with pytest.raises(ArgumentError, match="shards"):
        ShardedQueue("t", r, shards=shards)


def test_a_lane_limit_of_0_is_refused_not_read_as_no_limit(q, r):
    """limit(lane, 0) reached the script as its "no limit" and every job of
    the lane was served; now it is refused, the lane untouched."""
    q.lanes.limit(LANES[2], 1)
    with pytest.raises(ArgumentError, match="pause"):
        q.lanes.limit(LANES[2], 0)
    assert q.lanes.info(LANES[2])["limit"] == 1
    assert len(q.claim_batch(10, lease_ms=10_000)) == 1 + 2 + 1  # the limited lane gives one
