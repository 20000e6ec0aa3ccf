"""The park handed to a waiting worker thread (Consumer._park_or_hand_over):
the job that ends a quiet spell starts on the thread that read its wake,
with no hand-off between threads; a stop, a dropped connection and a
handler_many consumer (which never hands its park over) all behave as
with the fetcher parked itself."""
from __future__ import annotations

import threading
import time

import pytest

from echomq import Consumer, Queue, ShardedQueue
from echomq.consumer import _TAKEN

from .test_consumer import Running, wait_for


@pytest.fixture(params=["queue", "sharded"])
def q(request, r):
    return Queue("hand", r) if request.param == "queue" else ShardedQueue("hand", r, shards=3)


def parked_in_worker(c) -> bool:
    return c._parked and c._handover is _TAKEN


def test_the_job_that_ends_a_quiet_spell_starts_on_the_thread_that_read_its_wake(q):
    ran_on = []

    def handler(job):
        ran_on.append(threading.current_thread().name)

    with Running(Consumer(q, handler, concurrency=2)) as c:
        for n in range(1, 4):
            wait_for(lambda: parked_in_worker(c), what="a worker thread parked for the fetcher")
            q.enqueue(b"x")
            wait_for(lambda: q.counts()["completed"] == n, what=f"job {n} completed")
        assert c.stats["worker_wakes"] == 3
    assert len(ran_on) == 3 and all("-worker-" in name for name in ran_on)


def test_a_stop_ends_the_park_a_worker_holds_at_once(q):
    c = Consumer(q, lambda job: None, concurrency=1, beat_ms=60_000)
    runner = threading.Thread(target=c.run)
    runner.start()
    try:
        wait_for(lambda: parked_in_worker(c), what="the worker parked for the fetcher")
        began = time.monotonic()
        c.stop()
        runner.join(10)
        assert not runner.is_alive()
        assert time.monotonic() - began < 5  # the beat is a minute: the doorbell ended the park
    finally:
        c.stop()
        runner.join(10)


def test_a_parked_connection_dropped_under_a_worker_is_survived(q, r):
    done = []
    with Running(Consumer(q, lambda job: done.append(job.id), concurrency=2)) as c:
        wait_for(lambda: parked_in_worker(c), what="a worker thread parked for the fetcher")
        blocked = [cl for cl in r.client_list() if cl.get("cmd") in ("blpop", "blmpop")]
        assert blocked
        for cl in blocked:
            r.client_kill_filter(_id=cl["id"])
        job_id = q.enqueue(b"after")[0]
        wait_for(lambda: done == [job_id], what="the job enqueued after the drop")
        assert c._crashed is None


def test_a_handler_many_consumer_parks_its_fetcher_itself(q):
    seen = []
    with Running(Consumer(q, handler_many=lambda jobs: seen.extend(j.id for j in jobs), concurrency=2)) as c:
        wait_for(lambda: c._parked, what="the fetcher parked")
        assert c._handover is None
        q.enqueue(b"x")
        wait_for(lambda: len(seen) == 1, what="the job")
        assert c.stats["worker_wakes"] == 0


def test_a_job_that_comes_while_the_first_runs_does_not_wait_for_a_beat(q):
    """The worker that woke answers the fetcher without waking it (its claim
    came back short); the fetcher, woken as that claim went out, must take
    the answer and park again within moments, not at the end of a beat."""
    gate, started, done = threading.Event(), threading.Event(), []

    def handler(job):
        if job.payload == b"slow":
            started.set()
            gate.wait(30)
        done.append(job.payload)

    with Running(Consumer(q, handler, concurrency=2, beat_ms=60_000)) as c:
        try:
            wait_for(lambda: parked_in_worker(c), what="a worker thread parked for the fetcher")
            q.enqueue(b"slow")
            assert started.wait(10)
            q.enqueue(b"fast")
            wait_for(lambda: done == [b"fast"], timeout=10, what="the second job, with the first still running")
        finally:
            gate.set()
        wait_for(lambda: done == [b"fast", b"slow"], what="the first job")
