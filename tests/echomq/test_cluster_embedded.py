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


def test_cluster_ports_and_their_bus_ports_are_free_and_below_the_ephemeral_range():
    low = embedded._ephemeral_low()
    for _ in range(20):
        port = embedded.cluster_port()
        assert port + 10000 < low and embedded._bindable(port) and embedded._bindable(port + 10000)


@pytest.mark.slow
def test_a_fresh_node_whose_port_was_taken_moves_to_another(monkeypatch):
    """Between choosing a port and starting its node, another process may
    bind it: the node starts on another port, and the cluster forms."""
    import socket

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    busy = taken.getsockname()[1]
    chosen = iter([busy])
    real = embedded.cluster_port
    monkeypatch.setattr(embedded, "cluster_port", lambda: next(chosen, None) or real())
    cluster = embedded.LocalCluster(tempfile.mkdtemp(prefix="emq-moved-"), primaries=1, replicas=1)
    try:
        assert cluster.ports[0] == busy
        cluster.start()
        assert busy not in cluster.ports and len(set(cluster.ports)) == 2
        assert not cluster.node_dir(busy).exists()
        client = cluster.client()
        assert client.set("k", "v") and len(client.get_replicas()) == 1
        client.close()
    finally:
        cluster.stop(remove=True)
        taken.close()


def test_a_cluster_given_its_ports_does_not_move_them():
    import socket

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))  # bound, not listening: connections to it are refused at once
    cluster = embedded.LocalCluster(tempfile.mkdtemp(prefix="emq-given-"), primaries=1, replicas=0,
                                    ports=[taken.getsockname()[1]])
    try:
        with pytest.raises(embedded.EmbeddedValkeyError, match="exited"):
            cluster.start()
        assert cluster.ports == [taken.getsockname()[1]]
        assert all(p.poll() is not None for p in cluster.procs.values())
    finally:
        cluster.stop(remove=True)
        taken.close()


def test_a_cluster_that_fails_to_start_leaves_no_node_running():
    """One node cannot start: the ones started before it are stopped, not
    left running with nobody to stop them."""
    import socket

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    ports = [embedded.cluster_port(), taken.getsockname()[1]]
    cluster = embedded.LocalCluster(tempfile.mkdtemp(prefix="emq-half-"), primaries=1, replicas=1, ports=ports)
    try:
        with pytest.raises(embedded.EmbeddedValkeyError):
            cluster.start()
        assert len(cluster.procs) == 2 and all(p.poll() is not None for p in cluster.procs.values())
        assert not embedded._answers(embedded.server_url(ports[0], cluster.password))
    finally:
        cluster.stop(remove=True)
        taken.close()
