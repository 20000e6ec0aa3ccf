"""A payload longer than the server takes (a bulk argument over 512 MB)
is refused with ArgumentError before anything is sent, wherever a payload
goes in: one enqueue, a batch (nothing of it admitted), a flow, a
schedule; on a plain and a sharded queue. Before, the server closed the
connection mid-batch.

``bytes(n)`` is zero-filled by calloc: the pages are not touched until
read, so these payloads cost no memory as long as nothing reads them."""
from __future__ import annotations

import pytest

from echomq import ArgumentError, Queue, ShardedQueue
from echomq.checks import MAX_PAYLOAD_BYTES, check_payload

TOO_LONG = MAX_PAYLOAD_BYTES + 1


@pytest.fixture(params=["queue", "sharded"])
def q(request, r):
    return Queue("pl", r) if request.param == "queue" else ShardedQueue("pl", r, shards=3)


def snapshot(r) -> dict:
    return {k: r.type(k) for k in r.keys("*")}


def test_the_longest_payload_passes_the_check_uncopied():
    payload = bytes(MAX_PAYLOAD_BYTES)
    assert check_payload(payload) is payload


@pytest.mark.parametrize("make", [lambda: bytes(TOO_LONG), lambda: memoryview(bytes(TOO_LONG))],
                         ids=["bytes", "memoryview"])
def test_an_enqueue_over_the_limit_is_refused_and_writes_nothing(q, r, make):
    before = snapshot(r)
    with pytest.raises(ArgumentError, match="at most"):
        q.enqueue(make())
    assert snapshot(r) == before


def test_a_batch_with_one_payload_over_the_limit_admits_nothing(q, r):
    before = snapshot(r)
    with pytest.raises(ArgumentError, match="at most"):
        q.enqueue_many([b"small", {"payload": bytes(TOO_LONG)}, b"small"])
    assert snapshot(r) == before
    assert q.counts()["pending"] == 0


def test_a_flow_or_a_schedule_over_the_limit_is_refused(q, r):
    before = snapshot(r)
    with pytest.raises(ArgumentError, match="at most"):
        q.enqueue_flow(b"parent", [b"child", bytes(TOO_LONG)])
    with pytest.raises(ArgumentError, match="at most"):
        q.enqueue_flow(bytes(TOO_LONG), [b"child"])
    with pytest.raises(ArgumentError, match="at most"):
        q.schedule("big", every_ms=60_000, payload=bytes(TOO_LONG))
    assert snapshot(r) == before
