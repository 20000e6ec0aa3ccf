"""A reaper process for the schedule race: ``python -m tests.echomq.reaper_proc``.
Runs ``echomq.Reaper`` over one queue and adds each pass's fired count to
the key ``fired`` (so the test sees how many ticks all reapers enqueued)."""
import argparse
import logging
import os
import sys

import redis

from echomq import Queue, Reaper


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--queue", default="race")
    p.add_argument("--interval-ms", type=int, default=5)
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format=f"%(asctime)s pid={os.getpid()} %(name)s %(message)s")
    client = redis.Redis.from_url(a.url, socket_timeout=5)
    q = Queue(a.queue, client)
    reaper = Reaper([q], interval_ms=a.interval_ms)
    run_once = reaper.run_once

    def counted():
        report = run_once()
        if report[q.name]["fired"]:
            client.incrby("fired", report[q.name]["fired"])
        return report

    reaper.run_once = counted
    reaper.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
