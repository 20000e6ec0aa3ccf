"""job.progress(value): JSON of at most 1 KB on the job's row and as an
event, fenced by the claim's token (a stale worker's progress is refused
and changes nothing); job.set_result for a flow's parent. Valkey and Redis 7.0."""
from __future__ import annotations

import pytest

from echomq import Cancelled, EchoMQError, Job, Queue, StaleToken, ids
from echomq.errors import ArgumentError
from echomq.queue import MAX_PROGRESS

from .helpers import snapshot


@pytest.fixture
def q(any_server):
    return Queue("pg", any_server)


def test_progress_replaces_the_last_value(q):
    jid, _ = q.enqueue(b"x")
    job = q.claim(lease_ms=60_000)
    for value in (0, {"pct": 50, "note": "half"}, [1, 2], "done", None):
        assert job.progress(value) is True
        assert q.job(jid)["progress"] == value
    assert [e.data["value"] for e in q.events("0") if e.type == "progress"] == \
        [0, {"pct": 50, "note": "half"}, [1, 2], "done", None]
    assert q.find(jid)["state"] == "active"


def test_a_stale_workers_progress_is_refused(q, any_server):
    jid, _ = q.enqueue(b"x")
    old = q.claim(lease_ms=60_000)
    old.progress("mine")
    any_server.zadd(q.k_active, {jid: 0})
    q.reap()
    new = q.claim(lease_ms=60_000)
    before = snapshot(any_server, q)
    with pytest.raises(StaleToken):
        old.progress("still mine?")
    with pytest.raises(StaleToken):
        old.set_result({"late": True})
    assert snapshot(any_server, q) == before
    assert new.progress("yours") and q.job(jid)["progress"] == "yours"
    q.complete(jid, new.attempts)
    assert q.progress(jid, new.attempts, 1) is False  # gone


def test_progress_of_a_cancelled_job_drops_it(q):
    jid, _ = q.enqueue(b"x")
    job = q.claim(lease_ms=60_000)
    q.cancel(jid)
    with pytest.raises(Cancelled):
        job.progress(10)
    assert q.job(jid) is None and [e.type for e in q.events("0")][-1] == "cancelled"


def test_bad_values_change_nothing(q, any_server):
    jid, _ = q.enqueue(b"x")
    job = q.claim(lease_ms=60_000)
    before = snapshot(any_server, q)
    for bad in (float("nan"), float("inf"), {1, 2}, object(), "x" * MAX_PROGRESS, {"k": b"bytes"}):
        with pytest.raises(ArgumentError):
            job.progress(bad)
    with pytest.raises(ArgumentError):
        job.set_result("x" * 70_000)
    assert snapshot(any_server, q) == before
    assert job.progress("é" * 300) is True  # 600 bytes of UTF-8: within the kilobyte


def test_a_job_made_by_hand_has_no_lease_to_report_on():
    job = Job(ids.mint("JOB"), b"x", 1)
    with pytest.raises(EchoMQError):
        job.progress(1)
