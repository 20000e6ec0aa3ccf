"""Prometheus metrics for EchoMQ (optional: ``pip install prometheus_client``).

Two sides, both without Django:

* :class:`QueueCollector` reads each queue's state from Valkey when scraped
  (job counts per state, completed and dead totals, lanes, oldest pending
  age, lease expiries reaped, the event stream's length, cap, entries added
  and each named reader's lag). Valkey is the source of truth, so any process
  may serve it; the Django endpoint does (``echomq.contrib.django.metrics``).
* :class:`ConsumerMetrics` is a consumer ``Observer``: what one worker
  process did (jobs by outcome, handler time, claim-to-start wait,
  reconnects, jobs in hand). Each long-running command exports its own on
  ``--metrics-port`` through :func:`serve`. :class:`ReaperMetrics` does the
  same for a reaper's passes.

Every metric name is listed in ``docs/metrics.md``.
"""
from __future__ import annotations

import threading
import time

from .consumer import Observer

try:
    import prometheus_client
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
except ImportError:  # the core never needs it; these classes do
    prometheus_client = None

# Seconds; from a fast Valkey round trip to a minute-long task.
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
STATES = ("pending", "active", "scheduled", "dead")
OUTCOMES = ("completed", "retried", "dead", "dropped", "stale", "cancelled")
LANE_SAMPLE = 1000  # lanes inspected for the oldest pending job, per queue and scrape


def require():
    if prometheus_client is None:
        raise ImportError("EchoMQ metrics need prometheus_client: pip install 'prometheus_client>=0.20'")
    return prometheus_client


def serve(port: int, addr: str = "127.0.0.1", registry=None):
    """Export ``registry`` (the default one) over HTTP on ``port``, in a thread.
    The ``*_created`` series are turned off: nothing here needs them."""
    pc = require()
    pc.disable_created_metrics()
    return pc.start_http_server(port, addr=addr, registry=registry or pc.REGISTRY)


class QueueCollector:
    """Queue state at scrape time; ``queues`` is a callable answering Queues
    (a ShardedQueue is reported as one queue: its shards' figures summed,
    the oldest ready job of any shard)."""

    def __init__(self, queues):
        require()
        self.queues = queues

    def describe(self):
        return []  # collected live; no fixed description

    def collect(self):
        import redis

        up = GaugeMetricFamily("echomq_valkey_up", "1 when Valkey answered this scrape")
        jobs = GaugeMetricFamily("echomq_queue_jobs", "Jobs in the queue by state", labels=["queue", "state"])
        completed = CounterMetricFamily("echomq_queue_completed", "Jobs completed since the queue began",
                                        labels=["queue"])
        dead = CounterMetricFamily("echomq_queue_dead", "Jobs dead-lettered since the queue began",
                                   labels=["queue"])
        reaped = CounterMetricFamily("echomq_queue_lease_expiries_reaped",
                                     "Expired leases the reaper handled (returned or dead-lettered)",
                                     labels=["queue"])
        lanes = GaugeMetricFamily("echomq_queue_lanes", "Lanes with jobs", labels=["queue"])
        paused = GaugeMetricFamily("echomq_queue_paused", "1 when the queue is paused", labels=["queue"])
        oldest = GaugeMetricFamily("echomq_queue_oldest_pending_age_seconds",
                                   "Age of the oldest ready job (0 when none)", labels=["queue"])
        ev_len = GaugeMetricFamily("echomq_events_length", "Entries kept in the queue's event stream",
                                   labels=["queue"])
        ev_cap = GaugeMetricFamily("echomq_events_maxlen", "The event stream's cap (about; 0: events off)",
                                   labels=["queue"])
        ev_added = CounterMetricFamily("echomq_events_added", "Entries appended to the event stream since it began",
                                       labels=["queue"])
        ev_lag = GaugeMetricFamily("echomq_events_reader_lag_seconds",
                                   "How far behind the newest entry a named reader's last position is",
                                   labels=["queue", "reader"])
        rate_jobs = GaugeMetricFamily("echomq_queue_rate_limit_jobs", "Claims allowed per rate window "
                                      "(queues with a rate limit)", labels=["queue"])
        rate_window = GaugeMetricFamily("echomq_queue_rate_limit_window_seconds", "The rate window's length",
                                        labels=["queue"])
        rate_claimed = GaugeMetricFamily("echomq_queue_rate_window_claimed", "Claims in the open rate window",
                                         labels=["queue"])
        rate_left = GaugeMetricFamily("echomq_queue_rate_window_remaining_seconds",
                                      "Time until the open rate window closes (0: none is open)", labels=["queue"])
        try:
            for q in self.queues():
                c = q.counts()
                for state in STATES:
                    jobs.add_metric([q.name, state], c[state])
                completed.add_metric([q.name], c["completed"])
                dead.add_metric([q.name], c["dead_total"])
                lanes.add_metric([q.name], c["lanes"])
                paused.add_metric([q.name], int(c["paused"]))
                parts = getattr(q, "shards", None) or [q]  # a ShardedQueue: its shards' figures together
                reaped.add_metric([q.name], sum(int(p.client.hget(p.k_meta, "reaped") or 0) for p in parts))
                oldest.add_metric([q.name], max(oldest_pending_age_s(p) for p in parts) if c["pending"] else 0.0)
                ev = q.event_stats()
                ev_len.add_metric([q.name], ev["length"])
                ev_cap.add_metric([q.name], ev["maxlen"])
                ev_added.add_metric([q.name], ev["added"])
                for reader, r in ev["readers"].items():
                    ev_lag.add_metric([q.name, reader], r["lag_s"])
                rate = q.rate_limit()
                if rate is not None:
                    rate_jobs.add_metric([q.name], rate["jobs"])
                    rate_window.add_metric([q.name], rate["per_ms"] / 1000)
                    rate_claimed.add_metric([q.name], rate["claimed"])
                    rate_left.add_metric([q.name], rate["window_ms_left"] / 1000)
            up.add_metric([], 1)
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError):
            up.add_metric([], 0)
            yield up
            return
        yield from (up, jobs, completed, dead, reaped, lanes, paused, oldest, rate_jobs, rate_window, rate_claimed,
                    rate_left, ev_len, ev_cap, ev_added, ev_lag)


def oldest_pending_age_s(q) -> float:
    """Seconds since the oldest ready job was admitted (server clock).

    A ready set's score is its job's priority (-priority, lua/include/priority.lua)
    and equal scores sort by id, which for JOB ids is mint order; so the
    oldest job of a set is the first member of one of its priorities, not
    necessarily its first member (a high priority job admitted last comes
    first). The candidates are each priority's first member in the flat set
    and in each lane (up to LANE_SAMPLE lanes), found a priority at a time
    (one pipelined round trip per priority in use); their rows' ``created``
    decides."""
    client = q.client
    lanes = list(client.sscan_iter(q.k_lanes, count=LANE_SAMPLE))[:LANE_SAMPLE]
    keys = [q.k_pending] + [f"{q.prefix}g:{lane.decode()}:pending" for lane in lanes]
    firsts = []
    pipe = client.pipeline(transaction=False)
    for key in keys:
        pipe.zrange(key, 0, 0, withscores=True)
    replies = pipe.execute()
    while True:
        more = [(key, got[0]) for key, got in zip(keys, replies) if got]
        if not more:
            break
        firsts += [member.decode() for _, (member, _) in more]
        keys = [key for key, _ in more]
        pipe = client.pipeline(transaction=False)
        for key, (_, score) in more:  # the first member of the next priority down
            pipe.zrangebyscore(key, f"({score:.17g}", "+inf", start=0, num=1, withscores=True)
        replies = pipe.execute()
    if not firsts:
        return 0.0
    pipe = client.pipeline(transaction=False)
    for job_id in firsts:
        pipe.hget(q.job_key(job_id), "created")
    created = [int(v) for v in pipe.execute() if v]
    if not created:
        return 0.0
    return max(0.0, (q.server_time_ms() - min(created)) / 1000)


class ConsumerMetrics(Observer):
    """A consumer observer that counts into ``registry`` (default: the global one).

    Give the same instance to every Consumer of a process; ``watch`` them so
    the in-hand gauge reads 0 before their first claim."""

    def __init__(self, registry=None):
        pc = require()
        r = registry or pc.REGISTRY
        self.jobs_handled = pc.Counter("echomq_worker_jobs_handled", "Jobs this process settled, by outcome "
                                  "(completed, retried, dead, dropped, stale)", ["queue", "outcome"], registry=r)
        self.duration = pc.Histogram("echomq_worker_handler_seconds", "Time in the handler per job",
                                     ["queue"], buckets=BUCKETS, registry=r)
        self.waited = pc.Histogram("echomq_worker_claim_to_start_seconds",
                                   "From the claim to the handler starting (prefetch wait)", ["queue"],
                                   buckets=BUCKETS, registry=r)
        self.reconnects = pc.Counter("echomq_worker_reconnects", "Times the fetcher lost Valkey and retried",
                                     ["queue"], registry=r)
        self._lock = threading.Lock()
        self._claimed: dict[str, float] = {}
        self._consumers: list = []
        r.register(_InHand(self))

    def watch(self, consumer):
        """Show the consumer's queue from the start: every series at 0."""
        with self._lock:
            if consumer in self._consumers:
                return consumer
            self._consumers.append(consumer)
        name = consumer.queue.name
        for outcome in OUTCOMES:
            self.jobs_handled.labels(name, outcome)
        self.duration.labels(name), self.waited.labels(name), self.reconnects.labels(name)
        return consumer

    def claimed(self, consumer, jobs) -> None:
        now = time.monotonic()
        with self._lock:
            for job in jobs:
                self._claimed[job.id] = now
        self.watch(consumer)

    def started(self, consumer, job) -> None:
        with self._lock:
            at = self._claimed.pop(job.id, None)
        if at is not None:
            self.waited.labels(consumer.queue.name).observe(time.monotonic() - at)

    def handled(self, consumer, job, seconds: float) -> None:
        self.duration.labels(consumer.queue.name).observe(seconds)

    def settled(self, consumer, job, outcome: str) -> None:
        self.jobs_handled.labels(consumer.queue.name, outcome).inc()

    def reconnecting(self, consumer) -> None:
        self.reconnects.labels(consumer.queue.name).inc()


class _InHand:
    """echomq_worker_jobs_in_hand: claimed and not yet settled, per queue."""

    def __init__(self, metrics: ConsumerMetrics):
        self.metrics = metrics

    def describe(self):
        return [GaugeMetricFamily("echomq_worker_jobs_in_hand", "Jobs claimed and not yet settled",
                                  labels=["queue"])]

    def collect(self):
        g = GaugeMetricFamily("echomq_worker_jobs_in_hand", "Jobs claimed and not yet settled", labels=["queue"])
        totals: dict[str, int] = {}
        with self.metrics._lock:
            consumers = list(self.metrics._consumers)
        for c in consumers:
            totals[c.queue.name] = totals.get(c.queue.name, 0) + len(c._in_hand)
        for name, n in sorted(totals.items()):
            g.add_metric([name], n)
        yield g


class ReaperMetrics:
    """Counts what a Reaper's passes moved: ``ReaperMetrics().wrap(reaper)``."""

    def __init__(self, registry=None):
        pc = require()
        r = registry or pc.REGISTRY
        self.passes = pc.Counter("echomq_reaper_passes", "Maintenance passes run", registry=r)
        self.moved = pc.Counter("echomq_reaper_jobs", "Jobs moved by this reaper (returned, dead, promoted, fired: schedule ticks enqueued)",
                                ["queue", "action"], registry=r)

    def wrap(self, reaper):
        run_once = reaper.run_once
        for q in reaper.queues:  # every series shows from the start, at 0
            for action in ("returned", "dead", "promoted", "fired"):
                self.moved.labels(q.name, action)

        def counted():
            report = run_once()
            self.passes.inc()
            for q in reaper.queues:
                for action, n in report.get(q.name, {}).items():
                    if n:
                        self.moved.labels(q.name, action).inc(n)
            return report

        reaper.run_once = counted
        return reaper
