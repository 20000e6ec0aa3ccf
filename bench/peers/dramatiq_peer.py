"""dramatiq: Redis broker, one in-process Worker with N threads."""
import threading

import dramatiq
from dramatiq import Worker
from dramatiq.brokers.redis import RedisBroker

from bench.peers import QUEUE

DIST = "dramatiq"
CONFIGS = {
    "threadsN": "Worker(worker_threads=N), default middleware, prefetch 2*threads",
    "threads1": "Worker(worker_threads=1)",
}
TALLY = None


def noop():
    TALLY.hit()


def _actor(url):
    broker = RedisBroker(url=url)
    dramatiq.set_broker(broker)
    return broker, dramatiq.actor(noop, actor_name="noop", queue_name=QUEUE, max_retries=0, broker=broker)


def fill(url, n):
    broker, actor = _actor(url)
    for _ in range(n):
        actor.send()
    return "actor.send (one dispatch script per message)"


def work(url, n, concurrency, config, tally, ready):
    global TALLY
    TALLY = tally
    broker, _ = _actor(url)
    w = Worker(broker, worker_threads=1 if config == "threads1" else concurrency, worker_timeout=100)
    ready()
    w.start()
    threading.Event().wait()
