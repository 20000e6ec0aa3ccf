"""Flows: a parent job that runs once all its children have ended.

``Queue.enqueue_flow(parent, children, on_child_failure="fail")`` admits the
children (ready at once) and the parent (state ``waiting``) in one script,
``lua/enqueue_flow.lua``. The script that ends a child also does the flow's
bookkeeping (``lua/include/flow.lua``): it records how the child ended in
``emq:{q}:flow:<parent id>``, and when the last child has ended it makes the
parent ready. A child that ends other than completed (dead, cancelled,
removed) sends the parent to dead naming it under ``"fail"``; under
``"ignore"`` the parent runs anyway. Its handler reads how each child ended
with ``job.children_results()``; a child leaves a value there with
``job.set_result(value)`` before it completes.

Crash safety comes from the scripts that end jobs: a child ends once per
life (a fenced complete, a reap that dead-letters it), and only a child whose
record still reads pending moves the parent's count, so a child redelivered
after its worker died counts once, and the parent is made ready once.

One flow lives in one queue, one slot: every step is one script. On a
:class:`~echomq.ShardedQueue` the whole flow goes to the parent's shard (its
lane's, else its id's), whatever lanes the children name: a child's lane is
served in turn there, but a pause or limit set on that lane (which lives on
the lane's own shard) does not reach it. Its ids are looked for on the
other shards first (a parent's: duplicate; a child's: WrongState; nothing
written), in a step before the script: an id that reaches another shard
between the two is not seen (docs/echomq.md, "Progress, waiting, flows").
A flow does not span queues: to go on in another queue, the parent's handler enqueues there
(with a JOB id of its own making, so a redelivered parent enqueues once).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Mapping

from . import ids, keyspace
from .checks import check_payload
from .errors import ArgumentError

POLICIES = ("fail", "ignore")
_ITEM_KEYS = {"payload", "job_id", "lane"}


@dataclass(frozen=True, slots=True)
class Flow:
    """What ``enqueue_flow`` admitted: the parent's id, the children's ids in
    the order given, and ``"enqueued"`` or ``"duplicate"`` (the parent's id
    exists already: nothing changed)."""

    parent: str
    children: tuple[str, ...]
    status: str


def _item(item, what: str) -> tuple[str, bytes, str]:
    """(job id, payload, lane or '') of a parent or child: a payload, or a
    mapping with ``payload`` and optional ``job_id`` and ``lane``."""
    job_id = lane = None
    if isinstance(item, Mapping):
        extra = set(item) - _ITEM_KEYS
        if "payload" not in item or extra:
            raise ArgumentError(f"a flow's {what} is a payload or a mapping of payload, job_id and lane; "
                                f"got keys {sorted(map(str, item))}")
        payload, job_id, lane = item["payload"], item.get("job_id"), item.get("lane")
    else:
        payload = item
    payload = check_payload(payload, f"a flow's {what} payload")
    job_id = ids.mint("JOB") if job_id is None else keyspace.check_job_id(job_id)
    lane = "" if lane is None else keyspace.check_lane(lane)
    return job_id, payload, lane


def flow_call(prefix: str, parent, children, on_child_failure: str, max_children: int):
    """(parent id, child ids, ARGV) for ``enqueue_flow.lua``, every item checked."""
    if on_child_failure not in POLICIES:
        raise ArgumentError(f"on_child_failure must be 'fail' or 'ignore', got {on_child_failure!r}")
    if isinstance(children, (str, bytes, bytearray, memoryview, Mapping)) or not hasattr(children, "__iter__"):
        raise ArgumentError(f"children takes an iterable of payloads or mappings, not {type(children).__name__}")
    pid, ppayload, plane = _item(parent, "parent")
    kids = [_item(c, "child") for c in children]
    if not 1 <= len(kids) <= max_children:
        raise ArgumentError(f"a flow has 1 to {max_children} children, got {len(kids)}")
    every = [pid] + [k[0] for k in kids]
    if len(set(every)) != len(every):
        raise ArgumentError("a flow names a job id twice")
    args = [prefix, pid, ppayload, plane, on_child_failure]
    for cid, payload, lane in kids:
        args += (cid, payload, lane)
    return pid, tuple(k[0] for k in kids), args


def parse_children(raw: dict) -> dict[str, dict]:
    """``emq:{q}:flow:<parent>`` as {child id: {"state": ..., "result"/"error": ...}}."""
    out = {}
    for k, v in raw.items():
        k = k.decode() if isinstance(k, bytes) else k
        try:
            out[k] = json.loads(v)
        except ValueError:
            out[k] = {"state": "unknown"}
    return dict(sorted(out.items()))
