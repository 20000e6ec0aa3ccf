"""Rounds on a schedule: a ``RoundSchedule`` row -> an EchoMQ schedule -> one round per tick.

The row (admin: the Game master group) is the truth. Its *mirror* is the
EchoMQ schedule ``round-schedule-<id>`` on queue ``cm.tasks``
(``Queue.schedule``), whose every tick is a job of the Django task
:func:`open_scheduled_round` with the row's id as its one argument. The
reapers fire the ticks (``echomq.schedules``: of any number racing, one
fires each tick, by a cursor checked in ``lua/schedule_fire.lua``), and the
task worker (``run_tasks``) runs the job, which opens the round.

Why a Django task on ``cm.tasks`` rather than the settle consumer: a tick
is exactly what EchoMQ's Tasks integration schedules (the payload is the
task's record, so ``run_tasks`` runs it like an enqueued task; the queue
page and ``manage.py schedules`` show it); its result records what the tick
did (opened RND…, skipped, paused), readable by its JOB id; a failure is
retried with backoff and ends dead-lettered and visible; and the settle
consumer stays what it is, the one place rounds close. A tick is flat (no
lane) on ``cm.tasks``, so a burst of notifications on players' lanes does
not hold it up.

Exactly one round per tick:

* the tick's job is enqueued once, however many reapers race (the cursor);
* its JOB id is a function of the schedule and the tick
  (``echomq.schedules.tick_job_id``), and the round stores it in
  ``Round.schedule_job``, which is unique: a redelivered tick (a worker
  that died after the commit) finds its round and opens nothing more;
* the handler locks the schedule's row, so two ticks of one schedule do
  not both see "nothing open" under the *skip* policy.

The round is made from the row as it is at the tick and ends at the tick's
time plus its length (not at "now" plus it), so rounds sit on the grid: with
a round every 10 minutes lasting 10 minutes, one ends as the next opens. A
tick handled so late that its round would already be over opens nothing.

When the round this schedule opened last is still open at a tick, the
row's ``when_open`` decides: ``skip`` (the default: one round of the
schedule at a time; the next tick after it ends opens the next) or
``alongside`` (every tick opens one, whatever is still open).

Keeping the mirror true: saving or deleting a row re-mirrors it after the
commit (``sync_one``); the reaper re-mirrors every row at start and every few
seconds (``sync_all``: creates a missing mirror -- Valkey lost its data, or
was down at the save --, replaces a changed one, pauses or resumes it as
the row says, removes a mirror whose row is gone). A tick that comes anyway
for a paused or deleted row opens nothing: the handler reads the row.
"""
from __future__ import annotations

import logging
import time
from collections import Counter
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone
from functools import partial

from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Max
from django.db.models.signals import post_delete, post_save
from django.tasks import task
from django.utils import timezone

import echomq
from echomq import ids
from echomq.contrib.django import get_queue
from echomq.contrib.django.schedules import declared
from echomq.errors import ArgumentError

from . import rounds
from .models import Round, RoundSchedule
from .tasks import QUEUE

log = logging.getLogger("games.schedules")

PREFIX = "round-schedule-"
TASK = "games.schedules.open_scheduled_round"


# -- the tick ------------------------------------------------------------------
@task(queue_name=QUEUE, takes_context=True, max_attempts=20, backoff_ms=500)
def open_scheduled_round(context, schedule_id: int) -> dict:
    """A tick of schedule ``schedule_id``: open its round (see :func:`open_for_tick`)."""
    return open_for_tick(schedule_id, context.task_result.id)


def tick_time(job_id: str) -> datetime:
    """The tick a tick's JOB id names (its snowflake's millisecond)."""
    return datetime.fromtimestamp(ids.minted_at_ms(job_id) / 1000, dt_timezone.utc)


def open_for_tick(schedule_id: int, job_id: str) -> dict:
    """Open the round of one tick, once: ``{"round": RND… or None, "why": …}``.
    A second delivery of the same tick answers the round the first opened."""
    tick = tick_time(job_id)
    with transaction.atomic():
        schedule = RoundSchedule.objects.select_for_update().filter(pk=schedule_id).first()
        done = Round.objects.filter(schedule_job=job_id).values_list("pk", flat=True).first()
        if done:
            return _said(schedule_id, job_id, done, "opened by this tick before (a redelivery)")
        if schedule is None:
            return _said(schedule_id, job_id, None, "the schedule was deleted")
        if not schedule.active:
            return _said(schedule_id, job_id, None, "the schedule is paused")
        now = timezone.now()
        ends_at = tick + schedule.duration
        if ends_at <= now:
            return _said(schedule_id, job_id, None, f"too late: its round would have ended at {ends_at:%H:%M:%S} UTC")
        if schedule.when_open == RoundSchedule.Policy.SKIP:
            still = (schedule.rounds.filter(status=Round.Status.OPEN, ends_at__gt=now)
                     .order_by("-ends_at").values_list("pk", flat=True).first())
            if still:
                return _said(schedule_id, job_id, None, f"skipped: {still} is still open")
        try:
            with transaction.atomic():  # a savepoint: a lost race on the tick leaves the rest usable
                rnd = rounds.create_round(
                    schedule.emoji_set, kind=schedule.kind, currency=schedule.currency,
                    guess_price=schedule.guess_price, prize_pool=schedule.prize_pool,
                    keyboard_size=schedule.keyboard_size, title=schedule.name, ends_at=ends_at,
                    schedule=schedule, schedule_job=job_id)
        except (IntegrityError, ValidationError) as exc:
            done = Round.objects.filter(schedule_job=job_id).values_list("pk", flat=True).first()
            if done:
                return _said(schedule_id, job_id, done, "opened by this tick before (a redelivery)")
            return _said(schedule_id, job_id, None, f"cannot open a round: {exc}", level=logging.ERROR)
        except rounds.RoundError as exc:  # the set or keyboard no longer fit: retrying cannot help
            return _said(schedule_id, job_id, None, f"cannot open a round: {exc}", level=logging.ERROR)
    return _said(schedule_id, job_id, rnd.pk, f"opened until {ends_at:%Y-%m-%d %H:%M:%S} UTC")


def _said(schedule_id, job_id: str, round_id: str | None, why: str, level: int = logging.INFO) -> dict:
    log.log(level, "round schedule %s tick %s: %s%s", schedule_id, job_id, f"{round_id} " if round_id else "", why)
    return {"round": round_id, "why": why}


# -- the mirror ------------------------------------------------------------------
def mirror_definition(schedule: RoundSchedule) -> tuple[str, dict]:
    """(queue, ``Queue.schedule`` keywords) of the row's mirror: a task
    entry of ``echomq.contrib.django.schedules``, so its payload is the
    task's record, as for ``ECHOMQ["SCHEDULES"]``."""
    entry = {"task": TASK, "args": [schedule.pk]}
    if schedule.cron:
        entry.update(cron=schedule.cron, tz=schedule.tz)
    else:
        entry["every_ms"] = schedule.every_seconds * 1000
    [(queue, _, options)] = declared({"SCHEDULES": {schedule.mirror_name: entry}})
    return queue, options


def _same(row: dict, options: dict) -> bool:
    payload = options["payload"].encode() if isinstance(options["payload"], str) else options["payload"]
    return (row["cron"], row["every_ms"], row["tz"], bytes(row["payload"]), row["lane"], row["priority"],
            row["catch_up"]) == (options.get("cron"), options.get("every_ms"), options.get("tz", "UTC"),
                                 payload, options.get("lane"), options.get("priority", 0),
                                 options.get("catch_up", 0))


def _mirrors(queue) -> dict[str, dict]:
    """The round schedules' mirrors in Valkey, by name."""
    return {row["name"]: row for row in queue.schedules() if row["name"].startswith(PREFIX)}


def _sync(queue, schedule: RoundSchedule, row: dict | None) -> list[str]:
    """Make the mirror match the row; what it took ("created", "replaced", "paused", "resumed")."""
    _, options = mirror_definition(schedule)
    did, paused = [], bool(row and row["paused"])
    if row is None or not _same(row, options):
        did.append(queue.schedule(schedule.mirror_name, **options))  # a replaced one keeps its pause
    if schedule.active and paused:
        queue.resume_schedule(schedule.mirror_name)
        did.append("resumed")
    elif not schedule.active and not paused:
        queue.pause_schedule(schedule.mirror_name)
        did.append("paused")
    return did


def sync_one(schedule_id: int) -> list[str]:
    """Make one row's mirror match the row (gone: remove it); what it took.
    Valkey is read before the database, so a row saved meanwhile is never
    undone (its own sync, after its commit, writes the same)."""
    queue = get_queue(QUEUE)
    name = f"{PREFIX}{schedule_id}"
    row = _mirrors(queue).get(name)
    schedule = RoundSchedule.objects.filter(pk=schedule_id).first()
    if schedule is None:
        return ["removed"] if row is not None and queue.unschedule(name) else []
    return _sync(queue, schedule, row)


def sync_all() -> dict[str, int]:
    """The reaper's pass: every row mirrored as it says, every mirror
    without a row removed; counts of what it took. Quiet when nothing
    changed; a mirror that had to be made again is a warning (Valkey lost
    it, or did not answer when its row was saved)."""
    queue = get_queue(QUEUE)
    mirrors = _mirrors(queue)
    rows = {s.mirror_name: s for s in RoundSchedule.objects.all()}
    counts: Counter = Counter()
    for name, schedule in rows.items():
        try:
            did = _sync(queue, schedule, mirrors.get(name))
        except REFUSED as exc:  # a row saved around the form: the others are still mirrored
            counts["refused"] += 1
            _refused(schedule, exc)
            continue
        for what in did:
            counts[what] += 1
            missing = what == "created"
            log.log(logging.WARNING if missing else logging.INFO, "round schedule %s (%s): mirror %s on %s%s",
                    schedule.pk, schedule.name, what, QUEUE, " (it was missing)" if missing else "")
    for name in mirrors.keys() - rows.keys():
        if queue.unschedule(name):
            counts["removed"] += 1
            log.info("round schedule mirror %s removed: its schedule is gone", name)
    return dict(counts)


# What EchoMQ refuses of a definition saved around the form's checks (a
# cron line that never fires, an interval over a year).
REFUSED = (ArgumentError, ValueError, OverflowError, ImproperlyConfigured)
_told: set[tuple] = set()


def _refused(schedule: RoundSchedule, exc: Exception) -> None:
    """Say once per definition (not on every pass) that a row cannot be mirrored."""
    key = (schedule.pk, schedule.cron, schedule.every_seconds, schedule.tz)
    if key not in _told:
        _told.add(key)
        log.error("round schedule %s (%s) cannot be mirrored, so it opens no round: %s; fix it in the admin",
                  schedule.pk, schedule.name, exc)


def _sync_after_commit(schedule_id: int) -> None:
    try:
        did = sync_one(schedule_id)
    except echomq.UNAVAILABLE as exc:
        log.warning("round schedule %s: Valkey did not answer (%s); the reaper mirrors it when it does",
                    schedule_id, type(exc).__name__)
        return
    except REFUSED as exc:
        log.error("round schedule %s cannot be mirrored, so it opens no round: %s", schedule_id, exc)
        return
    if did:
        log.info("round schedule %s: mirror %s", schedule_id, ", ".join(did))


def _changed(sender, instance, **kwargs) -> None:
    forget_coming()
    transaction.on_commit(partial(_sync_after_commit, instance.pk), robust=True)


post_save.connect(_changed, sender=RoundSchedule, dispatch_uid="games.schedules.saved")
post_delete.connect(_changed, sender=RoundSchedule, dispatch_uid="games.schedules.deleted")


# -- what comes next ----------------------------------------------------------------
def opens_next(schedule: RoundSchedule, now: datetime, open_until: datetime | None = None) -> datetime | None:
    """When the schedule opens its next round: its next tick, or under
    *skip* with a round still open until ``open_until``, the first tick at
    or after that end. None when it has none."""
    after = now
    if schedule.when_open == RoundSchedule.Policy.SKIP and open_until is not None:
        after = max(now, open_until - timedelta(milliseconds=1))
    try:
        return schedule.next_runs(1, after=after)[0]
    except (ArgumentError, ValueError, OverflowError):
        return None


def coming(limit: int = 5, now: datetime | None = None) -> list[dict]:
    """The next rounds the active schedules will open, soonest first:
    ``{"title", "kind", "opens_at", "schedule"}``. Two queries, no Valkey."""
    now = now or timezone.now()
    schedules = list(RoundSchedule.objects.filter(active=True))
    skip = [s.pk for s in schedules if s.when_open == RoundSchedule.Policy.SKIP]
    open_until = dict(Round.objects.filter(schedule__in=skip, status=Round.Status.OPEN, ends_at__gt=now)
                      .values("schedule").annotate(until=Max("ends_at")).values_list("schedule", "until")) \
        if skip else {}
    out = []
    for s in schedules:
        at = opens_next(s, now, open_until.get(s.pk))
        if at is not None:
            out.append({"title": s.name, "kind": s.kind, "opens_at": at, "schedule": s.pk})
    out.sort(key=lambda c: c["opens_at"])
    return out[:limit]


COMING_TTL_S = 5.0
_coming: tuple[float, list[dict]] = (0.0, [])


def coming_soon() -> list[dict]:
    """:func:`coming`, computed at most every ``COMING_TTL_S`` seconds per
    process (the lobby asks on every view); a saved or deleted schedule
    drops this process's copy."""
    global _coming
    fresh_until, rows = _coming
    if time.monotonic() >= fresh_until:
        rows = coming()
        _coming = (time.monotonic() + COMING_TTL_S, rows)
    now = timezone.now()
    return [c for c in rows if c["opens_at"] > now]


def forget_coming() -> None:
    global _coming
    _coming = (0.0, [])
