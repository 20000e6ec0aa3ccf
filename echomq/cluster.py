"""What only a cluster needs: which node serves a key, a client for that one
node, each node's run_id, and the errors that mean "the topology is moving".

Every helper also takes a plain ``redis.Redis`` (one node serves every key),
so callers need not ask which kind of client they hold."""
from __future__ import annotations

import redis

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


# Replies after which a call is sent again through the cluster client, which
# follows redirections and refreshes its slot map: the call did not run here
# (MOVED, ASK, TRYAGAIN, CLUSTERDOWN, READONLY from a demoted primary).
_REROUTE = (
    redis.exceptions.MovedError,
    redis.exceptions.AskError,
    redis.exceptions.TryAgainError,
    redis.exceptions.ClusterDownError,
    redis.exceptions.ReadOnlyError,
)


def pipeline_by_node(client, commands: list[tuple[tuple, str]], fallback) -> list:
    """Send ``commands`` (each ``(args, first key)``) as one plain pipeline per
    node, all written before any is read; answers one reply per command,
    reply errors as exception objects (as ``execute(raise_on_error=False)``).

    redis-py's cluster pipeline resolves a routing policy, records metrics and
    builds a command object per call: on a claim/ack cycle that is several
    times the client CPU of a plain pipeline. Here each node's part goes over
    a connection of that node's own ``redis.Redis``, named by the client's
    slot map. Calls that one node could not run (a redirection, a node that
    went away or answered mid-failover) go to ``fallback(indices)``, which
    sends them through the cluster client: it follows MOVED/ASK and refreshes
    the slot map, so a failover is handled as before. (A call lost with its
    connection may have run; the scripts are fenced, as for the cluster
    pipeline, which sends such calls again too.)"""
    groups: dict[str, tuple] = {}
    redo: list[int] = []
    for i, (_, key) in enumerate(commands):
        try:
            node = client.get_node_from_key(key)
        except redis.exceptions.RedisClusterException:  # a slot not covered now
            redo.append(i)
            continue
        group = groups.get(node.name)
        if group is None:
            groups[node.name] = group = (node, [])
        group[1].append(i)
    out: list = [None] * len(commands)
    sent = []
    try:
        for node, idx in groups.values():
            r = node.redis_connection or client.get_redis_connection(node)
            try:
                conn = r.connection_pool.get_connection()
            except UNAVAILABLE:
                redo += idx
                continue
            sent.append((r, conn, idx))
            try:
                conn.send_packed_command(conn.pack_commands([commands[i][0] for i in idx]), check_health=False)
            except UNAVAILABLE:
                sent[-1] = (r, None, idx)  # send_packed_command disconnected it
                r.connection_pool.release(conn)
                redo += idx
        for k, (r, conn, idx) in enumerate(sent):
            if conn is None:
                continue
            for n, i in enumerate(idx):
                try:
                    reply = conn.read_response()
                except _REROUTE as exc:
                    reply = exc
                except redis.exceptions.ResponseError as exc:
                    out[i] = exc
                    continue
                except UNAVAILABLE:  # the rest are lost with the connection (LOADING, too, ends it)
                    conn.disconnect()  # never hand back a connection with replies unread
                    redo += idx[n:]
                    break
                if isinstance(reply, _REROUTE):
                    redo.append(i)
                else:
                    out[i] = reply
            r.connection_pool.release(conn)
            sent[k] = (r, None, idx)
    finally:
        for r, conn, _ in sent:  # only after an unexpected error: the replies were not all read
            if conn is not None:
                conn.disconnect()
                r.connection_pool.release(conn)
    if redo:
        redo.sort()
        for i, reply in zip(redo, fallback(redo)):
            out[i] = reply
    return out


def pipeline(client, commands: list[tuple[tuple, str]]) -> list:
    """Plain commands (each ``(args, key)``) in one round trip, replies in
    order, reply errors as exception objects: on a cluster one plain
    pipeline per node (:func:`pipeline_by_node`), else one pipeline."""
    def through_client(idx):
        pipe = client.pipeline(transaction=False)
        for i in idx:
            args, key = commands[i]
            opts = {"target_nodes": client.get_node_from_key(key)} if is_cluster(client) else {}
            pipe.execute_command(*args, **opts)
        return pipe.execute(raise_on_error=False)

    if not is_cluster(client):
        return through_client(range(len(commands)))
    return pipeline_by_node(client, commands, through_client)
