"""celery: Redis broker, acks_late, results ignored, one worker process."""
from celery import Celery

from bench.peers import QUEUE

DIST = "celery"
CONFIGS = {
    "solo-pf64": "--pool=solo, acks_late, ignore_result, prefetch_multiplier=64, no heartbeat/gossip/mingle",
    "threadsN-pf16": "--pool=threads -c N, acks_late, ignore_result, prefetch_multiplier=16",
}
TALLY = None


def _app(url, prefetch=4):
    app = Celery("bench", broker=url)
    app.conf.update(task_acks_late=True, task_ignore_result=True, task_default_queue=QUEUE,
                    worker_prefetch_multiplier=prefetch, broker_connection_retry_on_startup=True,
                    worker_hijack_root_logger=False, worker_redirect_stdouts=False)

    @app.task(name="noop", acks_late=True, ignore_result=True)
    def noop():
        TALLY.hit()

    return app, noop


def fill(url, n):
    app, noop = _app(url)
    with app.producer_or_acquire() as producer:
        for _ in range(n):
            noop.apply_async(producer=producer)
    return "apply_async, one producer"


def work(url, n, concurrency, config, tally, ready):
    global TALLY
    TALLY = tally
    if config.startswith("solo"):
        pool, conc, pf = "solo", 1, 64
    else:
        pool, conc, pf = "threads", concurrency, 16
    app, _ = _app(url, pf)
    ready()
    app.worker_main(["worker", f"--pool={pool}", f"--concurrency={conc}", "--without-heartbeat",
                     "--without-gossip", "--without-mingle", "--loglevel=WARNING", "-Q", QUEUE,
                     f"--prefetch-multiplier={pf}"])
