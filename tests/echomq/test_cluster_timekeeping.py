"""Issue 21 on the local 3+3 Valkey Cluster (``valkey_cluster``): every new
script runs in one slot (a cross-slot key would be refused), a plain Queue
and a ShardedQueue schedule, prioritise, rate-limit and deduplicate there,
a sharded queue's queue-wide limit is split over its shards, a drain waits
for the windows, and a unique job's id and key meet on one shard."""
import pytest

from echomq import ArgumentError, Queue, Reaper, ShardedQueue, ids
from echomq.cluster import node_of
from echomq.schedules import tick_job_id
from echomq.testing import drain


@pytest.fixture
def rc(valkey_cluster):
    client = valkey_cluster.client()
    client.flushall()
    yield client
    client.close()


def make_due(q, client, name):
    cursor = (q.server_time_ms() // 1000 - 3) * 1000
    client.hset(f"{q.prefix}sched:{name}", "next", cursor)
    client.zadd(f"{q.prefix}schedules", {name: cursor})
    return cursor


def test_a_queue_on_the_cluster_does_it_all_in_one_slot(rc):
    q = Queue("cl21", rc)
    lane = ids.mint("PLR")
    # priorities
    low, _ = q.enqueue(b"low", lane=lane, priority=-5)
    high, _ = q.enqueue(b"high", lane=lane, priority=5)
    # unique
    u, _ = q.enqueue(b"u", unique_key="once", unique_ttl_ms=60_000)
    assert q.enqueue(b"u2", unique_key="once") == (u, "duplicate")
    # rate limit (the queue's and a lane's)
    q.set_rate_limit(2, 60_000)
    q.lanes.set_rate(lane, 5, 60_000)
    got = q.claim_batch(10, lease_ms=60_000)
    assert [j.id for j in got] == [u, high] and got.queue_wait_ms > 0
    assert q.rate_limit()["claimed"] == 2
    q.complete_many([(j.id, j.attempts) for j in got])
    assert not rc.exists(f"{q.prefix}unique:once")
    q.set_rate_limit(None)
    assert q.claim(lease_ms=60_000).id == low
    # schedules: set, fire through a Reaper pass, pause, remove
    assert q.schedule("beat", every_ms=1000, payload=b"b", lane=lane) == "created"
    cursor = make_due(q, rc, "beat")
    assert Reaper([q]).run_once()["cl21"]["fired"] == 1
    last = q.schedules()[0]["last_ms"]
    assert last >= cursor and q.find(tick_job_id(q.schedules()[0]["seq"], last))["state"] == "pending"
    assert q.pause_schedule("beat") and q.schedules()[0]["paused"]
    assert q.unschedule("beat") and q.schedules() == []


def test_a_sharded_queue_on_the_cluster(rc):
    q = ShardedQueue("sh21", rc, shards=6)
    assert len({node_of(rc, s.k_meta) for s in q.shards}) == 3
    # unique without a lane: placed by the key, so duplicates meet
    first, _ = q.enqueue(b"a", unique_key="k")
    assert q.enqueue(b"b", unique_key="k") == (first, "duplicate")
    assert q.enqueue_many([{"payload": b"c", "unique_key": "k"}]) == [(first, "duplicate")]
    # priorities within a lane, on the lane's shard
    lane = ids.mint("PLR")
    order = [q.enqueue(str(p).encode(), lane=lane, priority=p)[0] for p in (1, 9, 5)]
    shard = q.shard_for(lane=lane)
    laned = [j.id for j in shard.claim_batch(10, lease_ms=60_000) if j.lane == lane]  # (flat jobs go first)
    assert laned == [order[1], order[2], order[0]]
    # a queue-wide limit split over the shards: never more than the limit in all
    q.set_rate_limit(12, 60_000)
    assert [s.rate_limit()["jobs"] for s in q.shards] == [2] * 6 and q.rate_limit()["jobs"] == 12
    q.enqueue_many([b"x"] * 60)
    claimed = sum(len(s.claim_batch(100, lease_ms=60_000)) for s in q.shards)
    assert claimed == 12
    q.set_rate_limit(None)
    assert q.rate_limit() is None
    # schedules: each lives on one shard, which fires its ticks
    assert q.schedule("beat", every_ms=1000, payload=b"b") == "created"
    holders = [s for s in q.shards if s.schedules()]
    assert len(holders) == 1
    make_due(holders[0], rc, "beat")
    assert q.fire_schedules() == 1 and q.fire_schedules() == 0
    jid = q.schedules()[0]["last_job"]
    assert q.find(jid)["state"] == "pending" and q.locate(jid) is holders[0]
    assert q.pause_schedule("beat") and q.resume_schedule("beat") and q.unschedule("beat")
    assert q.schedules() == []


def test_a_sharded_drain_on_the_cluster_runs_every_ready_job(rc):
    q = ShardedQueue("dr21", rc, shards=6)
    lanes = [ids.mint("PLR") for _ in range(5)]
    q.enqueue_many([{"payload": b"x", "lane": lanes[i % 5], "priority": i % 3} for i in range(40)] + [b"f"] * 20)
    stats = drain(q, lambda job: None, concurrency=4, beat_ms=600_000)  # a park would hang the test
    assert stats["completed"] == 60 and q.counts()["pending"] == 0


def test_a_sharded_unique_job_on_the_cluster_is_one_job_of_its_id_and_its_key(rc):
    """Without a lane the key's shard holds the job, and its id is one of that
    shard: the id stays one job, the key one holder; an id of another shard
    with that key is refused, nothing written."""
    q = ShardedQueue("un21", rc, shards=6)
    home = q.shard_index(unique_key="order:7")
    jid, status = q.enqueue(b"a", unique_key="order:7")
    assert status == "enqueued" and q.shard_index(job_id=jid) == home
    other = next(k for k in (f"order:{n}" for n in range(100)) if q.shard_index(unique_key=k) != home)
    before = sorted(q.keys())
    with pytest.raises(ArgumentError, match="mint_job_id"):
        q.enqueue(b"b", job_id=jid, unique_key=other)
    assert sorted(q.keys()) == before
    assert q.enqueue(b"c", job_id=jid) == (jid, "duplicate")
    assert q.enqueue(b"d", unique_key="order:7") == (jid, "duplicate")
    assert q.enqueue(b"e", job_id=q.mint_job_id(unique_key="order:7"), unique_key="order:7") == (jid, "duplicate")
    assert [s.name for s in q.shards if rc.exists(s.job_key(jid))] == [q.shards[home].name]
    assert q.counts()["pending"] == 1 and q.locate(jid) is q.shards[home]


def test_a_rate_limited_sharded_drain_on_the_cluster_waits_for_the_windows(rc):
    """A queue-wide limit split over 6 shards on 3 primaries and lanes that
    cool: the drain runs every job, each lane at most 2 per window."""
    q = ShardedQueue("rl21", rc, shards=6)
    lanes = [ids.mint("PLR") for _ in range(4)]
    for lane in lanes:
        q.lanes.set_rate(lane, 2, 200)
    q.set_rate_limit(12, 200)
    q.enqueue_many([{"payload": b"x", "lane": lanes[i % 4]} for i in range(16)] + [b"f"] * 24)
    stats = drain(q, lambda job: None, concurrency=4, beat_ms=600_000)  # a park would hang the test
    assert stats["completed"] == 40 and q.counts()["pending"] == 0
    for lane in lanes:
        claimed = sorted(rec["claimed"] for rec in q.completed_jobs(100) if rec["lane"] == lane)
        assert len(claimed) == 4 and claimed[2] - claimed[0] >= 200
    with pytest.raises(ArgumentError):
        q.set_rate_limit(1, 10**10)  # 6 x 10^10 ms per shard: past a year
    assert [s.rate_limit()["jobs"] for s in q.shards] == [2] * 6


def test_a_sharded_schedule_moved_to_another_lanes_shard_keeps_one_copy_on_the_cluster(rc):
    """A new lane moves a schedule to that lane's shard: the declaration's
    supersede calls go to every other shard, on every node, in one batch."""
    q = ShardedQueue("mv21", rc, shards=6)
    lanes = {}
    while len(lanes) < 3:
        lane = ids.mint("PLR")
        lanes.setdefault(q.shard_index(lane=lane), lane)
    assert len({node_of(rc, q.shards[i].k_meta) for i in lanes}) >= 2
    for i, lane in lanes.items():
        assert q.schedule("beat", every_ms=1000, lane=lane) == "created"
        assert [(j, row["lane"]) for j, s in enumerate(q.shards) for row in s.schedules()] == [(i, lane)]
    assert q.unschedule("beat") and q.schedules() == []
