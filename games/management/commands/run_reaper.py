"""The maintenance loop: reap expired leases, promote due jobs, fire the
schedules (those of ECHOMQ["SCHEDULES"] are created at startup), keep the
round schedules' EchoMQ mirrors true (at start, then every few seconds:
a Valkey that lost its data gets them back), relay unsent guesses, and ask
to settle rounds that are due."""
import logging
import time
from datetime import timedelta

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError
from django.db import close_old_connections

from echomq import Reaper, health
from echomq.contrib.django import get_queue, valkey_url
from echomq.embedded import redact
from echomq.contrib.django.schedules import declared_queues, install
from games import guesses, leaderboard, schedules, settlement, tasks
from games.management.runner import add_metrics_argument, describe_db

log = logging.getLogger(__name__)  # the command's own lines, in the site's log format


class Every:
    """Run ``fn`` at most once per ``seconds`` (the reaper passes faster)."""

    def __init__(self, fn, seconds: float):
        self.fn, self.seconds, self.next_at = fn, seconds, 0.0
        self.__name__ = fn.__name__

    def __call__(self):
        now = time.monotonic()
        if now < self.next_at:
            return None
        self.next_at = now + self.seconds
        close_old_connections()
        return self.fn()


class Command(BaseCommand):
    help = "Run the reaper over cm, cm.settle and cm.tasks, with the game's periodic tasks."

    def add_arguments(self, parser):
        parser.add_argument("--interval-ms", type=int, default=500)
        parser.add_argument("--max-stalls", type=int, default=2,
                            help="lease expiries before a job is dead-lettered")
        parser.add_argument("--relay-after-s", type=float, default=5.0,
                            help="re-send guesses still queued after this long")
        parser.add_argument("--sweep-every-s", type=float, default=1.0)
        add_metrics_argument(parser)
        parser.add_argument("--heal-every-s", type=float, default=1.0,
                            help="re-apply leaderboards a restarted, failed-over or flushed Valkey lost")
        parser.add_argument("--schedules-every-s", type=float, default=5.0,
                            help="re-mirror the round schedules into EchoMQ (missing, changed, paused, deleted)")
        health.add_arguments(parser)

    def handle(self, *args, **o):
        after = timedelta(seconds=o["relay_after_s"])

        def relay_unsent_guesses():
            return guesses.relay_unsent(older_than=after)

        def close_due_rounds():
            return settlement.close_due_rounds()

        def heal_boards():
            return leaderboard.heal()

        def mirror_round_schedules():
            return schedules.sync_all()

        periodic = [Every(mirror_round_schedules, o["schedules_every_s"]),  # first: on the first pass
                    Every(relay_unsent_guesses, max(1.0, o["relay_after_s"] / 2)),
                    Every(close_due_rounds, o["sweep_every_s"]),
                    Every(heal_boards, o["heal_every_s"])]
        try:
            installed = install()  # ECHOMQ["SCHEDULES"]; this reaper fires them
        except ImproperlyConfigured as exc:
            raise CommandError(str(exc)) from None
        for queue, name, status in installed:
            if status != "unchanged":
                log.info(f"reaper: schedule {queue}/{name} {status}")
        names = [guesses.QUEUE, settlement.QUEUE, tasks.QUEUE]
        queues = [get_queue(n) for n in names + [n for n in declared_queues() if n not in names]]
        log.info(f"reaper: queues={','.join(q.name for q in queues)} interval_ms={o['interval_ms']} "
                 f"max_stalls={o['max_stalls']} valkey={redact(valkey_url())} db={describe_db()}")
        reaper = Reaper(queues, interval_ms=o["interval_ms"], max_stalls=o["max_stalls"], tasks=periodic)
        if o["metrics_port"]:
            from echomq.metrics import ReaperMetrics, serve

            ReaperMetrics().wrap(reaper)
            serve(o["metrics_port"])
        health.watch([reaper], port=o["health_port"], addr=o["health_addr"])
        reaper.run()
        log.info("reaper stopped")
