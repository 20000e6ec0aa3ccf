"""Score guesses from queue ``cm`` (the only place a guess is scored).

Each handler thread scores the guesses waiting for it in batches of up to
``--batch`` (``games.workers.score_guesses``: one transaction of five
statements per batch, four on PostgreSQL, and one Valkey pipeline after
it), so a busy worker pays per batch what an idle one pays per guess. ``--batch-window-ms`` makes a
moderate stream batch too: when guesses keep arriving (a wake-up within two
windows of the last), the worker waits that long before it claims, so the
guesses that follow closely share its claim, transaction and ack; a lone
guess after a quiet spell is claimed at once (see ``echomq.Consumer``)."""
import logging

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from echomq import Consumer, health
from echomq.contrib.django import get_queue, valkey_url
from echomq.embedded import redact
from games.guesses import QUEUE
from games.management.runner import add_metrics_argument, describe_db, run_consumers, start_metrics
from games.workers import score_guesses

log = logging.getLogger(__name__)  # the command's own lines, in the site's log format

# Default batch window. Measured open loop (2 cores, PostgreSQL): at 200
# guesses/s, 10 ms gathers ~3 guesses per batch and 20 ms ~5, which took the
# worker side (worker + its PostgreSQL + Valkey CPU) from ~2.3 to ~1.2-1.8 ms
# per guess, for p99 enqueue->scored ~35 ms. A lone guess after a quiet
# spell waits no window (p50 submit->scored 8 ms at 10 guesses/s).
BATCH_WINDOW_MS = 20


class Command(BaseCommand):
    help = "Run the score worker: claim guess jobs from the players' lanes and score them."

    def add_arguments(self, parser):
        parser.add_argument("--queue", default=QUEUE)
        parser.add_argument("--concurrency", type=int, default=1, help="handler threads")
        parser.add_argument("--lease-ms", type=int, default=30_000)
        parser.add_argument("--batch", type=int, default=50, help="most guesses scored in one transaction")
        parser.add_argument("--batch-window-ms", type=int, default=BATCH_WINDOW_MS,
                            help="while guesses keep arriving, wait this long before claiming, so the guesses "
                                 "right behind one are scored in the same batch (0: off)")
        parser.add_argument("--prefetch", type=int, default=None,
                            help="jobs claimed ahead (default: adaptive, as echomq.Consumer), so the next "
                                 "batch waits in hand while one is scored")
        parser.add_argument("--max-attempts", type=int, default=10,
                            help="deliveries before a failing job is dead-lettered")
        parser.add_argument("--beat-ms", type=int, default=1_000,
                            help="longest a parked worker waits for work before it looks again; shorter than "
                                 "ECHOMQ['SOCKET_TIMEOUT'], which bounds every call's wait")
        add_metrics_argument(parser)
        health.add_arguments(parser)

    def handle(self, *args, **o):
        socket_timeout_ms = float(getattr(settings, "ECHOMQ", {}).get("SOCKET_TIMEOUT", 3)) * 1000
        if o["beat_ms"] >= socket_timeout_ms:
            raise CommandError(f"--beat-ms {o['beat_ms']} must be shorter than ECHOMQ['SOCKET_TIMEOUT'] "
                               f"({socket_timeout_ms:.0f} ms): a parked worker's wait would time out")
        queue = get_queue(o["queue"])
        observer = start_metrics(o["metrics_port"])
        if observer:
            from games.metrics import export_scoring

            export_scoring()
        log.info(f"score worker: queue={queue.name} concurrency={o['concurrency']} "
                 f"lease_ms={o['lease_ms']} batch={o['batch']} batch_window_ms={o['batch_window_ms']} "
                 f"prefetch={o['prefetch'] if o['prefetch'] is not None else 'auto'} valkey={redact(valkey_url())} "
                 f"db={describe_db()}")
        consumer = Consumer(queue, handler_many=score_guesses, batch=o["batch"],
                            batch_window_ms=o["batch_window_ms"], concurrency=o["concurrency"],
                            lease_ms=o["lease_ms"], prefetch=o["prefetch"], max_attempts=o["max_attempts"],
                            beat_ms=o["beat_ms"], name=f"scoreworker/{queue.name}", observer=observer)
        health.watch([consumer], port=o["health_port"], addr=o["health_addr"])
        run_consumers([consumer])
        log.info("score worker stopped")
