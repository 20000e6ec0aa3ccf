"""Issue 21 in the Tasks backend: priorities honoured, ECHOMQ["SCHEDULES"]
created at startup and fired as tasks, ``manage.py schedules``, and
``run_tasks --burst`` for a project's tests."""
from __future__ import annotations

import io
import threading
from datetime import timedelta

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import CommandError, call_command
from django.tasks import TaskResultStatus, task_backends
from django.utils import timezone

from echomq import Reaper, ids
from echomq.contrib.django import get_queue
from echomq.contrib.django.schedules import declared_queues, install
from echomq.contrib.django.tasks import Runner

from . import jobs
from .conftest import run_pending


@pytest.fixture
def schedules(settings):
    def declare(entries):
        settings.ECHOMQ = {**settings.ECHOMQ, "SCHEDULES": entries}
    return declare


def test_a_tasks_priority_orders_its_queue_and_is_kept_on_the_result(valkey):
    low = jobs.add.using(priority=-20).enqueue(1, 1)
    plain = jobs.add.enqueue(2, 2)
    high = jobs.add.using(priority=90).enqueue(3, 3)
    assert task_backends["default"].get_result(high.id).task.priority == 90
    q = get_queue("default")
    assert [j.id for j in q.claim_batch(3, lease_ms=60_000)] == [high.id, plain.id, low.id]
    assert q.job(high.id)["priority"] == "90"


def test_declared_schedules_are_created_once_and_fire_as_tasks(valkey, schedules):
    schedules({"adder": {"task": "tests.tasks.jobs.add", "every_ms": 1000, "args": [2], "kwargs": {"b": 3},
                         "catch_up": 1},
               "ping": {"queue": "cm.tasks", "cron": "*/5 * * * *", "tz": "Europe/Paris", "payload": "ping"}})
    assert sorted(install()) == [("cm.tasks", "ping", "created"), ("default", "adder", "created")]
    assert sorted(install()) == [("cm.tasks", "ping", "unchanged"), ("default", "adder", "unchanged")]
    assert declared_queues() == ["cm.tasks", "default"]
    q = get_queue("default")
    [row] = q.schedules()
    assert (row["name"], row["every_ms"], row["catch_up"], row["paused"]) == ("adder", 1000, 1, False)
    cursor = (q.server_time_ms() // 1000 - 1) * 1000
    valkey.hset(f"{q.prefix}sched:adder", "next", cursor)
    valkey.zadd(f"{q.prefix}schedules", {"adder": cursor})
    assert Reaper([q]).run_once()["default"]["fired"] == 2  # the due tick and one missed
    assert run_pending("default", Runner(task_backends["default"])) == ["completed", "completed"]
    result = task_backends["default"].get_result(q.schedules()[0]["last_job"])
    assert result.status == TaskResultStatus.SUCCESSFUL and result.return_value == 5


@pytest.mark.parametrize("entry, message", [
    ({"task": "tests.tasks.jobs.add", "cron": "not cron"}, "cron"),
    ({"task": "tests.tasks.jobs.add", "every_ms": 0}, "every_ms"),
    ({"task": "tests.tasks.jobs.add", "cron": "* * * * *", "tz": "Atlantis/Capital"}, "time zone"),
    ({"task": "tests.tasks.jobs.add", "cron": "0 0 30 2 *"}, "never fires"),
    ({"task": "tests.tasks.jobs.nope", "every_ms": 1000}, "no task"),
    ({"task": "tests.tasks.jobs.add", "every_ms": 1000, "args": [{1, 2}]}, "JSON"),
    ({"queue": "default", "every_ms": 1000, "color": "red"}, "an entry is"),
    ({"every_ms": 1000}, "name a task or a queue"),
    ({"queue": "default", "every_ms": 1000, "catch_up": 5000}, "catch_up"),
    ({"queue": "default", "every_ms": 1000, "priority": 101}, "priority"),
    ({"queue": "default", "every_ms": 1000, "lane": "not-a-lane"}, "lane"),
    ({"queue": "default", "every_ms": 1000, "payload": 42}, "payload"),
    ({"queue": "default", "cron": "R 3 * * *"}, "random"),
])
def test_a_bad_declaration_stores_nothing_and_stops_the_worker(valkey, schedules, entry, message):
    schedules({"fine": {"queue": "default", "every_ms": 1000}, "bad": entry})
    with pytest.raises(ImproperlyConfigured, match=message):
        install()
    with pytest.raises(CommandError, match=message):
        call_command("run_tasks", "--burst", stdout=io.StringIO())
    assert valkey.dbsize() == 0


def test_manage_py_schedules_lists_them_with_the_next_run(valkey, schedules):
    schedules({"adder": {"task": "tests.tasks.jobs.add", "cron": "0 3 * * *", "args": [1, 2]}})
    out = io.StringIO()
    call_command("schedules", "--install", stdout=out)
    text = out.getvalue()
    assert "default/adder: created" in text
    line = next(ln for ln in text.splitlines() if ln.startswith("default "))
    assert "adder" in line and "0 3 * * *" in line and "03:00:00 UTC (in " in line and "never" not in line
    get_queue("default").pause_schedule("adder")
    out = io.StringIO()
    call_command("schedules", "--queue", "default", stdout=out)
    assert "paused" in out.getvalue()


def test_manage_py_schedules_removes_one(valkey):
    q = get_queue("default")
    q.schedule("old", every_ms=60_000)
    out = io.StringIO()
    call_command("schedules", "--remove", "old", "--queue", "default", stdout=out)
    assert "default/old: removed" in out.getvalue() and q.schedules() == []
    for args, message in ((["--remove", "old", "--queue", "default"], "no schedule 'old'"),
                          (["--remove", "old"], "exactly one --queue"),
                          (["--remove", "bad name", "--queue", "default"], "ill-formed")):
        with pytest.raises(CommandError, match=message):
            call_command("schedules", *args, stdout=io.StringIO())


def test_run_tasks_burst_runs_every_ready_task_and_exits(valkey, settings, caplog):
    results = [jobs.add.enqueue(i, i) for i in range(5)] + [jobs.fails_then_works.enqueue("burst")]
    later = jobs.add.using(run_after=timezone.now() + timedelta(hours=1)).enqueue(0, 0)
    caplog.set_level("INFO", logger="echomq.contrib.django.management.commands.run_tasks")
    call_command("run_tasks", "--burst", "--queue", "default")
    assert "run_tasks stopped: completed=6" in caplog.messages
    backend = task_backends["default"]
    assert [backend.get_result(r.id).status for r in results] == [TaskResultStatus.SUCCESSFUL] * 6
    assert backend.get_result(results[-1].id).return_value == 2  # the retry without backoff ran in the burst
    assert backend.get_result(later.id).status == TaskResultStatus.READY  # not due: left scheduled
    assert get_queue("default").counts()["pending"] == 0 and get_queue("default").counts()["scheduled"] == 1


def test_run_tasks_burst_runs_follow_ups_and_ends_on_a_task_that_enqueues_itself_for_ever(valkey, caplog):
    """Tasks a task enqueues run in the same burst; one that enqueues itself
    for ever is cut after the drain's max_new (Consumer.drain) and the
    command still returns, its last follow-up left ready."""
    first = jobs.countdown.enqueue(3)
    caplog.set_level("INFO", logger="echomq.contrib.django.management.commands.run_tasks")
    call_command("run_tasks", "--burst", "--queue", "default")
    assert "run_tasks stopped: completed=4" in caplog.messages
    assert task_backends["default"].get_result(first.id).return_value == 3
    jobs.forever.enqueue()
    done = threading.Event()
    threading.Thread(target=lambda: (call_command("run_tasks", "--burst", "--queue", "default"), done.set()),
                     daemon=True).start()
    assert done.wait(120), "the burst did not end"
    assert any("admitted after it began" in m for m in caplog.messages)
    counts = get_queue("default").counts()
    assert (counts["pending"], counts["active"]) == (1, 0)


def test_a_lane_task_on_a_schedule_runs_on_its_lane(valkey, schedules):
    player = ids.mint("PLR")
    schedules({"nudge": {"task": "tests.tasks.jobs.per_player", "every_ms": 60_000, "args": [player, 1]}})
    install()
    q = get_queue("default")
    assert q.schedules()[0]["lane"] == player
