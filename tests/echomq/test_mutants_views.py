"""The read-only views: what they send and the clock they read.

Written against survivors of ``python -m bench.mutate`` (seed 11): a listing
view (``dead_jobs`` / ``active_jobs`` / ``scheduled_jobs``) that wrapped its
reads in MULTI/EXEC, and ``server_time_ms`` off by a factor. A view needs no
atomicity: it is one round trip of plain reads, one HMGET per row, so it
never holds the server for a whole listing in one transaction. Counted with
``INFO commandstats`` on the suite's own Valkey (``r``), where nothing else
sends commands meanwhile.
"""
from __future__ import annotations

import collections

import pytest

from echomq import Queue, ids
from echomq.metrics import oldest_pending_age_s


def command_calls(client) -> collections.Counter:
    """Calls per command since the server started (``INFO commandstats``)."""
    stats = client.info("commandstats")
    return collections.Counter({name.removeprefix("cmdstat_"): v["calls"] for name, v in stats.items()})


def sent_by(client, fn):
    """(fn's answer, the commands the server ran for it, INFO itself left out)."""
    before = command_calls(client)
    out = fn()
    delta = command_calls(client) - before
    delta.pop("info", None)
    return out, delta


@pytest.fixture
def q(r):
    return Queue("views", r)


@pytest.fixture
def populated(q, r):
    """Three jobs in each of active, scheduled and dead."""
    q.enqueue_many([b"a"] * 6)
    for job in q.claim_batch(6, lease_ms=60_000)[:3]:
        assert q.retry(job.id, job.attempts, max_attempts=1, error="boom") == "dead"
    for i in range(3):
        q.enqueue(b"later", delay_ms=60_000 + i)
    return q


@pytest.mark.parametrize("view,score", [("dead_jobs", "died"), ("active_jobs", "lease_deadline"),
                                        ("scheduled_jobs", "run_at")])
def test_a_listing_is_plain_reads_one_hmget_per_row(populated, r, view, score):
    rows, sent = sent_by(r, lambda: getattr(populated, view)(100))
    assert len(rows) == 3 and all(row[score] > 0 for row in rows)
    listing = "zrevrange" if view == "dead_jobs" else "zrange"
    assert sent == {listing: 1, "hmget": 3}  # no MULTI, no EXEC


def test_the_other_views_send_no_transaction_either(q, r):
    lane = ids.mint("PLR")
    jid, _ = q.enqueue(b"x", lane=lane)
    q.enqueue(b"y")
    for fn in (lambda: q.job(jid), lambda: q.per_minute(3), lambda: q.lanes.deepest(5),
               lambda: oldest_pending_age_s(q)):
        _, sent = sent_by(r, fn)
        assert sent and not {"multi", "exec"} & set(sent), sent


def server_ms(client) -> int:
    secs, micros = client.time()
    return secs * 1000 + micros // 1000


def test_server_time_ms_is_the_server_clock_in_milliseconds(q, r):
    for _ in range(50):
        before = server_ms(r)
        now = q.server_time_ms()
        assert before <= now <= server_ms(r)
    jid, _ = q.enqueue(b"x")
    created = q.job(jid)["created"]  # the enqueue script's own TIME
    assert created <= q.server_time_ms() <= created + 5_000
