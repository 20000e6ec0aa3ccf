"""The game's figures for the people on call (names in docs/metrics.md).

* Guesses submitted and refused (by reason) are counted in Valkey, in the
  hash ``cm:metrics``, so the ``/metrics`` endpoint (:class:`GameCollector`)
  reads the site's figure, not one gunicorn worker's. A web process counts
  in memory and adds its counts to the hash at most once a second (one
  pipelined HINCRBY per field, from a daemon thread; also at exit and
  before this process serves ``/metrics``), so a guess POST pays no Valkey
  round trip for them. Best effort: a Valkey hiccup loses a second of
  counts, never a request.
* Submit-to-scored latency is a histogram in the score worker process that
  scored the guess, exported on its ``--metrics-port``.
"""
from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from collections import Counter

from echomq import UNAVAILABLE
from echomq.contrib.django import get_client

log = logging.getLogger("games.metrics")

KEY = "cm:metrics"
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)

try:
    import prometheus_client
    from prometheus_client.core import CounterMetricFamily

    # Registered (exported) only by the process that scores: see export_scoring.
    SCORED_LATENCY = prometheus_client.Histogram(
        "codemojex_guess_submit_to_scored_seconds", "From a guess's submission to its score being written",
        buckets=BUCKETS, registry=None)
except ImportError:  # metrics are optional
    prometheus_client = SCORED_LATENCY = None


FLUSH_EVERY_S = 1.0


class _Counts:
    """Counts kept in this process until the next flush."""

    def __init__(self):
        self._lock = threading.Lock()
        self._sending = threading.Lock()  # one flush at a time; discard waits for it
        self._pending: Counter = Counter()
        self._flusher_pid = 0

    def add(self, field: str) -> None:
        with self._lock:
            self._pending[field] += 1
            if self._flusher_pid != os.getpid():  # first count here (or since a fork)
                self._flusher_pid = os.getpid()
                threading.Thread(target=self._flush_every_second, name="cm-metrics", daemon=True).start()

    def _flush_every_second(self) -> None:
        while True:
            time.sleep(FLUSH_EVERY_S)
            self.flush()

    def _take(self) -> Counter:
        with self._lock:
            pending, self._pending = self._pending, Counter()
        return pending

    def flush(self) -> None:
        with self._sending:
            pending = self._take()
            if not pending:
                return
            try:
                pipe = get_client().pipeline(transaction=False)
                for field, n in sorted(pending.items()):
                    pipe.hincrby(KEY, field, n)
                pipe.execute()
            except Exception as exc:
                log.debug("metrics %s not counted: %s", dict(pending), exc)

    def discard(self) -> None:
        """Drop what is not sent yet, once any flush under way is done (tests)."""
        with self._sending:
            self._take()


COUNTS = _Counts()
atexit.register(COUNTS.flush)


def _count(field: str) -> None:
    COUNTS.add(field)


def submitted() -> None:
    """A guess was accepted (called on its transaction's commit)."""
    _count("submitted")


def refused(reason: str) -> None:
    """A guess was refused; ``reason`` is the SubmitError code (or ``form``)."""
    _count(f"refused:{reason}")


def scored(guess) -> None:
    """A guess was scored for the first time (in the score worker)."""
    if SCORED_LATENCY is not None and guess.scored_at and guess.created_at:
        SCORED_LATENCY.observe(max(0.0, (guess.scored_at - guess.created_at).total_seconds()))


def export_scoring(registry=None) -> None:
    """Add the submit-to-scored histogram to this process's exported metrics."""
    (registry or prometheus_client.REGISTRY).register(SCORED_LATENCY)


class GameCollector:
    """The Valkey-kept counters, for the ``/metrics`` endpoint."""

    def describe(self):
        return []

    def collect(self):
        COUNTS.flush()  # this process's latest counts
        try:
            raw = {k.decode(): int(v) for k, v in get_client().hgetall(KEY).items()}
        except UNAVAILABLE:
            return  # echomq_valkey_up says why
        sub = CounterMetricFamily("codemojex_guesses_submitted", "Guesses accepted (charged and queued)")
        sub.add_metric([], raw.get("submitted", 0))
        ref = CounterMetricFamily("codemojex_guesses_refused", "Guesses refused, by reason", labels=["reason"])
        for field, n in sorted(raw.items()):
            if field.startswith("refused:"):
                ref.add_metric([field.split(":", 1)[1]], n)
        yield sub
        yield ref
