"""Consumer settings that cannot work are refused when the consumer is made,
with ArgumentError, as its numbers already are: a handler that is not
callable would fail every job at run time until each is dead-lettered (its
error a TypeError), an observer without the hooks crashes the fetcher
thread after it has claimed jobs, and a queue that is not a queue is an
AttributeError. Nothing is written to the server either way.

(The fix belongs in ``echomq/consumer.py``, ``Consumer.__init__``: check
``callable(handler)`` / ``callable(handler_many)`` / ``callable(backoff)``
when given, ``isinstance(observer, Observer)`` when given, and that ``queue``
has the Queue API -- e.g. ``isinstance(queue, (Queue, ShardedQueue))`` -- each
raising ArgumentError, before ``queue.parking(...)``.)"""
from __future__ import annotations

import pytest

from echomq import ArgumentError, Queue, ShardedQueue
from echomq.consumer import Consumer


@pytest.fixture(params=["queue", "sharded"])
def q(request, r):
    return Queue("t", r) if request.param == "queue" else ShardedQueue("t", r, shards=3)


def ok(job):
    return None


@pytest.mark.parametrize("make", [
    pytest.param(lambda q: Consumer(q, 5), id="handler not callable"),
    pytest.param(lambda q: Consumer(q, "module.handler"), id="handler a string"),
    pytest.param(lambda q: Consumer(q, handler_many=[]), id="handler_many not callable"),
    pytest.param(lambda q: Consumer(q, ok, backoff=5), id="backoff not callable"),
    pytest.param(lambda q: Consumer(q, ok, observer=5), id="observer without hooks"),
    pytest.param(lambda q: Consumer("t", ok), id="queue a name"),
    pytest.param(lambda q: Consumer(None, ok), id="queue None"),
])
def test_a_consumer_that_cannot_work_is_refused_when_made(q, r, make):
    with pytest.raises(ArgumentError):
        make(q)
    assert r.dbsize() == 0


def test_the_settings_that_work_are_still_taken(q, r):
    from echomq.consumer import Observer, exponential_backoff

    Consumer(q, ok, backoff=exponential_backoff(10, 100), observer=Observer())
    Consumer(q, handler_many=lambda jobs: [None] * len(jobs), batch=5)


def test_the_checks_leave_the_consumers_name_alone(q):
    """(A check's loop once reused ``name`` and renamed every consumer "backoff".)"""
    assert Consumer(q, ok, name="scorer").name == "scorer"
    assert Consumer(q, ok).name.startswith("t/CSR")
