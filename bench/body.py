"""A job's body for the realistic workload (``python -m bench.work``).

``incr``: one ``INCR`` on the same Valkey through one redis-py client that
every handler thread shares, what a handler that records a counter or a
score does. ``noop``: nothing (the drain tables of ``python -m bench``).
Imported in the peers' venvs too, so it needs only redis-py.
"""
from __future__ import annotations

BODIES = ("noop", "incr")
KEY = "bench:work:count"


def make(kind: str, client=None, url: str | None = None):
    """The body to run before each job is counted, or None for ``noop``.
    ``client``: the shared client (a new ``redis.Redis`` from ``url`` if none)."""
    if kind == "noop":
        return None
    if kind != "incr":
        raise ValueError(f"unknown body {kind!r}; one of {', '.join(BODIES)}")
    if client is None:
        import redis

        client = redis.Redis.from_url(url)
    incr = client.incr
    return lambda: incr(KEY)
