"""The sharded queue's per-node pipelines on a real 3-primary cluster: a
stale slot map (answered MOVED) or a node that cannot be reached is retried
through the cluster client, which finds the right node; and a consumer's
cycle costs the script calls per job of a plain queue."""
import threading

import pytest
from redis.cluster import ClusterNode

from echomq import Consumer, ShardedQueue, embedded
from echomq.cluster import pipeline_by_node
from echomq.sharded import NodeBatch


@pytest.fixture
def rc(valkey_cluster):
    client = valkey_cluster.client()
    client.flushall()
    yield client
    client.close()


def _point_slot_at(rc, key, node):
    slot = rc.keyslot(key)
    true = rc.nodes_manager.slots_cache[slot][0]
    rc.nodes_manager.slots_cache[slot] = [node]
    return true


def test_a_stale_slot_map_is_answered_moved_and_followed(rc):
    q = ShardedQueue("moved", rc, shards=3)
    jid, _ = q.shards[0].enqueue(b"x")
    key = q.shards[0].k_meta
    wrong = next(n for n in rc.get_primaries() if n.name != rc.get_node_from_key(key).name)
    true = _point_slot_at(rc, key, wrong)

    batch = NodeBatch(rc)
    q.shards[0].add_claim(batch, 10, lease_ms=60_000)
    batch.add("counts", (q.shards[1].k_pending, q.shards[1].k_active, q.shards[1].k_schedule, q.shards[1].k_dead,
                         q.shards[1].k_meta, q.shards[1].k_lanes, q.shards[1].k_ring), (q.shards[1].prefix,))
    claim, counts = batch.run()
    assert [j.id for j in q.shards[0].parse_claim(claim)] == [jid]
    assert int(counts[0]) == 0  # the other node's call, in the same round, answered as usual
    assert rc.get_node_from_key(key).name == true.name  # the cluster client corrected its map


def test_an_unreachable_node_in_the_map_is_retried_through_the_cluster_client(rc):
    q = ShardedQueue("gone", rc, shards=3)
    jid, _ = q.shards[2].enqueue(b"x")
    dead = ClusterNode("127.0.0.1", embedded.cluster_port())  # nothing listens there
    _point_slot_at(rc, q.shards[2].k_meta, dead)
    sent_back = []

    def fallback(idx):
        sent_back.extend(idx)
        return [rc.execute_command(*args) for args, _ in (commands[i] for i in idx)]

    commands = [(("HGET", q.shards[2].k_meta, "completed"), q.shards[2].k_meta),
                (("EXISTS", q.shards[2].job_key(jid)), q.shards[2].job_key(jid)),
                (("EXISTS", q.shards[0].job_key(jid)), q.shards[0].job_key(jid))]
    replies = pipeline_by_node(rc, commands, fallback)
    assert sent_back == [0, 1] and replies == [None, 1, 0]


def test_a_consumer_cycle_costs_the_calls_per_job_of_a_plain_queue(rc):
    """A plain queue's cycle is one complete_batch and one claim: ~0.06 calls
    per job at prefetch 64. A sharded consumer claims from one shard per
    cycle and stays there while it answers full, so its acks and its claim
    share a shard; split claims and acks cost 0.09-0.10."""
    n = 3000
    q = ShardedQueue("cost", rc, shards=6)
    for _ in range(n // 1000):
        q.enqueue_many([b"x"] * 1000)
    primaries = [rc.get_redis_connection(p) for p in rc.get_primaries()]
    for r in primaries:
        r.config_resetstat()
    done = 0
    lock = threading.Lock()

    def handler(job):
        nonlocal done
        with lock:
            done += 1
            if done == n:
                c.stop()

    c = Consumer(q, handler, concurrency=4, prefetch=64)
    c.run()
    assert q.counts()["completed"] == n
    calls = sum(r.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0) for r in primaries)
    assert calls / n < 0.075, calls / n
