"""The bundle on a (one-node) Valkey cluster through redis-py's RedisCluster:
the cluster refuses any script whose declared keys span slots (CROSSSLOT), so
this proves every transition's keys share the queue's hash slot."""
import time

import pytest
import redis
from redis.cluster import RedisCluster

from echomq import Queue, embedded, ids

from ..conftest import Server


class ClusterServer(Server):
    def __init__(self):
        # A cluster node also listens on port + 10000 (the cluster bus): a
        # port whose bus port is free too.
        self._port = embedded.cluster_port()
        super().__init__()

    def start(self):
        self.port = self._port
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc = embedded.start_server(self.dir, self.port, appendonly=False,
                                          extra=("--cluster-enabled", "yes",
                                                 "--cluster-config-file", str(self.dir / "nodes.conf")))
        embedded.wait_ready(self.url, proc=self.proc)
        c = redis.Redis(port=self.port)
        c.execute_command("CLUSTER", "ADDSLOTSRANGE", 0, 16383)
        deadline = time.monotonic() + 30
        while b"cluster_state:ok" not in c.execute_command("CLUSTER", "INFO"):
            if time.monotonic() > deadline:
                raise RuntimeError("the one-node cluster did not reach cluster_state:ok")
            time.sleep(0.05)


@pytest.fixture(scope="module")
def cluster():
    server = ClusterServer()
    client = RedisCluster(host="127.0.0.1", port=server.port)
    yield client
    client.close()
    server.stop()


def test_every_transition_runs_on_a_cluster(cluster):
    q = Queue("clustered", cluster)
    lane = ids.mint("PLR")
    jid, _ = q.enqueue(b"x", lane=lane)
    q.enqueue_many([b"a", {"payload": b"b", "lane": lane}])
    q.enqueue(b"later", delay_ms=60_000)
    jobs = q.claim_batch(3, lease_ms=60_000)
    assert len(jobs) == 3
    a, b, c = jobs
    assert q.extend(a.id, a.attempts, lease_ms=60_000) > 0
    assert q.complete_many([(a.id, a.attempts)]) == [True]
    assert q.retry(b.id, b.attempts, max_attempts=1, error="x") == "dead"
    q.requeue_dead(b.id)
    assert q.release(c.id, c.attempts)
    q.lanes.limit(lane, 1)
    q.lanes.pause(lane)
    q.lanes.resume(lane)
    q.pause()
    q.resume()
    cluster.zadd(q.k_schedule, {q.scheduled_jobs()[0]["id"]: 0})
    assert q.promote() == 1
    assert q.reap() == 0
    assert q.remove(jid) in ("pending", "active")
    counts = q.counts()
    assert (counts["pending"], counts["active"], counts["completed"]) == (2, 0, 1)
