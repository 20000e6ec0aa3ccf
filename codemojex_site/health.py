"""``/healthz`` and ``/readyz``, for a load balancer or an orchestrator.

* ``GET /healthz``: the process answers; nothing else is asked. 200
  ``{"status": "alive"}``.
* ``GET /readyz``: PostgreSQL (the default database: ``SELECT 1``) and
  Valkey (``PING``) each answered within ``READY_TIMEOUT_S``. 200
  ``{"status": "ready", "checks": {"database": "ok", "valkey": "ok"}}``, or
  503 ``{"status": "unavailable", "down": ["valkey"], "checks": {...}}``
  where a check that failed says ``"unreachable"`` or ``"timeout"`` (never
  the server's address: the page is public). Each change of a check's state
  is logged once, with the error.

:class:`HealthMiddleware` answers them first in ``MIDDLEWARE``, so nothing
can refuse, redirect, count or log them: no host check (a balancer asks by
the instance's address, which is not in ALLOWED_HOSTS), no HTTPS redirect (it
asks over plain HTTP), no session, CSRF, rate limit or request log line, and
the 503 is kept out of ``django.request``'s log too (:class:`QuietProbes`).
Through gunicorn each costs about a millisecond of CPU (``python -m
bench.health``, docs/deploy.md), fine to ask every second.

Each check runs on a thread of its own (:class:`Probe`), which keeps its
database connection between calls; the request waits for it at most the
timeout. While a check still hangs (a server that accepts connections and
never answers), later requests wait on that same check rather than start
another, so a hung server never piles up threads or connections.
"""
from __future__ import annotations

import json
import logging
import os
import queue
import threading
import time
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout

from django.http import HttpResponse

from .logs import one_line

log = logging.getLogger("codemojex.health")

READY_TIMEOUT_S = 0.5  # each check, run side by side: /readyz answers within about this
PATHS = ("/healthz", "/readyz")


def check_database() -> None:
    """``SELECT 1`` on this thread's connection; a broken connection is
    closed and the query tried once more on a new one (a restarted server
    is ready at once, not one probe later)."""
    from django.db import DatabaseError, connection

    for attempt in (1, 2):
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1")
                cursor.fetchone()
            return
        except DatabaseError:
            connection.close()
            if attempt == 2:
                raise


def check_valkey() -> None:
    """``PING`` on the process's shared client (the queues' and the cache's server)."""
    from echomq.contrib.django import get_client

    get_client().ping()


class Probe:
    """One dependency's check on a daemon thread of its own (a hung check
    never holds up the process's exit), at most one run in flight."""

    def __init__(self, name: str, check):
        self.name = name
        self._check = check
        self._lock = threading.Lock()
        self._asked: queue.SimpleQueue[Future] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._running: Future | None = None
        self._last = "ok"

    def start(self) -> Future:
        with self._lock:
            if self._running is None or self._running.done():
                self._running = Future()
                self._asked.put(self._running)
                if self._thread is None:
                    self._thread = threading.Thread(target=self._serve, name=f"readyz-{self.name}", daemon=True)
                    self._thread.start()
            return self._running

    def _serve(self) -> None:
        while True:
            future = self._asked.get()
            try:
                self._check()
            except BaseException as exc:  # noqa: BLE001 -- handed to the request that waits
                future.set_exception(exc)
            else:
                future.set_result(None)

    def outcome(self, future: Future, timeout: float) -> str:
        """"ok", "timeout" or "unreachable"; a change from the last outcome is logged."""
        try:
            future.result(timeout=max(0.0, timeout))
            state, detail = "ok", ""
        except FutureTimeout:
            state, detail = "timeout", f"no answer within {READY_TIMEOUT_S:g}s"
        except Exception as exc:  # noqa: BLE001 -- whatever the driver raises, the server is not usable
            state, detail = "unreachable", f"{type(exc).__name__}: {one_line(exc)}"
        if state != self._last:
            if state == "ok":
                log.info("readyz: %s answers again", self.name)
            else:
                log.warning("readyz: %s is down (%s)", self.name, detail)
            self._last = state
        return state


_probes: dict[int, list[Probe]] = {}


def probes() -> list[Probe]:
    """This process's probes (made after a fork, never inherited from a parent)."""
    pid = os.getpid()
    if pid not in _probes:
        _probes.clear()
        _probes[pid] = [Probe("database", check_database), Probe("valkey", check_valkey)]
    return _probes[pid]


def readiness(timeout: float = READY_TIMEOUT_S) -> dict[str, str]:
    """Every check's outcome, asked side by side, within about ``timeout``."""
    running = [(probe, probe.start()) for probe in probes()]
    deadline = time.monotonic() + timeout
    return {probe.name: probe.outcome(future, deadline - time.monotonic()) for probe, future in running}


def _json(status: int, body: dict) -> HttpResponse:
    response = HttpResponse(json.dumps(body), status=status, content_type="application/json")
    response["Cache-Control"] = "no-store"
    return response


def healthz(request) -> HttpResponse:
    return _json(200, {"status": "alive"})


def readyz(request) -> HttpResponse:
    checks = readiness()
    down = [name for name, state in checks.items() if state != "ok"]
    if down:
        return _json(503, {"status": "unavailable", "down": down, "checks": checks})
    return _json(200, {"status": "ready", "checks": checks})


ANSWERS = {"/healthz": healthz, "/readyz": readyz}


class HealthMiddleware:
    """First in MIDDLEWARE: answers GET and HEAD of /healthz and /readyz
    before any other middleware sees the request."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        answer = ANSWERS.get(request.path_info)
        if answer is None or request.method not in ("GET", "HEAD"):
            return self.get_response(request)
        return answer(request)


class QuietProbes(logging.Filter):
    """Keeps /readyz's 503 (asked every second while a server is down) out of
    ``django.request``'s log; the probe logs each change of state once."""

    def filter(self, record: logging.LogRecord) -> bool:
        request = getattr(record, "request", None)
        return getattr(request, "path_info", None) not in PATHS
