"""Running long-lived loops from management commands.

Consumers each get a thread; SIGTERM / SIGINT on the main thread stops them
all, and the command returns once they have finished the jobs in hand."""
from __future__ import annotations

import logging

from django.conf import settings

from echomq.supervise import run_together

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
    return run_together(consumers)
