"""Live play under load: N players on one round page, polling as play.js does.

    .venv/bin/python -m bench.live_poll            # 200 players, 60 s measured
    .venv/bin/python -m bench.live_poll --quick    # 200 players, 20 s measured
    .venv/bin/python -m bench.live_poll --players 50 --seconds 30 --postgres

What runs: a private valkey-server, a fresh database (SQLite in a temp dir,
or a fresh PostgreSQL database with --postgres), gunicorn serving the site
with DEBUG off (2 workers x 4 threads, as the browser tests run it) and one
score worker process. The clients are threads spread over 4 forked
processes, one keep-alive connection each, and follow the page's schedule
(games/static/games/play.js): open the round page once, then poll
``my-guesses.json`` every 3 s, every 0.5 s while one of their guesses is
queued. Each player also submits a guess (a real POST with its CSRF token,
then the GET of the round page it redirects to) every ``--guess-every``
seconds on average.

What is measured, after a warm-up:
* server CPU: user+system CPU seconds of the gunicorn processes (and,
  separately, the score worker and Valkey) per wall second;
* scored -> visible: for every guess, the time from the score worker's
  ``scored_at`` (written in the same transaction as the score) to the first
  poll answer in which its player sees it scored; p50/p99/max;
* the poll's own latency (request to answer), p50/p99.

The machine is shared and noisy (2 cores, other jobs): the clients run on
the same cores as the server, so their CPU competes with it and every
latency here is pessimistic. Say so when quoting figures.
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
POLL_OPEN_S = 3.0       # play.js: while the round is open
POLL_PENDING_S = 0.4    # play.js: while a guess of mine is queued
CPU_BUDGET = 1.0        # web CPU seconds per wall second for 200 players (one of the 2 cores)
LATENCY_BUDGET_S = 1.0  # p99 scored -> visible
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """utime + stime of one process, in seconds (0 if it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICK


def children(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def tree_cpu(pid: int) -> float:
    return cpu_seconds(pid) + sum(cpu_seconds(c) for c in children(pid))


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


class Player(threading.Thread):
    """One simulated player: a keep-alive connection and play.js's schedule."""

    def __init__(self, bench, name: str, session: str, keyboard: list[str], secret: list[str]):
        super().__init__(daemon=True, name=name)
        self.bench, self.session = bench, session
        self.keyboard, self.secret = keyboard, secret
        self.rng = random.Random(name)
        self.conn = http.client.HTTPConnection("127.0.0.1", bench.port, timeout=30)
        self.csrf_cookie = ""
        self.csrf_form = ""
        self.pending: set[str] = set()
        self.etag: str | None = None
        self.seen: dict[str, float] = {}  # guess id -> when first seen scored
        self.poll_ms: list[float] = []
        self.errors = 0

    def request(self, method: str, path: str, body: str | None = None, extra: dict | None = None
                ) -> tuple[int, bytes, dict]:
        cookies = f"sessionid={self.session}" + (f"; csrftoken={self.csrf_cookie}" if self.csrf_cookie else "")
        headers = {"Cookie": cookies, "Accept": "application/json, text/html", **(extra or {})}
        if body is not None:
            headers.update({"Content-Type": "application/x-www-form-urlencoded", "Referer": self.bench.url + path,
                            "Origin": self.bench.url})
        for attempt in (1, 2):
            try:
                self.conn.request(method, path, body=body.encode() if body else None, headers=headers)
                resp = self.conn.getresponse()
                data = resp.read()
                break
            except (http.client.HTTPException, OSError):
                self.conn.close()
                if attempt == 2:
                    raise
        for name, value in resp.getheaders():
            if name.lower() == "set-cookie" and value.startswith("csrftoken="):
                self.csrf_cookie = value.split(";", 1)[0].split("=", 1)[1]
        return resp.status, data, dict(resp.getheaders())

    def open_page(self) -> None:
        status, html, _ = self.request("GET", f"/rounds/{self.bench.round_id}/")
        if status != 200:
            raise RuntimeError(f"round page answered {status}")
        self.csrf_form = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', html).group(1).decode()
        self.see(html)

    def see(self, html: bytes) -> None:
        """What the round page itself shows: queued guesses, and scores."""
        now = time.time()
        self.etag = None  # a fresh page: play.js starts without an ETag
        self.pending = set()
        for status, gid in re.findall(rb'class="guess status-(\w+)[^"]*" data-guess="(GES\w+)"', html):
            gid = gid.decode()
            if status == b"queued":
                self.pending.add(gid)
            elif status == b"scored" and gid not in self.seen:
                self.seen[gid] = now

    def guess(self) -> None:
        from urllib.parse import urlencode

        while True:
            emojis = self.rng.sample(self.keyboard, 6)
            if emojis != self.secret:  # a perfect guess would close the round
                break
        body = urlencode({"csrfmiddlewaretoken": self.csrf_form, **{f"slot{i}": e for i, e in enumerate(emojis)}})
        status, _, headers = self.request("POST", f"/rounds/{self.bench.round_id}/guess/", body)
        if status != 302:
            self.errors += 1
            return
        self.bench.count("guesses")
        # The browser follows the redirect: the round page comes back (post/redirect/get).
        status, html, _ = self.request("GET", headers.get("Location", f"/rounds/{self.bench.round_id}/"))
        if status != 200:
            self.errors += 1
            return
        self.csrf_form = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', html).group(1).decode()
        self.see(html)

    def poll(self) -> None:
        t0 = time.monotonic()
        extra = {"If-None-Match": self.etag} if self.etag else {}
        status, data, headers = self.request("GET", f"/rounds/{self.bench.round_id}/my-guesses.json", extra=extra)
        now = time.time()
        if self.bench.measuring.is_set():
            self.poll_ms.append((time.monotonic() - t0) * 1000)
        self.bench.count("polls")
        if status == 304:
            self.bench.count("not_modified")
            return
        if status != 200:
            self.errors += 1
            return
        self.etag = headers.get("ETag") or headers.get("Etag")
        body = json.loads(data)
        self.pending = set()
        for g in body["guesses"]:
            if g["status"] == "queued":
                self.pending.add(g["id"])
            elif g["status"] == "scored" and g["id"] not in self.seen:
                self.seen[g["id"]] = now

    def run(self) -> None:
        try:
            self.open_page()
            next_guess = time.monotonic() + self.rng.expovariate(1 / self.bench.guess_every)
            next_poll = time.monotonic() + self.rng.uniform(0, POLL_OPEN_S)
            while not self.bench.stop.is_set():
                now = time.monotonic()
                if now >= next_guess:
                    self.guess()  # the page comes back; play.js then polls on its schedule
                    now = time.monotonic()
                    next_guess = now + self.rng.expovariate(1 / self.bench.guess_every)
                    next_poll = now + (POLL_PENDING_S if self.pending else POLL_OPEN_S)
                    continue
                if now >= next_poll:
                    self.poll()
                    next_poll = time.monotonic() + (POLL_PENDING_S if self.pending else POLL_OPEN_S)
                self.bench.stop.wait(max(0.0, min(next_poll, next_guess) - time.monotonic()))
        except Exception as exc:  # one player failing must not hide the others' figures
            self.errors += 1
            print(f"player {self.name}: {type(exc).__name__}: {exc}", file=sys.stderr)


class Ctx:
    """What the players share, across client processes: the target, the
    stop and measuring flags, and counters."""

    NAMES = ("polls", "guesses", "not_modified")

    def __init__(self, mp, port: int, round_id: str, guess_every: float):
        self.port, self.url, self.round_id, self.guess_every = port, f"http://127.0.0.1:{port}", round_id, guess_every
        self.stop, self.measuring = mp.Event(), mp.Event()
        self.values = {n: mp.Value("q", 0) for n in self.NAMES}

    def count(self, what: str) -> None:
        v = self.values[what]
        with v.get_lock():
            v.value += 1

    def counts(self) -> dict[str, int]:
        return {n: v.value for n, v in self.values.items()}


def client_process(ctx: Ctx, sessions, keyboard, secret, out) -> None:
    """One client process: a thread per player, results back through ``out``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    players = [Player(ctx, name, key, keyboard, secret) for name, key in sessions]
    for p in players:
        p.start()
    ctx.stop.wait()
    for p in players:
        p.join(35)
    out.put([(p.seen, p.poll_ms, p.errors) for p in players])


class Bench:
    def __init__(self, args):
        self.args = args
        self.guess_every = args.guess_every
        self.ctx: Ctx | None = None
        self.tmp = Path(tempfile.mkdtemp(prefix="cm-live-bench-"))
        self.procs: list[subprocess.Popen] = []
        self.pg_name = None

    def env(self) -> dict:
        env = dict(os.environ)
        env.update(CODEMOJEX_VAR_DIR=str(self.tmp / "var"), DATABASE_URL=self.database_url,
                   VALKEY_URL=self.valkey_url, DEBUG="0", SECRET_KEY="bench-" + "x" * 50,
                   STATIC_ROOT=str(self.tmp / "static"), LOG_LEVEL="WARNING", PYTHONUNBUFFERED="1",
                   DJANGO_SETTINGS_MODULE="codemojex_site.settings")
        if self.pg_name:
            env["CONN_MAX_AGE"] = "60"  # persistent connections, as a PostgreSQL deployment would run
        return env

    def start(self) -> None:
        from echomq import embedded

        port = embedded.free_port()
        self.valkey = embedded.start_server(self.tmp / "valkey", port, appendonly=False)
        self.procs.append(self.valkey)
        self.valkey_url = f"redis://127.0.0.1:{port}/0"
        embedded.wait_ready(self.valkey_url, proc=self.valkey)
        if self.args.postgres:
            import psycopg

            self.pg_name = f"codemojex_bench_{os.getpid()}"
            with psycopg.connect(self.args.postgres, autocommit=True) as c:
                c.execute(f'CREATE DATABASE "{self.pg_name}"')
            self.database_url = self.args.postgres.rsplit("/", 1)[0] + "/" + self.pg_name
        else:
            self.database_url = f"sqlite:///{self.tmp / 'bench.sqlite3'}"
        os.environ.update(self.env())
        step("migrate and collect static files")
        for cmd in (["migrate", "-v0"], ["collectstatic", "--noinput", "-v0"]):
            subprocess.run([sys.executable, "manage.py", *cmd], cwd=REPO, env=self.env(), check=True)
        import django

        django.setup()
        self.seed()
        self.port = embedded.free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        step(f"start gunicorn ({self.args.workers} workers x {self.args.threads} threads) and a score worker")
        log = open(self.tmp / "web.log", "wb")
        self.web = subprocess.Popen([sys.executable, "-m", "gunicorn", "codemojex_site.wsgi", "--bind",
                                     f"127.0.0.1:{self.port}", "--workers", str(self.args.workers),
                                     "--threads", str(self.args.threads), "--worker-connections", "1000",
                                     "--keep-alive", "30"],
                                    cwd=REPO, env=self.env(), stdout=log, stderr=subprocess.STDOUT)
        self.procs.append(self.web)
        self.score = subprocess.Popen([sys.executable, "manage.py", "run_scoreworker", "--concurrency", "2"],
                                      cwd=REPO, env=self.env(), stdout=open(self.tmp / "score.log", "wb"),
                                      stderr=subprocess.STDOUT)
        self.procs.append(self.score)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                c.request("GET", "/login/")
                if c.getresponse().status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)  # waiting for a child process to bind its port; no event to await
        raise RuntimeError("gunicorn did not answer in 30 s; see " + str(self.tmp / "web.log"))

    def seed(self) -> None:
        from datetime import timedelta

        from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
        from django.contrib.sessions.backends.db import SessionStore

        from games import wallet
        from games.emoji_sets import SETS
        from games.models import EmojiSet
        from games.players import ensure_player
        from games.rounds import create_round

        step(f"seed a round and {self.args.players} players with sessions")
        spec = SETS["animals"]
        es = EmojiSet.objects.create(slug="animals", title=spec["title"], emojis=spec["emojis"])
        rnd = create_round(es, kind="classic", guess_price=1, prize_pool=100, title="Bench classic",
                           duration=timedelta(hours=2))
        self.round_id, self.keyboard, self.secret = rnd.pk, list(rnd.keyboard), list(rnd.secret)
        User = get_user_model()
        self.sessions = []
        for i in range(self.args.players):
            user = User.objects.create_user(f"bench{i:03d}", password=None)
            wallet.grant(ensure_player(user), "keys", 1000)
            s = SessionStore()
            s[SESSION_KEY] = str(user.pk)
            s[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
            s[HASH_SESSION_KEY] = user.get_session_auth_hash()
            s.create()
            self.sessions.append((user.username, s.session_key))

    def run(self) -> dict:
        import multiprocessing

        from django.db import connections

        connections.close_all()  # the client processes are forked and never touch the database
        mp = multiprocessing.get_context("fork")
        self.ctx = ctx = Ctx(mp, self.port, self.round_id, self.guess_every)
        out = mp.Queue()
        k = max(1, min(self.args.client_procs, len(self.sessions)))
        slices = [self.sessions[i::k] for i in range(k)]
        step(f"{len(self.sessions)} players in {k} client processes open the round page and start polling; "
             f"warm-up {self.args.warmup:.0f} s")
        clients = [mp.Process(target=client_process, args=(ctx, sl, self.keyboard, self.secret, out), daemon=True)
                   for sl in slices]
        for c in clients:
            c.start()
        ctx.stop.wait(self.args.warmup)
        web0, score0, valkey0 = tree_cpu(self.web.pid), cpu_seconds(self.score.pid), self.valkey_cpu()
        client0 = sum(cpu_seconds(c.pid) for c in clients)
        counts0 = ctx.counts()
        t0, t0_wall = time.monotonic(), time.time()
        self.load = [os.getloadavg()[0]]
        ctx.measuring.set()
        step(f"measuring for {self.args.seconds:.0f} s")
        for left in range(int(self.args.seconds), 0, -10):
            ctx.stop.wait(min(10, left))
            now = ctx.counts()
            print(f"    {int(time.monotonic() - t0):>4} s: {now['polls'] - counts0['polls']} polls,"
                  f" {now['guesses'] - counts0['guesses']} guesses", flush=True)
        elapsed = time.monotonic() - t0
        web1, score1, valkey1 = tree_cpu(self.web.pid), cpu_seconds(self.score.pid), self.valkey_cpu()
        client1 = sum(cpu_seconds(c.pid) for c in clients)
        counts1 = ctx.counts()
        t1_wall = time.time()
        self.load.append(os.getloadavg()[0])
        ctx.measuring.clear()
        # Let the last guesses be seen before stopping the players.
        ctx.stop.wait(2 * POLL_PENDING_S + 1)
        ctx.stop.set()
        results = [row for _ in clients for row in out.get(timeout=120)]
        for c in clients:
            c.join(30)
        counts = {n: counts1[n] - counts0[n] for n in counts1}
        return self.figures(results, elapsed, t0_wall, t1_wall, web1 - web0, score1 - score0,
                            valkey1 - valkey0, client1 - client0, counts, k)

    def valkey_cpu(self) -> float:
        import redis

        info = redis.Redis.from_url(self.valkey_url).info("cpu")
        return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])

    def figures(self, results, elapsed, t0_wall, t1_wall, web_cpu, score_cpu, valkey_cpu, client_cpu,
                counts, procs) -> dict:
        from games.models import Guess

        scored_at = {g: s.timestamp() for g, s in Guess.objects.filter(status="scored", scored_at__isnull=False)
                     .values_list("id", "scored_at")}
        in_window = {g for g, at in scored_at.items() if t0_wall <= at <= t1_wall}
        seen_all: dict[str, float] = {}
        for seen, _, _ in results:
            seen_all.update(seen)
        lags = [seen_all[g] - scored_at[g] for g in in_window if g in seen_all]
        polls = [ms for _, poll_ms, _ in results for ms in poll_ms]
        n_polls = counts["polls"]
        return {
            "players": len(results), "seconds": elapsed, "polls": n_polls, "polls_per_s": n_polls / elapsed,
            "not_modified": counts["not_modified"], "guesses_scored": len(in_window),
            "unseen": len(in_window - set(seen_all)),
            "web_cpu_per_s": web_cpu / elapsed, "score_cpu_per_s": score_cpu / elapsed,
            "valkey_cpu_per_s": valkey_cpu / elapsed, "client_cpu_per_s": client_cpu / elapsed,
            "client_procs": procs, "web_cpu_ms_per_poll": 1000 * web_cpu / max(1, n_polls),
            "lag_p50_ms": 1000 * pct(lags, 50), "lag_p99_ms": 1000 * pct(lags, 99),
            "lag_max_ms": 1000 * max(lags) if lags else float("nan"),
            "poll_p50_ms": pct(polls, 50), "poll_p99_ms": pct(polls, 99),
            "errors": sum(e for _, _, e in results), "database": "postgresql" if self.pg_name else "sqlite",
            "load": self.load, "cpus": os.cpu_count(),
        }

    def close(self) -> None:
        if self.ctx is not None:
            self.ctx.stop.set()
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(20)
                except subprocess.TimeoutExpired:
                    proc.kill()
        if self.pg_name:
            import psycopg
            from django.db import connections

            connections.close_all()
            with psycopg.connect(self.args.postgres, autocommit=True) as c:
                c.execute(f'DROP DATABASE IF EXISTS "{self.pg_name}" WITH (FORCE)')
        shutil.rmtree(self.tmp, ignore_errors=True)


def step(text: str) -> None:
    print(f"==> {text}", flush=True)


def report(f: dict) -> str:
    ok_cpu = f["web_cpu_per_s"] <= CPU_BUDGET * f["players"] / 200
    ok_lag = f["lag_p99_ms"] <= LATENCY_BUDGET_S * 1000
    rows = [
        ("players polling one round page", f"{f['players']}", ""),
        ("database", f["database"], ""),
        ("measured for", f"{f['seconds']:.0f} s", ""),
        ("polls answered", f"{f['polls']} ({f['polls_per_s']:.0f}/s)", f"{f['not_modified']} of them 304"),
        ("guesses scored while measuring", f"{f['guesses_scored']}", f"{f['unseen']} never seen"),
        ("web CPU (gunicorn, all workers)", f"{f['web_cpu_per_s']:.2f} s/s",
         f"budget {CPU_BUDGET * f['players'] / 200:.2f} s/s: {'within' if ok_cpu else 'OVER'}"),
        ("web CPU per poll", f"{f['web_cpu_ms_per_poll']:.1f} ms", "guess posts and their page loads included"),
        ("score worker CPU", f"{f['score_cpu_per_s']:.2f} s/s", ""),
        ("Valkey CPU", f"{f['valkey_cpu_per_s']:.3f} s/s", ""),
        ("client CPU (the simulated players)", f"{f['client_cpu_per_s']:.2f} s/s", f"{f['client_procs']} processes"),
        ("scored -> visible p50", f"{f['lag_p50_ms']:.0f} ms", ""),
        ("scored -> visible p99", f"{f['lag_p99_ms']:.0f} ms",
         f"budget {LATENCY_BUDGET_S * 1000:.0f} ms: {'within' if ok_lag else 'OVER'}"),
        ("scored -> visible max", f"{f['lag_max_ms']:.0f} ms", ""),
        ("poll latency p50 / p99", f"{f['poll_p50_ms']:.0f} / {f['poll_p99_ms']:.0f} ms", ""),
        ("errors", f"{f['errors']}", ""),
        ("machine load (1 min) start / end", f"{f['load'][0]:.1f} / {f['load'][1]:.1f}", f"{f['cpus']} CPUs"),
    ]
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows)
    lines = ["", "== Live play: players polling a round page", f"{'':<{w0}}  {'value':>{w1}}  note",
             "-" * (w0 + w1 + 30)]
    lines += [f"{a:<{w0}}  {b:>{w1}}  {c}".rstrip() for a, b, c in rows]
    lines.append("Clients run on the same (shared, noisy) cores as the server; latencies are pessimistic.")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--players", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--warmup", type=float, default=10)
    parser.add_argument("--guess-every", type=float, default=30, help="mean seconds between a player's guesses")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--client-procs", type=int, default=4, help="processes the players are spread over")
    parser.add_argument("--quick", action="store_true", help="20 s measured, 5 s warm-up")
    parser.add_argument("--postgres", nargs="?", const="postgres://postgres@127.0.0.1:5432/postgres",
                        help="use a fresh PostgreSQL database made through this URL's server")
    parser.add_argument("--json", action="store_true", help="also print the figures as JSON")
    args = parser.parse_args(argv)
    if args.quick:
        args.seconds, args.warmup = 20, 5
    sys.path.insert(0, str(REPO))
    os.chdir(REPO)
    bench = Bench(args)
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        bench.start()
        figures = bench.run()
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        bench.close()
    print(report(figures))
    if args.json:
        print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
