"""The install's embedded local cluster: one call starts 3 primaries and 3
replicas (daemons, AOF on); a second call finds it running; stop_cluster
shuts it down and a later call brings the same nodes back with their data."""
import json
import shutil
import stat
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

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
        assert len(state["ports"]) == 6 and urlsplit(url).port == state["ports"][0]
        client = RedisCluster.from_url(url)
        assert len(client.get_primaries()) == 3 and len(client.get_replicas()) == 3
        for port in state["ports"]:
            info = redis.Redis(port=port, password=urlsplit(url).password).config_get("appendonly")
            assert info == {"appendonly": "yes"}
        client.set("kept", "yes")
        client.wait(1, 2000)  # AOF on the primary (fsync on shutdown), copy on its replica
        assert embedded.ensure_cluster(directory, primaries=3) == url  # already running
        client.close()

        assert embedded.stop_cluster(directory) is True
        assert not any(embedded._answers(embedded.server_url(p, urlsplit(url).password)) for p in state["ports"])
        assert embedded.ensure_cluster(directory, primaries=3) == url  # same nodes, from nodes.conf
        client = RedisCluster.from_url(url)
        assert client.get("kept") == b"yes"
        client.close()
    finally:
        embedded.stop_cluster(directory)
        shutil.rmtree(directory, ignore_errors=True)
    assert embedded.stop_cluster(directory) is False


def test_the_local_cluster_asks_for_its_password(valkey_cluster):
    """Every node refuses a client without the password kept owner-only in
    the cluster's directory; replicas give it to their primaries (they are
    in sync, or the fixture would not have started)."""
    for port in valkey_cluster.ports:
        with pytest.raises(redis.exceptions.AuthenticationError):
            redis.Redis(port=port).ping()
    secret = (valkey_cluster.directory / embedded.PASSWORD_FILE).read_text().strip()
    assert len(secret) >= 32 and all(urlsplit(u).password == secret for u in valkey_cluster.urls)
    assert stat.S_IMODE((valkey_cluster.directory / embedded.PASSWORD_FILE).stat().st_mode) == 0o600
    assert stat.S_IMODE(valkey_cluster.directory.stat().st_mode) == 0o700
    client = valkey_cluster.client()
    assert client.ping() and len(client.get_replicas()) == 3
    client.close()
