"""Worker threads that claim for themselves while the queue is busy
(Consumer._serve_self, from SELF_SERVE_THREADS threads): a job one of them
claimed is never stuck behind a slow job of that thread, a stop hands back
what they claimed and had not started, and the fetcher takes over whenever
no thread claims."""
from __future__ import annotations

import sys
import threading
import time

import pytest

from echomq import Consumer, Queue
from echomq.consumer import SELF_CLAIM, SELF_SERVE_THREADS, _Own

from .test_consumer import Running, wait_for


@pytest.fixture
def q(r):
    return Queue("self", r)


THREADS = SELF_SERVE_THREADS
AHEAD = THREADS * (SELF_CLAIM - 1)  # a fixed prefetch with which each thread claims SELF_CLAIM jobs


def test_jobs_behind_a_held_up_thread_are_run_by_another(q):
    """Two gate jobs in a row among fast ones, after the fetcher's first
    claim (THREADS + AHEAD jobs), so the threads claim them for
    themselves. Whichever thread claims a gate with jobs behind it is held
    up; those jobs must go to a thread that is free, so every fast job is
    done while both gates still block."""
    gate = threading.Event()
    fast = [jid for jid, _ in q.enqueue_many([b"fast"] * (THREADS + AHEAD + 100))]
    q.enqueue_many([b"gate", b"gate"])
    fast += [jid for jid, _ in q.enqueue_many([b"fast"] * 100)]
    done, lock = set(), threading.Lock()

    def handler(job):
        if job.payload == b"gate":
            gate.wait(60)
        else:
            with lock:
                done.add(job.id)

    with Running(Consumer(q, handler, concurrency=THREADS, prefetch=AHEAD)) as c:
        try:
            wait_for(lambda: len(done) == len(fast), what="every fast job, with both gates still blocking")
            wait_for(lambda: q.counts()["active"] == 2, what="the fast jobs' acks")
            assert not gate.is_set() and c.stats["unblocked"] >= 1
        finally:
            gate.set()
        wait_for(lambda: q.counts()["completed"] == len(fast) + 2, what="the gates")
    assert done == set(fast) and c.stats["completed"] == len(fast) + 2


def test_stop_hands_back_the_jobs_threads_claimed_for_themselves(q):
    """After the fetcher's first claim and as many jobs again, every
    handler blocks: each thread holds jobs it claimed and has not started.
    A stop hands all of them back; only the ones running stay leased until
    they finish."""
    gate = threading.Event()
    n, fast = 4 * (THREADS + AHEAD), 2 * (THREADS + AHEAD)
    q.enqueue_many([b"x"] * n)
    count, lock = [0], threading.Lock()

    def handler(job):
        with lock:
            count[0] += 1
            blocks = count[0] > fast
        if blocks:
            gate.wait(60)

    c = Consumer(q, handler, concurrency=THREADS, prefetch=AHEAD, grace_ms=60_000)
    t = threading.Thread(target=c.run)
    t.start()
    try:
        wait_for(lambda: count[0] == fast + THREADS, what="the fast jobs done and every thread blocked")
        assert c._waiting_own(), "no thread holds jobs it claimed (the test tests nothing)"
        c.stop()
        wait_for(lambda: q.counts()["pending"] == n - fast - THREADS and q.counts()["active"] == THREADS,
                 what="every claimed, unstarted job handed back")
    finally:
        gate.set()
        t.join(20)
    assert not t.is_alive()
    counts = q.counts()
    assert (counts["completed"], counts["pending"], counts["active"]) == (fast + THREADS, n - fast - THREADS, 0)


def test_the_fetcher_claims_when_no_thread_claims_for_itself(q):
    """The last claim came back full, yet every thread waits on the run
    queue (a thread's claim can come back full just as the fetcher parks,
    and a thread does not claim while it parks): the fetcher must claim,
    not leave the work to threads that are all waiting."""
    handled = threading.Event()
    with Running(Consumer(q, lambda job: handled.set(), concurrency=THREADS, beat_ms=200)) as c:
        wait_for(lambda: c._parked, what="the consumer to park")
        c._hot = True  # what that race leaves behind
        q.enqueue(b"x")
        assert handled.wait(5), "the job was not claimed"
        wait_for(lambda: q.counts()["completed"] == 1, what="its ack")


def test_handler_many_with_batch_1_is_not_self_served(q):
    """handler_many with batch=1 takes one job per call, but it is not a
    handler: its jobs are never run as a handler's (that called None and
    dead-lettered them)."""
    n = 400
    q.enqueue_many([b"x"] * n)
    c = Consumer(q, handler_many=lambda jobs: [None] * len(jobs), batch=1,
                 concurrency=SELF_SERVE_THREADS, prefetch=0, max_attempts=1)
    with Running(c):
        wait_for(lambda: q.counts()["completed"] + q.counts()["dead"] == n, what="every job settled")
    assert c.stats["dead"] == 0, f"{c.stats['dead']} jobs dead-lettered: {dict(c.stats)}"


def test_the_check_for_held_up_threads_survives_threads_changing_the_running_jobs(q):
    """The fetcher's check for held-up threads reads the running jobs while
    threads that run their own jobs add and remove them without the lock:
    it must never raise 'dictionary changed size during iteration' (which
    crashed the consumer). A GIL switch every microsecond makes the race
    likely within the three seconds."""
    c = Consumer(q, lambda job: None, concurrency=SELF_SERVE_THREADS)
    own = _Own()
    own.jobs.append(object())
    c._owns.append(own)  # a thread holds an unstarted job of its own
    old = time.monotonic() - 10
    for i in range(SELF_SERVE_THREADS):  # every thread in a handler for > the budget
        c._started[f"J{i}"] = old
    stop = threading.Event()

    def run_own_like():  # what _run_own does per job, lock-free
        started = c._started
        i = 0
        def handler():  # a Python call: where the GIL may change hands, as in a real handler
            return None

        while not stop.is_set():
            started[f"K{i}"] = old
            handler()
            del started[f"K{i}"]
            handler()
            i += 1

    prev = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    t = threading.Thread(target=run_own_like)
    t.start()
    errors = []
    try:
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and not errors:
            with c._cond:
                try:
                    c._stuck()
                except RuntimeError as exc:
                    errors.append(exc)
    finally:
        stop.set()
        t.join()
        sys.setswitchinterval(prev)
    assert not errors, f"_stuck raised {errors[0]!r}"


def test_a_ready_job_is_claimed_while_one_thread_is_held_up_and_the_rest_wait(q):
    """The last claim full (as a race leaves it), one thread held up in a
    long handler, every other thread waiting: the fetcher stands aside for
    threads that claim for themselves, so it must wake one of them; a
    ready job was never claimed."""
    gate = threading.Event()
    handled = threading.Event()

    def handler(job):
        if job.payload == b"gate":
            gate.wait(30)
        else:
            handled.set()

    q.enqueue(b"gate")
    c = Consumer(q, handler, concurrency=SELF_SERVE_THREADS, prefetch=0, beat_ms=200)

    def others_idle():
        # Each beat the fetcher hands its park to an idle thread, which then
        # waits in Valkey, not on the run queue: every other thread is idle
        # only between two hand-overs. So look often, and make the race's
        # state under the consumer's lock, while it holds.
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with c._cond:
                if c._started and c._idle == SELF_SERVE_THREADS - 1:
                    c._hot = True  # what the race leaves behind
                    return True
            time.sleep(0.0002)
        return False

    with Running(c):
        try:
            assert others_idle(), "gate running and every other thread idle: not seen in 20 s"
            q.enqueue(b"x")
            ok = handled.wait(3)
        finally:
            gate.set()
    assert ok, "a ready job was not claimed while 15 threads were idle"


def test_threads_added_as_the_consumer_stops_end_and_do_not_hold_up_the_stop(q):
    """A worker thread decides to add threads just as the consumer stops,
    and starts them after the shutdown handed out its stop sentinels: the
    stop must not wait the whole grace for them, and none may be left
    running (they blocked on the run queue for ever) once ``run`` returns,
    even one slow to get going (as on a loaded machine)."""
    q.enqueue_many([b"x"] * 2000)
    in_window, fetcher, late = threading.Event(), [], []
    c = Consumer(q, lambda job: time.sleep(0.002), grace_ms=30_000)  # adaptive concurrency
    original, work_loop = c._start_worker, c._work_loop

    def start_worker():
        if fetcher and threading.current_thread() is not fetcher[0]:
            in_window.set()       # a worker thread, between _grow's decision and the start
            c._stopping.wait()    # ... preempted here while the stop runs
            time.sleep(0.3)       # and _shutdown puts its sentinels
            late.append(True)
        original()

    def slow_work_loop():
        if late:
            time.sleep(0.2)       # a late thread, slow to get going
        work_loop()

    c._start_worker, c._work_loop = start_worker, slow_work_loop
    t = threading.Thread(target=c.run)
    fetcher.append(t)
    t.start()
    assert in_window.wait(20), "no worker grew the pool"
    t0 = time.monotonic()
    c.stop()
    t.join(20)
    took = time.monotonic() - t0
    alive = [w for w in c._threads if w.is_alive()]
    for _ in alive:
        c._runq.put(None)  # clean up
    assert not alive and took < 10, f"stop took {took:.1f}s; {len(alive)} worker threads left running"
