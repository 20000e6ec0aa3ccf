"""Schedules declared in settings, created when the workers start.

    ECHOMQ = {"SCHEDULES": {
        # a task (``@task``), with its arguments:
        "nightly-report": {"task": "games.tasks.nightly_report", "cron": "0 3 * * *",
                           "tz": "Europe/Paris", "args": [], "kwargs": {}},
        # or a plain job on a queue:
        "heartbeat": {"queue": "cm", "every_ms": 60_000, "payload": "ping"},
    }}

Each entry is one ``Queue.schedule`` (echomq/schedules.py): ``cron`` (with
``tz``, default UTC) or ``every_ms``, and optional ``catch_up``,
``priority``, ``lane``. A task entry runs on the task's queue (``queue``
overrides it), at its priority, on its lane when the task names one; each
tick is a job whose payload is the task's record, so ``run_tasks`` runs it
like an enqueued task. ``run_tasks`` and ``run_reaper`` call
:func:`install` at startup: declaring the same entry again keeps its
cursor and an operator's pause, a changed entry replaces it. ``manage.py
schedules`` lists every schedule with its next run.
"""
from __future__ import annotations

import json

from django.core.exceptions import ImproperlyConfigured
from django.tasks import task_backends
from django.tasks.base import Task
from django.utils.module_loading import import_string

from echomq import schedules
from echomq.errors import ArgumentError

from . import get_queue
from .dashboard import settings_conf
from .tasks import EchoMQBackend, json_exact, task_payload

DEFINITION = ("cron", "every_ms", "tz", "catch_up", "priority", "lane")
KNOWN = set(DEFINITION) | {"task", "queue", "payload", "args", "kwargs", "backend"}


def _task_entry(name: str, entry: dict) -> tuple[str, dict]:
    """(queue, Queue.schedule keywords) of an entry naming a task."""
    try:
        task = import_string(entry["task"])
    except ImportError as exc:
        raise ImproperlyConfigured(f"ECHOMQ['SCHEDULES'][{name!r}]: no task {entry['task']!r} ({exc})") from None
    if not isinstance(task, Task):
        raise ImproperlyConfigured(f"ECHOMQ['SCHEDULES'][{name!r}]: {entry['task']!r} is not a task (@task)")
    task = task.using(backend=entry.get("backend", task.backend), queue_name=entry.get("queue", task.queue_name))
    backend = task_backends[task.backend]
    if not isinstance(backend, EchoMQBackend):
        raise ImproperlyConfigured(f"ECHOMQ['SCHEDULES'][{name!r}]: task backend {task.backend!r} is not EchoMQ")
    args, kwargs = list(entry.get("args", [])), dict(entry.get("kwargs", {}))
    try:
        backend.validate_task(task)
        record = task_payload(backend, task, json_exact(args, "args"), json_exact(kwargs, "kwargs"),
                              task.queue_name)
        lane = backend._lane(task, args, kwargs)
    except Exception as exc:  # InvalidTask, and anything a task's own check raises
        raise ImproperlyConfigured(f"ECHOMQ['SCHEDULES'][{name!r}]: {exc}") from None
    options = {"payload": json.dumps(record, separators=(",", ":")), "priority": int(task.priority)}
    if lane:
        options["lane"] = lane
    return task.queue_name, options


def declared(conf: dict | None = None) -> list[tuple[str, str, dict]]:
    """(queue, name, Queue.schedule keywords) for each entry of
    ECHOMQ["SCHEDULES"]; ImproperlyConfigured names a bad entry."""
    conf = settings_conf() if conf is None else conf
    entries = conf.get("SCHEDULES") or {}
    if not isinstance(entries, dict):
        raise ImproperlyConfigured("ECHOMQ['SCHEDULES'] must map schedule names to entries")
    out = []
    for name, entry in entries.items():
        if not isinstance(entry, dict) or set(entry) - KNOWN:
            raise ImproperlyConfigured(f"ECHOMQ['SCHEDULES'][{name!r}]: an entry is a dict of "
                                       f"{', '.join(sorted(KNOWN))}")
        if "task" in entry:
            queue, options = _task_entry(name, entry)
        elif "queue" in entry:
            queue, options = entry["queue"], {"payload": entry.get("payload", b"")}
        else:
            raise ImproperlyConfigured(f"ECHOMQ['SCHEDULES'][{name!r}]: name a task or a queue")
        options.update({k: entry[k] for k in DEFINITION if k in entry})
        out.append((queue, name, options))
    return out


def install(conf: dict | None = None) -> list[tuple[str, str, str]]:
    """Create or update every declared schedule; answers (queue, name,
    "created" | "replaced" | "unchanged"). Everything is checked before
    the first is stored: a bad entry is ImproperlyConfigured and none is."""
    plans = declared(conf)
    queues = {}
    for queue_name, name, options in plans:
        try:
            queues[queue_name] = get_queue(queue_name)
            schedules.check_definition(name, **options)
        except ArgumentError as exc:
            raise ImproperlyConfigured(f"ECHOMQ['SCHEDULES'][{name!r}]: {exc}") from None
    out = []
    for queue_name, name, options in plans:
        try:
            out.append((queue_name, name, queues[queue_name].schedule(name, **options)))
        except ArgumentError as exc:
            raise ImproperlyConfigured(f"ECHOMQ['SCHEDULES'][{name!r}]: {exc}") from None
    return out


def declared_queues(conf: dict | None = None) -> list[str]:
    """The queues the declared schedules fire into (a reaper must pass over them)."""
    return sorted({queue for queue, _, _ in declared(conf)})
