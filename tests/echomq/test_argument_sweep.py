"""A sweep of the public Python API with hostile arguments: every method of
Queue, ShardedQueue and their lanes, each parameter in turn replaced by
values of the wrong type or range while the others stay valid. Each call
must either work or raise a typed EchoMQError; when it raises, every key on
the server (type and contents) must be as it was. A check removed from any
method shows up here as an untyped error (TypeError, KeyError, a redis
ResponseError) or as a write before the refusal."""
from __future__ import annotations

import inspect
import math

import pytest

from echomq import EchoMQError, Queue, ShardedQueue

LANE = "PLR0KHTOWnGLuC"
BAD = [None, -1, 0, 2**70, 1.5, math.nan, math.inf, "", "x" * 5000, "a\x00b", b"\xff\xfe", [], {}, True,
       object(), "nope", "a b", "\u200d", "JOB0KHTOWnGLuC"]
GOOD = dict(attempts=1, lease_ms=1000, consumer="c1", payload=b"x", lane=LANE, delay_ms=0, priority=0,
            unique_key=None, unique_ttl_ms=None, limit=10, n=2, paused=True, max_stalls=2, max_attempts=3, error="e",
            name="s1", cron=None, every_ms=60000, tz="UTC", catch_up=0, value=1, timeout_s=0.01, minutes=5,
            types=None, job=None, scan=None, maxlen=100, jobs=5, per_ms=1000, completed=None, completed_ms=None,
            dead=None, dead_ms=None, max_active=3)
# Helpers for batches and parsers, and the calls that block or are not about arguments.
LEFT_OUT = {"lanes", "batch", "batch_answers", "parse_claim", "parse_enqueue", "parse_counts", "enqueued",
            "add_claim", "add_complete", "add_complete_batch", "add_counts", "add_enqueue", "add_extend", "add_pause",
            "add_promote", "add_reap", "add_release", "add_retry", "admit_flow", "parking", "wait",
            "job_key", "keys", "server_time_ms", "events", "mark_hot", "has_hot", "rate_shares", "combine", "probe",
            "plan", "answered", "restart", "ready_shards", "locate", "shard_index", "shard_for", "shard_counts",
            "enqueue_flow", "complete_many", "extend_many", "enqueue_many"}


def everything(r) -> dict:
    out = {}
    for k in sorted(r.keys("*")):
        t = r.type(k).decode()
        v = {"string": lambda: r.get(k), "hash": lambda: sorted(r.hgetall(k).items()),
             "list": lambda: r.lrange(k, 0, -1), "set": lambda: sorted(r.smembers(k)),
             "zset": lambda: r.zrange(k, 0, -1, withscores=True), "stream": lambda: r.xrange(k)}.get(t, lambda: None)()
        out[k] = (t, v)
    return out


@pytest.mark.parametrize("kind", ["queue", "sharded"])
def test_every_public_method_refuses_bad_arguments_typed_and_unwritten(r, kind):
    q = Queue("t", r) if kind == "queue" else ShardedQueue("t", r, shards=3)

    def fresh():
        r.flushdb()
        q.enqueue(b"p", lane=LANE)
        q.enqueue(b"p2")
        q.schedule("s1", every_ms=60000)
        return q.claim(lease_ms=60000)

    job = fresh()
    targets = [(q, n) for n in dir(q) if not n.startswith("_") and n not in LEFT_OUT and callable(getattr(q, n))]
    targets += [(q.lanes, n) for n in ("pause", "resume", "limit", "set_rate", "depth", "info", "deepest")]
    problems, calls = [], 0
    for obj, name in targets:
        params = [p for p in inspect.signature(getattr(obj, name)).parameters.values()
                  if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        for param in params:
            for bad in BAD:
                good = dict(GOOD, job_id=job.id, attempts=job.attempts)
                args, kwargs = [], {}
                for p in params:
                    v = bad if p is param else good.get(p.name, None if p.default is p.empty else p.default)
                    (kwargs.__setitem__(p.name, v) if p.kind == p.KEYWORD_ONLY else args.append(v))
                before = everything(r)
                calls += 1
                try:
                    getattr(obj, name)(*args, **kwargs)
                except EchoMQError as exc:
                    if everything(r) != before:
                        problems.append(f"{name}({param.name}={bad!r:.30}): {type(exc).__name__} after a write")
                except Exception as exc:  # noqa: BLE001 -- the point: anything untyped is a finding
                    problems.append(f"{name}({param.name}={bad!r:.30}): untyped {type(exc).__name__}: {exc}"[:160])
                if (q.job(job.id) or {}).get("state") != "active":
                    job = fresh()
    assert calls > 1000
    assert problems == []
