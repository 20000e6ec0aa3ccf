"""Watchers of one round, pushed against polled, side by side in one run.

    .venv/bin/python -m bench.live_push                 # 1,000 watchers, 50 guesses/s, 60 s per mode
    .venv/bin/python -m bench.live_push --quick         # 20 s per mode
    .venv/bin/python -m bench.live_push --watchers 300 --rate 20 --postgres

What runs: a private valkey-server, a fresh database (SQLite in a temp dir,
or a fresh PostgreSQL database with --postgres), gunicorn serving the pages
(2 workers x 4 threads, as the browser tests run it), the live process
(``codemojex_site.asgi`` under uvicorn's worker, 1 worker) and one score
worker. A feeder process submits ``--rate`` guesses a second (``submit``,
as the guess POST does, spread over 100 players), scored by the worker.

Then, one mode after the other, on the same servers and round:

* **polling** (today's watch page, ``static/games/play.js``): each watcher
  asks ``/watch/<RND>/live.json`` every 3 s with its ETag, on a keep-alive
  connection to gunicorn;
* **push**: each watcher holds ``/live/watch/<RND>/`` open on the live
  process.

In both, 20 of the feeder's players keep their round page: polled every
0.4 s (play.js's pace while a guess of theirs is queued: today's best case)
or its stream held open, for their own scores.

What is measured, per mode, after a warm-up:

* scored -> visible: for a guess, from its ``scored_at`` (written in the
  score's transaction, just before the commit) to the first view a watcher
  receives that was read after the guess reached Valkey (the view's ``at``
  against the guess's time in the round's activity set, written after the
  commit); p50 / p99 over every (sampled guess, watcher) pair. For push,
  the same for each player's own guess on their round page stream
  (``mine``);
* CPU seconds per wall second of gunicorn (all workers) and of the live
  process, the score worker and Valkey;
* memory per connection: the live process's (or gunicorn's) resident memory
  with the watchers connected, less before they connected, over their number;
* how long after the score's commit the guess's ``completed`` event entered
  the queue's event stream (what the push reads): the most a worker-side
  publish (a per-round pub/sub message after the commit) could save.

The clients run on the same two shared cores as the servers (one asyncio
process, uvloop when installed, reading only what they time): every latency
here is pessimistic. Say so when quoting figures.
"""
from __future__ import annotations

import argparse
import asyncio
import bisect
import json
import multiprocessing
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from bench.live_poll import Bench as PollBench
from bench.live_poll import cpu_seconds, pct, step, tree_cpu

REPO = Path(__file__).resolve().parent.parent
AT = re.compile(rb'"at":\s*(\d+)')
SCORED = re.compile(rb'"id":"(GES\w+)"[^{}]*?"status":"scored"')
POLL_S = 3.0
POLL_PENDING_S = 0.4  # play.js, while a guess of mine is queued
OWN_PLAYERS = 20


def rss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def tree_rss_kb(pid: int) -> int:
    from bench.live_poll import children

    return rss_kb(pid) + sum(rss_kb(c) for c in children(pid))


# -- the clients (one asyncio process) ---------------------------------------
async def _request(reader, writer, path: str, headers: dict) -> tuple[int, dict, bytes]:
    lines = [f"GET {path} HTTP/1.1", "Host: 127.0.0.1", *(f"{k}: {v}" for k, v in headers.items()), "", ""]
    writer.write("\r\n".join(lines).encode())
    status_line = await reader.readline()
    status = int(status_line.split()[1])
    head = {}
    while True:
        line = await reader.readline()
        if line in (b"\r\n", b""):
            break
        k, _, v = line.decode("latin-1").partition(":")
        head[k.strip().lower()] = v.strip()
    return status, head, b""


async def _body(reader, head: dict) -> bytes:
    if "content-length" in head:
        return await reader.readexactly(int(head["content-length"]))
    if head.get("transfer-encoding") == "chunked":
        out = b""
        while True:
            size = int((await reader.readline()).strip(), 16)
            chunk = await reader.readexactly(size + 2)
            if size == 0:
                return out
            out += chunk[:-2]
    return b""


async def poll_loop(port: int, path: str, every_s: float, cookie: str, stop: asyncio.Event, errors: list,
                    seen) -> None:
    """A page's poll loop on one keep-alive connection, with the last ETag,
    every ``every_s``; ``seen(body, now)`` gets each full answer."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    etag = None
    while not stop.is_set():
        try:
            headers = {"Accept": "application/json", **({"Cookie": cookie} if cookie else {})}
            if etag:
                headers["If-None-Match"] = etag
            status, head, _ = await _request(reader, writer, path, headers)
            body = await _body(reader, head)
            if status == 200:
                etag = head.get("etag")
                seen(body, time.time())
            elif status != 304:
                errors.append(status)
        except (OSError, asyncio.IncompleteReadError, ValueError, IndexError):
            errors.append("conn")
            writer.close()
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            await asyncio.wait_for(stop.wait(), every_s)
        except TimeoutError:
            pass
    writer.close()


async def poller(port: int, path: str, stop: asyncio.Event, record: list, errors: list) -> None:
    """A watch page's poll: every 3 s; when each view (its ``at``) arrived."""
    def seen(body: bytes, now: float) -> None:
        m = AT.search(body)
        if m:
            record.append((now, int(m.group(1))))
    await asyncio.sleep(random.uniform(0, POLL_S))
    await poll_loop(port, path, POLL_S, "", stop, errors, seen)


async def own_poller(port: int, path: str, cookie: str, stop: asyncio.Event, own: dict, errors: list) -> None:
    """A player's round page right after a guess, polled as play.js does
    while a guess of theirs is queued (every 0.4 s): when each of their
    guesses is first seen scored."""
    def seen(body: bytes, now: float) -> None:
        for gid in SCORED.findall(body.replace(b'": ', b'":').replace(b', "', b',"')):
            own.setdefault(gid.decode(), now)
    await poll_loop(port, path, POLL_PENDING_S, cookie, stop, errors, seen)


async def listener(port: int, path: str, cookie: str, stop: asyncio.Event, record: list, errors: list,
                   own: dict | None = None) -> None:
    """A page's EventSource: one stream, its frames timed as they arrive."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    headers = {"Accept": "text/event-stream"}
    if cookie:
        headers["Cookie"] = cookie
    status, head, _ = await _request(reader, writer, path, headers)
    if status != 200:
        errors.append(status)
        writer.close()
        return
    chunked = head.get("transfer-encoding") == "chunked"
    try:
        while not stop.is_set():  # cancelled at the end of the phase
            if chunked:
                size = int((await reader.readline()).strip() or b"0", 16)
                if size == 0:
                    break
                data = (await reader.readexactly(size + 2))[:-2]
            else:
                data = await reader.read(65536)
                if not data:
                    break
            now = time.time()
            for m in AT.finditer(data):
                record.append((now, int(m.group(1))))
            if own is not None and b"event: mine" in data:
                for gid in SCORED.findall(data):
                    own.setdefault(gid.decode(), now)
    except (OSError, asyncio.IncompleteReadError, ValueError):
        errors.append("conn")
    finally:
        writer.close()


def clients_main(mode: str, args: dict, conn) -> None:
    """The client process: ``watchers`` pollers or listeners (and, pushed,
    the feeder's players' round page streams) until told to stop; sends
    back what each saw."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        import uvloop
        uvloop.install()
    except ImportError:
        pass

    async def run():
        stop = asyncio.Event()
        records = [[] for _ in range(args["watchers"])]
        own: dict[str, float] = {}
        errors: list = []
        tasks = []
        for i in range(args["watchers"]):
            if mode == "poll":
                tasks.append(asyncio.create_task(poller(args["web_port"], args["watch_poll"], stop, records[i],
                                                        errors)))
            else:
                tasks.append(asyncio.create_task(listener(args["live_port"], args["watch_stream"], "", stop,
                                                          records[i], errors)))
                if i % 50 == 49:
                    await asyncio.sleep(0.05)  # open them over a second or so, as page loads would
        if mode == "poll":
            for cookie in args["cookies"]:
                tasks.append(asyncio.create_task(own_poller(args["web_port"], args["round_poll"], cookie, stop, own,
                                                            errors)))
        if mode == "push":
            for cookie in args["cookies"]:
                tasks.append(asyncio.create_task(listener(args["live_port"], args["round_stream"], cookie, stop,
                                                          [], errors, own)))
        loop = asyncio.get_running_loop()
        loop.add_reader(conn.fileno(), stop.set)  # the parent's word: stop
        conn.send("connected")
        await stop.wait()
        loop.remove_reader(conn.fileno())
        os.set_blocking(conn.fileno(), True)  # the loop made it non-blocking: the report is large
        conn.recv()
        for task in tasks:
            task.cancel()
        await asyncio.wait(tasks, timeout=10)
        return records, own, errors

    records, own, errors = asyncio.run(run())
    conn.send((records, own, errors[:50], len(errors)))


def feeder_main(rate: float, round_id: str, players: list[str], keyboard: list[str], secret: list[str],
                stop) -> None:
    """Submit ``rate`` guesses a second, as the guess POST does."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    import django
    from django.db import connections

    connections.close_all()
    django.setup()
    from games.errors import SubmitError
    from games.guesses import submit
    from games.models import Player

    plrs = list(Player.objects.filter(pk__in=players))
    rng = random.Random(7)
    start, n = time.monotonic(), 0
    while not stop.is_set():
        due = start + n / rate
        wait = due - time.monotonic()
        if wait > 0:
            stop.wait(wait)
            continue
        while True:
            emojis = rng.sample(keyboard, 6)
            if emojis != secret:
                break
        try:
            submit(plrs[n % len(plrs)], round_id, emojis)
        except SubmitError:
            pass
        n += 1


# -- the run ---------------------------------------------------------------------
class Bench(PollBench):
    """live_poll's set-up (Valkey, database, gunicorn, a score worker, the
    seeded round and sessions), plus the live process and the feeder."""

    def start(self) -> None:
        super().start()
        from echomq import embedded

        self.live_port = embedded.free_port()
        env = self.env()
        env.update(LIVE_URL=f"http://127.0.0.1:{self.live_port}")
        step("start the live process (uvicorn worker, 1 process)")
        self.live = subprocess.Popen([sys.executable, "-m", "gunicorn", "-c", "python:codemojex_site.gunicorn_conf",
                                      "-k", "codemojex_site.live_worker.Worker", "codemojex_site.asgi:application",
                                      "--bind", f"127.0.0.1:{self.live_port}", "--workers", "1"],
                                     cwd=REPO, env=env, stdout=open(self.tmp / "live.log", "wb"),
                                     stderr=subprocess.STDOUT)
        self.procs.append(self.live)
        import http.client

        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.live_port, timeout=2)
                c.request("GET", "/readyz")
                if c.getresponse().status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)  # waiting for a child process to bind its port; no event to await
        raise RuntimeError("the live process did not answer in 30 s; see " + str(self.tmp / "live.log"))

    def worker_pids(self) -> dict[str, int]:
        return {"web": self.web.pid, "live": self.live.pid}

    def phase(self, mode: str) -> dict:
        from django.db import connections

        connections.close_all()
        a = self.args
        parent, child = multiprocessing.Pipe()
        args = {"watchers": a.watchers, "web_port": self.port, "live_port": self.live_port,
                "watch_poll": f"/watch/{self.round_id}/live.json", "watch_stream": f"/live/watch/{self.round_id}/",
                "round_stream": f"/live/rounds/{self.round_id}/",
                "round_poll": f"/rounds/{self.round_id}/my-guesses.json",
                "cookies": [f"sessionid={key}" for _, key in self.sessions[:OWN_PLAYERS]]}
        mem0 = {name: tree_rss_kb(pid) for name, pid in self.worker_pids().items()}
        step(f"{mode}: {a.watchers} watchers connect, and {OWN_PLAYERS} players' round pages")
        proc = multiprocessing.get_context("fork").Process(target=clients_main, args=(mode, args, child),
                                                           daemon=True)
        proc.start()
        if not parent.poll(120):
            raise RuntimeError("the clients did not connect in 120 s")
        parent.recv()
        self.stop_for(a.warmup)
        mem1 = {name: tree_rss_kb(pid) for name, pid in self.worker_pids().items()}
        cpu0 = self.cpus(proc.pid)
        t0_wall = time.time()
        step(f"{mode}: measuring for {a.seconds:.0f} s")
        self.stop_for(a.seconds)
        cpu1 = self.cpus(proc.pid)
        t1_wall = time.time()
        self.stop_for(2 * POLL_S)  # the last guesses reach the pollers too
        parent.send("stop")
        if not parent.poll(120):
            raise RuntimeError("the clients did not report in 120 s")
        records, own, sample_errors, n_errors = parent.recv()
        proc.join(30)
        elapsed = t1_wall - t0_wall
        cpu = {k: (cpu1[k] - cpu0[k]) / elapsed for k in cpu0}
        return {"mode": mode, "elapsed": elapsed, "t0": t0_wall, "t1": t1_wall, "records": records, "own": own,
                "errors": n_errors, "sample_errors": sample_errors, "cpu": cpu,
                "mem_per_conn_kb": {k: (mem1[k] - mem0[k]) / max(1, a.watchers) for k in mem0}}

    def stop_for(self, seconds: float) -> None:
        self.halt.wait(seconds)
        if self.halt.is_set():
            raise KeyboardInterrupt

    def cpus(self, clients_pid: int) -> dict[str, float]:
        return {"web": tree_cpu(self.web.pid), "live": tree_cpu(self.live.pid), "score": cpu_seconds(self.score.pid),
                "valkey": self.valkey_cpu(), "clients": cpu_seconds(clients_pid),
                "feeder": cpu_seconds(self.feeder.pid)}

    def activity(self) -> None:
        """Keep the round's activity set's entries (guess -> ms it reached
        Valkey); the set holds a minute, so read it often enough."""
        import redis

        client = redis.Redis.from_url(self.valkey_url)
        from games import live

        for gid, ms in client.zrange(live.activity_key(self.round_id), 0, -1, withscores=True):
            self.recorded.setdefault(gid.decode(), int(ms))

    def run_all(self) -> list[dict]:
        self.halt = multiprocessing.Event()
        self.recorded: dict[str, int] = {}
        players = [p for p, in self.players_ids()]
        self.feeder = multiprocessing.get_context("fork").Process(
            target=feeder_main, args=(self.args.rate, self.round_id, players, self.keyboard, self.secret, self.halt),
            daemon=True)
        from django.db import connections

        connections.close_all()
        self.feeder.start()
        import threading

        def keep():
            while not self.halt.wait(10):
                try:
                    self.activity()
                except Exception as exc:  # noqa: BLE001 -- reported, the run goes on
                    print(f"activity read failed: {exc}", file=sys.stderr)
        threading.Thread(target=keep, daemon=True).start()
        out = []
        for mode in ("poll", "push"):
            out.append(self.phase(mode))
            self.activity()
        return out

    def players_ids(self):
        from games.models import Player

        return list(Player.objects.filter(user__username__startswith="bench").order_by("pk").values_list("pk")[:100])

    def scored_at(self, t0: float, t1: float) -> dict[str, tuple[float, str]]:
        from games.models import Guess

        return {g: (s.timestamp(), j) for g, s, j in Guess.objects.filter(
            round_id=self.round_id, status="scored", scored_at__isnull=False).values_list("id", "scored_at", "job_id")
            if t0 <= s.timestamp() <= t1}

    def event_lag(self, scored: dict) -> list[float]:
        """ms from each guess's scored_at to its completed event's entry id."""
        import redis

        from echomq.contrib.django import get_queue

        client = redis.Redis.from_url(self.valkey_url)
        by_job = {j: at for at, j in scored.values()}
        lags = []
        key = get_queue("cm").prefix + "events"
        for entry_id, fields in client.xrange(key, min=f"{int(min(by_job.values()) * 1000)}-0" if by_job else "-"):
            if fields.get(b"type") != b"completed":
                continue
            at_ms = int(entry_id.split(b"-")[0])
            for job in fields.get(b"job", b"").decode().split():
                if job in by_job:
                    lags.append(at_ms - by_job[job] * 1000)
        return lags

    def figures(self, phase: dict) -> dict:
        scored = self.scored_at(phase["t0"], phase["t1"])
        sample = sorted(scored)[:: max(1, len(scored) // 400)]
        lags = []
        unseen = 0
        for record in phase["records"]:
            if not record:
                continue
            # views by when they were read, each with the earliest arrival of
            # any view read at or after it: the first the watcher saw of a guess
            record.sort(key=lambda r: r[1])
            ats = [at for _, at in record]
            first = [arrival for arrival, _ in record]
            for i in range(len(first) - 2, -1, -1):
                first[i] = min(first[i], first[i + 1])
            for gid in sample:
                rec_ms = self.recorded.get(gid)
                if rec_ms is None:
                    continue
                i = bisect.bisect_left(ats, rec_ms)
                if i == len(ats):
                    unseen += 1
                    continue
                lags.append(first[i] - scored[gid][0])
        own = [phase["own"][g] - scored[g][0] for g in phase["own"] if g in scored]
        ev = self.event_lag(scored) if phase["mode"] == "push" else []
        return {"mode": phase["mode"], "guesses": len(scored), "rate": len(scored) / phase["elapsed"],
                "lag_p50": 1000 * pct(lags, 50), "lag_p99": 1000 * pct(lags, 99),
                "lag_max": 1000 * max(lags) if lags else float("nan"), "pairs": len(lags), "unseen": unseen,
                "own_p50": 1000 * pct(own, 50) if own else None, "own_p99": 1000 * pct(own, 99) if own else None,
                "own_n": len(own), "event_p50": pct(ev, 50) if ev else None, "event_p99": pct(ev, 99) if ev else None,
                "cpu": phase["cpu"], "mem": phase["mem_per_conn_kb"], "errors": phase["errors"],
                "sample_errors": phase["sample_errors"]}


def report(rows: list[dict], args) -> str:
    poll, push = rows
    w = args.watchers

    def ms(v):
        return "-" if v is None or v != v else f"{v:,.0f} ms"

    def cpu(r, k):
        return f"{r['cpu'][k]:.2f} s/s"

    lines = [("watchers of one round", f"{w:,}", f"{w:,}"),
             ("guesses scored while measuring", f"{poll['guesses']:,} ({poll['rate']:.0f}/s)",
              f"{push['guesses']:,} ({push['rate']:.0f}/s)"),
             ("scored -> visible p50", ms(poll["lag_p50"]), ms(push["lag_p50"])),
             ("scored -> visible p99", ms(poll["lag_p99"]), ms(push["lag_p99"])),
             ("scored -> visible max", ms(poll["lag_max"]), ms(push["lag_max"])),
             ("(guess, watcher) pairs timed", f"{poll['pairs']:,}", f"{push['pairs']:,}"),
             ("own score -> own page p50 / p99",
              f"{ms(poll['own_p50'])} / {ms(poll['own_p99'])} ({poll['own_n']})",
              f"{ms(push['own_p50'])} / {ms(push['own_p99'])} ({push['own_n']})"),
             ("web CPU: gunicorn", cpu(poll, "web"), cpu(push, "web")),
             ("web CPU: live process", cpu(poll, "live"), cpu(push, "live")),
             ("web CPU, both", f"{poll['cpu']['web'] + poll['cpu']['live']:.2f} s/s",
              f"{push['cpu']['web'] + push['cpu']['live']:.2f} s/s"),
             ("memory per connection (gunicorn / live)",
              f"{poll['mem']['web']:.1f} KB / -", f"- / {push['mem']['live']:.1f} KB"),
             ("score worker CPU", cpu(poll, "score"), cpu(push, "score")),
             ("Valkey CPU", f"{poll['cpu']['valkey']:.3f} s/s", f"{push['cpu']['valkey']:.3f} s/s"),
             ("client CPU (the simulated watchers)", cpu(poll, "clients"), cpu(push, "clients")),
             ("commit -> completed event p50 / p99", "-",
              f"{push['event_p50']:.1f} / {push['event_p99']:.1f} ms" if push["event_p50"] is not None else "-"),
             ("errors", str(poll["errors"]), str(push["errors"]))]
    w0 = max(len(a) for a, _, _ in lines)
    w1 = max(len(b) for _, b, _ in lines)
    out = ["", f"== Watchers of one round: today's polling vs live push ({args.database}, {os.cpu_count()} CPUs)",
           f"{'':<{w0}}  {'polling (3 s, ETag)':>{w1}}  push (SSE)", "-" * (w0 + w1 + 40)]
    out += [f"{a:<{w0}}  {b:>{w1}}  {c}" for a, b, c in lines]
    out.append("Clients run on the same (shared, noisy) 2 cores as the servers; latencies are pessimistic.")
    return "\n".join(out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--watchers", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=50.0, help="guesses scored per second")
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--warmup", type=float, default=10)
    parser.add_argument("--quick", action="store_true", help="20 s measured per mode, 5 s warm-up")
    parser.add_argument("--postgres", nargs="?", const="postgres://postgres@127.0.0.1:5432/postgres",
                        help="use a fresh PostgreSQL database made through this URL's server")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.seconds, args.warmup = 20, 5
    # live_poll's set-up options: the players are the feeder's, the web as the browser tests run it
    args.players, args.workers, args.threads, args.guess_every, args.client_procs = 100, 2, 4, 30, 1
    args.database = "postgresql" if args.postgres else "sqlite"
    sys.path.insert(0, str(REPO))
    os.chdir(REPO)
    bench = Bench(args)
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        bench.start()
        phases = bench.run_all()
        rows = [bench.figures(p) for p in phases]
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        if getattr(bench, "halt", None) is not None:
            bench.halt.set()
        bench.close()
    print(report(rows, args))
    if args.json:
        print(json.dumps([{k: v for k, v in r.items()} for r in rows], indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
