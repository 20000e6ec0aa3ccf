"""Batching: script calls on many shards in one round trip.

On a cluster a :class:`NodeBatch` sends each node's calls as one plain
pipeline (``cluster.pipeline_by_node``) rather than through redis-py's
cluster pipeline, and a call a node could not run goes again through the
cluster client, which follows redirections. A :class:`ShardedBatch` groups
those calls into *logical* ones: a sharded ``claim`` or ``complete_batch``
made of one call per shard answers once, so a consumer reads it as it reads
a plain queue's.
"""
from __future__ import annotations

from ..cluster import is_cluster, pipeline_by_node
from ..scripts import Batch


class NodeBatch(Batch):
    """A :class:`~echomq.scripts.Batch` that, on a cluster, sends each node's
    calls as one plain pipeline (``cluster.pipeline_by_node``); a call the
    node could not run goes again through the cluster pipeline, which follows
    redirections. On one node it is a Batch."""

    def _send(self, calls) -> list:
        if not is_cluster(self.client) or not all(keys for _, keys, _ in calls):
            return super()._send(calls)
        commands = [(("EVALSHA", script.sha, len(keys), *keys, *args), keys[0]) for script, keys, args in calls]
        return pipeline_by_node(self.client, commands, lambda idx: Batch._send(self, [calls[i] for i in idx]))


class ShardedBatch:
    """Script calls on many shards in one pipelined round trip, answered as
    *logical* calls: a sharded ``complete_batch`` or ``claim`` made of one
    call per shard answers once, so a consumer reads it like a Queue's."""

    def __init__(self, client):
        self.inner = NodeBatch(client)
        self.logical: list[tuple] = []  # (combine, [(inner index, meta)])

    def __len__(self) -> int:
        return len(self.logical)

    def part(self, add) -> int:
        """Run ``add(inner_batch)`` (one Queue.add_* call); its inner index."""
        before = len(self.inner)
        add(self.inner)
        assert len(self.inner) == before + 1
        return before

    def add(self, combine, parts) -> None:
        """One logical call: ``combine([(meta, reply), ...])`` of its parts
        (each ``(inner index, meta)``) is its answer."""
        self.logical.append((combine, parts))

    def run(self) -> list:
        replies = self.inner.run()
        return [combine([(meta, replies[i]) for i, meta in parts]) for combine, parts in self.logical]
