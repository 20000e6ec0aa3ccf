"""What only a cluster needs: which node serves a key, a client for that one
node, each node's run_id, and the errors that mean "the topology is moving".

Every helper also takes a plain ``redis.Redis`` (one node serves every key),
so callers need not ask which kind of client they hold."""
from __future__ import annotations

from .errors import UNAVAILABLE

# Errors a failover or a restart answers for a while: retry after a pause.
# (A primary that died: connection refused; slots without a serving node:
# CLUSTERDOWN / SlotNotCovered; a migrating slot: TRYAGAIN.) The one table
# lives in errors.py: the core's Unavailable plus the raw redis-py classes.
TRANSIENT_ERRORS = UNAVAILABLE


def is_cluster(client) -> bool:
    return hasattr(client, "get_node_from_key")


def _name(kwargs) -> str:
    return f"{kwargs.get('host', 'localhost')}:{kwargs.get('port', 6379)}"


def node_client(client, key: str):
    """(``host:port``, a ``redis.Redis`` for the primary that serves ``key``)."""
    if not is_cluster(client):
        return _name(client.connection_pool.connection_kwargs), client
    node = client.get_node_from_key(key)
    return node.name, node.redis_connection or client.get_redis_connection(node)


def node_of(client, key: str) -> str:
    """``host:port`` of the primary serving ``key`` (for the dashboard)."""
    return node_client(client, key)[0]


def run_ids(client) -> dict[str, str]:
    """{``host:port``: run_id} of every primary. A run_id changes when the
    server restarts, and a failover puts a different server (the promoted
    replica, its own run_id) behind the same slots, so a changed run_id
    means "writes may have been lost here"."""
    if not is_cluster(client):
        return {_name(client.connection_pool.connection_kwargs): client.info("server")["run_id"]}
    out = {}
    for node in client.get_primaries():
        r = node.redis_connection or client.get_redis_connection(node)
        out[node.name] = r.info("server")["run_id"]
    return out
