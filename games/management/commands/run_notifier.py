"""Settle rounds (``cm.settle``); drain the retired ``cm.notify`` queue.

Notifications now run as a Django task (``games.tasks.notify``, worker
``run_tasks``). Jobs enqueued on ``cm.notify`` by a release before that
change are still delivered here, by the old handler, until the queue is empty.
"""
import logging

from django.core.management.base import BaseCommand, CommandError

from echomq import Consumer, health
from echomq.contrib.django import get_queue, valkey_url
from games import settlement
from games.management.runner import add_metrics_argument, describe_db, run_consumers, start_metrics
from games.workers import notify, settle

log = logging.getLogger(__name__)  # the command's own lines, in the site's log format

LEGACY_NOTIFY = "cm.notify"


class Command(BaseCommand):
    help = "Run the settlement consumer (and drain the retired cm.notify queue) in one process."

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
        consumers = [
            Consumer(get_queue(settlement.QUEUE), settle, name="settler", **common),
            Consumer(get_queue(LEGACY_NOTIFY), notify, name="notifier-legacy", **common),
        ]
        for c in consumers:
            observer and observer.watch(c)
        log.info(f"notifier: queues={settlement.QUEUE},{LEGACY_NOTIFY} valkey={valkey_url()} "
                 f"db={describe_db()}")
        health.watch(consumers, port=o["health_port"], addr=o["health_addr"])
        if not run_consumers(consumers):
            raise CommandError("a consumer stopped unexpectedly (see the log above)")
        log.info("notifier stopped")
