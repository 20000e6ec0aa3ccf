"""Running long-lived loops from management commands.

Consumers each get a thread; SIGTERM / SIGINT on the main thread stops them
all, and the command returns once they have finished the jobs in hand."""
from __future__ import annotations

import logging
import os
import signal
import threading

from django.conf import settings

log = logging.getLogger("games.runner")


def describe_db() -> str:
    db = settings.DATABASES["default"]
    return f"{db['ENGINE'].rsplit('.', 1)[-1]}:{db.get('NAME')}"


def add_metrics_argument(parser) -> None:
    parser.add_argument("--metrics-port", type=int, default=None,
                        help="export this process's Prometheus metrics on 127.0.0.1:PORT")


def start_metrics(port: int | None):
    """A ConsumerMetrics observer exported on ``port``; None when no port."""
    if not port:
        return None
    from echomq.metrics import ConsumerMetrics, serve

    observer = ConsumerMetrics()
    serve(port)
    log.info("metrics on 127.0.0.1:%d/metrics", port)
    return observer


def run_consumers(consumers) -> bool:
    """Run until SIGTERM/SIGINT; False when a consumer died on its own."""
    if len(consumers) == 1:
        consumers[0].run()  # installs its own SIGTERM/SIGINT handlers
        return True
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda s, f: stop.set()) for sig in (signal.SIGTERM, signal.SIGINT)}
    threads = [threading.Thread(target=c.run, name=c.name, daemon=True) for c in consumers]
    healthy = True
    try:
        for t in threads:
            t.start()
        while not stop.wait(0.5):
            if not all(t.is_alive() for t in threads):
                log.error("a consumer thread stopped unexpectedly; stopping the others")
                healthy = False
                break
    finally:
        log.info("pid %d stopping %d consumers", os.getpid(), len(consumers))
        for c in consumers:
            c.stop()
        for t in threads:
            t.join()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return healthy
