"""/healthz and /readyz on a real gunicorn, with its servers stopped and
started under it: its own Valkey (killed, then started again on its port),
and PostgreSQL behind a TCP proxy process (killed, frozen with SIGSTOP,
started again), since the machine's PostgreSQL is shared and never stopped.

The balancer's requests are the awkward kind: addressed to the instance's
IP (not in ALLOWED_HOSTS), over plain HTTP while the site redirects to HTTPS.
"""
from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest
from django.conf import settings

from echomq import embedded
from tests.conftest import Server
from tests.games.procs import wait_for

ROOT = Path(settings.BASE_DIR)
PROXY = Path(__file__).with_name("tcp_proxy.py")
BALANCER_HOST = "10.1.2.3:8000"  # how a load balancer addresses an instance
SITE = "codemojex.example"


def _postgres() -> tuple[str, int, str, str]:
    """host, port, user, database of a PostgreSQL to put the proxy in front of:
    the suite's own when it runs on PostgreSQL, else the machine's."""
    db = settings.DATABASES["default"]
    if "postgresql" in db["ENGINE"] or db["ENGINE"] == "codemojex_site.db":
        return db.get("HOST") or "127.0.0.1", int(db.get("PORT") or 5432), db.get("USER") or "postgres", "postgres"
    return "127.0.0.1", 5432, "postgres", "postgres"


class Proxy:
    def __init__(self, target_host: str, target_port: int):
        self.port = embedded.free_port()
        self.target = (target_host, target_port)
        self.proc = None
        self.start()

    def start(self) -> None:
        self.proc = subprocess.Popen([sys.executable, str(PROXY), str(self.port), *map(str, self.target)],
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline().strip() == "listening"

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(10)


def ask(port: int, path: str, host: str = BALANCER_HOST) -> tuple[int, dict | str, float, dict]:
    """GET over plain HTTP as a balancer would (no redirect followed):
    status, body (JSON when it is), seconds, headers."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    start = time.monotonic()
    try:
        connection.request("GET", path, headers={"Host": host})
        response = connection.getresponse()
        raw = response.read()
    finally:
        connection.close()
    took = time.monotonic() - start
    try:
        body = json.loads(raw)
    except ValueError:
        body = raw.decode(errors="replace")
    return response.status, body, took, dict(response.headers)


@pytest.fixture
def stack(tmp_path):
    host, port, user, dbname = _postgres()
    try:
        psycopg.connect(host=host, port=port, user=user, dbname=dbname, connect_timeout=2).close()
    except psycopg.OperationalError as exc:
        pytest.skip(f"no PostgreSQL at {host}:{port} to put a proxy in front of ({exc})")
    tmp = tmp_path
    valkey = Server()
    proxy = Proxy(host, port)
    web_port = embedded.free_port()
    env = dict(os.environ, DEBUG="0", SECRET_KEY="readyz-test-" + "x" * 40, ALLOWED_HOSTS=SITE,
               DATABASE_URL=f"postgres://{user}@127.0.0.1:{proxy.port}/{dbname}", VALKEY_URL=valkey.url,
               STATIC_ROOT=str(tmp / "static"), CODEMOJEX_VAR_DIR=str(tmp / "var"), LOG_FORMAT="json",
               LOG_LEVEL="INFO", PYTHONUNBUFFERED="1")
    log = open(tmp / "web.log", "wb")
    web = subprocess.Popen([sys.executable, "-m", "gunicorn", "-c", "python:codemojex_site.gunicorn_conf",
                            "codemojex_site.wsgi", "--bind", f"127.0.0.1:{web_port}", "--workers", "1"],
                           cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    log.close()
    stack = {"port": web_port, "valkey": valkey, "proxy": proxy, "log": tmp / "web.log", "web": web}
    try:
        wait_for(lambda: _status(web_port, "/readyz") == 200, timeout=60, what="gunicorn ready")
        yield stack
    finally:
        web.send_signal(signal.SIGTERM)
        web.wait(30)
        if proxy.proc.poll() is None:
            os.kill(proxy.proc.pid, signal.SIGCONT)
            proxy.kill()
        valkey.stop()


def _status(port: int, path: str) -> int | None:
    try:
        return ask(port, path)[0]
    except (OSError, http.client.HTTPException):
        return None


def _down_within_a_second(port: int, down: list[str], state: str) -> None:
    status, body, took, _ = ask(port, "/readyz")
    assert status == 503, body
    assert body["status"] == "unavailable" and body["down"] == down, body
    assert body["checks"][down[0]] == state, body
    assert took < 1.0, f"/readyz took {took:.2f}s with {down} down"


@pytest.mark.slow
def test_readyz_names_what_is_down_within_a_second_and_recovers(stack):
    port = stack["port"]
    status, body, took, headers = ask(port, "/readyz")
    assert (status, body) == (200, {"status": "ready", "checks": {"database": "ok", "valkey": "ok"}})
    assert headers["Content-Type"] == "application/json" and headers["Cache-Control"] == "no-store"

    # Valkey stopped (killed: no clean shutdown), then started on its port again.
    stack["valkey"].proc.kill()
    stack["valkey"].proc.wait(10)
    _down_within_a_second(port, ["valkey"], "unreachable")
    _down_within_a_second(port, ["valkey"], "unreachable")  # every time, not only the first
    assert ask(port, "/healthz")[:2] == (200, {"status": "alive"})  # liveness asks nothing
    stack["valkey"].start()
    wait_for(lambda: _status(port, "/readyz") == 200, timeout=10, what="ready again after Valkey returned")

    # PostgreSQL's path gone: every forwarded connection closed, the port refusing.
    stack["proxy"].kill()
    _down_within_a_second(port, ["database"], "unreachable")
    stack["proxy"].start()
    wait_for(lambda: _status(port, "/readyz") == 200, timeout=10, what="ready again after PostgreSQL returned")

    # PostgreSQL hung: connections accepted, nothing answered. The check
    # times out; the next request waits on that same hung check.
    os.kill(stack["proxy"].proc.pid, signal.SIGSTOP)
    _down_within_a_second(port, ["database"], "timeout")
    _down_within_a_second(port, ["database"], "timeout")
    os.kill(stack["proxy"].proc.pid, signal.SIGCONT)
    wait_for(lambda: _status(port, "/readyz") == 200, timeout=10, what="ready again after PostgreSQL woke")


@pytest.mark.slow
def test_probes_are_refused_nothing_and_logged_nowhere(stack):
    port = stack["port"]
    # The site itself refuses such requests: an unknown host gets a 400, plain HTTP a redirect.
    assert ask(port, "/rules/")[0] == 400
    status, _, _, headers = ask(port, "/rules/", host=SITE)
    assert status == 301 and headers["Location"] == f"https://{SITE}/rules/"
    # The probes: any host, plain HTTP, no cookie, many times a second.
    for host in (BALANCER_HOST, SITE, "127.0.0.1", "[::1]:8000"):
        for path in ("/healthz", "/readyz"):
            status, body, _, headers = ask(port, path, host=host)
            assert status == 200, (host, path, body)
            assert "Set-Cookie" not in headers and "X-Request-ID" not in headers
    assert all(ask(port, "/healthz")[0] == 200 for _ in range(50))
    stack["valkey"].proc.kill()
    stack["valkey"].proc.wait(10)
    assert all(ask(port, "/readyz")[0] == 503 for _ in range(5))
    stack["valkey"].start()
    wait_for(lambda: _status(port, "/readyz") == 200, timeout=10, what="ready again")
    ask(port, "/rules/", host=SITE)  # one request that is logged, as a control

    stack["web"].send_signal(signal.SIGTERM)
    stack["web"].wait(30)
    lines = stack["log"].read_text().splitlines()
    records = [json.loads(line) for line in lines]  # LOG_FORMAT=json: every line is one JSON object
    requests = [r for r in records if r["logger"] == "codemojex.request"]
    assert [r["path"] for r in requests] == ["/rules/", "/rules/", "/rules/"], requests
    assert all(r.get("request_id", "").startswith("REQ") for r in requests)
    assert not [r for r in records if "/readyz" in r["message"] or "/healthz" in r["message"]]
    changes = [r["message"] for r in records if r["logger"] == "codemojex.health"]
    assert changes == [changes[0], "readyz: valkey answers again"] and changes[0].startswith(
        "readyz: valkey is down (ConnectionError"), changes


@pytest.mark.slow
def test_a_hung_database_check_does_not_hold_up_shutdown(stack):
    port = stack["port"]
    os.kill(stack["proxy"].proc.pid, signal.SIGSTOP)
    _down_within_a_second(port, ["database"], "timeout")  # its check now hangs on a thread
    start = time.monotonic()
    stack["web"].send_signal(signal.SIGTERM)
    assert stack["web"].wait(20) == 0
    assert time.monotonic() - start < 5, "gunicorn waited on the hung check before it exited"
