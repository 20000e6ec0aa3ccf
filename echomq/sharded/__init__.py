"""ShardedQueue: one logical queue over S ordinary queues, for a cluster.

A :class:`~echomq.Queue` lives in one hash slot, so one Valkey core runs all
its scripts. ``ShardedQueue(name, client, shards=S)`` spreads a queue over S
queues ("shards"), each with its own hash tag, so a cluster serves them on
different primaries, and answers the ``Queue`` API. One module per idea:

* :mod:`.placement` -- the shards' names and which shard a job goes to (its
  lane's, else its id's), the same in every process;
* :mod:`.batching` -- calls on many shards in one round trip, one plain
  pipeline per cluster node, answered as logical calls;
* :mod:`.turns` -- which shard a consumer claims from next: it stays on a
  shard that answers full for a few cycles, then moves on, so none starves;
* :mod:`.parking` -- an idle consumer's wait: one ``BLPOP`` per shard at once;
* :mod:`.queue` and :mod:`.lanes` -- the ``Queue`` and lanes API over them.

Changing S for a live queue is a drain-and-switch (docs/scaling.md): jobs
stay where they were enqueued, so stop admitting, drain, then switch.
"""
from .batching import NodeBatch, ShardedBatch
from .lanes import ShardedLanes
from .parking import ShardParking
from .placement import MAX_SHARDS, shard_names
from .queue import ShardedQueue
from .turns import STICKY_CYCLES, ShardTurns

__all__ = ["ShardedQueue", "ShardedLanes", "ShardedBatch", "NodeBatch", "ShardParking", "ShardTurns",
           "shard_names", "MAX_SHARDS", "STICKY_CYCLES"]
