"""The Django side on a cluster: the settings make every client a
RedisCluster and `cm` a ShardedQueue, and the dashboard shows a sharded
queue as one queue with a per-shard breakdown and the node of each shard."""
import pytest
from redis.cluster import RedisCluster

from echomq import ShardedQueue, ids
from echomq.contrib import django as emq_django
from echomq.contrib.django import get_client, get_queue


@pytest.fixture
def on_cluster(valkey_cluster, settings):
    settings.ECHOMQ = {"URL": valkey_cluster.url, "CLUSTER": True, "QUEUES": {"cm": {"shards": 6}, "cm.settle": {}}}
    emq_django.reset_client()
    client = get_client()
    client.flushall()
    yield client
    emq_django.reset_client()


def test_cluster_settings_make_cluster_clients_and_sharded_queues(on_cluster):
    assert isinstance(on_cluster, RedisCluster)
    cm = get_queue("cm")
    assert isinstance(cm, ShardedQueue) and len(cm.shards) == 6
    assert type(get_queue("cm.settle")).__name__ == "Queue"
    jid, status = cm.enqueue(b"x", lane=ids.mint("PLR"))
    assert status == "enqueued" and cm.job(jid)["state"] == "pending"


@pytest.mark.django_db
def test_the_dashboard_shows_a_sharded_queue_as_one_with_its_shards(on_cluster, admin_client, valkey_cluster):
    cm = get_queue("cm")
    for _ in range(12):
        cm.enqueue(b"x", lane=ids.mint("PLR"))
    page = admin_client.get("/admin/queues/")
    assert page.status_code == 200
    body = page.content.decode()
    assert "/admin/queues/cm/" in body
    assert not any(f"/admin/queues/{s.name}/" in body for s in cm.shards)  # shards are not separate queues
    page = admin_client.get("/admin/queues/cm/")
    assert page.status_code == 200
    body = page.content.decode()
    assert 'id="shards"' in body
    assert all(s.name in body for s in cm.shards)
    nodes = {f"127.0.0.1:{p}" for p in valkey_cluster.primary_ports()}
    assert sum(1 for n in nodes if n in body) == 3
    assert 'id="count-lanes">12<' in body


@pytest.mark.django_db
def test_a_plain_queue_page_has_no_shard_table(on_cluster, admin_client):
    get_queue("cm.settle").enqueue(b"x")
    body = admin_client.get("/admin/queues/cm.settle/").content.decode()
    assert 'id="shards"' not in body
