"""Task functions for the tests, importable by a real ``run_tasks`` worker."""
from __future__ import annotations

import sys
import time

from django.tasks import task

from echomq.contrib.django import get_client


@task
def add(a: int, b: int) -> int:
    return a + b


@task(max_attempts=2, backoff_ms=0)  # fewer than the backend's 3: the task's own limit rules
def always_fails(message: str) -> None:
    get_client().incr(f"test:fails:{message}")
    raise ValueError(message)


@task(max_attempts=3, backoff_ms=0)
def fails_then_works(marker: str) -> int:
    runs = get_client().incr(f"test:runs:{marker}")
    if runs < 2:
        raise RuntimeError(f"attempt {runs} fails")
    return runs


@task
def crash_once(marker: str) -> int:
    """The first run parks until its worker is killed; later runs answer at once."""
    client = get_client()
    runs = client.incr(f"test:runs:{marker}")
    if runs == 1:
        client.rpush(f"test:started:{marker}", "1")
        time.sleep(120)
    return runs


@task
def returns_a_set() -> object:
    return {1, 2}


@task
async def async_double(x: int) -> int:
    return 2 * x


@task(takes_context=True)
def which_attempt(context, label: str) -> dict:
    return {"label": label, "attempt": context.attempt}


@task(lane="player_id")
def per_player(player_id: str, n: int) -> int:
    return n


@task
def gated(marker: str) -> str:
    """Says it started, then waits (up to 30 s) for the test to open the gate."""
    client = get_client()
    client.rpush(f"test:started:{marker}", "1")
    return "opened" if client.blpop([f"test:gate:{marker}"], timeout=30) else "timed out"


@task
def exits(marker: str) -> None:
    """A library calling sys.exit() inside a task."""
    get_client().incr(f"test:runs:{marker}")
    sys.exit(3)


@task
def interrupted(marker: str) -> None:
    get_client().incr(f"test:runs:{marker}")
    raise KeyboardInterrupt


@task
def countdown(n: int) -> int:
    """Enqueues its follow-up (n - 1) until 0."""
    if n:
        countdown.enqueue(n - 1)
    return n


@task
def forever() -> None:
    """Enqueues itself again, for ever."""
    forever.enqueue()
