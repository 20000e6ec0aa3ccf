"""Consumer.drain() / echomq.testing.drain (issue 21): every job ready now
and those that become ready while it runs, then it returns, never parked."""
import threading
import time

import pytest

from echomq import Queue, Retry, ShardedQueue, ids
from echomq.testing import drain


@pytest.fixture(params=["queue", "sharded"])
def q(request, r):
    return Queue("d", r) if request.param == "queue" else ShardedQueue("d", r, shards=3)


def returns(fn, timeout=20.0):
    """Run fn in a thread; its result, asserting it returned (a drain that
    parked would sit out its 60 s beat)."""
    out = []
    t = threading.Thread(target=lambda: out.append(fn()), daemon=True)
    t.start()
    t.join(timeout)
    assert not t.is_alive(), "drain did not return"
    return out[0]


def test_drain_runs_ready_jobs_and_zero_delay_retries_then_returns(q):
    lane = ids.mint("PLR")
    q.enqueue_many([b"flat"] * 10 + [{"payload": b"lane", "lane": lane}] * 10)
    later, _ = q.enqueue(b"later", delay_ms=60_000)
    seen = []

    def handler(job):
        seen.append(job.id)
        if job.payload == b"lane" and job.attempts == 1:
            raise Retry("once more", delay_ms=0)

    stats = returns(lambda: drain(q, handler, concurrency=4, beat_ms=60_000))
    assert stats["completed"] == 20 and stats["retried"] == 10
    assert len(seen) == 30
    c = q.counts()
    assert (c["pending"], c["active"], c["scheduled"], c["completed"]) == (0, 0, 1, 20)
    assert q.find(later)["state"] == "scheduled"  # not due: left for later


def test_drain_dead_letters_a_failing_job_within_one_run_with_no_backoff(q):
    jid, _ = q.enqueue(b"boom")
    stats = returns(lambda: drain(q, lambda job: 1 / 0, max_attempts=3, backoff=lambda attempt: 0,
                                  beat_ms=60_000))
    assert (stats["retried"], stats["dead"]) == (2, 1)
    assert q.find(jid)["state"] == "dead"


def test_drain_of_an_empty_or_paused_queue_returns_at_once(q):
    assert returns(lambda: drain(q, lambda job: None, beat_ms=60_000))["completed"] == 0
    q.enqueue(b"x")
    q.pause()
    assert returns(lambda: drain(q, lambda job: None, beat_ms=60_000))["completed"] == 0
    q.resume()
    assert returns(lambda: drain(q, lambda job: None, beat_ms=60_000))["completed"] == 1


def minted_before(ms: int = 1000) -> str:
    """A JOB id minted ``ms`` ago: a job admitted before the drain began
    (one minted in the drain's first millisecond counts as new)."""
    return ids.encode("JOB", (int(time.time() * 1000) - ms - ids.EPOCH_MS) << 22)


def test_drain_runs_a_flow_parent_its_last_child_made_ready(q):
    """The parent becomes ready when the drain settles the last child, after
    a claim found nothing: the drain looks again and runs it. The second
    child finishes only once a claim has come back empty, every time."""
    flow = q.enqueue_flow(b"parent", [b"a", b"b"])
    emptied = threading.Event()
    parse = q.parse_claim

    def parse_claim(reply):
        jobs = parse(reply)
        if not jobs:
            emptied.set()
        return jobs

    q.parse_claim = parse_claim
    ran = []

    def handler(job):
        if job.payload == b"b":
            assert emptied.wait(20)
        ran.append(job.payload)

    stats = returns(lambda: drain(q, handler, concurrency=2, prefetch=0, beat_ms=60_000))
    assert sorted(ran[:2]) == [b"a", b"b"] and ran[2:] == [b"parent"]
    assert stats["completed"] == 3 and q.find(flow.parent)["state"] == "completed"


def test_drain_runs_what_its_handlers_enqueue_and_ends_on_a_job_that_enqueues_for_ever(q, caplog):
    """The rule: a drain claims at most max_new jobs admitted after it began.
    A chain of follow-ups shorter than that runs to its end; an endless one
    is cut (a warning, stats["drain_cut"]), with nothing lost: the last
    follow-up waits, ready, for the next consumer."""
    q.enqueue(b"3", job_id=minted_before())

    def chain(job):
        n = int(job.payload)
        if n:
            q.enqueue(str(n - 1).encode())

    stats = returns(lambda: drain(q, chain, beat_ms=60_000))
    assert (stats["completed"], stats["drain_new"], stats["drain_cut"]) == (4, 3, 0)

    q.enqueue(b"again", job_id=minted_before())
    stats = returns(lambda: drain(q, lambda job: q.enqueue(b"again"), max_new=5, beat_ms=60_000))
    assert stats["drain_cut"] == 1 and stats["drain_new"] == 5 and stats["completed"] == 6
    assert "admitted after it began" in caplog.text
    c = q.counts()
    assert (c["pending"], c["active"]) == (1, 0)


def test_drain_refuses_a_bad_max_new(q):
    from echomq import ArgumentError

    for bad in (0, -1, 1.5, "5"):
        with pytest.raises(ArgumentError):
            drain(q, lambda job: None, max_new=bad)


def test_drain_under_queue_and_lane_rate_limits_runs_every_job_waiting_for_the_windows(q, r):
    """Jobs held back only by a rate window (the queue's, or a lane's that
    cools off the ring) are still the drain's: it waits for the windows
    instead of returning, and does not spin meanwhile. 6 lanes, each limited
    to 2 jobs per 200 ms, hold 4 jobs each; 12 flat jobs; and the queue
    takes at most 12 per 200 ms (split over a sharded queue's shards)."""
    lanes = [ids.mint("PLR") for _ in range(6)]
    for lane in lanes:
        q.lanes.set_rate(lane, 2, 200)
    q.set_rate_limit(12, 200)
    q.enqueue_many([{"payload": b"lane", "lane": lanes[i % 6]} for i in range(24)] + [b"flat"] * 12)
    r.config_resetstat()
    stats = returns(lambda: drain(q, lambda job: None, concurrency=4, beat_ms=60_000))
    calls = r.info("commandstats")["cmdstat_evalsha"]["calls"]
    assert stats["completed"] == 36 and stats["rate_waits"] >= 2
    c = q.counts()
    assert (c["pending"], c["active"], c["completed"]) == (0, 0, 36)
    records = q.completed_jobs(100)
    for lane in lanes:
        claimed = sorted(rec["claimed"] for rec in records if rec["lane"] == lane)
        assert len(claimed) == 4 and claimed[2] - claimed[0] >= 200  # a third job waits for the next window
    assert calls < 100, calls  # waits, not a loop of claims that find nothing (18 measured, 45 sharded)
