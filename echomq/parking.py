"""Where an idle consumer waits for work: a queue's ``parking()``.

Both queue kinds hand a consumer an object with the same four calls:
``wait(timeout_s)`` blocks until new work may be ready (truthy then), the
consumer's doorbell rings, or the timeout; ``ring()`` wakes the waiter from
another thread and never raises; ``release()`` says the consumer is busy
(a claim filled its free slots), so nothing it keeps waiting between two
waits may take wake tokens meant for a consumer with room; ``close()`` lets
go of what it holds (the consumer stops).

:class:`Parking` is a plain queue's: one ``BLPOP`` on the queue's wake list
and the consumer's own doorbell list. A sharded queue's parks on every shard
at once (:class:`echomq.sharded.ShardParking`).
"""
from __future__ import annotations

from . import keyspace
from .errors import translated


class Parking:
    """A consumer's wait on a plain queue: ``BLPOP <wake list> <doorbell>``."""

    def __init__(self, queue, consumer: str):
        self.queue = queue
        self.doorbell = keyspace.queue_key(queue.name, f"wake:{consumer}")

    def wait(self, timeout_s: float) -> bool:
        """True when a wake token (new work) ended the wait, False for the
        doorbell or the timeout."""
        wake = self.queue.k_wake
        with translated():
            got = self.queue.client.blpop([wake, self.doorbell], timeout=timeout_s)
        return got is not None and got[0] in (wake, wake.encode())

    def ring(self) -> None:
        try:
            self.queue.client.lpush(self.doorbell, "1")
        except Exception:  # redis-py's own errors (not mapped on this bare call)
            pass  # the waiter wakes at the end of its timeout anyway

    def release(self) -> None:
        pass  # nothing waits between two waits: the BLPOP has answered

    def close(self) -> None:
        pass  # holds nothing: the BLPOP used a pooled connection
