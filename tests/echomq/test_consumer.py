"""The consumer in-process: outcomes, heartbeat, batching, stop."""
import threading
import time

import pytest

from echomq import ArgumentError, Consumer, Drop, Queue, Reaper, Retry, ids
from echomq.consumer import exponential_backoff


def wait_for(predicate, timeout=20.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


class Running:
    """A consumer on a thread, stopped and joined at the end of the block."""

    def __init__(self, consumer):
        self.consumer = consumer
        self.thread = threading.Thread(target=consumer.run)

    def __enter__(self):
        self.thread.start()
        return self.consumer

    def __exit__(self, *exc):
        self.consumer.stop()
        self.thread.join(20)
        assert not self.thread.is_alive()


@pytest.fixture
def q(r):
    return Queue("cons", r)


def test_outcomes_complete_drop_retry_dead(q, r):
    seen = []

    def handler(job):
        seen.append((job.payload, job.attempts))
        if job.payload == b"drop":
            raise Drop("not needed any more")
        if job.payload == b"boom":
            raise ValueError("always fails")
        if job.payload == b"later" and job.attempts == 1:
            raise Retry("not yet", delay_ms=0)

    ok, _ = q.enqueue(b"ok")
    drop, _ = q.enqueue(b"drop")
    boom, _ = q.enqueue(b"boom")
    later, _ = q.enqueue(b"later")
    reaper = Reaper([q])
    with Running(Consumer(q, handler, max_attempts=3, backoff=lambda n: 0)) as c:
        wait_for(lambda: (reaper.run_once(), q.counts()["dead"] == 1 and q.counts()["completed"] == 3)[1],
                 what="three completions and one dead letter")
    assert q.counts()["pending"] == 0 and q.counts()["scheduled"] == 0
    dead = q.dead_jobs()
    assert [d["id"] for d in dead] == [boom] and "ValueError: always fails" in dead[0]["last_error"]
    assert seen.count((b"boom", 3)) == 1 and (b"boom", 4) not in seen
    assert (b"later", 2) in seen
    assert c.stats["completed"] == 2 and c.stats["dropped"] == 1 and c.stats["dead"] == 1


def test_heartbeat_keeps_a_slow_handler_leased(q):
    started = threading.Event()
    runs = []

    def slow(job):
        runs.append(job.attempts)
        started.set()
        time.sleep(1.2)  # four times the lease: only the heartbeat keeps it

    q.enqueue(b"slow")
    reaper = Reaper([q])
    with Running(Consumer(q, slow, lease_ms=300)):
        assert started.wait(10)
        wait_for(lambda: (reaper.run_once(), q.counts()["completed"] == 1)[1], what="the slow job")
    assert runs == [1]


def test_batch_claim_and_concurrency_finish_everything_once(q, r):
    lanes = [ids.mint("PLR") for _ in range(5)]
    q.enqueue_many([{"payload": str(i).encode(), "lane": lanes[i % 5]} for i in range(500)])
    done = []
    lock = threading.Lock()

    def handler(job):
        with lock:
            done.append(job.id)

    with Running(Consumer(q, handler, concurrency=4, prefetch=32)):
        wait_for(lambda: q.counts()["completed"] == 500, what="500 completions")
    assert len(done) == len(set(done)) == 500


def test_stop_hands_back_prefetched_jobs(q):
    gate = threading.Event()
    q.enqueue_many([b"x"] * 10)
    c = Consumer(q, lambda job: gate.wait(10), concurrency=1, prefetch=4)
    t = threading.Thread(target=c.run)
    t.start()
    wait_for(lambda: q.counts()["active"] == 5, what="1 running + 4 prefetched")
    c.stop()
    wait_for(lambda: q.counts()["pending"] == 9, what="the prefetched jobs handed back")
    gate.set()
    t.join(10)
    assert q.counts()["completed"] == 1 and q.counts()["active"] == 0


def test_an_idle_consumer_wakes_on_enqueue(q):
    got = threading.Event()
    with Running(Consumer(q, lambda job: got.set(), beat_ms=30_000)) as c:
        wait_for(lambda: c._parked, what="the consumer to park on BLPOP")  # beat: 30 s
        q.enqueue(b"x")
        assert got.wait(5), "the wake token did not reach the parked consumer"


def test_backoff_grows_and_is_capped():
    b = exponential_backoff(base_ms=100, cap_ms=1_000)
    for attempt, top in [(1, 100), (2, 200), (3, 400), (4, 800), (10, 1_000)]:
        delays = {b(attempt) for _ in range(50)}
        assert all(top // 2 <= d <= top for d in delays)


@pytest.mark.parametrize("setting", [{"concurrency": 0}, {"lease_ms": 10}, {"lease_ms": 10**30},
                                     {"lease_ms": float("nan")}, {"prefetch": -1}, {"prefetch": 10**6},
                                     {"beat_ms": "1000"}, {"max_attempts": 0}, {"grace_ms": -1}])
def test_bad_settings_are_refused(q, setting):
    """A setting the scripts would refuse fails at construction, not later in a thread."""
    with pytest.raises(ArgumentError):
        Consumer(q, print, **setting)


@pytest.mark.parametrize("shards", [1, 3])
def test_stop_wakes_a_parked_consumer_at_once_however_long_the_beat(r, shards):
    """A consumer with nothing to do parks for up to beat_ms; stop() (what
    SIGTERM calls) rings it awake, so a worker exits in well under a beat."""
    from echomq import ShardedQueue

    q = Queue("cons", r) if shards == 1 else ShardedQueue("cons", r, shards=shards)
    c = Consumer(q, lambda job: None, concurrency=4, beat_ms=2_900)
    t = threading.Thread(target=c.run)
    t.start()
    q.enqueue(b"one")
    wait_for(lambda: c.stats["completed"] == 1 and c._parked, what="the first job, then a parked fetcher")
    started = time.monotonic()
    c.stop()
    t.join(10)
    assert not t.is_alive() and time.monotonic() - started < 1.5
