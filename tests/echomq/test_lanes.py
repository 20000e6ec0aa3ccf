"""Fair lanes: the ring serves lanes in turn; pause and limit take a lane off it."""
import pytest

from echomq import Queue, ids


@pytest.fixture
def q(any_server):
    return Queue("lanes", any_server)


def test_lanes_rotate_fairly(q):
    a, b = ids.mint("PLR"), ids.mint("PLR")
    for _ in range(3):
        q.enqueue(b"a", lane=a)
    for _ in range(3):
        q.enqueue(b"b", lane=b)
    assert [j.lane for j in q.claim_batch(6, lease_ms=60_000)] == [a, b, a, b, a, b]
    assert q.lanes.ring() == []


def test_a_deep_lane_delays_a_single_job_by_at_most_one_claim(q):
    masher, quiet = ids.mint("PLR"), ids.mint("PLR")
    q.enqueue_many([{"payload": b"m", "lane": masher}] * 10_000)
    for _ in range(7):
        q.claim(lease_ms=60_000)
    jid, _ = q.enqueue(b"q", lane=quiet)
    first_two = [q.claim(lease_ms=60_000).id for _ in range(2)]
    assert jid in first_two
    assert q.lanes.depth(masher) == 10_000 - 7 - 1


def test_pause_takes_a_lane_off_the_ring_and_resume_puts_it_back(q):
    a, b = ids.mint("PLR"), ids.mint("PLR")
    q.enqueue(b"a", lane=a)
    q.enqueue(b"b", lane=b)
    q.lanes.pause(a)
    assert q.lanes.ring() == [b]
    assert [j.lane for j in q.claim_batch(5, lease_ms=60_000)] == [b]
    q.enqueue(b"a2", lane=a)
    assert q.lanes.ring() == []
    q.lanes.resume(a)
    assert q.lanes.ring() == [a]
    assert [j.lane for j in q.claim_batch(5, lease_ms=60_000)] == [a, a]
    assert q.lanes.info(a)["active"] == 2


def test_limit_caps_active_jobs_per_lane(q):
    a, b = ids.mint("PLR"), ids.mint("PLR")
    for _ in range(4):
        q.enqueue(b"a", lane=a)
    q.enqueue(b"b", lane=b)
    q.lanes.limit(a, 2)
    jobs = q.claim_batch(10, lease_ms=60_000)
    assert sorted(j.lane for j in jobs) == sorted([a, a, b])
    assert q.lanes.ring() == []  # a is at its limit, b is empty
    done = next(j for j in jobs if j.lane == a)
    q.complete(done.id, done.attempts)
    assert q.lanes.ring() == [a]
    assert [j.lane for j in q.claim_batch(10, lease_ms=60_000)] == [a]
    q.lanes.limit(a, None)
    assert [j.lane for j in q.claim_batch(10, lease_ms=60_000)] == [a]
    assert q.lanes.depth(a) == 0


def test_the_ring_holds_each_servable_lane_once(q):
    lanes = [ids.mint("PLR") for _ in range(5)]
    for lane in lanes:
        for _ in range(3):
            q.enqueue(b"x", lane=lane)
    q.lanes.pause(lanes[0])
    q.lanes.pause(lanes[0])
    q.lanes.resume(lanes[0])
    q.lanes.resume(lanes[0])
    ring = q.lanes.ring()
    assert sorted(ring) == sorted(lanes) and len(ring) == 5
    assert q.counts()["pending"] == 15


def test_an_emptied_lane_is_forgotten(q, any_server):
    lane = ids.mint("PLR")
    q.enqueue(b"x", lane=lane)
    job = q.claim(lease_ms=60_000)
    assert q.lanes.names() == [lane]
    q.complete(job.id, job.attempts)
    assert q.lanes.names() == [] and not any_server.exists(f"{q.prefix}g:{lane}:meta")


def test_flat_jobs_are_served_before_lanes(q):
    lane = ids.mint("PLR")
    q.enqueue(b"lane", lane=lane)
    flat, _ = q.enqueue(b"flat")
    assert [j.id for j in q.claim_batch(2, lease_ms=60_000)][0] == flat
