"""Placement: the shards' names, and which shard a job goes to.

Shard ``i`` of queue ``name`` is the queue ``<name>.<i>`` (or
``<name>.<i>-<k>``, the first ``k`` whose slot falls in the ``i``-th S-th of
the slot space), so S shards spread evenly over any cluster whose primaries
split the slots evenly, and every process derives the same names from
(name, S). A job on a lane goes to the lane's shard (a stable CRC32 of the
lane), so one player's jobs stay on one shard, in order; a job without a lane
goes to its JOB id's shard. Either way an enqueue repeated with the same id
and lane reaches the same shard, so the id stays the idempotency key. (A job
with a unique key and no lane must also be on the key's shard: its id is one
of that shard, see ``ShardedQueue.enqueue``.)
"""
from __future__ import annotations

import functools
import zlib

from .. import keyspace
from ..errors import InvalidName

MAX_SHARDS = 1024


def keyspace_slots() -> int:
    return 16384


def shard_names(name: str, shards: int) -> tuple[str, ...]:
    """The S shard queue names of ``name``, each in its own S-th of the slots.
    Checked before the cache is asked: a list is unhashable (a TypeError),
    and True or 1.0 would hit the entry of 1."""
    keyspace.check_queue(name)
    if not isinstance(shards, int) or isinstance(shards, bool) or not 1 <= shards <= MAX_SHARDS:
        raise InvalidName(f"shards must be an integer from 1 to {MAX_SHARDS}, got {shards!r}")
    return _shard_names(name, shards)


@functools.lru_cache(maxsize=64)
def _shard_names(name: str, shards: int) -> tuple[str, ...]:
    out = []
    for i in range(shards):
        lo, hi = i * keyspace_slots() // shards, (i + 1) * keyspace_slots() // shards
        for k in range(100_000):
            cand = f"{name}.{i}" if k == 0 else f"{name}.{i}-{k}"
            # Keep off the range's edges: a cluster's even split may round a
            # boundary slot to the neighbouring primary.
            if lo < keyspace.slot("{" + cand + "}") < hi - 1 or shards > 4096:
                out.append(keyspace.check_queue(cand))
                break
    return tuple(out)


def shard_of(*, lane: str | None, job_id: str | None, shards: int) -> int:
    """The index of the shard a job goes to: its lane's, else its id's."""
    if lane:
        return zlib.crc32(keyspace.check_lane(lane).encode()) % shards
    return zlib.crc32(keyspace.check_job_id(job_id).encode()) % shards
