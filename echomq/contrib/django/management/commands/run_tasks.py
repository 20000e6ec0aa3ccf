"""``manage.py run_tasks``: the worker of the EchoMQ task backend.

One Consumer per queue (threads in this process) runs the tasks enqueued
through ``django.tasks``, plus a reaper over those queues (it returns the
jobs of dead workers and promotes ``run_after`` jobs when due; any number
may run). SIGTERM/SIGINT: stop claiming, finish the tasks in hand, exit 0.
At startup it creates the schedules of ``ECHOMQ["SCHEDULES"]``
(echomq.contrib.django.schedules). ``--burst`` runs every task that is
ready now (``Consumer.drain``) and exits 0: for tests and one-off runs.
"""
import logging

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError
from django.tasks import task_backends

from echomq import health
from echomq.contrib.django import valkey_url
from echomq.embedded import redact
from echomq.contrib.django.schedules import install
from echomq.contrib.django.tasks import EchoMQBackend, serve

log = logging.getLogger(__name__)  # the command's own lines, in the site's log format


class Command(BaseCommand):
    help = "Run the tasks enqueued through Django's Tasks framework on EchoMQ."

    def add_arguments(self, parser):
        parser.add_argument("--backend", default="default", help="the TASKS alias (default: default)")
        parser.add_argument("--queue", action="append", dest="queues", metavar="NAME",
                            help="a queue to serve (repeatable; default: every queue of the backend)")
        parser.add_argument("--concurrency", type=int, default=1, help="task threads per queue")
        parser.add_argument("--lease-ms", type=int, default=None, help="default: OPTIONS LEASE_MS")
        parser.add_argument("--reap-interval-ms", type=int, default=500,
                            help="built-in reaper's period; 0 leaves reaping to run_reaper")
        parser.add_argument("--metrics-port", type=int, default=None, help="export Prometheus metrics here")
        health.add_arguments(parser)
        parser.add_argument("--burst", action="store_true",
                            help="run every task ready now, then exit 0 (no reaper, no waiting)")

    def handle(self, *args, **o):
        backend = task_backends[o["backend"]]
        if not isinstance(backend, EchoMQBackend):
            raise CommandError(f"TASKS[{o['backend']!r}] is {type(backend).__name__}, not EchoMQBackend")
        if not backend.queues:
            raise CommandError(f"TASKS[{o['backend']!r}]['QUEUES'] is empty: name the queues to serve")
        queues = o["queues"] or sorted(backend.queues)
        unknown = sorted(set(queues) - backend.queues)
        if unknown:
            raise CommandError(f"not in TASKS[{o['backend']!r}]['QUEUES']: {', '.join(unknown)}")
        if o["concurrency"] < 1:
            raise CommandError("--concurrency must be at least 1")
        if o["lease_ms"] is not None and o["lease_ms"] < 100:
            raise CommandError("--lease-ms must be at least 100")
        try:
            created = install()
        except ImproperlyConfigured as exc:
            raise CommandError(str(exc)) from None
        for queue, name, status in created:
            if status != "unchanged":
                log.info(f"run_tasks: schedule {queue}/{name} {status}")
        observer = None
        if o["metrics_port"]:
            from echomq.metrics import ConsumerMetrics
            from echomq.metrics import serve as export

            observer = ConsumerMetrics()
            export(o["metrics_port"])
        log.info(f"run_tasks: backend={o['backend']} queues={','.join(queues)} "
                 f"concurrency={o['concurrency']} valkey={redact(valkey_url())}"
                 + (f" metrics=:{o['metrics_port']}" if o["metrics_port"] else "")
                 + (" burst" if o["burst"] else ""))
        consumers = []
        healthy = serve(backend, queues, concurrency=o["concurrency"], lease_ms=o["lease_ms"],
                        reap_interval_ms=o["reap_interval_ms"], observer=observer, consumers_out=consumers,
                        health_port=o["health_port"], health_addr=o["health_addr"], burst=o["burst"])
        done = sum(c.stats["completed"] for c in consumers)
        log.info(f"run_tasks stopped: completed={done}")
        if not healthy:
            raise CommandError("a task consumer stopped unexpectedly (see the log above)")
