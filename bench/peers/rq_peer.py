"""rq: SimpleWorker (no fork per job) in burst mode; results not kept."""
from redis import Redis
from rq import Queue, SimpleWorker

from bench.peers import QUEUE

DIST = "rq"
CONFIGS = {"simple-burst": "SimpleWorker, burst, result_ttl=0 (rq runs one job at a time)"}
TALLY = None


def noop():
    TALLY.hit()


def fill(url, n):
    q = Queue(QUEUE, connection=Redis.from_url(url))
    for i in range(0, n, 1000):
        q.enqueue_many([Queue.prepare_data(noop, result_ttl=0) for _ in range(min(1000, n - i))])
    return "Queue.enqueue_many x1000"


def work(url, n, concurrency, config, tally, ready):
    global TALLY
    TALLY = tally
    conn = Redis.from_url(url)
    w = SimpleWorker([Queue(QUEUE, connection=conn)], connection=conn, log_job_description=False)
    ready()
    w.work(burst=True, logging_level="WARNING")
