"""Parking: how an idle consumer of a sharded queue waits for work.

``BLPOP`` cannot span slots, so an idle consumer keeps one ``BLPOP <shard
wake list>`` parked per shard, each on its own connection, and waits in
``select()`` for the first answer (or its own doorbell, a local socket
pair). A wake-up reads that answer and goes to claim at once; the other
calls stay parked for the next wait, so a consumer that wakes for each job
of a trickle sends one BLPOP per job, not one per shard. When the consumer
gets busy (a claim that filled every free slot) it ends them with ``CLIENT
UNBLOCK`` so no wake token is taken while it has no room, and reads those
answers at its next wait. It answers the calls of :mod:`echomq.parking`.
"""
from __future__ import annotations

import logging
import selectors
import socket
import time

from ..cluster import node_client
from ..errors import UNAVAILABLE, Unavailable

log = logging.getLogger(__name__)

UNBLOCK_TRIES = 20  # CLIENT UNBLOCKs sent for one parked call before its connection is dropped


class ShardParking:
    """A consumer's wait for work on any shard of a sharded queue.

    ``wait(t)`` makes sure a ``BLPOP <wake list>`` is parked for every shard,
    each on a connection of its own to the node serving the shard, and
    ``select()``s on those sockets and a local doorbell. The first answer (a
    wake token, or the doorbell rung by a worker) ends the wait; a call that
    answered is sent again at the next wait, the others stay parked. The
    woken shards are marked hot for the next claim (``ShardTurns.woken``);
    a wait that times out marks every shard hot (a sweep, as a plain
    queue's consumer looks again every beat). Idle, that is one round of S blocked calls per beat: no
    polling.

    ``release()`` (the consumer is busy) ends the parked calls with ``CLIENT
    UNBLOCK`` (they answer nil, so they take no token), written on one
    control connection per node and read at the start of the next wait; a
    call that took a token just before is seen then, and its shard is
    answered at once. An UNBLOCK can also reach the node before the BLPOP it
    ends (two connections, no order between them): it answers 0 and the
    BLPOP blocks after it. The read sees that (0, and no answer on the
    parked connection) and sends the UNBLOCK again, until the call has
    answered: a wait never stalls on a call that was not ended."""

    def __init__(self, queue):
        self.queue = queue  # a ShardedQueue
        self._rx, self._tx = socket.socketpair()
        self._rx.setblocking(False)
        self._tx.setblocking(False)
        self._conns: dict[int, tuple] = {}  # shard -> (node name, node client, connection, client id)
        self._controls: dict[str, tuple] = {}  # node name -> (node client, connection) for CLIENT UNBLOCK
        self._parked: dict[int, tuple] = {}  # shard -> its held connection, while a BLPOP is out on it
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
        self._ended, self._parked = {}, {}
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
                q.turns.woken(late)
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

    def release(self) -> None:
        """The consumer is busy: end the parked calls (CLIENT UNBLOCK on each
        node's control connection, answers read at the next wait), so a wake
        token goes to a consumer with room."""
        if not self._parked:
            return
        parked, self._parked = self._parked, {}
        try:
            for i, (name, node, conn, cid) in parked.items():
                self._ended.setdefault(name, []).append((i, conn, cid))
            for name, calls in self._ended.items():
                control = self._control(name, parked[calls[0][0]][1])
                control.send_packed_command(control.pack_commands([("CLIENT", "UNBLOCK", cid)
                                                                   for _, _, cid in calls]))
        except (*UNAVAILABLE, OSError):
            self.close()  # reconnect at the next wait, which reports the outage
            self.queue.mark_hot(range(len(self.queue.shards)))

    def _wait(self, timeout_s: float) -> list[int]:
        q = self.queue
        n = len(q.shards)
        deadline = time.monotonic() + timeout_s
        while True:
            for i in range(n):
                if i not in self._parked:
                    held = self._conn(i)
                    held[2].send_command("BLPOP", q.shards[i].k_wake, f"{timeout_s:.3f}")
                    self._parked[i] = held
            left = deadline - time.monotonic()
            if left <= 0:
                q.mark_hot(range(n))  # a whole beat and nothing: look everywhere once
                return []
            woken, rung, answered = self._select(left)
            if rung:
                self._drain_doorbell()
            if woken:
                q.turns.woken(woken)
                return woken
            if rung:
                return []
            if not answered:
                q.mark_hot(range(n))
                return []
            # only calls that timed out on their node (sent at an earlier wait): send them again

    def _select(self, timeout_s: float) -> tuple[list[int], bool, bool]:
        """Wait on the parked calls and the doorbell: (shards whose call
        took a token, doorbell rung, any call answered)."""
        sel = selectors.DefaultSelector()
        try:
            for i, (_, _, conn, _) in self._parked.items():
                sel.register(conn._sock, selectors.EVENT_READ, i)
            sel.register(self._rx, selectors.EVENT_READ, None)
            ready = sel.select(timeout_s)
        finally:
            sel.close()
        woken, rung = [], False
        for key, _ in ready:
            if key.data is None:
                rung = True
                continue
            conn = self._parked.pop(key.data)[2]
            if conn.read_response() is not None:
                woken.append(key.data)
        return woken, rung, bool(ready)
