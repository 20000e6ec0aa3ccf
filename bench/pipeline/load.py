"""HTTP load for the pipeline bench: raw HTTP/1.1 over one new connection
per request (gunicorn's sync workers close each one), on asyncio.

``open_loop`` sends at a fixed rate whatever happens (each request's latency
counts from its *intended* send time, so a server that falls behind cannot
hide it by slowing the sender); ``closed_loop`` keeps ``concurrency``
requests in flight for saturation figures."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass

MAX_IN_FLIGHT = 400  # sockets; a request waiting for one still counts from its intended time


@dataclass
class Sent:
    intended: float  # loop clock
    done: float
    status: int      # 0: no answer
    meta: object


def request(method: str, path: str, port: int, *, cookie: str = "", body: bytes = b"",
            content_type: str = "application/x-www-form-urlencoded") -> bytes:
    head = [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{port}", "Connection: close"]
    if cookie:
        head.append(f"Cookie: {cookie}")
    if method == "POST":
        head += [f"Content-Type: {content_type}", f"Content-Length: {len(body)}"]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


async def _send(port: int, raw: bytes, timeout: float) -> int:
    async def go():
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            writer.write(raw)
            line = await reader.readline()
            while await reader.read(65536):
                pass
            return int(line.split()[1]) if line else 0
        finally:
            writer.close()

    try:
        return await asyncio.wait_for(go(), timeout)
    except (OSError, asyncio.TimeoutError, ValueError, IndexError):
        return 0


async def open_loop(port: int, rate: float, seconds: float, make, *, timeout: float = 10.0) -> list[Sent]:
    """``make(i) -> (raw request, meta)``; send ``rate``/s for ``seconds``."""
    loop = asyncio.get_running_loop()
    gate = asyncio.Semaphore(MAX_IN_FLIGHT)
    t0 = loop.time() + 0.05
    out: list[Sent] = []

    async def one(intended, raw, meta):
        async with gate:
            status = await _send(port, raw, timeout)
        out.append(Sent(intended, loop.time(), status, meta))

    tasks = []
    for i in range(int(rate * seconds)):
        intended = t0 + i / rate
        delay = intended - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        raw, meta = make(i)
        tasks.append(asyncio.create_task(one(intended, raw, meta)))
    await asyncio.gather(*tasks)
    return out


async def closed_loop(port: int, concurrency: int, seconds: float, make, *, timeout: float = 10.0) -> list[Sent]:
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    out: list[Sent] = []
    counter = iter(range(10**9))

    async def worker():
        while loop.time() < end:
            raw, meta = make(next(counter))
            start = loop.time()
            status = await _send(port, raw, timeout)
            out.append(Sent(start, loop.time(), status, meta))

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return out


def pct(values: list[float], p: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]
