"""Consumer(handler_many=...): batches of claimed jobs in one call, each job
settled on its own result."""
import threading

import pytest

from echomq import Consumer, Drop, Queue, Reaper, Retry

from .test_consumer import Running, wait_for


@pytest.fixture
def q(r):
    return Queue("many", r)


def test_batches_are_handed_whole_and_every_job_settles_on_its_own_result(q):
    sizes, seen, lock = [], [], threading.Lock()

    def handle_many(jobs):
        with lock:
            sizes.append(len(jobs))
            seen.extend((j.payload, j.attempts) for j in jobs)
        out = []
        for j in jobs:
            if j.payload == b"drop":
                out.append(Drop("not needed"))
            elif j.payload == b"boom":
                out.append(ValueError("always fails"))
            elif j.payload == b"later" and j.attempts == 1:
                out.append(Retry("not yet", delay_ms=0))
            else:
                out.append(None)
        return out

    q.enqueue_many([{"payload": b"ok%d" % i} for i in range(117)])
    for p in (b"drop", b"boom", b"later"):
        q.enqueue(p)
    reaper = Reaper([q])
    with Running(Consumer(q, handler_many=handle_many, batch=50, max_attempts=3, backoff=lambda n: 0)) as c:
        wait_for(lambda: (reaper.run_once(), q.counts()["dead"] == 1 and q.counts()["completed"] == 119)[1],
                 what="119 completions and one dead letter")
    assert max(sizes) == 50 and sum(sizes) == len(seen) == 120 + 2 + 1  # boom thrice, later twice
    assert [d["id"] for d in q.dead_jobs()] and "ValueError: always fails" in q.dead_jobs()[0]["last_error"]
    assert (b"later", 2) in seen and seen.count((b"boom", 3)) == 1
    assert c.stats["completed"] == 118 and c.stats["dropped"] == 1 and c.stats["dead"] == 1


def test_a_raising_or_miscounting_handler_many_retries_the_whole_batch(q):
    calls = []

    def handle_many(jobs):
        calls.append([j.attempts for j in jobs])
        if len(calls) == 1:
            raise RuntimeError("database gone")
        if len(calls) == 2:
            return [None]  # one result for more jobs: a bug, so nothing is completed
        return [None] * len(jobs)

    ids_ = [q.enqueue(b"x%d" % i)[0] for i in range(3)]
    reaper = Reaper([q])
    with Running(Consumer(q, handler_many=handle_many, batch=10, backoff=lambda n: 0, max_attempts=5)):
        wait_for(lambda: (reaper.run_once(), q.counts()["completed"] == 3)[1], what="three completions")
    assert all(q.job(i) is None or q.job(i)["state"] == "completed" for i in ids_)
    assert sum(len(c) for c in calls) >= 9  # every job ran three times: failed, miscounted, completed


def test_handler_and_handler_many_are_exclusive(q):
    with pytest.raises(ValueError):
        Consumer(q)
    with pytest.raises(ValueError):
        Consumer(q, lambda j: None, handler_many=lambda js: [])
    with pytest.raises(ValueError):
        Consumer(q, lambda j: None, batch=5)
    assert Consumer(q, handler_many=lambda js: [], batch=5, prefetch=3).capacity == 8
