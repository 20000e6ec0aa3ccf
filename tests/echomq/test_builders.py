"""The public builders a batch is made of (``add_*`` and ``parse_*``) answer
as the direct calls do, refuse a bad argument before it joins the batch, and
``parking()`` gives either queue kind's consumer its wait."""
from __future__ import annotations

import threading

import pytest

from echomq import ArgumentError, Queue, ShardedQueue, ids


def test_a_batch_of_builders_answers_as_the_direct_calls(r):
    q = Queue("b", r)
    batch = q.batch()
    first = q.add_enqueue(batch, b"x", lane=ids.mint("PLR"))
    again = q.add_enqueue(batch, b"y", job_id=first)
    later = q.add_enqueue(batch, b"z", delay_ms=60_000)
    replies = batch.run()
    assert again == first
    assert [q.parse_enqueue(rep) for rep in replies] == ["enqueued", "duplicate", "scheduled"]
    batch = q.batch()  # (a batch keeps its order only among calls whose scripts the server has loaded)
    q.add_counts(batch)
    assert q.parse_counts(batch.run()[0]) == q.counts()
    assert q.counts()["pending"] == 1 and q.lanes.depth(q.job(first)["lane"]) == 1
    assert [j["id"] for j in q.scheduled_jobs()] == [later]

    job = q.claim(lease_ms=1)
    deadline = q.job(job.id)["lease_deadline"]
    while q.server_time_ms() <= deadline:  # the 1 ms lease runs out on the server's clock
        pass
    batch = q.batch()
    q.add_reap(batch, max_stalls=2, limit=10)
    q.add_promote(batch, limit=10)
    q.add_pause(batch)
    returned, dead = batch.run()[0]
    assert (returned, dead) == (1, 0) and q.job(job.id)["state"] == "pending"
    assert q.counts()["paused"] is True
    batch = q.batch()
    q.add_pause(batch, False)
    batch.run()
    assert q.counts()["paused"] is False

    job = q.claim()
    batch = q.batch()
    q.add_extend(batch, job.id, job.attempts, lease_ms=90_000)
    (deadline,) = batch.run()
    assert deadline == q.job(job.id)["lease_deadline"] and deadline > q.server_time_ms() + 80_000


@pytest.mark.parametrize("add", [
    lambda q, b: q.add_enqueue(b, 3),
    lambda q, b: q.add_enqueue(b, b"x", delay_ms=-1),
    lambda q, b: q.add_extend(b, "JOB0KHTOWnGLuC", 1, lease_ms=0),
    lambda q, b: q.add_reap(b, max_stalls=-1),
    lambda q, b: q.add_promote(b, limit=0),
])
def test_a_builder_refuses_a_bad_argument_before_it_joins_the_batch(r, add):
    q = Queue("b", r)
    batch = q.batch()
    with pytest.raises(ArgumentError):
        add(q, batch)
    assert len(batch) == 0


@pytest.mark.parametrize("kind", ["queue", "sharded"])
def test_either_queue_kind_parks_a_consumer_and_its_ring_wakes_it(r, kind):
    q = Queue("p", r) if kind == "queue" else ShardedQueue("p", r, shards=3)
    parking = q.parking(ids.mint("CSR"))
    if kind == "sharded":
        q.claim_batch(1)  # finds nothing: no shard is hot, so the wait really blocks
    try:
        woke = threading.Event()

        def wait():
            parking.wait(10)
            woke.set()

        t = threading.Thread(target=wait)
        t.start()
        assert not woke.wait(0.2)  # blocked: nothing rang and no work came
        parking.ring()
        assert woke.wait(5)
        t.join()
        q.enqueue(b"work")
        assert parking.wait(10)  # a wake token: new work
    finally:
        parking.close()
