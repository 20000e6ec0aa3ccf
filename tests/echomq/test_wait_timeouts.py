"""The two waits that took any timeout: ``Queue.wait_for_work`` passed it to
BLPOP unchecked (-1, NaN, inf: a redis ResponseError; True: a DataError;
"1": taken), and ``Job.wait_cancelled`` to ``threading.Event.wait`` (inf or
2**70: OverflowError; "1": TypeError). Both must refuse it with
ArgumentError, as ``Queue.wait`` does (``checks.check_seconds``), before
anything is sent.

(The fixes belong in files being edited now: ``echomq/queue.py``
``wait_for_work``: ``timeout_s = check_seconds(timeout_s, "timeout_s")``
first; ``echomq/job.py`` ``wait_cancelled``: ``None`` stays "for ever",
anything else through ``check_seconds`` -- or, to keep 0 meaning "just
look", a check of a finite real number in [0, MAX_MS / 1000].)"""
from __future__ import annotations

import math

import pytest

from echomq import ArgumentError, Queue

BAD = [-1, math.nan, math.inf, -math.inf, 2**70, True, "1", object()]


def commands(r) -> int:
    return sum(v["calls"] for k, v in r.info("commandstats").items() if k != "cmdstat_config|resetstat")


@pytest.mark.parametrize("timeout", BAD)
def test_wait_for_work_refuses_a_bad_timeout_before_asking_valkey(r, timeout):
    q = Queue("t", r)
    r.config_resetstat()
    with pytest.raises(ArgumentError, match="timeout"):
        q.wait_for_work(timeout)
    assert commands(r) == 0


@pytest.mark.parametrize("timeout", [math.nan, math.inf, 2**70, "1", object()])
def test_wait_cancelled_refuses_a_bad_timeout(r, timeout):
    q = Queue("t", r)
    q.enqueue(b"x")
    job = q.claim(lease_ms=10_000)
    with pytest.raises(ArgumentError, match="timeout"):
        job.wait_cancelled(timeout)


def test_the_good_timeouts_still_wait(r):
    q = Queue("t", r)
    assert q.wait_for_work(0.01) is False
    q.enqueue(b"x")
    job = q.claim(lease_ms=10_000)
    assert job.wait_cancelled(0.01) is False
