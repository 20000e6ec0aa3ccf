"""The install's embedded local cluster: one call starts 3 primaries and 3
replicas (daemons, AOF on); a second call finds it running; stop_cluster
shuts it down and a later call brings the same nodes back with their data."""
import json
import shutil
import tempfile
from pathlib import Path

import pytest
import redis
from redis.cluster import RedisCluster

from echomq import embedded


@pytest.mark.slow
def test_ensure_cluster_starts_finds_stops_and_restarts_with_the_data():
    directory = Path(tempfile.mkdtemp(prefix="emq-install-cluster-"))
    try:
        url = embedded.ensure_cluster(directory, primaries=3)
        state = json.loads((directory / embedded.CLUSTER_STATE).read_text())
        assert len(state["ports"]) == 6 and state["url"] == url
        client = RedisCluster.from_url(url)
        assert len(client.get_primaries()) == 3 and len(client.get_replicas()) == 3
        for port in state["ports"]:
            info = redis.Redis(port=port).config_get("appendonly")
            assert info == {"appendonly": "yes"}
        client.set("kept", "yes")
        client.wait(1, 2000)  # AOF on the primary (fsync on shutdown), copy on its replica
        assert embedded.ensure_cluster(directory, primaries=3) == url  # already running
        client.close()

        assert embedded.stop_cluster(directory) is True
        assert not any(embedded._answers(f"redis://127.0.0.1:{p}/0") for p in state["ports"])
        assert embedded.ensure_cluster(directory, primaries=3) == url  # same nodes, from nodes.conf
        client = RedisCluster.from_url(url)
        assert client.get("kept") == b"yes"
        client.close()
    finally:
        embedded.stop_cluster(directory)
        shutil.rmtree(directory, ignore_errors=True)
    assert embedded.stop_cluster(directory) is False
