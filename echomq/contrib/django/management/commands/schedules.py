"""``manage.py schedules``: every schedule of the known queues, with its next run.

The queues are the dashboard's (``ECHOMQ["QUEUES"]`` and those found in
Valkey) plus those of ``ECHOMQ["SCHEDULES"]``. ``--install`` first creates
the declared schedules (as ``run_tasks`` and ``run_reaper`` do at startup).
Removing an entry from the settings does not remove its schedule (the
workers only create and update): ``--remove NAME --queue QUEUE`` does.
"""
from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError

from echomq.contrib.django import dashboard, get_client, get_queue
from echomq.contrib.django.schedules import declared_queues, install
from echomq.errors import InvalidName


def _when(ms, now):
    if ms is None:
        return "-"
    return f"{dashboard.ms_to_dt(ms):%Y-%m-%d %H:%M:%S} UTC ({dashboard.relative(ms, now)})"


class Command(BaseCommand):
    help = "List the EchoMQ schedules with their next run."

    def add_arguments(self, parser):
        parser.add_argument("--queue", action="append", dest="queues", metavar="NAME",
                            help="only this queue (repeatable)")
        parser.add_argument("--install", action="store_true",
                            help="create or update the schedules of ECHOMQ['SCHEDULES'] first")
        parser.add_argument("--remove", metavar="NAME",
                            help="remove schedule NAME of the one --queue (jobs it enqueued stay)")

    def handle(self, *args, **o):
        if o["remove"]:
            if len(o["queues"] or ()) != 1:
                raise CommandError("--remove needs exactly one --queue")
            try:
                removed = get_queue(o["queues"][0]).unschedule(o["remove"])
            except InvalidName as exc:
                raise CommandError(str(exc)) from None
            if not removed:
                raise CommandError(f"queue {o['queues'][0]} has no schedule {o['remove']!r}")
            self.stdout.write(f"{o['queues'][0]}/{o['remove']}: removed")
        try:
            if o["install"]:
                for queue, name, status in install():
                    self.stdout.write(f"{queue}/{name}: {status}")
            names = o["queues"] or sorted(set(dashboard.all_queues(get_client())) | set(declared_queues()))
            queues = [get_queue(n) for n in names]
        except (ImproperlyConfigured, InvalidName) as exc:
            raise CommandError(str(exc)) from None
        rows = []
        for q in queues:
            now = q.server_time_ms()
            for s in q.schedules():
                spec = s["cron"] + (f" ({s['tz']})" if s["tz"] != "UTC" else "") if s["cron"] \
                    else f"every {s['every_ms']} ms"
                rows.append((q.name, s["name"], spec, "paused" if s["paused"] else _when(s["next_ms"], now),
                             _when(s["last_ms"], now), s["last_job"] or "-"))
        if not rows:
            self.stdout.write("no schedules")
            return
        head = ("queue", "schedule", "spec", "next run", "last run", "last job")
        widths = [max(len(str(r[i])) for r in rows + [head]) for i in range(len(head))]
        for row in [head] + rows:
            self.stdout.write("  ".join(str(v).ljust(w) for v, w in zip(row, widths)).rstrip())
