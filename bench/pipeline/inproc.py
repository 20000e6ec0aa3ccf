"""The pipeline's web requests in one process, for counting what each costs:

    .venv/bin/python -m bench.pipeline.inproc                 # CPU µs per request, median of 5 rounds
    .venv/bin/python -m bench.pipeline.inproc --profile post  # cProfile of 2,000 guess POSTs
    .venv/bin/python -m bench.pipeline.inproc --instructions  # instructions per request (callgrind)

The same four requests as ``bench.pipeline``'s saturation rows (the bare
one-INSERT view, the signed-in floor, the round page GET, the guess form
POST) go straight into Django's WSGI handler, with no HTTP server and no
load generator beside them, on a private PostgreSQL and Valkey. What is
counted is the web process's share alone (PostgreSQL and Valkey run in
their own processes), so a change to the request path shows here without
the noise of a full run: ``--instructions`` counts instructions under
valgrind's callgrind, which gives the same figure however busy the machine
is (run N requests of one kind, subtract a run of none, divide by N).
"""
from __future__ import annotations

import argparse
import io
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from urllib.parse import urlencode

REPO = Path(__file__).resolve().parents[2]
KINDS = ("bare", "signed", "page", "post")


def _environ(method: str, path: str, cookie: str = "", body: bytes = b"") -> dict:
    path, _, query = path.partition("?")
    env = {"REQUEST_METHOD": method, "PATH_INFO": path, "QUERY_STRING": query, "SCRIPT_NAME": "",
           "SERVER_NAME": "127.0.0.1", "SERVER_PORT": "8000", "SERVER_PROTOCOL": "HTTP/1.1",
           "HTTP_HOST": "127.0.0.1:8000", "REMOTE_ADDR": "127.0.0.1", "HTTP_CONNECTION": "close",
           "wsgi.url_scheme": "http", "wsgi.input": io.BytesIO(body), "wsgi.errors": sys.stderr,
           "wsgi.multithread": False, "wsgi.multiprocess": True, "wsgi.run_once": False,
           "wsgi.version": (1, 0)}
    if cookie:
        env["HTTP_COOKIE"] = cookie
    if method == "POST":
        env["CONTENT_TYPE"] = "application/x-www-form-urlencoded"
        env["CONTENT_LENGTH"] = str(len(body))
    return env


class Harness:
    """A private PostgreSQL and Valkey, the bench's seed, and Django's WSGI
    handler called directly."""

    def __init__(self, tmp: Path):
        from . import __main__ as pipeline

        self.tmp = tmp
        self.pg = pipeline.Postgres(tmp)
        from echomq import embedded

        port = pipeline.free_port()
        password = secrets.token_hex(16)  # as the install's embedded server asks for one
        self.valkey = embedded.start_server(tmp / "valkey", port, appendonly=False, password=password)
        url = embedded.server_url(port, password)
        embedded.wait_ready(url, proc=self.valkey)
        env = dict(DJANGO_SETTINGS_MODULE="bench.pipeline.settings", VALKEY_URL=url,
                   SECRET_KEY="bench-" + uuid.uuid4().hex, CODEMOJEX_VAR_DIR=str(tmp / "var"),
                   STATIC_ROOT=str(tmp / "static"), DATABASE_URL=self.pg.url("postgres"), LOG_LEVEL="WARNING")
        os.environ.update(env)
        for argv in (["migrate", "--verbosity", "0"], ["collectstatic", "--noinput", "--verbosity", "0"]):
            subprocess.run([sys.executable, "manage.py", *argv], cwd=REPO, env=dict(os.environ), check=True)
        import django

        django.setup()
        seed = pipeline.Pipeline.__new__(pipeline.Pipeline)
        pipeline.Pipeline._seed(seed)
        seed.web_port = 8000
        self.seed = seed
        from django.core.handlers.wsgi import WSGIHandler

        self.app = WSGIHandler()

    def call(self, env: dict) -> str:
        status = []
        chunks = self.app(env, lambda s, headers, exc_info=None: status.append(s))
        try:
            for _ in chunks:
                pass
        finally:
            getattr(chunks, "close", lambda: None)()
        return status[0]

    def request(self, kind: str, i: int) -> dict:
        who = i % len(self.seed.cookies)
        cookie = self.seed.cookies[who]
        body = urlencode({"csrfmiddlewaretoken": "b" * 32}).encode()
        if kind == "bare":
            return _environ("POST", "/bench/insert/")
        if kind == "signed":
            return _environ("POST", "/bench/signed-in/", cookie, body)
        if kind == "page":
            return _environ("GET", f"/rounds/{self.seed.round.pk}/", cookie)
        raw = self.seed.guess(i)[0]  # the bench's own request; its body follows the blank line
        return _environ("POST", f"/rounds/{self.seed.round.pk}/guess/", cookie, raw.split(b"\r\n\r\n", 1)[1])

    def run(self, kind: str, n: int, start: int = 0) -> float:
        """``n`` requests of ``kind``, built first; the CPU seconds the
        requests themselves took."""
        want = {"post": "302"}.get(kind, "200")
        envs = [self.request(kind, i) for i in range(start, start + n)]
        t0 = time.process_time()
        for env in envs:
            status = self.call(env)
            if not status.startswith(want):
                raise SystemExit(f"{kind} answered {status}, not {want}")
        return time.process_time() - t0

    def warm_up(self, guesses: int = 0) -> None:
        """Each player's first page (its session and identity reach the
        cache, as after a sign-in; bench.pipeline does the same), then a
        few of each request; then ``guesses`` more guesses per player, so
        the round page lists as many as a player has in bench.pipeline's
        later slices (its POST rows leave ~7 per player per slice), each
        rendered once already (a web process renders each state of a guess
        once)."""
        self.run("page", len(self.seed.cookies), start=-len(self.seed.cookies))
        for kind in KINDS:
            self.run(kind, 50, start=-1000)
        if guesses:  # and each player's page once after them, as the pipeline's later pages are
            self.run("post", guesses * len(self.seed.cookies), start=-100_000)
            self.run("page", len(self.seed.cookies), start=-len(self.seed.cookies))

    def stop(self) -> None:
        from django.db import connections

        connections.close_all()
        self.valkey.terminate()
        self.valkey.wait(10)
        self.pg.stop()


def cpu_table(h: Harness, n: int, rounds: int) -> dict[str, float]:
    """CPU µs per request of this process, the median of ``rounds``
    interleaved rounds of ``n`` requests each."""
    import gc

    per: dict[str, list[float]] = {k: [] for k in KINDS}
    for r in range(rounds):
        for kind in KINDS:
            gc.collect()
            per[kind].append(h.run(kind, n, start=(r + 1) * n) * 1e6 / n)
    return {k: statistics.median(v) for k, v in per.items()}


def _child(args) -> None:
    """One callgrind run: warm up, build the requests, then (instrumented)
    run ``args.n`` of them, so only the requests themselves are counted."""
    tmp = Path(tempfile.mkdtemp(prefix="cm-inproc-"))
    h = Harness(tmp)
    try:
        _steady_under_valgrind()
        h.warm_up(args.guesses)
        envs = [h.request(args.kind, i) for i in range(1000, 1000 + args.n)]
        import gc

        gc.collect()
        gc.disable()
        _toggle(True)
        for env in envs:
            h.call(env)
        _toggle(False)
    finally:
        h.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def _steady_under_valgrind() -> None:
    """Under callgrind everything runs ~50 times slower, so the caches that
    live a minute or two (a session's identity, the live panel's names)
    would expire between the warm-up and the counted requests, and the
    count would depend on the clock. Stretch them: the counted requests see
    the steady state a real run sees."""
    from games import live, players, sessions

    players.CACHE_SECONDS = sessions.CACHE_SECONDS = live.NAME_MEMO_S = 24 * 3600


def _toggle(on: bool) -> None:
    """Start or stop callgrind's collection from inside the process
    (``callgrind_control -i``), so set-up and warm-up are not counted."""
    subprocess.run(["callgrind_control", "-i", "on" if on else "off", str(os.getpid())],
                   check=True, capture_output=True)


def _callgrind_total(kind: str, n: int, guesses: int = 0) -> int:
    """Instructions callgrind counted while ``n`` requests of ``kind`` ran."""
    with tempfile.TemporaryDirectory() as out:
        cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}/cg.%p",
               sys.executable, "-m", "bench.pipeline.inproc", "--child", kind, "--n", str(n),
               "--guesses", str(guesses)]
        # A fixed hash seed: the same dict layouts, so the same count twice.
        res = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, env=dict(os.environ, PYTHONHASHSEED="0"))
        if res.returncode:
            raise SystemExit(res.stderr[-2000:])
        for f in Path(out).glob("cg.*"):
            for line in f.read_text(errors="replace").splitlines():
                if line.startswith("totals:"):
                    return int(line.split()[1])
    raise SystemExit("callgrind wrote no totals")


def instructions(kinds, n: int, guesses: int = 0) -> dict[str, float]:
    """Instructions per request of each kind: a run of ``n`` less a run of
    none (the toggling itself), divided by ``n``."""
    zero = _callgrind_total("bare", 0, guesses)
    return {kind: (_callgrind_total(kind, n, guesses) - zero) / n for kind in kinds}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=400, help="requests per kind and round")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--profile", choices=KINDS, help="cProfile this kind instead, sorted by own time")
    ap.add_argument("--instructions", action="store_true", help="count instructions per request under callgrind")
    ap.add_argument("--loop", choices=KINDS, help="after the warm-up, only run --n requests of this kind "
                    "(for a sampling profiler: py-spy record -- python -m bench.pipeline.inproc --loop post)")
    ap.add_argument("--kinds", type=lambda v: v.split(","), default=list(KINDS),
                    help="with --instructions: which requests (comma-separated; bare is always counted)")
    ap.add_argument("--guesses", type=int, default=0,
                    help="guesses per player made before the counted requests (default 0; the round page "
                         "lists them: bench.pipeline's page rows see ~10 on average)")
    ap.add_argument("--child", choices=KINDS, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        args.kind = args.child
        return _child(args)
    if args.instructions:
        n = min(args.n, 200)
        rows = instructions([k for k in KINDS if k == "bare" or k in args.kinds], n, args.guesses)
        print(f"\n{'request':<10}{'instructions':>14}{'x bare':>8}")
        for kind, v in rows.items():
            print(f"{kind:<10}{v:>14,.0f}{v / rows['bare']:>8.2f}")
        return
    tmp = Path(tempfile.mkdtemp(prefix="cm-inproc-"))
    h = Harness(tmp)
    try:
        h.warm_up(args.guesses)
        if args.loop:
            h.run(args.loop, args.n, start=10_000)
            return
        if args.profile:
            import cProfile
            import pstats

            envs = [h.request(args.profile, i) for i in range(10_000, 12_000)]
            prof = cProfile.Profile(time.process_time)
            prof.enable()
            for env in envs:
                h.call(env)
            prof.disable()
            pstats.Stats(prof).sort_stats("tottime").print_stats(45)
            pstats.Stats(prof).sort_stats("cumtime").print_stats(60)
            return
        table = cpu_table(h, args.n, args.rounds)
        print(f"\n{'request':<10}{'CPU µs':>9}{'x bare':>8}")
        for kind, v in table.items():
            print(f"{kind:<10}{v:>9,.0f}{v / table['bare']:>8.2f}")
    finally:
        h.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
