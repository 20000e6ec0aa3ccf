"""Parking: how an idle consumer of a sharded queue waits for work.

``BLPOP`` cannot span slots, so an idle consumer sends one ``BLPOP <shard
wake list>`` per shard on its own connection, all at once, and waits in
``select()`` for the first answer (or its own doorbell, a local socket
pair); the still-blocked calls are ended with ``CLIENT UNBLOCK`` so no other
wake token is taken while the consumer is busy. The wake-up does not wait
for those: the UNBLOCKs are written and their answers read at the start of
the next wait, so the consumer claims at once. It answers the calls of
:mod:`echomq.parking`.
"""
from __future__ import annotations

import logging
import selectors
import socket

from ..cluster import node_client
from ..errors import UNAVAILABLE, Unavailable

log = logging.getLogger(__name__)

UNBLOCK_TRIES = 20  # CLIENT UNBLOCKs sent for one parked call before its connection is dropped


class ShardParking:
    """A consumer's wait for work on any shard of a sharded queue.

    ``wait(t)`` sends ``BLPOP <wake list> t`` for every shard at once, each on
    a connection of its own to the node serving the shard, and ``select()``s
    on those sockets and a local doorbell. The first answer (a wake token,
    or the doorbell rung by a worker that finished a job) ends the wait; the
    other calls are ended with ``CLIENT UNBLOCK`` (they answer nil, so they
    take no token), written on one control connection per node and left
    unread: the wait returns at once, and the next one reads those answers
    first. The woken shards are marked hot for the next claim; a wait that
    times out marks every shard hot (a sweep, as a plain queue's consumer
    looks again every beat). Idle, that is one round of S blocked calls per
    beat: no polling.

    A parked call that took a token just before its UNBLOCK arrived is seen
    by that read: the next wait answers its shard at once, so the job is
    claimed by this consumer as soon as it has room (or by another one that
    looks). An UNBLOCK can also reach the node before the BLPOP it ends (two
    connections, no order between them): it answers 0 and the BLPOP blocks
    after it. The read sees that (0, and no answer on the parked
    connection) and sends the UNBLOCK again, until the call has answered;
    a wait never stalls on a call that was not ended."""

    def __init__(self, queue):
        self.queue = queue  # a ShardedQueue
        self._rx, self._tx = socket.socketpair()
        self._rx.setblocking(False)
        self._tx.setblocking(False)
        self._conns: dict[int, tuple] = {}  # shard -> (node name, node client, connection, client id)
        self._controls: dict[str, tuple] = {}  # node name -> (node client, connection) for CLIENT UNBLOCK
        self._ended: dict[str, list] = {}  # node name -> [(shard, connection, client id)]: UNBLOCKs sent, unread

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

    def _control(self, name: str, node):
        """The connection that carries this node's CLIENT UNBLOCKs."""
        held = self._controls.get(name)
        if held is None:
            self._controls[name] = held = (node, node.connection_pool.get_connection())
        return held[1]

    def _drop(self, i: int) -> None:
        name, node, conn, _ = self._conns.pop(i)
        conn.disconnect()
        node.connection_pool.release(conn)

    def close(self) -> None:
        self._ended = {}
        for i in list(self._conns):
            self._drop(i)
        for node, conn in self._controls.values():
            conn.disconnect()
            node.connection_pool.release(conn)
        self._controls = {}

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
        try:
            late = self._collect()
            if late:
                q.mark_hot(late)
                return late
            if q.has_hot() or self._drain_doorbell():
                return []
            return self._wait(timeout_s)
        except (*UNAVAILABLE, OSError):
            self.close()  # the topology may have changed: reconnect next time
            q.mark_hot(range(len(q.shards)))
            raise Unavailable("a shard's node went away while parked") from None

    def _collect(self) -> list[int]:
        """Read what the last wait left: each UNBLOCK's answer and that of
        the call it ended (nil, or a token taken just before). A call the
        UNBLOCK missed (it answered 0 and the call has not answered: the
        BLPOP reached the node after it) gets another UNBLOCK. Answers the
        shards whose call took a token."""
        late: list[int] = []
        missed = []
        ended, self._ended = self._ended, {}
        for name, calls in ended.items():
            control = self._controls[name][1]
            for i, conn, cid in calls:
                if control.read_response() or conn.can_read(timeout=0):
                    if conn.read_response() is not None:
                        late.append(i)
                else:
                    missed.append((name, i, conn, cid))
        for _ in range(UNBLOCK_TRIES):
            if not missed:
                return late
            for name, i, conn, cid in missed:
                self._controls[name][1].send_command("CLIENT", "UNBLOCK", cid)
            still = []
            for name, i, conn, cid in missed:
                if self._controls[name][1].read_response() or conn.can_read(timeout=0):
                    if conn.read_response() is not None:
                        late.append(i)
                else:
                    still.append((name, i, conn, cid))
            missed = still
        for name, i, conn, cid in missed:  # never seen blocked nor answered: start that shard afresh
            log.warning("sharded %s: a parked call on %s did not end; reconnecting it", self.queue.name, name)
            self._drop(i)
        return late

    def _wait(self, timeout_s: float) -> list[int]:
        q = self.queue
        n = len(q.shards)
        pending = {}
        sel = selectors.DefaultSelector()
        try:
            for i in range(n):
                name, node, conn, cid = self._conn(i)
                conn.send_command("BLPOP", q.shards[i].k_wake, f"{timeout_s:.3f}")
                pending[i] = (name, node, conn, cid)
                sel.register(conn._sock, selectors.EVENT_READ, i)
            sel.register(self._rx, selectors.EVENT_READ, None)
            woken, rung = [], False
            ready = sel.select(timeout_s + 2.0)
            for key, _ in ready:
                if key.data is None:
                    rung = True
                    continue
                i = key.data
                conn = pending.pop(i)[2]
                if conn.read_response() is not None:
                    woken.append(i)
            if pending and not ready:
                log.warning("sharded %s: no answer from %d parked calls", q.name, len(pending))
            # End the others: one CLIENT UNBLOCK each, written per node on its
            # control connection; an unblocked BLPOP answers nil (if it had
            # just taken a token, the next wait finds it: _collect). Read
            # later, so the claim goes out now.
            for i, (name, node, conn, cid) in pending.items():
                self._ended.setdefault(name, []).append((i, conn, cid))
            for name, calls in self._ended.items():
                control = self._control(name, pending[calls[0][0]][1])
                control.send_packed_command(control.pack_commands([("CLIENT", "UNBLOCK", cid)
                                                                   for _, _, cid in calls]))
        finally:
            sel.close()
        if rung:
            self._drain_doorbell()
        if woken:
            q.mark_hot(woken)
        elif not rung:
            q.mark_hot(range(n))  # a whole beat and nothing: look everywhere once
        return woken
