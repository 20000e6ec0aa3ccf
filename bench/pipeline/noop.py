"""The no-op Consumer, alone: drain N pre-filled jobs with one
``echomq.Consumer`` (default settings) and print ``RESULT {json}``.

    python -m bench.pipeline.noop VALKEY_URL N
"""
import json
import sys
import threading
import time

import redis

from echomq import Consumer, Queue


def main() -> None:
    url, n = sys.argv[1], int(sys.argv[2])
    q = Queue("bench.noop", redis.Redis.from_url(url))
    q.enqueue_many([{"payload": b"x"} for _ in range(n)])
    seen, times = [0], []
    done = threading.Event()

    def handler(job):
        seen[0] += 1
        if seen[0] == 1 or seen[0] == n:
            times.append(time.perf_counter())
        if seen[0] == n:
            done.set()

    c = Consumer(q, handler)
    t = threading.Thread(target=c.run, daemon=True)
    cpu0 = time.process_time()
    t.start()
    done.wait(300)
    cpu = time.process_time() - cpu0
    c.stop()
    t.join(30)
    rate = (n - 1) / (times[-1] - times[0]) if len(times) == 2 and times[-1] > times[0] else None
    print("RESULT " + json.dumps({"jobs_per_s": rate, "cpu_ms_per_job": cpu * 1000 / n}), flush=True)


if __name__ == "__main__":
    main()
