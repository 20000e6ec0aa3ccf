"""saq: asyncio worker on Redis lists (BLMOVE)."""
import asyncio

from saq import Queue, Worker

from bench.peers import QUEUE

DIST = "saq"
CONFIGS = {
    "conc64": "Worker concurrency=64",
    "concN": "Worker concurrency=N",
}
TALLY = None


async def noop(ctx):
    TALLY.hit()


def fill(url, n):
    async def go():
        q = Queue.from_url(url, name=QUEUE)
        await q.connect()
        for i in range(0, n, 500):
            await asyncio.gather(*(q.enqueue("noop") for _ in range(min(500, n - i))))
        await q.disconnect()
    asyncio.run(go())
    return "Queue.enqueue, 500 concurrent"


def work(url, n, concurrency, config, tally, ready):
    global TALLY
    TALLY = tally
    conc = 64 if config == "conc64" else concurrency

    async def go():
        q = Queue.from_url(url, name=QUEUE)
        w = Worker(q, functions=[noop], concurrency=conc)
        ready()
        await w.start()
    asyncio.run(go())
