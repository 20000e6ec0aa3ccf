"""Helpers for a project's own tests: run a queue's jobs in the test's process.

    from echomq.testing import drain

    def test_a_welcome_is_sent(queue):
        signup("ann")                       # enqueues a job
        stats = drain(queue, send_welcome)  # runs it here, now
        assert stats["completed"] == 1

``drain`` is ``Consumer.drain()``: every job ready now, and those that become
ready while it runs (a retry without delay, a delayed job falling due, a job
a handler enqueues, a flow's parent once its children ran), then it returns the consumer's stats (completed, retried, dead, dropped, ...).
Jobs delayed into the future stay scheduled; give the consumer
``backoff=lambda attempt: 0`` to see a failing job's retries, and
dead-letter, within one drain. Django projects run their tasks with
``call_command("run_tasks", "--burst")`` the same way (docs/echomq.md).
"""
from __future__ import annotations

import collections

from .consumer import DRAIN_MAX_NEW, Consumer


def drain(queue, handler=None, *, max_new: int = DRAIN_MAX_NEW, **options) -> collections.Counter:
    """Run every job of ``queue`` that is ready now with ``handler`` (or
    ``handler_many=``; ``options`` are the Consumer's), and those that become
    ready meanwhile (``max_new``: see ``Consumer.drain``), then return its stats."""
    return Consumer(queue, handler, **options).drain(max_new=max_new)
