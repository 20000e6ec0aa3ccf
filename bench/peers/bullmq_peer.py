"""bullmq (the Python port): asyncio Worker, removeOnComplete."""
import asyncio

from bullmq import Queue, Worker

from bench.peers import QUEUE

DIST = "bullmq"
CONFIGS = {
    "conc64": "Worker concurrency=64, jobs removeOnComplete",
    "concN": "Worker concurrency=N, jobs removeOnComplete",
}
TALLY = None
OPTS = {"removeOnComplete": True, "removeOnFail": True}


async def noop(job, token):
    TALLY.hit()


def fill(url, n):
    async def go():
        q = Queue(QUEUE, {"connection": url})
        for i in range(0, n, 1000):
            await q.addBulk([{"name": "noop", "data": {}, "opts": OPTS} for _ in range(min(1000, n - i))])
        await q.close()
    asyncio.run(go())
    return "Queue.addBulk x1000"


def work(url, n, concurrency, config, tally, ready):
    global TALLY
    TALLY = tally
    conc = 64 if config == "conc64" else concurrency

    async def go():
        ready()
        Worker(QUEUE, noop, {"connection": url, "concurrency": conc})
        await asyncio.Event().wait()
    asyncio.run(go())
