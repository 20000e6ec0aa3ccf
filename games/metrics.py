"""The game's figures for the people on call (names in docs/metrics.md).

* Guesses submitted and refused (by reason) are counted in Valkey, in the
  hash ``cm:metrics``: whichever web process took the request adds one, and
  the ``/metrics`` endpoint reads the totals (:class:`GameCollector`), so the
  figure is the site's, not one gunicorn worker's. Best effort: a Valkey
  hiccup loses a count, never a request.
* Submit-to-scored latency is a histogram in the score worker process that
  scored the guess, exported on its ``--metrics-port``.
"""
from __future__ import annotations

import logging

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


def _count(field: str) -> None:
    try:
        get_client().hincrby(KEY, field, 1)
    except Exception as exc:
        log.debug("metric %s not counted: %s", field, exc)


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
