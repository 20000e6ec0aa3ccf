"""EchoMQ: a reliable job queue on Valkey.

Jobs are rows in ``emq:{q}:`` keys moved by one Lua script per transition
(``lua/``): enqueue, claim under a server-clock lease with a fencing token,
complete / retry / extend fenced by that token, reap expired leases, promote
due jobs. Delivery is at-least-once; a consumer that is idempotent on the
JOB id makes the effect exactly-once.

The core needs only redis-py; ``echomq.contrib.django`` adds the Django bits.
"""
from .errors import (
    UNAVAILABLE,
    ArgumentError,
    Cancelled,
    Drop,
    EchoMQError,
    EventsLost,
    InvalidName,
    JobNotFound,
    KindError,
    Retry,
    StaleToken,
    Unavailable,
    WrongState,
)
from .job import Job
from .queue import Queue

__all__ = [
    "Queue", "ShardedQueue", "Job", "Consumer", "Reaper",
    "EchoMQError", "ArgumentError", "InvalidName", "KindError", "StaleToken", "Cancelled",
    "JobNotFound", "WrongState", "EventsLost", "Unavailable", "UNAVAILABLE", "Retry", "Drop",
]


def __getattr__(name):
    # The worker side is imported on first use so `import echomq` stays light.
    if name == "Consumer":
        from .consumer import Consumer

        return Consumer
    if name == "ShardedQueue":
        from .sharded import ShardedQueue

        return ShardedQueue
    if name == "Reaper":
        from .reaper import Reaper

        return Reaper
    raise AttributeError(name)
