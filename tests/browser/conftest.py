"""A live Codemojex for Playwright: gunicorn serving the site with DEBUG
off (static files collected and served by WhiteNoise) plus real score
worker, notifier, task worker and reaper processes, all on the test database and the
session's test Valkey; and the system Chromium (never a downloaded one).

Tests here use ``transactional_db`` so what they create is committed and the
server processes see it. Screenshots go to ``test-artifacts/screenshots/``.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from echomq import embedded
from echomq.contrib import django as emq_django
from tests.games.conftest import emoji_set, make_player, make_round, with_secret  # noqa: F401
from tests.games.procs import ROOT, Proc, env_for, wait_for

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SHOTS = ROOT / "test-artifacts" / "screenshots"
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"viewport": {"width": 390, "height": 844}, "device_scale_factor": 2, "is_mobile": True, "has_touch": True}


@dataclass
class Live:
    url: str
    score: Proc
    procs: list


@pytest.fixture(scope="module")
def browser():
    """The system Chromium, per test module. Playwright's sync API keeps an
    asyncio loop in this thread, and Django refuses ORM calls from a thread
    with a running loop; the tests' ORM calls are plain synchronous ones, so
    allow them while the browser is up (and only then)."""
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"no system Chromium at {CHROMIUM} (apt-get install chromium; ./dev test does it)")
    from playwright.sync_api import expect, sync_playwright

    # expect() does not follow a context's default timeout (its own is 5 s):
    # the same 20 s, for pages waiting on workers that start slowly on a loaded machine.
    expect.set_options(timeout=20_000)
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as pw:
            chromium = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            yield chromium
            chromium.close()
    finally:
        os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)


def _get_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return resp.status == 200
    except OSError:
        return False


@pytest.fixture(scope="module")
def live(django_db_setup, valkey_server, tmp_path_factory):
    """gunicorn + the live process + score worker + notifier + task worker + reaper against the test database,
    per module: they must be gone before other tests run, or these workers
    would score and settle those tests' rounds."""
    logs = tmp_path_factory.mktemp("live-logs")
    static = tmp_path_factory.mktemp("static")
    env = env_for(valkey_server.url, 0)
    env.pop("ECHOMQ_NODE_ID")  # each gunicorn worker mints ids with its own pid as node
    env.update(DEBUG="0", STATIC_ROOT=str(static), LOG_LEVEL="WARNING")
    subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"], cwd=ROOT, env=env,
                   check=True)
    port, live_port = embedded.free_port(), embedded.free_port()
    # The pages open their streams on the live process's own port, as under ./dev run.
    env.update(LIVE_URL=f"http://127.0.0.1:{live_port}", LIVE_ORIGINS=f"http://127.0.0.1:{port}")
    with open(logs / "web.log", "wb") as log:
        web = subprocess.Popen([sys.executable, "-m", "gunicorn", "codemojex_site.wsgi", "--bind",
                                f"127.0.0.1:{port}", "--workers", "2", "--threads", "4"],
                               cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    with open(logs / "live.log", "wb") as log:
        pusher = subprocess.Popen([sys.executable, "-m", "gunicorn", "-c", "python:codemojex_site.gunicorn_conf",
                                   "-k", "codemojex_site.live_worker.Worker", "codemojex_site.asgi:application",
                                   "--bind", f"127.0.0.1:{live_port}", "--workers", "1"],
                                  cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    procs = [
        Proc(["run_scoreworker", "--concurrency", "2"], valkey_server.url, logs, "score"),
        Proc(["run_notifier"], valkey_server.url, logs, "notify"),
        Proc(["run_tasks"], valkey_server.url, logs, "tasks"),
        Proc(["run_reaper", "--interval-ms", "200"], valkey_server.url, logs, "reaper"),
    ]
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _get_ok(url + "/login/"), timeout=30, what="gunicorn")
        wait_for(lambda: _get_ok(f"http://127.0.0.1:{live_port}/readyz"), timeout=30, what="the live process")
        yield Live(url, procs[0], procs)
    finally:
        for server in (web, pusher):
            server.send_signal(signal.SIGTERM)
            server.wait(30)
        for proc in procs:
            proc.popen.send_signal(signal.SIGCONT)  # in case a test left it stopped
            proc.terminate()
    out = ((logs / "web.log").read_text(errors="replace") + (logs / "live.log").read_text(errors="replace")
           + "".join(p.output() for p in procs))
    assert "Traceback" not in out, out


@pytest.fixture(autouse=True)
def _test_valkey(valkey_server):
    """Code run in the test process (e.g. making a dead job) uses the test Valkey."""
    emq_django.reset_client(valkey_server.url)
    yield


@pytest.fixture
def desktop(browser):
    context = browser.new_context(viewport=DESKTOP)
    context.set_default_timeout(20_000)
    yield context
    context.close()


@pytest.fixture
def phone(browser):
    context = browser.new_context(**PHONE)
    context.set_default_timeout(20_000)
    yield context
    context.close()


@pytest.fixture
def shot():
    """``shot(page, name)`` saves a full-page screenshot under test-artifacts."""
    SHOTS.mkdir(parents=True, exist_ok=True)

    def take(page, name: str) -> Path:
        path = SHOTS / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return take
