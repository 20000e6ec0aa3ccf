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
    """A lane with no setting is forgotten by the claim that takes its last
    ready job; its leased job then ends without touching any lane key."""
    lane = ids.mint("PLR")
    meta = f"{q.prefix}g:{lane}:meta"
    q.enqueue(b"x", lane=lane)
    job = q.claim(lease_ms=60_000)
    assert q.lanes.names() == [] and not any_server.exists(meta)
    assert q.lanes.info(lane)["active"] == 1  # counted from the active set
    q.complete(job.id, job.attempts)
    assert q.lanes.names() == [] and not any_server.exists(meta)
    assert q.lanes.info(lane)["active"] == 0


def test_a_limited_lane_is_kept_and_counted_while_its_jobs_are_leased(q, any_server):
    lane = ids.mint("PLR")
    meta = f"{q.prefix}g:{lane}:meta"
    q.lanes.limit(lane, 3)
    q.enqueue_many([{"payload": b"x", "lane": lane}] * 2)
    jobs = q.claim_batch(5, lease_ms=60_000)
    assert q.lanes.names() == [lane]
    assert any_server.hgetall(meta) == {b"limit": b"3", b"active": b"2"}
    q.complete(jobs[0].id, jobs[0].attempts)
    assert any_server.hgetall(meta) == {b"limit": b"3", b"active": b"1"}
    q.lanes.limit(lane, None)  # the count goes with the limit
    assert not any_server.exists(meta) and q.lanes.names() == []
    q.complete(jobs[1].id, jobs[1].attempts)  # and the ack of a job counted before writes nothing
    assert not any_server.exists(meta) and q.lanes.names() == []


@pytest.mark.parametrize("end", ["complete", "retry", "release", "cancel", "remove", "reap"])
def test_a_limit_set_while_jobs_are_leased_counts_them(q, any_server, end):
    """A lane without a limit keeps no count; setting one counts the lane's
    leased jobs (and no other lane's), so the limit holds at once and every
    way a leased job ends gives its place back exactly once."""
    lane, other = ids.mint("PLR"), ids.mint("PLR")
    q.enqueue_many([{"payload": b"x", "lane": lane}] * 4 + [{"payload": b"y", "lane": other}] * 2)
    held = q.claim_batch(4, lease_ms=60_000)  # two of each lane, in turn
    assert sorted(j.lane for j in held) == sorted([lane, lane, other, other])
    mine = [j for j in held if j.lane == lane]
    q.lanes.limit(lane, 2)
    assert any_server.hget(f"{q.prefix}g:{lane}:meta", "active") == b"2"
    assert q.lanes.info(lane)["active"] == 2 and q.lanes.ring() == []  # at its limit; other drained
    assert q.claim_batch(5, lease_ms=60_000) == []
    j = mine[0]
    if end == "complete":
        q.complete(j.id, j.attempts)
    elif end == "retry":
        q.retry(j.id, j.attempts, delay_ms=60_000, error="again")
    elif end == "release":
        q.release(j.id, j.attempts)
    elif end == "cancel":
        q.cancel(j.id)
    elif end == "remove":
        q.remove(j.id)
    else:
        any_server.zadd(q.k_active, {j.id: 0})  # its lease ran out
        q.reap()
    if end == "cancel":  # a leased job's cancel lands when the reaper or its worker next looks
        any_server.zadd(q.k_active, {j.id: 0})
        q.reap()
    assert any_server.hget(f"{q.prefix}g:{lane}:meta", "active") == b"1"
    assert q.lanes.ring() == [lane]
    again = q.claim_batch(5, lease_ms=60_000)
    assert [x.lane for x in again] == [lane]  # one place back, and only one
    assert any_server.hget(f"{q.prefix}g:{lane}:meta", "active") == b"2"


def test_flat_jobs_are_served_before_lanes(q):
    lane = ids.mint("PLR")
    q.enqueue(b"lane", lane=lane)
    flat, _ = q.enqueue(b"flat")
    assert [j.id for j in q.claim_batch(2, lease_ms=60_000)][0] == flat


class _RingModel:
    """The documented claim, one job at a time: each pick rotates the ring one
    step (LMOVE) and pops the head of that lane; a lane that is then drained,
    paused or at its limit leaves the ring; a release or an enqueue that makes
    a lane servable puts it at the ring's tail."""

    def __init__(self, limits, paused):
        self.ready, self.active, self.ring = {}, {}, []
        self.limits, self.paused = limits, paused

    def servable(self, lane):
        limit = self.limits.get(lane)
        return (bool(self.ready.get(lane)) and lane not in self.paused
                and (limit is None or self.active.get(lane, 0) < limit))

    def change(self, lane, step):
        was = self.servable(lane)
        step()
        if self.servable(lane) and not was:
            self.ring.append(lane)

    def enqueue(self, lane, job_id):
        self.change(lane, lambda: self.ready.setdefault(lane, []).append(job_id))

    def complete(self, lane):
        self.change(lane, lambda: self.active.__setitem__(lane, self.active[lane] - 1))

    def claim(self, n):
        taken = []
        while len(taken) < n and self.ring:
            lane = self.ring.pop(0)
            self.ring.append(lane)
            if not self.ready[lane]:
                self.ring.pop()
                continue
            taken.append(self.ready[lane].pop(0))
            self.active[lane] = self.active.get(lane, 0) + 1
            if not self.servable(lane):
                self.ring.pop()
        return taken


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_claims_take_lanes_in_turn_exactly_as_one_job_at_a_time(q, seed):
    """claim works the turns out per lane and pops each lane once (lua/claim.lua):
    over random claim sizes (larger and smaller than the ring), completions
    that reopen limited lanes and new jobs, every claim answers the jobs, in
    the order, and leaves the ring, that one rotation and pop per job gives."""
    import random

    rnd = random.Random(seed)
    lanes = [ids.mint("PLR") for _ in range(7)]
    limits = {lanes[0]: 1, lanes[1]: 2, lanes[2]: 3}
    paused = {lanes[3]}
    for lane, limit in limits.items():
        q.lanes.limit(lane, limit)
    q.lanes.pause(lanes[3])
    model = _RingModel(limits, paused)
    lane_of, held = {}, []

    def enqueue(k):
        picks = [rnd.choice(lanes) for _ in range(k)]
        for (jid, _), lane in zip(q.enqueue_many([{"payload": b"x", "lane": lane} for lane in picks]), picks):
            lane_of[jid] = lane
            model.enqueue(lane, jid)

    enqueue(60)
    for _ in range(40):
        step = rnd.random()
        if step < 0.5:
            n = rnd.choice([1, 2, 3, 5, 8, 13, 40])
            jobs = q.claim_batch(n, lease_ms=60_000)
            assert [j.id for j in jobs] == model.claim(n)
            held += jobs
        elif step < 0.85 and held:
            done = rnd.sample(held, rnd.randint(1, len(held)))
            assert q.complete_many([(j.id, j.attempts) for j in done]) == [True] * len(done)
            for j in done:
                held.remove(j)
                model.complete(lane_of[j.id])
        else:
            enqueue(rnd.randint(1, 10))
        assert q.lanes.ring() == model.ring


def test_setting_a_limit_again_recounts_jobs_an_older_version_leased(q, any_server):
    """Jobs leased by scripts that counted every lane carry no mark, so their
    ends give no place back (docs/echomq.md, upgrading): the lane fills up.
    Setting its limit again recounts, and the lane is served once more."""
    lane = ids.mint("PLR")
    meta = f"{q.prefix}g:{lane}:meta"
    q.lanes.limit(lane, 2)
    q.enqueue_many([{"payload": b"x", "lane": lane}] * 4)
    held = q.claim_batch(5, lease_ms=60_000)
    assert len(held) == 2
    for j in held:  # as the older claim left them
        any_server.hdel(q.job_key(j.id), "counted")
    assert q.complete_many([(j.id, j.attempts) for j in held]) == [True, True]
    assert any_server.hget(meta, "active") == b"2" and q.claim_batch(5, lease_ms=60_000) == []
    q.lanes.limit(lane, 2)
    assert any_server.hget(meta, "active") == b"0"
    assert len(q.claim_batch(5, lease_ms=60_000)) == 2


def test_a_limit_counts_leased_jobs_past_one_page_of_the_active_set(q, any_server):
    """The count walks the active set a thousand at a time: 2,345 leased
    jobs, most of another lane, are counted exactly, each once."""
    lane, other = ids.mint("PLR"), ids.mint("PLR")
    q.enqueue_many([{"payload": b"x", "lane": lane}] * 1_200 + [{"payload": b"y", "lane": other}] * 1_145)
    held = []
    while len(held) < 2_345:
        held += q.claim_batch(1_000, lease_ms=60_000)
    q.lanes.limit(lane, 5_000)
    assert any_server.hget(f"{q.prefix}g:{lane}:meta", "active") == b"1200"
    marked = [j for j in held if any_server.hget(q.job_key(j.id), "counted") == b"1"]
    assert len(marked) == 1_200 and {j.lane for j in marked} == {lane}


def test_active_counts_on_a_sharded_queue_cover_every_shard(any_server):
    from echomq import ShardedQueue

    sq = ShardedQueue("lc", any_server, shards=4)
    lanes = [ids.mint("PLR") for _ in range(8)]
    sq.enqueue_many([{"payload": b"x", "lane": lane} for lane in lanes for _ in range(2)])
    assert len({sq.shard_index(lane=lane) for lane in lanes}) > 1
    held = []
    for shard in sq.shards:
        held += shard.claim_batch(100, lease_ms=60_000)
    assert len(held) == 16
    assert sq.lanes.active_counts() == {lane: 2 for lane in lanes}
    assert {sq.lanes.info(lane)["active"] for lane in lanes} == {2}
