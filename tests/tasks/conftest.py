"""Fixtures for the Tasks backend tests: the session's real Valkey, flushed
per test, with ``echomq.contrib.django`` (and so TASKS) pointed at it."""
from __future__ import annotations

import pytest

from echomq import Drop, Retry
from echomq.contrib import django as emq_django
from echomq.contrib.django import get_queue


@pytest.fixture(autouse=True)
def valkey(valkey_server, request):
    if not request.node.get_closest_marker("django_db"):
        # The Runner tidies database connections after each task, as a
        # worker does; one a database test left open (pytest-django runs
        # those first) would be touched by a test that may not use it.
        from django.db import connections

        connections.close_all()
    client = valkey_server.client()
    client.flushall()
    emq_django.reset_client(valkey_server.url)
    yield client
    client.close()


def run_pending(queue_name: str, runner, *, limit: int = 100) -> list[str]:
    """Claim and run every ready job in this process, settling each the way
    the Consumer does; answers the outcomes in order."""
    q = get_queue(queue_name)
    seen = []
    for _ in range(limit):
        job = q.claim(lease_ms=10_000)
        if job is None:
            break
        try:
            runner(job)
        except Drop:
            q.complete(job.id, job.attempts)
            seen.append("dropped")
        except Retry as exc:
            seen.append(q.retry(job.id, job.attempts, delay_ms=exc.delay_ms or 0,
                                max_attempts=exc.max_attempts or 3, error=str(exc)))
        else:
            q.complete(job.id, job.attempts)
            seen.append("completed")
    return seen
