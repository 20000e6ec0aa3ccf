"""Python and the Node client (clients/node) on one queue: jobs cross from
one runtime to the other, and a Node consumer killed mid-job is reaped by the
Python reaper and its job completed once, by Python, with the next token."""
from __future__ import annotations

import re
import signal
import time

import pytest

from echomq import Queue, Reaper, StaleToken, ids

from ..games.procs import wait_for
from ..nodeclient import NodeProc, run

pytestmark = pytest.mark.slow


def test_jobs_enqueued_by_python_are_consumed_by_the_node_consumer(valkey_server, r, tmp_path):
    q = Queue("interop", r)
    lanes = [ids.mint("PLR") for _ in range(3)]
    first = q.enqueue_many([{"payload": f"flat {i} é🙂".encode(), "lane": None} for i in range(5)]
                           + [{"payload": f"laned {i}".encode(), "lane": lanes[i % 3]} for i in range(10)])
    node = NodeProc(tmp_path / "node.log", "consume", "--url", valkey_server.url, "--queue", "interop",
                    "--concurrency", "4", "--beat-ms", "500")
    try:
        wait_for(lambda: q.counts()["completed"] == 15, timeout=60, what="the first jobs, enqueued before it started")
        # The consumer is parked on the wake list now: new jobs must wake it.
        later = q.enqueue_many([{"payload": f"later {i}".encode(), "lane": lanes[i % 3]} for i in range(10)])
        wait_for(lambda: q.counts()["completed"] == 25, timeout=60, what="the jobs enqueued while it was parked")
    finally:
        code = node.stop()
    log = node.output()
    assert code == 0, log
    consumer = re.search(r"consumer (CSR\w+) started: queue=interop", log).group(1)
    handled = re.findall(r"^handled (JOB\w+) payload=(.*)$", log, re.M)
    sent = {jid for jid, _ in first + later}
    assert sorted(jid for jid, _ in handled) == sorted(sent)  # each exactly once
    assert '"flat 0 é🙂"' in dict(handled)[first[0][0]]
    assert f"consumer {consumer} stopped: completed=25 retried=0 dead=0 stale=0 cancelled=0 left_leased=0" in log
    records = q.completed_jobs(100)
    assert {rec["id"] for rec in records} == sent
    assert {rec["consumer"] for rec in records} == {consumer} and {rec["attempts"] for rec in records} == {1}
    c = q.counts()
    assert (c["pending"], c["active"], c["lanes"], c["ring"]) == (0, 0, 0, 0)


def test_jobs_enqueued_by_the_node_client_are_consumed_by_python(valkey_server, r, tmp_path):
    lane = ids.mint("PLR")
    lines = "\n".join(['{"payload": "from node"}', f'{{"payload": "laned", "lane": "{lane}"}}',
                       '{"payload": "later", "delay_ms": 60000}'])
    out = run("enqueue", "--url", valkey_server.url, "--queue", "interop", input=lines)
    assert out.returncode == 0, out.stderr
    answers = [line.split() for line in out.stdout.splitlines()]
    assert [a[1] for a in answers] == ["enqueued", "enqueued", "scheduled"] and all(ids.is_valid(a[0]) for a in answers)
    again = run("enqueue", "--url", valkey_server.url, "--queue", "interop",
                input=f'{{"id": "{answers[0][0]}", "payload": "again"}}')
    assert again.stdout.split() == [answers[0][0], "duplicate"]
    q = Queue("interop", r)
    jobs = q.claim_batch(5, lease_ms=60_000)
    assert [(j.id, j.payload, j.lane, j.attempts) for j in jobs] == [
        (answers[0][0], b"from node", None, 1), (answers[1][0], b"laned", lane, 1)]
    assert q.complete_many([(j.id, j.attempts) for j in jobs]) == [True, True]
    assert q.job(answers[2][0])["state"] == "scheduled"


def test_a_failing_node_handler_retries_then_dead_letters(valkey_server, r, tmp_path):
    q = Queue("interop", r)
    jid, _ = q.enqueue(b"poison")
    node = NodeProc(tmp_path / "node.log", "consume", "--url", valkey_server.url, "--queue", "interop",
                    "--handler", "fail", "--max-attempts", "2", "--beat-ms", "200")
    try:
        wait_for(lambda: q.job(jid)["state"] == "scheduled", timeout=60, what="the first failure to be retried")
        r.zadd(q.k_schedule, {jid: 0})  # due now rather than after the backoff
        assert q.promote() == 1
        wait_for(lambda: q.job(jid)["state"] == "dead", timeout=60, what="the second failure to dead-letter it")
    finally:
        assert node.stop() == 0, node.output()
    dead = q.dead_jobs()[0]
    assert dead["id"] == jid and dead["attempts"] == 2 and "failing on purpose" in dead["last_error"]
    assert re.search(rf"retried {jid} token=1 .*\n(.*\n)*.*dead {jid} token=2", node.output())


def test_a_killed_node_consumer_is_reaped_by_python_and_completed_once(valkey_server, r, tmp_path):
    q = Queue("interop", r)
    jid, _ = q.enqueue(b"slow work", lane=ids.mint("PLR"))
    node = NodeProc(tmp_path / "node.log", "consume", "--url", valkey_server.url, "--queue", "interop",
                    "--handler", "hang", "--lease-ms", "1500")
    try:
        started = wait_for(lambda: re.search(rf"consumer (CSR\w+) started {jid} token=(\d+)", node.output()),
                           timeout=60, every=0.02, what="the Node consumer to start the job")
        first = r.zscore(q.k_active, jid)
        # Its heartbeat (extend, every lease/3) moves the deadline while the handler hangs.
        wait_for(lambda: r.zscore(q.k_active, jid) > first, timeout=30, every=0.02, what="a heartbeat")
    finally:
        node.kill()  # SIGKILL mid-job: no goodbye, the lease stays
    token = int(started.group(2))
    assert token == 1 and q.job(jid)["state"] == "active"
    assert q.find(jid)["consumer"] == started.group(1)

    reaper = Reaper([q], max_stalls=2)
    wait_for(lambda: reaper.run_once()["interop"]["returned"] == 1, timeout=60, every=0.02,
             what="the lease to run out and be reaped")
    row = q.job(jid)
    assert row["state"] == "pending" and row["stalled"] == 1

    job = q.claim(lease_ms=60_000)
    assert (job.id, job.attempts, job.payload) == (jid, token + 1, b"slow work")
    with pytest.raises(StaleToken):
        q.complete(jid, token)  # what the dead worker would have sent
    assert q.complete(jid, job.attempts) is True
    assert q.complete(jid, job.attempts) is False  # once
    record = q.find(jid)
    assert (record["state"], record["attempts"], record["consumer"]) == ("completed", 2, None)
    assert q.counts()["completed"] == 1
    assert "completed" not in node.output().split(f"started {jid}")[1]


def test_a_node_consumer_under_a_rate_limit_takes_every_job_once_and_waits_for_the_window(valkey_server, r, tmp_path):
    """A claim cut short by the limit ends its reply with the waits; the
    Node client reads the jobs before them (it used to read the waits as a
    job and lose the claim) and parks until the window opens."""
    q = Queue("interop", r)
    q.set_rate_limit(3, 1000)
    sent = {jid for jid, _ in q.enqueue_many([f"job {i}".encode() for i in range(9)])}
    node = NodeProc(tmp_path / "node.log", "consume", "--url", valkey_server.url, "--queue", "interop",
                    "--concurrency", "8", "--beat-ms", "30000")
    try:  # a beat of 30 s: only the windows' waits can bring the last six in time
        wait_for(lambda: q.counts()["completed"] == 9, timeout=20, what="nine jobs at three per second")
    finally:
        code = node.stop()
    log = node.output()
    assert code == 0 and "claim failed" not in log, log
    assert sorted(re.findall(r"^handled (JOB\w+)", log, re.M)) == sorted(sent)
    starts = sorted(rec["claimed"] for rec in q.completed_jobs(100))  # server ms of each claim
    assert all(later - earlier >= 1000 for earlier, later in zip(starts, starts[3:])), starts  # 3 per window


def test_a_node_consumer_waits_out_a_full_queue_window_deaf_to_new_jobs(valkey_server, r, tmp_path):
    """While the queue's window is full with jobs ready behind it, each new
    job's wake token would only make the consumer claim nothing: it sleeps
    until the window reopens, as the Python consumer does."""
    q, node = _behind_a_full_window(valkey_server, r, tmp_path, per_ms=2000, beat_ms=30_000)
    try:
        r.config_resetstat()
        for i in range(20):  # one EVALSHA each, and a wake token each
            q.enqueue(f"later {i}".encode())
        wait_for(lambda: int(r.hget(q.k_meta, "completed")) >= 2, timeout=20,  # (counts() is a script too)
                 what="the window to reopen")
        calls = r.info("commandstats")["cmdstat_evalsha"]["calls"]
    finally:
        code = node.stop()
    assert code == 0, node.output()
    assert calls - 20 <= 3, calls  # a claim or two at the reopening, and the complete: not one per wake token


def test_a_node_consumer_stopped_while_a_claim_is_in_flight_exits_when_it_answers(valkey_server, r, tmp_path):
    """stop() that comes while the claim is on its way, and the claim then
    answers a queue wait: the consumer ends at once, not after sleeping
    out a beat (it did: 8 s with an 8 s beat). The claim is held in flight
    by CLIENT PAUSE WRITE (the server queues every script call meanwhile)."""
    q, node = _behind_a_full_window(valkey_server, r, tmp_path, per_ms=60_000, beat_ms=3000)
    try:
        r.execute_command("CLIENT", "PAUSE", 20_000, "WRITE")
        try:
            def claim_held():
                return any("flags=b" in line and "cmd=evalsha" in line
                           for line in r.execute_command("CLIENT", "LIST").decode().splitlines())
            wait_for(claim_held, timeout=10, what="the consumer's next claim, held by the pause")
            node.popen.send_signal(signal.SIGTERM)
            wait_for(lambda: "stopping" in node.output(), timeout=10, what="the stop, during the claim")
        finally:
            r.execute_command("CLIENT", "UNPAUSE")
        unpaused = time.monotonic()
        code = node.popen.wait(10)
        took = time.monotonic() - unpaused
    finally:
        node.stop()
    assert code == 0, node.output()
    assert took < 1.5, f"exited {took:.1f} s after the claim answered (a beat is 3 s)"
    assert "stopped: completed=1 " in node.output()


def _behind_a_full_window(valkey_server, r, tmp_path, *, per_ms: int, beat_ms: int):
    """A Node consumer on a queue limited to one job per ``per_ms``, with a
    second job ready behind the first (so each claim answers the queue's
    wait), once it has completed the first."""
    q = Queue("interop", r)
    q.set_rate_limit(1, per_ms)
    q.enqueue(b"first")
    q.enqueue(b"second")
    node = NodeProc(tmp_path / "node.log", "consume", "--url", valkey_server.url, "--queue", "interop",
                    "--concurrency", "4", "--beat-ms", str(beat_ms))
    try:  # (the meta's counter: counts() is a script, and CLIENT PAUSE would hold it)
        wait_for(lambda: int(r.hget(q.k_meta, "completed") or 0) == 1, timeout=20, what="the first job")
    except BaseException:
        node.stop()
        raise
    return q, node
