"""Settle rounds (``cm.settle``) and create notifications (``cm.notify``)."""
from django.core.management.base import BaseCommand, CommandError

from echomq import Consumer
from echomq.contrib.django import get_queue, valkey_url
from games import notifications, settlement
from games.management.runner import describe_db, run_consumers
from games.workers import notify, settle


class Command(BaseCommand):
    help = "Run the settlement and notification consumers in one process."

    def add_arguments(self, parser):
        parser.add_argument("--concurrency", type=int, default=1, help="handler threads per queue")
        parser.add_argument("--lease-ms", type=int, default=30_000)
        parser.add_argument("--max-attempts", type=int, default=20)

    def handle(self, *args, **o):
        common = {"concurrency": o["concurrency"], "lease_ms": o["lease_ms"], "max_attempts": o["max_attempts"]}
        consumers = [
            Consumer(get_queue(settlement.QUEUE), settle, name="settler", **common),
            Consumer(get_queue(notifications.QUEUE), notify, name="notifier", **common),
        ]
        self.stdout.write(f"notifier: queues={settlement.QUEUE},{notifications.QUEUE} valkey={valkey_url()} "
                          f"db={describe_db()}")
        self.stdout.flush()
        if not run_consumers(consumers):
            raise CommandError("a consumer stopped unexpectedly (see the log above)")
        self.stdout.write("notifier stopped")
