"""ShardedQueue on a real 3-primary, 3-replica Valkey Cluster: placement,
the Queue API across shards, no starving shard, and the parked consumer's
cost and wake-up latency (measured in a separate process, figures printed)."""
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from echomq import Consumer, ShardedQueue, ids, keyspace
from echomq.cluster import node_of
from echomq.errors import InvalidName
from echomq.sharded import shard_names

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def rc(valkey_cluster):
    client = valkey_cluster.client()
    client.flushall()
    yield client
    client.close()


def test_the_local_cluster_has_three_primaries_each_with_a_synced_replica(valkey_cluster):
    roles = Counter(valkey_cluster.roles().values())
    assert roles == {"master": 3, "slave": 3}


def test_shards_spread_evenly_over_the_primaries(rc):
    q = ShardedQueue("spread", rc, shards=6)
    nodes = Counter(node_of(rc, s.k_meta) for s in q.shards)
    assert sorted(nodes.values()) == [2, 2, 2]
    assert len({keyspace.slot(s.k_meta) for s in q.shards}) == 6
    assert shard_names("spread", 6) == tuple(s.name for s in q.shards)  # every process agrees


def test_bad_shard_counts_are_refused():
    for bad in (0, -1, 1.5, True, 5000):
        with pytest.raises(InvalidName):
            shard_names("x", bad)


def test_the_queue_api_across_shards(rc):
    q = ShardedQueue("api", rc, shards=4)
    lanes = [ids.mint("PLR") for _ in range(8)]
    jobs = {}
    for n in range(5):
        for lane in lanes:
            jid, status = q.enqueue(f"{lane}:{n}".encode(), lane=lane)
            assert status == "enqueued"
            jobs[jid] = lane
    # the same id and lane again is a duplicate: it reaches the same shard
    some = next(iter(jobs))
    assert q.enqueue(b"again", job_id=some, lane=jobs[some]) == (some, "duplicate")
    answers = q.enqueue_many([b"flat", {"payload": b"laned", "lane": lanes[0]}])
    assert [s for _, s in answers] == ["enqueued", "enqueued"]
    assert len({q.shard_index(lane=lane) for lane in lanes}) > 1
    assert q.counts()["pending"] + q.counts()["lanes"] >= 1
    seen = []
    while True:
        got = q.claim_batch(7, lease_ms=60_000)
        if not got:
            break
        seen += got
        assert q.extend_many([(j.id, j.attempts) for j in got], lease_ms=60_000)[0] > 0
    assert len(seen) == 42
    # one lane's jobs stay in order (one shard, the lane's own sorted set)
    for lane in lanes:
        mine = [j.payload.decode() for j in seen if j.lane == lane and j.payload.startswith(lane.encode())]
        assert mine == [f"{lane}:{n}" for n in range(5)]
    a, b, c, *rest = seen
    assert q.retry(a.id, a.attempts, max_attempts=1, error="boom") == "dead"
    assert q.counts()["dead"] == 1 and q.dead_jobs()[0]["id"] == a.id
    q.requeue_dead(a.id)
    assert q.job(a.id)["state"] == "pending"
    assert q.release(b.id, b.attempts)
    assert q.remove(c.id) == "active"
    assert q.complete_many([(j.id, j.attempts) for j in rest]) == [True] * len(rest)
    # ids this process never claimed are found by asking the shards
    fresh = ShardedQueue("api", rc, shards=4)
    again = fresh.claim_batch(10, lease_ms=60_000)
    assert sorted(j.id for j in again) == sorted([a.id, b.id])
    assert ShardedQueue("api", rc, shards=4).complete_many([(j.id, j.attempts) for j in again]) == [True, True]
    counts = q.counts()
    assert (counts["pending"], counts["active"], counts["dead"], counts["completed"]) == (0, 0, 0, 41)
    assert sum(r["counts"]["completed"] for r in q.shard_counts()) == 41


def test_maintenance_runs_on_every_shard(rc):
    q = ShardedQueue("maint", rc, shards=3)
    per_shard = Counter()
    while len(per_shard) < 3 or min(per_shard.values()) < 3:  # three lanes on each shard
        lane = ids.mint("PLR")
        if per_shard[q.shard_index(lane=lane)] < 3:
            per_shard[q.shard_index(lane=lane)] += 1
            q.enqueue(b"x", lane=lane, delay_ms=1)
    assert q.counts()["scheduled"] == 9
    promoted = 0
    deadline = time.monotonic() + 5
    while promoted < 9 and time.monotonic() < deadline:  # due after 1 ms of server time
        promoted += q.promote()
    assert promoted == 9
    got = q.claim_batch(9, lease_ms=100)
    assert len(got) == 9 and len({j.queue for j in got}) == 3
    q.pause()
    assert q.counts()["paused"] and q.claim_batch(1) == []
    q.resume()
    reaped = 0
    deadline = time.monotonic() + 5
    while reaped < 9 and time.monotonic() < deadline:  # leases of 100 ms run out on the server clock
        reaped += q.reap(max_stalls=5)
    assert reaped == 9
    again = q.claim_batch(9, lease_ms=60_000)
    assert sorted(j.id for j in again) == sorted(j.id for j in got) and {j.attempts for j in again} == {2}


def test_a_deep_shard_does_not_starve_the_others(rc):
    q = ShardedQueue("fair", rc, shards=4)
    deep = ids.mint("PLR")
    q.enqueue_many([{"payload": b"deep", "lane": deep} for _ in range(200)])
    other = next(lane for lane in iter(lambda: ids.mint("PLR"), None)
                 if q.shard_index(lane=lane) != q.shard_index(lane=deep))
    q.enqueue(b"other", lane=other)
    order = []
    for _ in range(8):
        order += [j.payload for j in q.claim_batch(1, lease_ms=60_000)]
    assert b"other" in order[:4], order


def test_a_consumer_leaves_a_busy_shard_for_another_within_a_few_cycles(rc):
    """A consumer stays on a shard that answers full for at most
    STICKY_CYCLES cycles, then serves the next shard with work."""
    from echomq.sharded import STICKY_CYCLES

    q = ShardedQueue("sticky", rc, shards=4)
    ids_on = lambda shard: (j for j in iter(lambda: ids.mint("JOB"), None) if q.shard_index(job_id=j) == shard)
    deep = ids_on(0)
    q.enqueue_many([{"payload": b"deep", "job_id": next(deep)} for _ in range(100)])
    q.enqueue(b"other", job_id=next(ids_on(1)))
    q.turns.cursor = 0  # start at the deep shard (a process starts at a random one)
    order = []

    def handler(job):
        order.append(job.payload)
        if len(order) == 12:
            c.stop()

    c = Consumer(q, handler, concurrency=1, prefetch=0)  # one job per cycle
    c.run()
    assert b"other" in order[:STICKY_CYCLES + 1], order


IDLE_CONSUMER = textwrap.dedent("""
    import sys, time, threading
    from echomq import Consumer, ShardedQueue
    from redis.cluster import RedisCluster
    q = ShardedQueue("idle", RedisCluster.from_url(sys.argv[1]), shards=16)
    client = RedisCluster.from_url(sys.argv[1])
    def handler(job):
        client.rpush("started", f"{job.payload.decode()} {time.time() * 1000:.3f}")
    c = Consumer(q, handler, concurrency=2, beat_ms=1000)
    print("ready", flush=True)
    c.run()
""")


def test_an_idle_sharded_consumer_is_cheap_and_wakes_at_once(valkey_cluster, rc, capsys):
    q = ShardedQueue("idle", rc, shards=16)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-c", IDLE_CONSUMER, valkey_cluster.url], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        q.enqueue(f"{time.time() * 1000:.3f}".encode(), lane=ids.mint("PLR"))
        assert rc.blpop(["started"], timeout=10) is not None  # the loop is warm

        def cpu_seconds():
            fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

        before = cpu_seconds()
        time.sleep(5)  # the measurement window itself, not a wait for an event
        idle_cpu = cpu_seconds() - before

        latencies = []
        for _ in range(100):
            q.enqueue(f"{time.time() * 1000:.3f}".encode(), lane=ids.mint("PLR"))
            _, row = rc.blpop(["started"], timeout=10)
            sent, started = map(float, row.decode().split())
            latencies.append(started - sent)
            time.sleep(0.02)  # idle between jobs: the consumer parks again
        latencies.sort()
        p50, p99 = latencies[49], latencies[98]
        with capsys.disabled():
            print(f"\nidle consumer of a 16-shard queue on 3 primaries: {idle_cpu:.3f}s CPU in 5s; "
                  f"enqueue->handler start p50 {p50:.2f} ms, p99 {p99:.2f} ms (shared 2-core machine)")
        assert idle_cpu < 0.2
        assert q.counts()["completed"] == 101
    finally:
        proc.terminate()
        proc.wait(30)


def test_a_park_does_not_stall_on_a_blpop_that_reached_its_node_after_the_unblock(rc):
    """A busy consumer ends its parked BLPOPs with CLIENT UNBLOCK, sent on
    another connection, so a node may run the UNBLOCK first (it answers 0)
    and the BLPOP after it, which then blocks for its whole timeout. Here one
    shard's BLPOP is held back 50 ms to make that happen every time: neither
    the release nor the next wait may stall on it."""
    q = ShardedQueue("late", rc, shards=4)
    parking = q.parking(ids.mint("CSR"))
    for i in range(len(q.shards)):
        q.turns.answered(i, 0, 1)  # nothing hot: the waits park
    conn = parking._conn(3)[2]
    send = conn.send_command

    def late_blpop(*args, **kw):
        if args[0] == "BLPOP":
            threading.Timer(0.05, send, args, kw).start()
        else:
            send(*args, **kw)

    conn.send_command = late_blpop
    try:
        threading.Timer(0.01, parking.ring).start()
        t0 = time.perf_counter()
        assert parking.wait(5.0) == []  # the doorbell
        parking.release()  # the consumer got busy: UNBLOCK every parked call, shard 3's before its BLPOP
        first = time.perf_counter() - t0
        time.sleep(0.2)  # the held-back BLPOP has reached the node and blocks there
        conn.send_command = send
        threading.Timer(0.05, lambda: q.enqueue(b"x", lane=ids.mint("PLR"))).start()
        t0 = time.perf_counter()
        assert parking.wait(5.0)  # the token's shard, not a stall on shard 3
        second = time.perf_counter() - t0
    finally:
        parking.close()
    assert first < 1.0 and second < 1.0, (first, second)


def test_parked_calls_wait_between_wake_ups_but_take_no_token_once_released(rc):
    """Between two waits the other shards' BLPOPs stay parked (a consumer
    woken for each job of a trickle sends one BLPOP per job, not one per
    shard), so a token pushed then is taken and answers the next wait at
    once. Once the consumer is busy (release), a token stays on its wake
    list for a consumer with room."""
    q = ShardedQueue("lazy", rc, shards=4)
    parking = q.parking(ids.mint("CSR"))
    for i in range(len(q.shards)):
        q.turns.answered(i, 0, 1)  # nothing hot: the waits park
    lanes = {q.shard_index(lane=lane): lane for lane in (ids.mint("PLR") for _ in range(64))}
    try:
        threading.Timer(0.05, lambda: q.enqueue(b"a", lane=lanes[0])).start()
        assert parking.wait(5.0) == [0]
        q.turns.answered(0, 0, 1)
        q.enqueue(b"b", lane=lanes[1])  # shard 1's call is still parked: it takes the token
        assert rc.llen(q.shards[1].k_wake) == 0
        assert parking.wait(5.0) == [1]  # at once
        q.turns.answered(1, 0, 1)
        parking.release()
        q.enqueue(b"c", lane=lanes[2])
        time.sleep(0.1)  # the window in which a parked call would have taken it
        assert rc.llen(q.shards[2].k_wake) == 1  # left for a consumer with room
        assert parking.wait(5.0) == [2]  # and this one finds it when it waits again
    finally:
        parking.close()
