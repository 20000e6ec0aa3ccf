"""arq: asyncio worker; results not kept, no per-job log line, short poll."""
import asyncio

from arq import create_pool
from arq.connections import RedisSettings
from arq.worker import Worker, func

from bench.peers import QUEUE

DIST = "arq"
# arq's default poll_delay (0.5 s) sleeps between reads of up to
# queue_read_limit ids; a drain wants a short poll and a large read.
CONFIGS = {
    "jobs64": "max_jobs=64, poll_delay=0, queue_read_limit=1000, keep_result=0, log_results=False",
    "jobsN": "max_jobs=N, poll_delay=0, queue_read_limit=1000, keep_result=0, log_results=False",
}
TALLY = None


async def noop(ctx):
    TALLY.hit()


def fill(url, n):
    async def go():
        pool = await create_pool(RedisSettings.from_dsn(url), default_queue_name=QUEUE)
        for i in range(0, n, 500):
            await asyncio.gather(*(pool.enqueue_job("noop", _queue_name=QUEUE) for _ in range(min(500, n - i))))
        await pool.aclose()
    asyncio.run(go())
    return "enqueue_job, 500 concurrent"


def work(url, n, concurrency, config, tally, ready):
    global TALLY
    TALLY = tally
    max_jobs = 64 if config == "jobs64" else concurrency

    async def go():
        w = Worker(functions=[func(noop, name="noop")], queue_name=QUEUE,
                   redis_settings=RedisSettings.from_dsn(url), handle_signals=False,
                   max_jobs=max_jobs, poll_delay=0, queue_read_limit=1000, keep_result=0,
                   log_results=False, max_tries=1)
        ready()
        await w.main()
    asyncio.run(go())
