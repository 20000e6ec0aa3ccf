"""A consumer process for the crash tests: ``python -m tests.echomq.worker_proc``.

Handlers record what they do in Valkey, next to the queue:
  ``runs``        every job id each time a handler starts it (redeliveries show)
  ``holding``     same, for tests that wait until a worker holds its jobs
  ``effect:<id>`` SET NX by whichever run did the job's effect first
  ``effects``     INCR only when that SET NX won (one script): the effect count
Modes: ``effect`` (do the effect, optionally sleep), ``gate-before`` / ``gate-after``
(block on ``gate`` before / after the effect until the test pushes a token),
``poison`` (SIGKILL our own process: a job that kills every worker),
``cancellable`` (sleep ``--sleep-ms`` in 10 ms steps, stopping at ``job.check()``
once the job is cancelled; the effect only after the whole sleep; a stop is
recorded in ``stopped``), ``crash`` (a bug in the consumer's own code: the
process must exit non-zero), ``flow`` (a flow's jobs: a child leaves a result
and, if its payload is ``kill`` and no process has yet, SIGKILLs its own
process, its pid pushed on ``killed``; the parent records in ``parent-saw``
how each child ended and pushes its id on ``parent-done``).
Each process pushes its pid on ``ready`` just before its consumer starts, so
a test can wait for every process before it enqueues.
"""
import argparse
import logging
import os
import signal
import sys
import time

import redis

from echomq import Consumer, Queue


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--queue", default="crash")
    p.add_argument("--mode", default="effect")
    p.add_argument("--concurrency", type=int, default=1)
    p.add_argument("--prefetch", type=int, default=None)
    p.add_argument("--lease-ms", type=int, default=30_000)
    p.add_argument("--sleep-ms", type=int, default=0)
    p.add_argument("--grace-ms", type=int, default=10_000)
    p.add_argument("--beat-ms", type=int, default=1_000)
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format=f"%(asctime)s pid={os.getpid()} %(name)s %(message)s")
    client = redis.Redis.from_url(a.url, socket_timeout=5, socket_connect_timeout=2)
    side = redis.Redis.from_url(a.url, socket_timeout=60)

    # The marker and the counter change together or not at all (a restart
    # between two separate calls would leave a marker without its count).
    record = side.register_script(
        "if redis.call('SET', KEYS[1], ARGV[1], 'NX') then redis.call('INCR', KEYS[2]) end")

    def effect(job):
        record(keys=[f"effect:{job.id}", "effects"], args=[os.getpid()])

    def handler(job):
        side.rpush("runs", job.id)
        side.rpush("holding", job.id)
        if a.mode == "flow":
            if job.payload == b"parent":
                side.hset("parent-saw", mapping={k: v["state"] for k, v in job.children_results().items()})
                side.rpush("parent-done", job.id)
                return
            job.set_result({"pid": os.getpid()})
            if job.payload == b"kill" and side.set("kill-once", os.getpid(), nx=True):
                side.rpush("killed", os.getpid())
                os.kill(os.getpid(), signal.SIGKILL)
            return
        if a.mode == "poison":
            os.kill(os.getpid(), signal.SIGKILL)
        if a.mode == "cancellable":
            try:
                for _ in range(a.sleep_ms // 10):
                    job.check()
                    job.wait_cancelled(0.01)
                job.check()
            except Exception:
                side.rpush("stopped", job.id)
                raise
            effect(job)
            return
        if a.mode == "gate-before":
            side.blpop(["gate"], timeout=60)
        effect(job)
        if a.mode == "gate-after":
            side.blpop(["gate"], timeout=60)
        if a.sleep_ms:
            time.sleep(a.sleep_ms / 1000)

    consumer = Consumer(Queue(a.queue, client), handler, concurrency=a.concurrency, prefetch=a.prefetch,
                        lease_ms=a.lease_ms, grace_ms=a.grace_ms, beat_ms=a.beat_ms,
                        backoff=lambda attempt: 0)
    if a.mode == "crash":
        def broken(*args):
            raise RuntimeError("a bug in the consumer's own code")
        consumer._settle = broken  # settling the acks that just went out
    side.rpush("ready", os.getpid())
    consumer.run()
    side.rpush("exited", os.getpid())
    return 0


if __name__ == "__main__":
    sys.exit(main())
