"""echomq.metrics in-process, on a private registry: what a scrape reports.

Written against survivors of ``python -m bench.mutate`` (seed 11): ``serve``
exporting the wrong registry, a QueueCollector that lost its queues, and a
ConsumerMetrics whose ``watch`` forgot the consumer (so the in-hand gauge
never showed it). The slow tests in tests/metrics scrape real processes;
these stay fast enough for the mutation run.
"""
from __future__ import annotations

import threading
import urllib.request

import redis
from prometheus_client import CollectorRegistry, Counter  # a dependency of the project (pyproject.toml)
from prometheus_client.parser import text_string_to_metric_families
from redis.backoff import NoBackoff
from redis.retry import Retry

from echomq import Consumer, Queue, ids
from echomq.embedded import free_port
from echomq.metrics import OUTCOMES, ConsumerMetrics, QueueCollector, serve

from .test_consumer import Running, wait_for


def scrape(port: int) -> dict:
    """{(sample name, sorted labels): value} from the exporter on ``port``."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        assert resp.status == 200
        text = resp.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


class Served:
    """``serve(...)`` on a free port, shut down at the end of the block."""

    def __init__(self, **kw):
        self.port, self.kw = free_port(), kw

    def __enter__(self):
        self.httpd, self.thread = serve(self.port, **self.kw)
        return self.port

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)


# -- serve ----------------------------------------------------------------

def test_serve_exports_the_registry_it_is_given():
    reg = CollectorRegistry()
    probe = Counter("emq_serve_probe", "a counter only this registry holds", registry=reg)
    probe.inc(3)
    with Served(registry=reg) as port:
        found = scrape(port)
    assert found == {("emq_serve_probe_total", ()): 3.0}  # this registry, and nothing of the global one


def test_serve_without_a_registry_exports_the_global_one():
    with Served() as port:
        found = scrape(port)
    names = {name for name, _ in found}
    assert "python_info" in names  # the default registry's own collectors
    assert "emq_serve_probe_total" not in names


# -- QueueCollector ---------------------------------------------------------

def collected(queues) -> CollectorRegistry:
    reg = CollectorRegistry()
    reg.register(QueueCollector(queues))
    return reg


def test_queue_collector_reports_each_queues_state(r):
    q = Queue("mx", r)
    other = Queue("my", r)
    a, _ = q.enqueue(b"a")
    job = q.claim(lease_ms=60_000)
    assert q.complete(a, job.attempts) is True
    b, _ = q.enqueue(b"b")
    job = q.claim(lease_ms=60_000)
    assert q.retry(b, job.attempts, max_attempts=1, error="boom") == "dead"
    c, _ = q.enqueue(b"c")
    q.claim(lease_ms=60_000)
    r.zadd(q.k_active, {c: 0})  # its worker died
    assert q.reap().returned == 1
    assert q.claim(lease_ms=60_000).id == c  # active again
    q.enqueue(b"d", lane=ids.mint("PLR"))  # pending on a lane
    q.enqueue(b"e", delay_ms=60_000)  # scheduled
    other.pause()

    reg = collected(lambda: [q, other])
    got = lambda name, queue, **labels: reg.get_sample_value(name, {"queue": queue, **labels})  # noqa: E731
    assert reg.get_sample_value("echomq_valkey_up") == 1
    assert {s: got("echomq_queue_jobs", "mx", state=s) for s in ("pending", "active", "scheduled", "dead")} == \
        {"pending": 1, "active": 1, "scheduled": 1, "dead": 1}
    assert got("echomq_queue_completed_total", "mx") == 1
    assert got("echomq_queue_dead_total", "mx") == 1
    assert got("echomq_queue_lease_expiries_reaped_total", "mx") == 1
    assert got("echomq_queue_lanes", "mx") == 1
    assert (got("echomq_queue_paused", "mx"), got("echomq_queue_paused", "my")) == (0, 1)
    assert 0 <= got("echomq_queue_oldest_pending_age_seconds", "mx") < 5  # d, just enqueued
    assert got("echomq_queue_oldest_pending_age_seconds", "my") == 0
    assert {s: got("echomq_queue_jobs", "my", state=s) for s in ("pending", "active", "scheduled", "dead")} == \
        {"pending": 0, "active": 0, "scheduled": 0, "dead": 0}


def test_queue_collector_asks_for_the_queues_at_each_scrape(r):
    known = []
    reg = collected(lambda: list(known))
    assert reg.get_sample_value("echomq_valkey_up") == 1
    assert reg.get_sample_value("echomq_queue_jobs", {"queue": "late", "state": "pending"}) is None
    q = Queue("late", r)
    q.enqueue_many([b"x"] * 4)
    known.append(q)
    assert reg.get_sample_value("echomq_queue_jobs", {"queue": "late", "state": "pending"}) == 4


def test_queue_collector_says_valkey_is_down():
    dead = redis.Redis(host="127.0.0.1", port=free_port(), socket_connect_timeout=0.5,
                       retry=Retry(NoBackoff(), 0))
    reg = collected(lambda: [Queue("gone", dead)])
    assert reg.get_sample_value("echomq_valkey_up") == 0
    assert reg.get_sample_value("echomq_queue_jobs", {"queue": "gone", "state": "pending"}) is None


# -- ConsumerMetrics: the in-hand gauge -------------------------------------

def in_hand(reg, name):
    return reg.get_sample_value("echomq_worker_jobs_in_hand", {"queue": name})


def test_watch_shows_the_consumer_at_zero_before_its_first_claim(r):
    reg = CollectorRegistry()
    m = ConsumerMetrics(registry=reg)
    c = Consumer(Queue("mw", r), lambda job: None, observer=m)
    assert in_hand(reg, "mw") is None
    assert m.watch(c) is c
    assert in_hand(reg, "mw") == 0
    assert reg.get_sample_value("echomq_worker_jobs_handled_total", {"queue": "mw", "outcome": "completed"}) == 0


def test_in_hand_counts_a_running_job_then_none(r):
    q = Queue("mh", r)
    reg = CollectorRegistry()
    m = ConsumerMetrics(registry=reg)
    started, gate = threading.Event(), threading.Event()

    def handler(job):
        started.set()
        assert gate.wait(10)

    q.enqueue(b"x")
    with Running(m.watch(Consumer(q, handler, observer=m, lease_ms=60_000, beat_ms=50))):
        assert started.wait(10)
        assert in_hand(reg, "mh") == 1
        gate.set()
        wait_for(lambda: reg.get_sample_value("echomq_worker_jobs_handled_total",
                                              {"queue": "mh", "outcome": "completed"}) == 1,
                 what="the ack to be counted")
        wait_for(lambda: in_hand(reg, "mh") == 0, what="the job out of hand")
    assert q.counts()["completed"] == 1


def test_watch_exports_every_series_of_the_queue_at_zero_before_anything_happens(r):
    """A dashboard's rate() needs the series before the first event: after
    ``watch``, with nothing claimed, run or lost, the handled counter of
    every outcome, both histograms and the reconnect counter are there at 0
    (seed 7 survivor: the histograms and the reconnect counter left out)."""
    reg = CollectorRegistry()
    m = ConsumerMetrics(registry=reg)
    c = Consumer(Queue("mz", r), lambda job: None, observer=m)
    m.watch(c)
    got = lambda name, **labels: reg.get_sample_value(name, {"queue": "mz", **labels})  # noqa: E731
    assert {o: got("echomq_worker_jobs_handled_total", outcome=o) for o in OUTCOMES} == dict.fromkeys(OUTCOMES, 0)
    for hist in ("echomq_worker_handler_seconds", "echomq_worker_claim_to_start_seconds"):
        assert (got(hist + "_count"), got(hist + "_sum")) == (0, 0)
        assert got(hist + "_bucket", le="+Inf") == 0
    assert got("echomq_worker_reconnects_total") == 0
    assert in_hand(reg, "mz") == 0
    assert c.stats == {}  # nothing happened: the zeros are the registration's
