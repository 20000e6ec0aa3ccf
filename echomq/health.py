"""Liveness of a worker process: is each of its loops still going round?

A :class:`~echomq.Consumer`'s fetcher and a :class:`~echomq.Reaper` note the
monotonic time of every pass round their loop (``last_pass``). A fetcher
goes round at least once a beat (``beat_ms``) while it waits for work or for
room, once per back-off while Valkey is away, and a reaper once per
interval; so a loop whose last pass is older than ``stale_after_s`` (60 s
by default, far beyond any of those) is stuck, and the process should be
restarted. Two ways to ask, both started by :func:`watch`:

* **HTTP** (``--health-port PORT`` on the worker commands): ``GET /healthz``
  on ``127.0.0.1:PORT`` answers 200 ``{"status": "alive", "loops": {...}}``,
  or 503 ``{"status": "stalled", "stalled": [names], ...}``.
* **systemd's watchdog**: under a unit with ``Type=notify`` and
  ``WatchdogSec=``, the process sends ``READY=1`` once every loop has made
  its first pass and ``WATCHDOG=1`` every half watchdog period while all of
  them are alive; when the pings stop, systemd restarts the service.

A loop that has stopped (after SIGTERM, while the process drains) keeps its
last pass: the answer turns to stalled only if the drain outlasts
``stale_after_s``. No Django here; any process running consumers can use it.
"""
from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

log = logging.getLogger("echomq.health")

STALE_AFTER_S = 60.0


class Liveness:
    """Whether each of ``loops`` (objects with ``name`` and ``last_pass``) is going round."""

    def __init__(self, loops, *, stale_after_s: float = STALE_AFTER_S):
        self.loops = list(loops)
        self.stale_after_s = stale_after_s
        self.started = time.monotonic()

    def report(self) -> tuple[bool, dict]:
        """(alive, a JSON-ready body). A loop that has not made its first pass
        yet is "starting", which is alive for ``stale_after_s`` from start."""
        now = time.monotonic()
        loops, stalled = {}, []
        for n, loop in enumerate(self.loops):
            name = str(getattr(loop, "name", None) or f"{type(loop).__name__.lower()}-{n}")
            last = getattr(loop, "last_pass", None)
            age = now - (self.started if last is None else last)
            if age > self.stale_after_s:
                stalled.append(name)
                loops[name] = f"stalled: no pass for {age:.0f}s"
            else:
                loops[name] = "starting" if last is None else "ok"
        alive = not stalled
        body = {"status": "alive" if alive else "stalled", "loops": loops}
        if stalled:
            body["stalled"] = stalled
        return alive, body

    def ready(self) -> bool:
        """Every loop has made its first pass."""
        return all(getattr(loop, "last_pass", None) is not None for loop in self.loops)


def _handler(liveness: Liveness):
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's naming)
            if self.path.split("?", 1)[0] not in ("/healthz", "/"):
                self._answer(404, {"status": "not found", "paths": ["/healthz"]})
                return
            alive, body = liveness.report()
            self._answer(200 if alive else 503, body)

        do_HEAD = do_GET  # noqa: N815

        def _answer(self, status: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Cache-Control", "no-store")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        def log_message(self, format, *args):  # asked every few seconds: not worth a log line
            pass

    return Handler


def serve(liveness: Liveness, port: int, addr: str = "127.0.0.1") -> ThreadingHTTPServer:
    """Answer ``GET /healthz`` on ``addr:port`` from a daemon thread."""
    server = ThreadingHTTPServer((addr, port), _handler(liveness))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name=f"health :{port}", daemon=True).start()
    log.info("liveness on http://%s:%d/healthz", addr, server.server_address[1])
    return server


def notify(message: str) -> bool:
    """Send ``message`` (e.g. ``READY=1``) to systemd's ``$NOTIFY_SOCKET``;
    False when there is none (not started by systemd with Type=notify)."""
    address = os.environ.get("NOTIFY_SOCKET", "")
    if not address:
        return False
    if address.startswith("@"):  # an abstract socket
        address = "\0" + address[1:]
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.connect(address)
        sock.sendall(message.encode())
    return True


def _watchdog_interval_s() -> float | None:
    """Half the watchdog period systemd set for this process, or None."""
    usec = os.environ.get("WATCHDOG_USEC", "")
    pid = os.environ.get("WATCHDOG_PID", "")
    if not usec.isdigit() or int(usec) == 0 or (pid and pid != str(os.getpid())):
        return None
    return int(usec) / 2e6


def _systemd(liveness: Liveness) -> None:
    """READY=1 once every loop has gone round; then WATCHDOG=1 every half
    period while all of them are alive (nothing more without a watchdog)."""
    while not liveness.ready():
        time.sleep(0.2)
    notify("READY=1")
    every = _watchdog_interval_s()
    quiet = False
    while every is not None:
        alive, body = liveness.report()
        if alive:
            notify("WATCHDOG=1")
        elif not quiet:
            log.error("liveness: %s stalled; no more watchdog pings, systemd will restart this process",
                      ", ".join(body["stalled"]))
        quiet = not alive
        time.sleep(every)


def watch(loops, *, port: int | None = None, addr: str = "127.0.0.1",
          stale_after_s: float = STALE_AFTER_S) -> Liveness:
    """Report on ``loops`` over HTTP (when ``port``) and to systemd (when it
    started this process with ``$NOTIFY_SOCKET``). Call before running them."""
    liveness = Liveness(loops, stale_after_s=stale_after_s)
    if port:
        serve(liveness, port, addr)
    if os.environ.get("NOTIFY_SOCKET"):
        threading.Thread(target=_systemd, args=(liveness,), name="systemd notify", daemon=True).start()
    return liveness


def add_arguments(parser) -> None:
    """``--health-port`` and ``--health-addr`` for a worker command."""
    parser.add_argument("--health-port", type=int, default=None, metavar="PORT",
                        help="answer GET /healthz on this port: 200 while every loop goes round, else 503")
    parser.add_argument("--health-addr", default="127.0.0.1",
                        help="address for --health-port (default 127.0.0.1; 0.0.0.0 for a probe from outside)")
