"""The EchoMQ side of a drain or latency run, as its own process.

    python -m bench.echo_worker --url URL --queue Q --n N --mode MODE [...]

MODE
  consumer   echomq.Consumer(queue, handler, concurrency=, prefetch=) with a
             no-op handler; stops itself (Consumer.stop) after n jobs.
             ``--prefetch auto`` (the default) passes no prefetch at all: the
             Consumer's own default (adaptive).
  mix        the same Consumer; the payload is the handler's sleep in ms (the
             mixed 1 ms / 2 s run); runs until SIGTERM.
  latency    the same Consumer; the payload is the enqueue time (unix s, as
             text); the handler records now - payload; percentiles reported.
  raw1       reference loop, no Consumer: claim one, handle, complete; one
             round trip per claim and one per complete.
  rawpipe    reference loop, no Consumer: one Batch (pipeline) per cycle
             that completes the previous batch and claims the next.
  selfloop   reference loop, no Consumer: the default Consumer's busy shape
             with none of its bookkeeping: ``--concurrency`` threads (default:
             the consumer's MAX_THREADS), each claiming ``--claim`` jobs
             (SELF_CLAIM) in one round trip with the acks waiting, then
             running them (the handler's work only) and queueing their acks.

``--body incr`` gives every job one INCR through the queue's own client,
shared by the handler threads (bench.body); ``--fill N --lanes K`` enqueues
N jobs on K lanes before READY, with this process's own echomq (so a run
can compare two versions of the code, each filling its own way).

Prints READY, PROGRESS and RESULT lines (see bench.tally).
"""
from __future__ import annotations

import argparse
import collections
import importlib
import logging
import sys
import threading
import time

import redis

from echomq import Queue, ids

from bench import body
from bench.tally import Tally, emit


def load_consumer(spec: str):
    module, _, attr = spec.partition(":")
    return getattr(importlib.import_module(module), attr or "Consumer")


def percentiles(values, ps=(50, 90, 99, 99.9)) -> dict:
    if not values:
        return {}
    v = sorted(values)
    out = {}
    for p in ps:
        k = min(len(v) - 1, max(0, int(round(p / 100 * len(v))) - 1))
        out[f"p{p:g}"] = v[k]
    out["max"] = v[-1]
    out["mean"] = sum(v) / len(v)
    return out


def fill(q: Queue, n: int, lanes: int) -> None:
    names = [ids.mint("PLR") for _ in range(lanes)]
    for i in range(0, n, 1000):
        q.enqueue_many([{"payload": b"x", "lane": names[j % lanes]} if lanes else b"x"
                        for j in range(i, min(n, i + 1000))])


def run_consumer(q: Queue, a, tally: Tally, handler) -> dict:
    Consumer = load_consumer(a.consumer)
    tuning = {} if a.prefetch is None else {"prefetch": a.prefetch}  # None: the Consumer's default
    if a.defaults:  # Consumer(queue, handler), exactly as a user writes it first
        consumer = Consumer(q, handler)
    else:
        consumer = Consumer(q, handler, concurrency=a.concurrency, lease_ms=a.lease_ms, beat_ms=a.beat_ms,
                            **tuning)
    tally.on_done = lambda: threading.Thread(target=consumer.stop, daemon=True).start()
    emit("READY")
    consumer.run()
    stats = getattr(consumer, "stats", None)
    return {"stats": dict(stats) if stats else None, "counts": q.counts()}


def run_raw1(q: Queue, a, tally: Tally) -> dict:
    emit("READY")
    while not tally.done.is_set():
        job = q.claim(lease_ms=a.lease_ms)
        if job is None:
            q.wait_for_work(0.05)
            continue
        tally.hit()
        q.complete(job.id, job.attempts)
    return {}


def run_rawpipe(q: Queue, a, tally: Tally) -> dict:
    """What a consumer's fetcher does, minus the threads: one round trip per
    cycle that completes the previous batch and claims the next one, through
    the Queue's batch API (complete_batch when the Queue has it). Falls back
    to complete_many + claim_batch (two round trips) on an older Queue."""
    size = max(1, a.prefetch or 64)
    emit("READY")
    held: list[tuple[str, int]] = []
    one_trip = hasattr(q, "batch") and hasattr(q, "add_claim")
    while True:
        done = tally.done.is_set()
        if done and not held:
            break
        if not one_trip:
            if held:
                q.complete_many(held)
            if done:
                break
            held = [(j.id, j.attempts) for j in q.claim_batch(size, lease_ms=a.lease_ms)]
        else:
            b = q.batch()
            if held:
                if hasattr(q, "add_complete_batch"):
                    q.add_complete_batch(b, held)
                else:
                    for job_id, token in held:
                        q.add_complete(b, job_id, token)
            if not done:
                q.add_claim(b, size, lease_ms=a.lease_ms)
            replies = b.run()
            for r in replies:
                if isinstance(r, Exception):
                    raise r
            if done:
                break
            reply = replies[-1]  # the claim: id, payload, token, lane per job
            held = [(reply[i].decode(), int(reply[i + 2])) for i in range(0, len(reply), 4)]
        if not held:
            q.wait_for_work(0.05)
        for _ in held:
            tally.hit()
    return {"one_round_trip": one_trip}


def run_selfloop(q: Queue, a, tally: Tally) -> dict:
    from echomq import consumer as _consumer

    threads = a.concurrency if a.concurrency > 1 else _consumer.MAX_THREADS
    size = a.claim or _consumer.SELF_CLAIM
    acks: collections.deque = collections.deque()
    me = ids.mint("CSR")

    def loop():
        while not tally.done.is_set():
            pairs = []
            while acks:
                try:
                    pairs.append(acks.popleft())
                except IndexError:
                    break
            b = q.batch()
            if pairs:
                q.add_complete_batch(b, pairs)
            q.add_claim(b, size, lease_ms=a.lease_ms, consumer=me)
            replies = b.run()
            for r in replies:
                if isinstance(r, Exception):
                    raise r
            jobs = q.parse_claim(replies[-1])
            if not jobs:
                time.sleep(0.001)
            for job in jobs:
                tally.hit()
                acks.append((job.id, job.attempts))

    emit("READY")
    workers = [threading.Thread(target=loop, daemon=True) for _ in range(threads)]
    for t in workers:
        t.start()
    tally.done.wait()
    for t in workers:  # each sends the acks it took, or finds none left
        t.join(5)
    while acks:  # the last acks, for the counts the harness checks
        q.complete_many([acks.popleft() for _ in range(min(len(acks), 1000))])
    return {"threads": threads, "claim": size, "counts": q.counts()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--queue", default="bench")
    ap.add_argument("--n", type=int, required=True)
    ap.add_argument("--mode", choices=("consumer", "latency", "mix", "raw1", "rawpipe", "selfloop"), default="consumer")
    ap.add_argument("--concurrency", type=int, default=1)
    ap.add_argument("--prefetch", type=lambda v: None if v == "auto" else int(v), default=None,
                    help="an int, or 'auto' (default): leave it to the Consumer")
    ap.add_argument("--lease-ms", type=int, default=30_000)
    ap.add_argument("--claim", type=int, default=0, help="selfloop: jobs per claim (default: SELF_CLAIM)")
    ap.add_argument("--beat-ms", type=int, default=1_000)
    ap.add_argument("--consumer", default="echomq:Consumer")
    ap.add_argument("--defaults", action="store_true", help="Consumer(queue, handler): no other argument")
    ap.add_argument("--body", choices=body.BODIES, default="noop", help="each job's work (bench.body)")
    ap.add_argument("--fill", type=int, default=0, help="enqueue this many jobs before READY")
    ap.add_argument("--lanes", type=int, default=0, help="spread the --fill jobs over this many lanes")
    a = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)

    q = Queue(a.queue, redis.Redis.from_url(a.url))
    if a.fill:
        fill(q, a.fill, a.lanes)
    tally = Tally(a.n, body=body.make(a.body, q.client))
    if a.mode == "consumer":
        extra = run_consumer(q, a, tally, lambda job: tally.hit())
    elif a.mode == "latency":
        lat = []

        def handler(job):
            lat.append(time.time() - float(job.payload))
            tally.hit()

        extra = run_consumer(q, a, tally, handler)
        extra["latency_ms"] = {k: v * 1000 for k, v in percentiles(lat).items()}
    elif a.mode == "mix":
        extra = run_consumer(q, a, Tally(10**12, progress=False),
                             lambda job: time.sleep(int(job.payload) / 1000))
    elif a.mode == "selfloop":
        extra = run_selfloop(q, a, tally)
    elif a.mode == "raw1":
        extra = run_raw1(q, a, tally)
    else:
        extra = run_rawpipe(q, a, tally)
    emit("RESULT", tally.result(**extra))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
