"""Parking: how an idle consumer of a sharded queue waits for work.

``BLPOP`` cannot span slots, so an idle consumer sends one ``BLPOP <shard
wake list>`` per shard on its own connection, all at once, and waits in
``select()`` for the first answer (or its own doorbell, a local socket
pair); the still-blocked calls are ended with ``CLIENT UNBLOCK`` so no other
wake token is taken while the consumer is busy. It answers the calls of
:mod:`echomq.parking`.
"""
from __future__ import annotations

import logging
import selectors
import socket

from ..cluster import node_client
from ..errors import UNAVAILABLE, Unavailable

log = logging.getLogger(__name__)


class ShardParking:
    """A consumer's wait for work on any shard of a sharded queue.

    ``wait(t)`` sends ``BLPOP <wake list> t`` for every shard at once, each on
    a connection of its own to the node serving the shard, and ``select()``s
    on those sockets and a local doorbell. The first answer (a wake token,
    or the doorbell rung by a worker that finished a job) ends the wait; the
    other calls are ended with ``CLIENT UNBLOCK`` (they answer nil, so they
    take no token). The woken shards are marked hot for the next claim; a
    wait that times out marks every shard hot (a sweep, as a plain queue's
    consumer looks again every beat). Idle, that is one round of S blocked
    calls per beat: no polling."""

    rings_locally = True  # ring() writes to a local socket pair

    def __init__(self, queue):
        self.queue = queue  # a ShardedQueue
        self._rx, self._tx = socket.socketpair()
        self._rx.setblocking(False)
        self._tx.setblocking(False)
        self._conns: dict[int, tuple] = {}  # shard -> (node name, node client, connection, client id)

    def ring(self) -> None:
        try:
            self._tx.send(b"x")
        except (BlockingIOError, OSError):
            pass  # already rung

    def _conn(self, i: int):
        shard = self.queue.shards[i]
        name, node = node_client(self.queue.client, shard.k_wake)
        held = self._conns.get(i)
        if held is not None and held[0] == name:
            return held
        if held is not None:
            self._drop(i)
        conn = node.connection_pool.get_connection()
        conn.send_command("CLIENT", "ID")
        cid = conn.read_response()
        self._conns[i] = held = (name, node, conn, cid)
        return held

    def _drop(self, i: int) -> None:
        name, node, conn, _ = self._conns.pop(i)
        conn.disconnect()
        node.connection_pool.release(conn)

    def close(self) -> None:
        for i in list(self._conns):
            self._drop(i)

    def _drain_doorbell(self) -> bool:
        rung = False
        while True:
            try:
                if not self._rx.recv(64):
                    return rung
                rung = True
            except BlockingIOError:
                return rung

    def wait(self, timeout_s: float) -> list[int]:
        """Block until a shard may have work, the doorbell rings, or the
        timeout; answers the shards woken (all of them after a timeout)."""
        q = self.queue
        if q.has_hot() or self._drain_doorbell():
            return []
        try:
            return self._wait(timeout_s)
        except (*UNAVAILABLE, OSError):
            self.close()  # the topology may have changed: reconnect next time
            q.mark_hot(range(len(q.shards)))
            raise Unavailable("a shard's node went away while parked") from None

    def _wait(self, timeout_s: float) -> list[int]:
        q = self.queue
        n = len(q.shards)
        pending = {}
        sel = selectors.DefaultSelector()
        try:
            for i in range(n):
                name, node, conn, cid = self._conn(i)
                conn.send_command("BLPOP", q.shards[i].k_wake, f"{timeout_s:.3f}")
                pending[i] = (node, conn, cid)
                sel.register(conn._sock, selectors.EVENT_READ, i)
            sel.register(self._rx, selectors.EVENT_READ, None)
            woken, rung = [], False
            ready = sel.select(timeout_s + 2.0)
            for key, _ in ready:
                if key.data is None:
                    rung = True
                    continue
                i = key.data
                node, conn, _ = pending.pop(i)
                if conn.read_response() is not None:
                    woken.append(i)
            if pending and not ready:
                log.warning("sharded %s: no answer from %d parked calls", q.name, len(pending))
            # End the others: one CLIENT UNBLOCK each, pipelined per node; an
            # unblocked BLPOP answers nil (if it had just taken a token, the
            # token is kept as a wake-up of that shard).
            by_node: dict[int, tuple] = {}
            for i, (node, conn, cid) in pending.items():
                by_node.setdefault(id(node), (node, []))[1].append(cid)
            for node, cids in by_node.values():
                pipe = node.pipeline(transaction=False)
                for cid in cids:
                    pipe.execute_command("CLIENT", "UNBLOCK", cid)
                pipe.execute()
            for i, (node, conn, cid) in pending.items():
                if conn.read_response() is not None:
                    woken.append(i)
        finally:
            sel.close()
        if rung:
            self._drain_doorbell()
        if woken:
            q.mark_hot(woken)
        elif not rung:
            q.mark_hot(range(n))  # a whole beat and nothing: look everywhere once
        return woken
