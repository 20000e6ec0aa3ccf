"""Finished jobs leave a bounded trace: the last N completed with their
timings, dead jobs up to a bound, both trimmed by count and by age; any job
found by id in whatever state it is. On Valkey and Redis 7.0."""
from __future__ import annotations

import pytest

from echomq import Queue, ids

KEYS = {"id", "state", "attempts", "lane", "consumer", "enqueued", "claimed", "finished", "duration_ms",
        "last_error"}


@pytest.fixture
def q(any_server):
    return Queue("keep", any_server)


def server_ms(client) -> int:
    s, us = client.time()
    return s * 1000 + us // 1000


def test_a_completed_job_keeps_its_timings(q, any_server):
    lane, csr = ids.mint("PLR"), ids.mint("CSR")
    jid, _ = q.enqueue(b"x", lane=lane)
    job = q.claim(lease_ms=60_000, consumer=csr)
    assert q.complete(job.id, job.attempts) is True
    (rec,) = q.completed_jobs()
    assert KEYS <= set(rec)
    assert (rec["id"], rec["state"], rec["attempts"], rec["lane"], rec["consumer"]) == (jid, "completed", 1, lane, csr)
    assert rec["enqueued"] <= rec["claimed"] <= rec["finished"] <= server_ms(any_server)
    assert rec["duration_ms"] == rec["finished"] - rec["claimed"]
    assert q.find(jid) == rec
    assert q.counts()["retained"] == 1


def test_find_answers_every_state(q, any_server):
    def claimed(payload):
        q.enqueue(payload)
        return q.claim(lease_ms=60_000)

    dead = claimed(b"d")
    q.retry(dead.id, dead.attempts, max_attempts=1, error="boom")
    done = claimed(b"c")
    q.complete(done.id, done.attempts)
    active = claimed(b"a")
    scheduled, _ = q.enqueue(b"s", delay_ms=60_000)
    pending, _ = q.enqueue(b"p")
    want = {pending: "pending", active.id: "active", scheduled: "scheduled", dead.id: "dead",
            done.id: "completed"}
    assert {jid: q.find(jid)["state"] for jid in want} == want
    assert all(set(q.find(jid)) == set(q.find(done.id)) >= KEYS for jid in want)  # one shape for all
    assert q.find(dead.id)["last_error"] == "boom" and q.find(dead.id)["finished"] is not None
    assert q.find(active.id)["claimed"] is not None and q.find(pending)["claimed"] is None
    assert q.find(ids.mint("JOB")) is None


def test_find_a_pending_job(q):
    jid, _ = q.enqueue(b"p")
    row = q.find(jid)
    assert row["state"] == "pending" and row["attempts"] == 0 and row["claimed"] is None


def test_completed_records_are_bounded_by_count(q):
    q.set_retention(completed=3)
    done = []
    for _ in range(5):
        jid, _ = q.enqueue(b"x")
        job = q.claim(lease_ms=60_000)
        q.complete(job.id, job.attempts)
        done.append(jid)
    assert [r["id"] for r in q.completed_jobs()] == done[:1:-1]  # the last three, newest first
    assert q.find(done[0]) is None and q.counts()["retained"] == 3
    assert len(q.client.hkeys(q.prefix + "done:rows")) == 3  # rows go with their index entries


def test_completed_records_are_bounded_by_age(q, any_server):
    q.set_retention(completed_ms=60_000)
    old, _ = q.enqueue(b"old")
    job = q.claim(lease_ms=60_000)
    q.complete(job.id, job.attempts)
    any_server.zadd(q.prefix + "done", {old: server_ms(any_server) - 120_000})  # two minutes ago
    q.enqueue(b"new")
    job = q.claim(lease_ms=60_000)
    q.complete(job.id, job.attempts)
    assert [r["id"] for r in q.completed_jobs()] == [job.id]
    assert any_server.hget(q.prefix + "done:rows", old) is None


def test_keep_none(q):
    q.set_retention(completed=0)
    q.enqueue(b"x")
    job = q.claim(lease_ms=60_000)
    q.complete(job.id, job.attempts)
    assert q.completed_jobs() == [] and q.counts()["completed"] == 1


def test_dead_jobs_are_bounded_by_count_and_age(q, any_server):
    q.set_retention(dead=2, dead_ms=60_000)
    dead = []
    for _ in range(3):
        jid, _ = q.enqueue(b"x")
        job = q.claim(lease_ms=60_000)
        q.retry(job.id, job.attempts, max_attempts=1, error="boom")
        dead.append(jid)
    assert [d["id"] for d in q.dead_jobs()] == dead[:0:-1]
    assert q.find(dead[0]) is None  # its row went with it
    any_server.zadd(q.k_dead, {dead[1]: server_ms(any_server) - 120_000})
    jid, _ = q.enqueue(b"x")
    job = q.claim(lease_ms=60_000)
    q.retry(job.id, job.attempts, max_attempts=1, error="boom")
    assert [d["id"] for d in q.dead_jobs()] == [jid, dead[2]]
    assert q.find(dead[1]) is None and q.counts()["dead"] == 2


def test_memory_per_retained_job_is_small(q, any_server):
    """The figure docs/echomq.md states, kept honest: the retained records'
    keys (MEMORY USAGE, every element sampled) per job."""
    lane = ids.mint("PLR")
    q.enqueue_many([{"payload": b"x", "lane": lane} for _ in range(1000)])
    csr = ids.mint("CSR")
    while True:
        jobs = q.claim_batch(500, lease_ms=60_000, consumer=csr)
        if not jobs:
            break
        q.complete_many([(j.id, j.attempts) for j in jobs])
    assert q.counts()["retained"] == 1000
    used = sum(any_server.memory_usage(q.prefix + k, samples=0) for k in ("done", "done:rows"))
    per_job = used / 1000
    print(f"\nretained completed job: {per_job:.0f} bytes each")
    assert per_job < 400
