"""Queue.wait: told by the script that ends the job (lua/wait.lua and
lua/include/waiters.lua), never by polling; with events on or off; for a
job that ended before the call; TimeoutError at the deadline. On Valkey and
Redis 7.0, and through a sharded queue."""
from __future__ import annotations

import threading

import pytest

from echomq import JobNotFound, Queue, ShardedQueue, ids
from echomq.errors import ArgumentError

from .helpers import snapshot


@pytest.fixture(params=["on", "off"])
def q(any_server, request):
    queue = Queue("wt", any_server)
    if request.param == "off":
        queue.set_events(0)
    return queue


def waiting(q, job_id, timeout_s=30.0):
    """Start a waiter thread; answer it once it is registered (the row's
    'wait' count says so: from then on no end can go unheard)."""
    out = {}
    start = (q.job(job_id) or {}).get("wait", 0)

    def run():
        try:
            out["state"] = q.wait(job_id, timeout_s)
        except Exception as exc:  # noqa: BLE001 -- the test looks at it
            out["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    while thread.is_alive() and (q.job(job_id) or {}).get("wait", 0) <= start:
        thread.join(0.005)
    thread.out = out
    return thread


def test_a_completion_wakes_the_waiter(q):
    jid, _ = q.enqueue(b"x")
    job = q.claim(lease_ms=60_000)
    waiter = waiting(q, jid)
    assert waiter.is_alive()  # registered and blocked: the job has not ended
    q.complete(jid, job.attempts)
    waiter.join(30)
    assert waiter.out == {"state": "completed"}
    assert q.wait(jid, 1) == "completed"  # ended before the call: answered at once from the record


def test_wait_returns_as_the_job_completes(q, any_server):
    """Ordering, not timing: as soon as it returns, the waiter enqueues a
    marker; a timer started when the complete call returns enqueues another
    later (0.5 s: room for a loaded machine, still half a polling slice).
    The waiter's marker is in first, every time."""
    for _ in range(3):
        jid, _ = q.enqueue(b"x")
        job = q.claim(lease_ms=60_000)
        order = []

        def after_wait():
            order.append(q.wait(jid, 30))
            order.append(q.enqueue(b"waiter")[0])

        waiter = threading.Thread(target=after_wait)
        waiter.start()
        while (q.job(jid) or {}).get("wait", 0) < 1:
            waiter.join(0.005)
        q.complete(jid, job.attempts)
        timer = threading.Timer(0.5, lambda: order.append(q.enqueue(b"timer")[0]))
        timer.start()
        waiter.join(30)
        timer.join(30)
        assert order[0] == "completed"
        assert [q.find(j)["payload"] for j in order[1:]] == [b"waiter", b"timer"]
        for j in order[1:]:
            q.remove(j)


def test_every_waiter_is_told(q):
    jid, _ = q.enqueue(b"x")
    job = q.claim(lease_ms=60_000)
    waiters = [waiting(q, jid) for _ in range(3)]
    q.retry(jid, job.attempts, max_attempts=1, error="boom")
    for w in waiters:
        w.join(30)
    assert [w.out for w in waiters] == [{"state": "dead"}] * 3
    assert "wait" not in q.job(jid)  # a dead row keeps no count of waiters already told
    assert q.wait(jid, 1) == "dead"


@pytest.mark.parametrize("end", ["cancel", "remove", "cancel_active", "reap_dead"])
def test_every_way_to_end_is_told(q, any_server, end):
    jid, _ = q.enqueue(b"x")
    job = q.claim(lease_ms=60_000) if end in ("cancel_active", "reap_dead") else None
    waiter = waiting(q, jid)
    if end == "cancel":
        q.cancel(jid)
    elif end == "remove":
        q.remove(jid)
    elif end == "cancel_active":
        q.cancel(jid)
        assert waiter.is_alive()  # marked, not ended: its worker still holds it
        q.complete_many([(jid, job.attempts)])  # its worker's ack: refused, the job dropped
    else:
        any_server.zadd(q.k_active, {jid: 0})
        q.reap(max_stalls=0)
    waiter.join(30)
    want = {"cancel": "cancelled", "remove": "removed", "cancel_active": "cancelled", "reap_dead": "dead"}[end]
    assert waiter.out == {"state": want}


def test_a_retry_is_not_an_end(q, any_server):
    jid, _ = q.enqueue(b"x")
    job = q.claim(lease_ms=60_000)
    waiter = waiting(q, jid)
    q.retry(jid, job.attempts, max_attempts=3, error="again")
    any_server.zadd(q.k_schedule, {jid: 0})
    q.promote()
    job = q.claim(lease_ms=60_000)
    assert waiter.is_alive()
    q.complete(jid, job.attempts)
    waiter.join(30)
    assert waiter.out == {"state": "completed"}


def test_the_deadline_raises_timeout_error(q):
    jid, _ = q.enqueue(b"x")
    with pytest.raises(TimeoutError):
        q.wait(jid, 0.05)
    assert q.job(jid)["wait"] == 1  # it registered; an end pushes once for it and the push expires


def test_an_unknown_job_and_bad_arguments(q, any_server):
    with pytest.raises(JobNotFound):
        q.wait(ids.mint("JOB"), 1)
    before = snapshot(any_server, q)
    for bad in (0, -1, float("nan"), float("inf"), "1", None, True, 10**12):
        with pytest.raises(ArgumentError):
            q.wait(ids.mint("JOB"), bad)
    for bad in ("JOB", ids.mint("PLR"), 7):
        with pytest.raises(ArgumentError):
            q.wait(bad, 1)
    assert snapshot(any_server, q) == before


def test_a_completed_job_past_retention_is_not_found(q):
    q.set_retention(completed=0)
    jid, _ = q.enqueue(b"x")
    job = q.claim(lease_ms=60_000)
    q.complete(jid, job.attempts)
    with pytest.raises(JobNotFound):
        q.wait(jid, 1)


def test_wait_on_a_sharded_queue(valkey_server):
    client = valkey_server.client()
    client.flushall()
    sq = ShardedQueue("wts", client, shards=4)
    lane = ids.mint("PLR")
    jid, _ = sq.enqueue(b"x", lane=lane)
    job = sq.claim(lease_ms=60_000)
    shard = sq.locate(jid)
    waiter = waiting(shard, jid)
    sq.complete(jid, job.attempts)
    waiter.join(30)
    assert waiter.out == {"state": "completed"}
    other = ShardedQueue("wts", client, shards=4)  # another process: knows nothing of where the job ran
    assert other.wait(jid, 1) == "completed"


def test_wait_on_the_cluster(valkey_cluster):
    client = valkey_cluster.client()
    q = Queue("wtc", client)
    jid, _ = q.enqueue(b"x")
    job = q.claim(lease_ms=60_000)
    waiter = waiting(q, jid)
    q.retry(jid, job.attempts, max_attempts=1, error="boom")
    waiter.join(30)
    assert waiter.out == {"state": "dead"} and q.wait(jid, 1) == "dead"


@pytest.mark.parametrize("again", ["requeue", "reenqueue"])
def test_a_waiter_is_never_answered_by_an_earlier_life_of_the_job(q, any_server, again):
    """A waiter that timed out leaves its push unread when the job ends. If
    the job lives again (requeued from dead, or its id enqueued again once
    its completed row is gone), the next waiter must wait for the new end,
    not take that leftover: each life has a list of its own."""
    jid, _ = q.enqueue(b"x")
    with pytest.raises(TimeoutError):
        q.wait(jid, 0.05)  # registered, then gave up
    first = f"{q.prefix}notify:{jid}:{q.job(jid)['wait_seq']}"
    job = q.claim(lease_ms=60_000)
    if again == "requeue":
        assert q.retry(jid, job.attempts, max_attempts=1, error="boom") == "dead"
        assert any_server.llen(first) == 1  # the unread push
        q.requeue_dead(jid)
    else:
        q.complete(jid, job.attempts)
        assert any_server.llen(first) == 1
        q.enqueue(b"x", job_id=jid)  # the row is gone: the id is free again
    waiter = waiting(q, jid)
    assert waiter.is_alive(), waiter.out  # not answered by the earlier end
    assert f"{q.prefix}notify:{jid}:{q.job(jid)['wait_seq']}" != first
    assert any_server.llen(first) == 1  # left for whoever may still read it; it expires
    job = q.claim(lease_ms=60_000)
    q.complete(jid, job.attempts)
    waiter.join(30)
    assert waiter.out == {"state": "completed"}

def before_the_first_blpop(q, step):
    """Run ``step()`` once, when the next ``q.wait`` has registered and is
    about to send its first BLPOP: the moment a waiter is between its
    blocking reads, driven by hand instead of by timing."""
    real = q.client.blpop

    def blpop(*args, **kw):
        del q.client.blpop  # the client's own method again, for step() and after
        step()
        return real(*args, **kw)

    q.client.blpop = blpop


@pytest.mark.parametrize("again", ["requeue", "reenqueue"])
def test_a_waiter_between_blocking_reads_still_hears_an_end_followed_by_a_new_life(q, any_server, again):
    """A waiter registers; before its BLPOP reaches the server the job ends
    (its push waits in the list), lives again (requeued from dead, or its id
    enqueued again) and gets a waiter of its new life. The first waiter must
    still get the end it registered for, and the new one the new end."""
    jid, _ = q.enqueue(b"x")
    later = {}

    def end_and_live_again():
        job = q.claim(lease_ms=60_000)
        if again == "requeue":
            assert q.retry(jid, job.attempts, max_attempts=1, error="boom") == "dead"
            q.requeue_dead(jid)
        else:
            assert q.complete(jid, job.attempts) is True
            q.enqueue(b"x", job_id=jid)
        later["waiter"] = waiting(q, jid)

    before_the_first_blpop(q, end_and_live_again)
    assert q.wait(jid, 2) == ("dead" if again == "requeue" else "completed")
    waiter = later["waiter"]
    assert waiter.is_alive(), waiter.out  # the new life has not ended
    job = q.claim(lease_ms=60_000)
    q.complete(jid, job.attempts)
    waiter.join(30)
    assert waiter.out == {"state": "completed"}
