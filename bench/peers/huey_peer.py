"""huey: RedisHuey (blocking pop), results off, thread workers."""
from huey import RedisHuey

from bench.peers import QUEUE

DIST = "huey"
CONFIGS = {
    "threadsN": "RedisHuey(results=False, blocking=True), consumer workers=N threads",
    "threads1": "RedisHuey(results=False, blocking=True), consumer workers=1",
}
TALLY = None


def _huey(url):
    h = RedisHuey(QUEUE, url=url, results=False, blocking=True, utc=True)

    @h.task(name="noop")
    def noop():
        TALLY.hit()

    return h, noop


def fill(url, n):
    h, noop = _huey(url)
    for _ in range(n):
        noop()
    return "task() call (one LPUSH each)"


def work(url, n, concurrency, config, tally, ready):
    global TALLY
    TALLY = tally
    h, _ = _huey(url)
    workers = 1 if config == "threads1" else concurrency
    c = h.create_consumer(workers=workers, worker_type="thread", periodic=False,
                          check_worker_health=False)
    ready()
    c.run()
