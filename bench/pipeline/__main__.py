"""The guess pipeline, end to end, in one command:

    .venv/bin/python -m bench.pipeline            # about two minutes
    .venv/bin/python -m bench.pipeline --quick    # about a minute

It starts its own PostgreSQL cluster (pg_stat_statements loaded; the web and
the score worker connect as different roles so their statements are counted
apart) and its own Valkey, migrates, seeds one open classic round and 200
signed-in players, and runs gunicorn (2 sync workers, as ``manage.py up``)
and one ``run_scoreworker`` with its default flags, all with the project's
own settings. Then, side by side in this one run:

* saturation (closed loop, 8 connections) of a bare Django view doing one
  INSERT, of the same view behind a player's session and CSRF check (the
  floor of every game request: session, user, CSRF, then the INSERT), of
  the round page GET, and of the guess form POST (score worker
  paused with SIGSTOP, so the POST is measured alone): requests/s, CPU per
  request of the web workers and PostgreSQL, SQL statements per request.
  The four take turns, three slices each (``--slices``), so a slow spell
  of the shared machine weighs on every row and not on one;
* the score worker draining the guesses those POSTs queued plus 3,000 more
  queued by ``submit`` in this process: guesses/s (first to last
  ``scored_at``), CPU per guess, statements per guess;
* open loop at rising rates, POST -> scored: each guess's latency counts
  from its intended send time, to the HTTP answer and to its ``scored_at``.
  The highest rate with no error, >= 95% of it answered and p99
  submit->scored under 1 s is the max sustained rate;
* the no-op ``echomq.Consumer`` draining 20,000 jobs, for the queue's share.

CPU is read from /proc for each process tree (web: gunicorn master and
workers; PostgreSQL: the postmaster and its backends; Valkey; the worker),
so the load generator, which shares the machine, is not counted in them.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import pwd
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from urllib.parse import urlencode

from . import load

REPO = Path(__file__).resolve().parents[2]
PLAYERS = 200
CSRF = "b" * 32  # an unmasked CSRF secret: the cookie and the form field agree
TICK = os.sysconf("SC_CLK_TCK")


def log(msg: str) -> None:
    print(f"[pipeline {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- CPU of process trees ----------------------------------------------------
def _procs() -> dict[int, tuple[int, float]]:
    """pid -> (ppid, CPU seconds incl. reaped children)."""
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[int(entry)] = (int(fields[1]), sum(int(f) for f in fields[11:15]) / TICK)
    return out


def cpu_of(roots: dict[str, int]) -> dict[str, float]:
    procs = _procs()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in procs.items():
        children.setdefault(ppid, []).append(pid)
    out = {}
    for name, root in roots.items():
        total, todo = 0.0, [root]
        while todo:
            pid = todo.pop()
            if pid in procs:
                total += procs[pid][1]
                todo += children.get(pid, [])
        out[name] = total
    return out


# -- the private servers -----------------------------------------------------
def _as_postgres(argv: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


def _pg_bin(name: str) -> str:
    found = shutil.which(name)
    if found:
        return found
    for d in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (d / name).exists():
            return str(d / name)
    raise SystemExit(f"PostgreSQL's {name} was not found (install postgresql)")


class Postgres:
    def __init__(self, tmp: Path):
        self.dir = tmp / "pg"
        self.dir.mkdir()
        if os.geteuid() == 0:
            pw = pwd.getpwnam("postgres")
            os.chown(tmp, pw.pw_uid, pw.pw_gid)
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
        subprocess.run(_as_postgres([_pg_bin("initdb"), "-D", str(self.dir), "-A", "trust", "-U", "postgres",
                                     "-E", "UTF8", "--no-sync"]), check=True, capture_output=True)
        self.port = free_port()
        self.log = open(tmp / "postgres.log", "wb")
        self.proc = subprocess.Popen(_as_postgres([
            _pg_bin("postgres"), "-D", str(self.dir), "-p", str(self.port), "-k", str(self.dir),
            "-c", "listen_addresses=127.0.0.1", "-c", "shared_preload_libraries=pg_stat_statements",
            "-c", "pg_stat_statements.track=all", "-c", "max_connections=200"]),
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        import psycopg

        for _ in range(300):
            try:
                psycopg.connect(self.url("postgres", "postgres"), autocommit=True).close()
                break
            except psycopg.OperationalError:
                time.sleep(0.1)
        with psycopg.connect(self.url("postgres", "postgres"), autocommit=True) as c:
            c.execute("CREATE ROLE bench_web SUPERUSER LOGIN")
            c.execute("CREATE ROLE bench_worker SUPERUSER LOGIN")
            c.execute("CREATE DATABASE codemojex_bench")
        with psycopg.connect(self.url("postgres"), autocommit=True) as c:
            c.execute("CREATE EXTENSION pg_stat_statements")
            c.execute("CREATE TABLE bench_ping (id bigserial PRIMARY KEY, at timestamptz NOT NULL)")

    @property
    def pid(self) -> int:
        return int((self.dir / "postmaster.pid").read_text().split()[0])

    def url(self, user: str, db: str = "codemojex_bench") -> str:
        return f"postgres://{user}@127.0.0.1:{self.port}/{db}"

    def statements(self) -> dict[str, int]:
        import psycopg

        with psycopg.connect(self.url("postgres"), autocommit=True) as c:
            rows = c.execute("SELECT r.rolname, sum(s.calls) FROM pg_stat_statements s JOIN pg_roles r "
                             "ON r.oid = s.userid JOIN pg_database d ON d.oid = s.dbid "
                             "WHERE d.datname = 'codemojex_bench' GROUP BY 1").fetchall()
        return {name: int(n) for name, n in rows}

    def stop(self) -> None:
        """Fast shutdown, signalled to the postmaster itself (``runuser``
        does not pass signals on)."""
        try:
            os.kill(self.pid, signal.SIGINT)
        except (OSError, ValueError):
            self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


# -- the run -------------------------------------------------------------------
class Pipeline:
    def __init__(self, tmp: Path, args):
        self.tmp, self.args = tmp, args
        log("starting PostgreSQL and Valkey")
        self.pg = Postgres(tmp)
        from echomq import embedded

        self.valkey_port = free_port()
        password = secrets.token_hex(16)  # as the install's embedded server asks for one
        self.valkey = embedded.start_server(tmp / "valkey", self.valkey_port, appendonly=True, password=password)
        self.valkey_url = embedded.server_url(self.valkey_port, password)
        embedded.wait_ready(self.valkey_url, proc=self.valkey)
        self.env = dict(os.environ, DJANGO_SETTINGS_MODULE="bench.pipeline.settings", VALKEY_URL=self.valkey_url,
                        SECRET_KEY="bench-" + uuid.uuid4().hex, CODEMOJEX_VAR_DIR=str(tmp / "var"),
                        STATIC_ROOT=str(tmp / "static"), PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1",
                        DATABASE_URL=self.pg.url("postgres"), LOG_LEVEL="WARNING")
        os.environ.update(self.env)
        self._manage(["migrate", "--verbosity", "0"])
        self._manage(["collectstatic", "--noinput", "--verbosity", "0"])
        import django

        django.setup()
        self._seed()
        self.web_port = free_port()
        web_env = dict(self.env, DATABASE_URL=self.pg.url("bench_web"))
        self.web = subprocess.Popen([sys.executable, "-m", "gunicorn", "codemojex_site.wsgi", "--bind",
                                     f"127.0.0.1:{self.web_port}", "--workers", "2", "--backlog", "2048"],
                                    cwd=REPO, env=web_env, stdout=open(tmp / "web.log", "wb"),
                                    stderr=subprocess.STDOUT, start_new_session=True)
        worker_env = dict(self.env, DATABASE_URL=self.pg.url("bench_worker"), LOG_LEVEL="WARNING")
        self.worker_log = tmp / "worker.log"
        self.worker = subprocess.Popen([sys.executable, "manage.py", "run_scoreworker"], cwd=REPO, env=worker_env,
                                       stdout=open(self.worker_log, "wb"), stderr=subprocess.STDOUT,
                                       start_new_session=True)
        self._wait_web()

    def _manage(self, argv):
        subprocess.run([sys.executable, "manage.py", *argv], cwd=REPO, env=self.env, check=True)

    def _seed(self) -> None:
        from importlib import import_module

        from django.conf import settings
        from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model

        from games import rounds, wallet
        from games.emoji_sets import SETS
        from games.models import EmojiSet
        from games.players import ensure_player

        log(f"seeding one round and {PLAYERS} signed-in players")
        spec = SETS["animals"]
        es = EmojiSet.objects.create(slug="animals", title=spec["title"], emojis=spec["emojis"])
        from datetime import timedelta

        self.round = rounds.create_round(es, duration=timedelta(hours=6), keyboard_size=24, guess_price=1,
                                         title="bench")
        store = import_module(settings.SESSION_ENGINE).SessionStore
        from django.contrib.auth import load_backend

        # The session names the first backend that can load a user, as
        # Django's own force_login does (django-axes' comes first and cannot).
        backend = next(path for path in settings.AUTHENTICATION_BACKENDS
                       if hasattr(load_backend(path), "get_user"))
        self.cookies, self.used = [], []
        User = get_user_model()
        for i in range(PLAYERS):
            user = User.objects.create_user(f"bench{i:03d}", password=None)
            wallet.grant(ensure_player(user), "keys", 10**9)
            s = store()
            s[SESSION_KEY], s[BACKEND_SESSION_KEY] = str(user.pk), backend
            s[HASH_SESSION_KEY] = user.get_session_auth_hash()
            s.create()
            self.cookies.append(f"sessionid={s.session_key}; csrftoken={CSRF}")
            self.used.append(set())
        self.rng = random.Random(9)

    def fill(self, n: int) -> None:
        """Queue ``n`` guesses the way the POST does (``submit``, enqueued on commit)."""
        from games.guesses import submit
        from games.models import Player

        players = list(Player.objects.order_by("user__username"))
        for i in range(n):
            who = i % PLAYERS
            while True:
                emojis = tuple(self.rng.sample(self.round.keyboard, 6))
                if list(emojis) != self.round.secret and emojis not in self.used[who]:
                    break
            self.used[who].add(emojis)
            submit(players[who], self.round.pk, list(emojis), idempotency_key=uuid.uuid4().hex)

    def _wait_web(self) -> None:
        for _ in range(600):
            status = asyncio.run(load._send(self.web_port, self.bare(0)[0], 2))
            if status == 200:
                return
            time.sleep(0.1)
        raise SystemExit("gunicorn did not answer; see " + str(self.tmp / "web.log"))

    # requests
    def bare(self, i):
        return load.request("POST", "/bench/insert/", self.web_port), None

    def signed(self, i):
        body = urlencode({"csrfmiddlewaretoken": CSRF}).encode()
        return load.request("POST", "/bench/signed-in/", self.web_port, cookie=self.cookies[i % PLAYERS],
                            body=body), None

    def page(self, i):
        return load.request("GET", f"/rounds/{self.round.pk}/", self.web_port,
                            cookie=self.cookies[i % PLAYERS]), None

    def guess(self, i):
        who = i % PLAYERS
        while True:  # six distinct emojis, never the secret, never this player's earlier guess
            emojis = tuple(self.rng.sample(self.round.keyboard, 6))
            if list(emojis) != self.round.secret and emojis not in self.used[who]:
                break
        self.used[who].add(emojis)
        token = uuid.uuid4().hex
        body = urlencode({**{f"slot{n}": e for n, e in enumerate(emojis)}, "token": token,
                          "csrfmiddlewaretoken": CSRF}).encode()
        return load.request("POST", f"/rounds/{self.round.pk}/guess/", self.web_port,
                            cookie=self.cookies[who], body=body), token

    # measuring
    def roots(self) -> dict[str, int]:
        return {"web": self.web.pid, "worker": self.worker.pid, "pg": self.pg.pid, "valkey": self.valkey.pid}

    def measure(self, run):
        cpu0, st0, t0 = cpu_of(self.roots()), self.pg.statements(), time.monotonic()
        result = run()
        cpu1, st1, t1 = cpu_of(self.roots()), self.pg.statements(), time.monotonic()
        cpu = {k: cpu1[k] - cpu0[k] for k in cpu0}
        st = {k: st1.get(k, 0) - st0.get(k, 0) for k in set(st0) | set(st1)}
        return result, cpu, st, t1 - t0

    def queued(self) -> int:
        from django.db import connection

        with connection.cursor() as c:
            c.execute("SELECT count(*) FROM games_guess WHERE status = 'queued'")
            return c.fetchone()[0]

    def wait_drained(self, limit_s: float) -> bool:
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            if self.queued() == 0:
                return True
            time.sleep(0.1)
        return False

    def scored_at(self, tokens) -> dict[str, float]:
        from django.db import connection

        with connection.cursor() as c:
            c.execute("SELECT idempotency_key, extract(epoch FROM scored_at) FROM games_guess "
                      "WHERE idempotency_key = ANY(%s) AND scored_at IS NOT NULL", [list(tokens)])
            return {k: float(t) for k, t in c.fetchall()}

    def stop(self) -> None:
        for p in (self.web, self.worker):
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.send_signal(signal.SIGTERM)
        for p in (self.web, self.worker):
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
        self.valkey.terminate()
        self.valkey.wait(10)
        self.pg.stop()


def saturate(pl: Pipeline, make, seconds: float, role: str = "bench_web") -> dict:
    sent, cpu, st, wall = pl.measure(lambda: asyncio.run(load.closed_loop(pl.web_port, 8, seconds, make)))
    ok = [s for s in sent if 200 <= s.status < 400]
    n = max(len(ok), 1)
    return {"rate": len(ok) / wall, "ok": len(ok), "errors": len(sent) - len(ok),
            "web_ms": cpu["web"] * 1000 / n, "pg_ms": cpu["pg"] * 1000 / n, "valkey_ms": cpu["valkey"] * 1000 / n,
            "statements": st.get(role, 0) / n,
            "p50_ms": (load.pct([s.done - s.intended for s in ok], 50) or 0) * 1000}


def merge(parts: list[dict]) -> dict:
    """Slices of one kind's saturation as one row: totals over all their
    requests (p50: the median of the slices' medians)."""
    n = sum(max(p["ok"], 1) for p in parts)
    wall = sum(p["ok"] / p["rate"] for p in parts if p["rate"])
    row = {"ok": sum(p["ok"] for p in parts), "errors": sum(p["errors"] for p in parts),
           "p50_ms": statistics.median(p["p50_ms"] for p in parts)}
    row["rate"] = row["ok"] / wall if wall else 0.0
    for key in ("web_ms", "pg_ms", "valkey_ms", "statements"):
        row[key] = sum(p[key] * max(p["ok"], 1) for p in parts) / n
    return row


def run(args) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="cm-pipeline-"))
    pl = Pipeline(tmp, args)
    out: dict = {"rev": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                                       text=True).stdout.strip()}
    try:
        sat_s = 3 if args.quick else 6
        log("warming up: each player's first page (its session and user reach the cache)")

        async def visit_all():
            for i in range(PLAYERS):
                await load._send(pl.web_port, pl.page(i)[0], 10)

        asyncio.run(visit_all())
        asyncio.run(load.closed_loop(pl.web_port, 4, 1.0, pl.bare))
        asyncio.run(load.closed_loop(pl.web_port, 4, 1.0, pl.guess))
        pl.wait_drained(60)
        # The score worker stays paused through every slice: the POSTs are
        # measured alone, and its scoring never lands in another row's
        # PostgreSQL or Valkey CPU.
        pl.worker.send_signal(signal.SIGSTOP)
        kinds = (("bare", "bare one-INSERT view", pl.bare),
                 ("signed", "signed-in POST doing the same INSERT", pl.signed),
                 ("page", "round page GET", pl.page), ("post", "guess POST (score worker paused)", pl.guess))
        slices: dict[str, list[dict]] = {name: [] for name, _, _ in kinds}
        for k in range(args.slices):
            for name, what, make in kinds:
                log(f"saturation {k + 1}/{args.slices}: {what}")
                slices[name].append(saturate(pl, make, sat_s / args.slices))
        out.update({name: merge(parts) for name, parts in slices.items()})
        fill = 600 if args.quick else 3000
        log(f"score worker: queueing {fill} more guesses through games.guesses.submit")
        pl.fill(fill)
        backlog = pl.queued()
        log(f"score worker: draining {backlog} queued guesses")
        from django.db import connection

        def drain():
            pl.worker.send_signal(signal.SIGCONT)
            return pl.wait_drained(300)

        since = time.time()
        drained, cpu, st, wall = pl.measure(drain)
        with connection.cursor() as c:
            c.execute("SELECT count(*), extract(epoch FROM max(scored_at) - min(scored_at)) FROM games_guess "
                      "WHERE scored_at >= to_timestamp(%s)", [since])
            n, span = c.fetchone()
        n = max(n or 0, 1)
        out["worker"] = {"guesses": n, "rate": (n - 1) / float(span) if span else None, "drained": drained,
                         "worker_ms": cpu["worker"] * 1000 / n, "pg_ms": cpu["pg"] * 1000 / n,
                         "valkey_ms": cpu["valkey"] * 1000 / n, "statements": st.get("bench_worker", 0) / n}
        out["steps"] = []
        for rate in args.rates:
            log(f"open loop: {rate} guesses/s for {args.step_s}s")
            def step():
                loop_offset = []

                async def go():
                    loop_offset.append(time.time() - asyncio.get_running_loop().time())
                    return await load.open_loop(pl.web_port, rate, args.step_s, pl.guess)

                sent = asyncio.run(go())
                pl.wait_drained(15)
                return sent, loop_offset[0]

            (sent, wall_of_loop), cpu, st, wall = pl.measure(step)
            ok = [s for s in sent if s.status == 302]
            scored = pl.scored_at([s.meta for s in ok])
            e2e = [scored[s.meta] - (s.intended + wall_of_loop) for s in ok if s.meta in scored]
            http = [s.done - s.intended for s in ok]
            span = max(s.done for s in sent) - min(s.intended for s in sent) if sent else 1
            n = max(len(ok), 1)
            row = {"offered": rate, "answered": len(ok) / span, "errors": len(sent) - len(ok),
                   "unscored": len(ok) - len(e2e),
                   "http_p50": load.pct(http, 50), "http_p99": load.pct(http, 99),
                   "e2e_p50": load.pct(e2e, 50), "e2e_p99": load.pct(e2e, 99),
                   "web_ms": cpu["web"] * 1000 / n, "worker_ms": cpu["worker"] * 1000 / n,
                   "pg_ms": cpu["pg"] * 1000 / n, "valkey_ms": cpu["valkey"] * 1000 / n,
                   "statements": (st.get("bench_web", 0) + st.get("bench_worker", 0)) / n}
            row["sustained"] = (row["errors"] == 0 and row["unscored"] == 0 and len(ok) >= 0.95 * rate * args.step_s
                                and row["e2e_p99"] is not None and row["e2e_p99"] < 1.0)
            out["steps"].append(row)
            if not row["sustained"]:
                break
        log("no-op Consumer: draining 20,000 jobs")
        res = subprocess.run([sys.executable, "-m", "bench.pipeline.noop", pl.valkey_url, "20000"], cwd=REPO,
                             env=pl.env, capture_output=True, text=True, timeout=600)
        line = next((ln for ln in res.stdout.splitlines() if ln.startswith("RESULT ")), None)
        out["noop"] = json.loads(line[7:]) if line else {"error": res.stderr[-300:]}
    finally:
        pl.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def fmt(v, spec=",.0f", dash="-"):
    return dash if v is None else format(v, spec)


def report(out: dict) -> str:
    b, pg, po, w = out["bare"], out["page"], out["post"], out["worker"]
    lines = [f"\n== Guess pipeline on PostgreSQL, commit {out['rev']}, {os.cpu_count()} cores "
             f"(shared machine: absolute figures move between runs; compare the ratios)",
             "", "-- saturation (closed loop, 8 connections)",
             f"{'path':<36}{'req/s':>8}{'x bare cost':>12}{'web ms':>8}{'pg ms':>7}{'valkey ms':>10}{'SQL/req':>8}{'errors':>7}"]
    base_cost = b["web_ms"] + b["pg_ms"]
    rows = [("bare view, one INSERT", b), ("signed-in POST, one INSERT", out.get("signed")),
            ("round page GET", pg), ("guess POST (worker paused)", po)]
    for name, r in [(n, r) for n, r in rows if r]:
        cost = r["web_ms"] + r["pg_ms"] + r["valkey_ms"]
        lines.append(f"{name:<36}{fmt(r['rate']):>8}{fmt(cost / base_cost if base_cost else None, '.1f'):>12}"
                     f"{r['web_ms']:>8.2f}{r['pg_ms']:>7.2f}{r['valkey_ms']:>10.2f}{r['statements']:>8.1f}{r['errors']:>7}")
    lines += ["", "-- run_scoreworker, default flags, draining the POSTs' guesses",
              f"{w['guesses']} guesses: {fmt(w['rate'])} scored/s; per guess: worker {w['worker_ms']:.2f} ms, "
              f"PostgreSQL {w['pg_ms']:.2f} ms, Valkey {w['valkey_ms']:.2f} ms CPU, {w['statements']:.2f} SQL statements"]
    noop = out.get("noop", {})
    if noop.get("jobs_per_s"):
        lines.append(f"no-op Consumer (default flags): {fmt(noop['jobs_per_s'])} jobs/s, "
                     f"{noop['cpu_ms_per_job']:.3f} ms CPU per job; scoring runs at "
                     f"{(w['rate'] or 0) / noop['jobs_per_s']:.2f}x the bare queue's rate")
    lines += ["", "-- open loop, POST -> scored (latency from the intended send time)",
              f"{'offered/s':>9}{'answered/s':>11}{'err':>5}{'http p50':>9}{'p99':>7}{'scored p50':>11}{'p99':>7}"
              f"{'web ms':>8}{'worker':>7}{'pg':>6}{'valkey':>7}{'SQL/guess':>10}  ok"]
    best = None
    for r in out["steps"]:
        ms = lambda v: fmt(None if v is None else v * 1000, ",.0f")  # noqa: E731
        lines.append(f"{r['offered']:>9}{r['answered']:>11.0f}{r['errors']:>5}{ms(r['http_p50']):>9}{ms(r['http_p99']):>7}"
                     f"{ms(r['e2e_p50']):>11}{ms(r['e2e_p99']):>7}{r['web_ms']:>8.2f}{r['worker_ms']:>7.2f}"
                     f"{r['pg_ms']:>6.2f}{r['valkey_ms']:>7.2f}{r['statements']:>10.1f}  {'yes' if r['sustained'] else 'NO'}")
        if r["sustained"]:
            best = r
    if best:
        lines.append(f"max sustained: {best['offered']} guesses/s (p99 submit->scored "
                     f"{best['e2e_p99'] * 1000:.0f} ms); CPU per guess there: web {best['web_ms']:.2f} ms, "
                     f"worker {best['worker_ms']:.2f} ms, PostgreSQL {best['pg_ms']:.2f} ms, Valkey {best['valkey_ms']:.2f} ms; "
                     f"{best['statements']:.1f} SQL statements per guess (web + worker)")
    else:
        lines.append("max sustained: below the first step")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="shorter steps")
    ap.add_argument("--rates", type=lambda s: [int(x) for x in s.split(",")],
                    default=[10, 25, 50, 100, 200, 300, 400, 600, 800])
    ap.add_argument("--step-s", type=float, default=None, help="seconds per open-loop step (default 6; quick 3)")
    ap.add_argument("--slices", type=int, default=3,
                    help="saturation runs the four requests in turn this many times, each for a share of the "
                         "time, and sums them, so a slow spell of a shared machine weighs on every row alike "
                         "(default 3; 1: each request once, one after another)")
    ap.add_argument("--json", action="store_true", help="also print the raw figures as JSON")
    args = ap.parse_args()
    if args.slices < 1:
        ap.error("--slices must be 1 or more")
    args.step_s = args.step_s or (3.0 if args.quick else 6.0)
    out = run(args)
    print(report(out))
    if args.json:
        print(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main()
