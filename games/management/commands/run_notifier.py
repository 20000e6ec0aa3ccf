"""Settle rounds: the ``cm.settle`` consumer.

The command keeps the name it had when it also delivered notifications:
``./dev run``, the tests and deployments start it by that name. The
notifications themselves are Django tasks (``games.tasks.notify`` on
``cm.tasks``), run by ``run_tasks``.
"""
import logging

from django.core.management.base import BaseCommand, CommandError

from echomq import Consumer, health
from echomq.contrib.django import get_queue, valkey_url
from echomq.embedded import redact
from games import settlement
from games.management.runner import add_metrics_argument, describe_db, run_consumers, start_metrics
from games.workers import settle

log = logging.getLogger(__name__)  # the command's own lines, in the site's log format


class Command(BaseCommand):
    help = "Run the settlement consumer (cm.settle)."

    def add_arguments(self, parser):
        parser.add_argument("--concurrency", type=int, default=1, help="handler threads per queue")
        parser.add_argument("--lease-ms", type=int, default=30_000)
        parser.add_argument("--max-attempts", type=int, default=20)
        add_metrics_argument(parser)
        health.add_arguments(parser)

    def handle(self, *args, **o):
        observer = start_metrics(o["metrics_port"])
        common = {"concurrency": o["concurrency"], "lease_ms": o["lease_ms"], "max_attempts": o["max_attempts"],
                  "observer": observer}
        consumers = [Consumer(get_queue(settlement.QUEUE), settle, name="settler", **common)]
        for c in consumers:
            observer and observer.watch(c)
        log.info(f"notifier: queues={settlement.QUEUE} valkey={redact(valkey_url())} db={describe_db()}")
        health.watch(consumers, port=o["health_port"], addr=o["health_addr"])
        if not run_consumers(consumers):
            raise CommandError("a consumer stopped unexpectedly (see the log above)")
        log.info("notifier stopped")
