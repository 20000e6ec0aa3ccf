"""Crash safety with real processes: SIGKILL, SIGSTOP/SIGCONT, SIGTERM and a
Valkey restart, each checked for loss and for a second effect."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from echomq import Queue, Reaper

from ..conftest import Server
from .helpers import snapshot

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def wait_for(predicate, timeout=30.0, what="condition"):
    """Poll ``predicate`` until true; the awaited event is in Valkey or a process."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


class Workers:
    def __init__(self, url, tmp_path):
        self.url, self.tmp, self.procs = url, tmp_path, []

    def start(self, *args):
        log = open(self.tmp / f"worker-{len(self.procs)}.log", "w+")
        proc = subprocess.Popen([sys.executable, "-m", "tests.echomq.worker_proc", "--url", self.url, *args],
                                cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        proc.log = log
        self.procs.append(proc)
        return proc

    def output(self, proc) -> str:
        proc.log.flush()
        return Path(proc.log.name).read_text()

    def cleanup(self):
        for proc in self.procs:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGCONT)
                proc.kill()
                proc.wait(10)


@pytest.fixture
def workers(valkey_server, r, tmp_path):
    w = Workers(valkey_server.url, tmp_path)
    yield w
    w.cleanup()


def reap_all(q: Queue, n: int, timeout=30.0):
    """Run reaper passes until ``n`` jobs came back (leases expire on the server clock)."""
    got = 0

    def done():
        nonlocal got
        got += q.reap()
        return got >= n

    wait_for(done, timeout, f"{n} expired leases to be reaped")
    return got


def test_sigkilled_consumer_loses_nothing_and_redelivery_has_no_second_effect(r, workers):
    q = Queue("crash", r)
    ids = [jid for jid, _ in q.enqueue_many([b"x"] * 40)]
    a = workers.start("--mode", "gate-after", "--concurrency", "4", "--prefetch", "4", "--lease-ms", "800")
    wait_for(lambda: r.llen("holding") == 4, what="worker A to hold 4 jobs")
    wait_for(lambda: q.counts()["active"] == 8, what="A's prefetch")
    # A did the effect of 4 jobs and acknowledged none. The handler pushes to
    # "holding" before it records the effect, so wait for the count too.
    wait_for(lambda: r.get("effects") == b"4", what="A's 4 effects")
    a.kill()
    a.wait(10)
    assert reap_all(q, 8) == 8
    workers.start("--mode", "effect", "--concurrency", "2")
    wait_for(lambda: q.counts()["completed"] == 40, what="worker B to finish everything")
    runs = [x.decode() for x in r.lrange("runs", 0, -1)]
    assert sorted(set(runs)) == sorted(ids)         # nothing lost
    assert len(runs) == 44                           # the 4 A held ran twice...
    assert int(r.get("effects")) == 40               # ...with one effect each
    assert all(r.exists(f"effect:{jid}") for jid in ids)
    c = q.counts()
    assert (c["pending"], c["active"], c["scheduled"], c["dead"]) == (0, 0, 0, 0)


def test_a_stopped_worker_wakes_up_fenced_out(r, workers):
    q = Queue("crash", r)
    (jid, _), = q.enqueue_many([b"x"])
    a = workers.start("--mode", "gate-before", "--lease-ms", "600")
    wait_for(lambda: r.llen("holding") == 1, what="A to hold the job")
    os.kill(a.pid, signal.SIGSTOP)  # A is frozen past its lease, heartbeat and all
    assert reap_all(q, 1) == 1
    r.delete("holding")
    b = workers.start("--mode", "gate-before", "--lease-ms", "60000")
    wait_for(lambda: r.llen("holding") == 1, what="B to hold the job")
    assert q.job(jid)["attempts"] == 2
    before = snapshot(r, q, jobs_only=True)
    effects_before = r.get("effects")
    os.kill(a.pid, signal.SIGCONT)
    r.lpush("gate", "a")  # exactly one of the two blocked handlers takes it
    wait_for(lambda: "refused, token 1 is stale" in workers.output(a) or
             "refused, token 2 is stale" in workers.output(b), what="a stale refusal")
    assert "refused, token 1 is stale" in workers.output(a), "A's completion must be the one refused"
    assert snapshot(r, q, jobs_only=True) == before  # A's wake-up changed nothing in the queue
    assert r.get("effects") == b"1" and effects_before is None  # A's effect is the only one...
    r.lpush("gate", "b")
    wait_for(lambda: q.counts()["completed"] == 1, what="B to complete")
    assert r.get("effects") == b"1"  # ...and B's run of the same job added none
    for proc in (a, b):
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
    assert q.counts()["completed"] == 1 and q.job(jid) is None


def test_a_poison_job_is_dead_lettered_after_its_stall_limit(r, workers):
    q = Queue("crash", r)
    (jid, _), = q.enqueue_many([b"poison"])
    deaths = 0
    while q.job(jid)["state"] != "dead":
        assert deaths < 5, "the poison job is looping"
        proc = workers.start("--mode", "poison", "--lease-ms", "300")
        assert proc.wait(30) == -signal.SIGKILL
        deaths += 1
        wait_for(lambda: q.reap(max_stalls=2) == 1, what="the lease to expire")
    assert deaths == 3  # two stalls allowed, the third is dead
    row = q.job(jid)
    assert row["stalled"] == 3 and "stalled 3 times" in row["last_error"]
    assert q.counts()["dead"] == 1 and q.claim(lease_ms=1000) is None


def test_sigterm_finishes_jobs_in_hand_and_hands_back_the_rest(r, workers):
    q = Queue("crash", r)
    q.enqueue_many([b"x"] * 20)
    proc = workers.start("--mode", "gate-after", "--concurrency", "2", "--prefetch", "6")
    wait_for(lambda: r.llen("holding") == 2 and q.counts()["active"] == 8, what="2 running + 6 prefetched")
    proc.send_signal(signal.SIGTERM)
    wait_for(lambda: q.counts()["pending"] == 18, what="the 6 unstarted jobs handed back")
    r.lpush("gate", "1", "2")
    assert proc.wait(15) == 0
    c = q.counts()
    assert (c["completed"], c["pending"], c["active"]) == (2, 18, 0)
    assert int(r.get("effects")) == 2
    assert "handed back 6 unstarted jobs" in workers.output(proc)
    # The handed-back jobs did not spend an attempt.
    job = q.claim(lease_ms=1000)
    assert job.attempts == 2 and q.retry(job.id, job.attempts, max_attempts=2) == "scheduled"


def test_jobs_survive_a_valkey_restart_exactly_once(tmp_path):
    server = Server(appendonly=True)
    try:
        client = server.client()
        q = Queue("crash", client)
        ids = [jid for jid, _ in q.enqueue_many([b"x"] * 300)]
        w = Workers(server.url, tmp_path)
        try:
            for _ in range(2):
                w.start("--mode", "effect", "--concurrency", "2", "--sleep-ms", "30", "--lease-ms", "1500")
            wait_for(lambda: q.counts()["completed"] >= 60, what="work to be under way")
            # 30 ms jobs on 2 x 2 threads: seconds of work are left when the server goes.
            assert q.counts()["completed"] < 250
            server.restart()  # SHUTDOWN writes the AOF; consumers see their connections drop
            client = server.client()
            q = Queue("crash", client)
            assert q.counts()["completed"] >= 60  # the AOF kept what happened before
            # A handler whose own Valkey calls failed in the restart asked for a
            # retry; the reaper's passes (reap + promote) bring those back.
            reaper = Reaper([q], interval_ms=50)
            wait_for(lambda: (reaper.run_once(), q.counts()["completed"] == 300)[1], timeout=60,
                     what="every job to complete after the restart")
            assert int(client.get("effects")) == 300
            assert all(client.exists(f"effect:{jid}") for jid in ids)
            c = q.counts()
            assert (c["pending"], c["active"], c["dead"], c["completed"]) == (0, 0, 0, 300)
            outputs = [w.output(p) for p in w.procs]
            assert not any("crashed" in out for out in outputs), outputs
            assert any("lost Valkey" in out for out in outputs), [out[-3000:] for out in outputs]
        finally:
            w.cleanup()
    finally:
        server.stop()


def test_an_idle_consumer_uses_almost_no_cpu(r, workers, capsys):
    proc = workers.start("--mode", "effect", "--beat-ms", "1000")
    wait_for(lambda: "started" in workers.output(proc), what="the consumer to start")
    Queue("crash", r).enqueue(b"x")
    wait_for(lambda: r.get("effects") == b"1", what="one job so the loop is warm")

    def cpu_seconds():
        fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    before = cpu_seconds()
    time.sleep(5)  # the measurement window itself, not a wait for an event
    used = cpu_seconds() - before
    with capsys.disabled():
        print(f"\nidle consumer: {used:.3f}s CPU in 5s")
    assert used < 0.2


def test_cancel_stops_a_sleeping_handler_within_one_beat(r, workers):
    """A real consumer process runs a handler that sleeps 20 s in 10 ms steps
    with ``job.check()`` between; cancelling the job stops it within one
    heartbeat (lease/3 = 300 ms), its effect is never done, and the queue
    shows it nowhere."""
    q = Queue("crash", r)
    jid, _ = q.enqueue(b"slow")
    proc = workers.start("--mode", "cancellable", "--sleep-ms", "20000", "--lease-ms", "900")
    wait_for(lambda: r.llen("holding") == 1, what="the handler to start")
    cancelled_at = time.monotonic()
    assert q.cancel(jid) == "cancelling"
    stopped = wait_for(lambda: r.blpop(["stopped"], timeout=1), timeout=10, what="the handler to stop")
    took = time.monotonic() - cancelled_at
    assert stopped[1].decode() == jid
    # One beat (0.3 s) and its round trip, with slack for a loaded machine; without the beat it is 20 s.
    assert took < 0.3 + 1.2, f"the handler stopped {took:.2f}s after the cancel; one beat is 0.3s"
    wait_for(lambda: "cancelled" in workers.output(proc), what="the consumer to log it")
    c = q.counts()
    assert (c["pending"], c["active"], c["scheduled"], c["dead"], c["completed"]) == (0, 0, 0, 0, 0)
    assert c["cancelled"] == 1 and q.find(jid) is None
    assert r.get("effects") is None and not r.exists(f"effect:{jid}")
    assert proc.poll() is None  # the consumer keeps running
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(10) == 0


def test_a_bug_in_the_consumer_exits_the_process_non_zero(r, workers):
    q = Queue("crash", r)
    q.enqueue(b"x")
    proc = workers.start("--mode", "crash")
    assert proc.wait(30) != 0
    out = workers.output(proc)
    assert "crashed; stopping" in out and "Traceback" in out and "a bug in the consumer's own code" in out
    # Nothing lost: the job was completed (the bug hit after the ack went out)
    # or stays leased for the reaper.
    c = q.counts()
    assert c["completed"] + c["active"] + c["pending"] == 1
