"""EchoMQBackend in one process: Django's documented Task behaviours, the
checks at enqueue, and what the Runner records (no worker process here;
tests/tasks/test_worker.py runs a real one)."""
from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.tasks import TaskResultStatus, task_backends
from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist
from django.utils import timezone

from echomq import ids
from echomq.contrib.django import get_queue
from echomq.contrib.django.tasks import EchoMQBackend, EchoMQTask, Runner

from . import jobs
from .conftest import run_pending

PLAYER = ids.mint("PLR")


def backend() -> EchoMQBackend:
    return task_backends["default"]


def test_flags_are_truthful():
    b = backend()
    assert isinstance(b, EchoMQBackend) and b.task_class is EchoMQTask
    assert (b.supports_defer, b.supports_get_result, b.supports_async_task, b.supports_priority) == (
        True, True, True, True)
    assert b.check() == []


def test_enqueue_writes_a_ready_result_and_a_job(valkey):
    result = jobs.add.enqueue(2, b=3)
    assert result.status == TaskResultStatus.READY and result.id.startswith("JOB")
    again = backend().get_result(result.id)
    assert (again.status, again.args, again.kwargs, again.task.func) == ("READY", [2], {"b": 3}, jobs.add.func)
    assert again.enqueued_at is not None and again.started_at is None and again.attempts == 0
    with pytest.raises(ValueError):
        again.return_value  # not finished yet
    q = get_queue("default")
    assert q.counts()["pending"] == 1 and q.job(result.id)["state"] == "pending"
    assert valkey.ttl(f"emq:{{default}}:task:{result.id}") > 86_000  # kept a day by default


def test_runner_records_success_and_the_return_value():
    result = jobs.add.enqueue(2, 3)
    assert run_pending("default", Runner(backend())) == ["completed"]
    result.refresh()
    assert (result.status, result.return_value, result.attempts, result.errors) == ("SUCCESSFUL", 5, 1, [])
    assert result.enqueued_at <= result.started_at <= result.finished_at
    assert jobs.add.get_result(result.id).return_value == 5


def test_failure_is_retried_then_failed_with_the_traceback(valkey):
    result = jobs.always_fails.enqueue("boom")
    runner = Runner(backend())
    assert run_pending("default", runner) == ["scheduled"]
    result.refresh()
    assert result.status == TaskResultStatus.READY and len(result.errors) == 1  # ready to run again
    q = get_queue("default")
    q.promote()
    assert run_pending("default", runner) == ["dead"]  # its own max_attempts=2, not the backend's 3
    result.refresh()
    assert result.status == TaskResultStatus.FAILED and result.attempts == 2 and len(result.errors) == 2
    assert result.errors[-1].exception_class is ValueError and "boom" in result.errors[-1].traceback
    assert "Traceback" in result.errors[-1].traceback and result.finished_at is not None
    assert int(valkey.get("test:fails:boom")) == 2
    dead = q.dead_jobs()
    assert [d["id"] for d in dead] == [result.id] and "ValueError: boom" in dead[0]["last_error"]
    with pytest.raises(ValueError):
        result.return_value


def test_unknown_and_ill_formed_ids_do_not_exist():
    for rid in (ids.mint("JOB"), "nope", ""):
        with pytest.raises(TaskResultDoesNotExist):
            backend().get_result(rid)


@pytest.mark.parametrize("args, kwargs", [
    ((timezone.now(),), {}),          # not JSON
    (({1: "a"},), {}),                # int keys come back as strings
    ((float("nan"),), {}),
    ((), {"b": b"\xff"}),
])
def test_args_that_do_not_round_trip_fail_at_enqueue_and_write_nothing(valkey, args, kwargs):
    with pytest.raises(InvalidTask):
        jobs.add.enqueue(*args, **kwargs)
    assert valkey.dbsize() == 0


def test_invalid_tasks_are_refused():
    with pytest.raises(InvalidTask):
        jobs.add.using(priority=101)  # outside Django's range (EchoMQ takes -100..100)
    with pytest.raises(InvalidTask):
        jobs.add.using(queue_name="elsewhere")  # not in QUEUES
    with pytest.raises(InvalidTask):
        jobs.add.using(run_after=timezone.now().replace(tzinfo=None))
    with pytest.raises(InvalidTask, match="lane 'who'"):
        EchoMQTask(func=jobs.add.func, lane="who")
    with pytest.raises(InvalidTask, match="max_attempts"):
        EchoMQTask(func=jobs.add.func, max_attempts=0)
    from echomq.checks import MAX_COUNT, MAX_MS

    assert EchoMQTask(func=jobs.add.func, max_attempts=MAX_COUNT, backoff_ms=MAX_MS).max_attempts == MAX_COUNT
    with pytest.raises(InvalidTask, match="max_attempts"):  # more than a retry takes
        EchoMQTask(func=jobs.add.func, max_attempts=MAX_COUNT + 1)
    with pytest.raises(InvalidTask, match="backoff_ms"):
        EchoMQTask(func=jobs.add.func, backoff_ms=MAX_MS + 1)


def test_lane_comes_from_the_named_argument(valkey):
    result = jobs.per_player.enqueue(PLAYER, 7)
    assert get_queue("default").job(result.id)["lane"] == PLAYER
    assert get_queue("default").counts()["lanes"] == 1
    before = sorted(valkey.keys())
    assert f"emq:{{default}}:task:{result.id}".encode() in before  # the result sits in the queue's slot
    with pytest.raises(InvalidTask, match="lane argument"):
        jobs.per_player.enqueue("not an id", 1)
    assert sorted(valkey.keys()) == before


def test_run_after_is_a_delayed_job():
    at = timezone.now() + timedelta(minutes=5)
    result = jobs.add.using(run_after=at).enqueue(1, 1)
    job = get_queue("default").job(result.id)
    assert job["state"] == "scheduled"
    assert abs(job["run_at"] - at.timestamp() * 1000) < 2_000
    assert backend().get_result(result.id).task.run_after == at
    assert run_pending("default", Runner(backend())) == []  # not due


def test_async_and_context_tasks_run():
    a = jobs.async_double.enqueue(21)
    c = jobs.which_attempt.enqueue("x")
    assert run_pending("default", Runner(backend())) == ["completed", "completed"]
    assert jobs.async_double.get_result(a.id).return_value == 42
    assert jobs.which_attempt.get_result(c.id).return_value == {"label": "x", "attempt": 1}


def test_a_return_value_that_is_not_json_fails_the_task():
    result = jobs.returns_a_set.enqueue()
    run_pending("default", Runner(backend()))
    result.refresh()
    assert result.status == "READY" and "JSON" in result.errors[0].traceback


def test_results_are_found_through_any_configured_queue(settings):
    settings.TASKS = {"default": {**settings.TASKS["default"], "QUEUES": ["default", "cm.tasks", "other"]}}
    backend = task_backends["default"]
    assert backend.queues == {"default", "cm.tasks", "other"}
    result = jobs.add.enqueue(1, 2)
    assert backend.get_result(result.id).task.queue_name == "default"


def test_aenqueue_and_aget_result():
    import asyncio

    async def go():
        result = await jobs.add.aenqueue(4, 5)
        return result, await jobs.add.aget_result(result.id)

    result, again = asyncio.run(go())
    assert again.id == result.id and again.status == "READY" and again.args == [4, 5]


def test_check_reports_ill_formed_queue_names_and_options(settings):
    settings.TASKS = {"default": {**settings.TASKS["default"], "QUEUES": ["default", "no spaces"],
                                  "OPTIONS": {"MAX_ATTEMPTS": 0}}}
    assert sorted(e.id for e in task_backends["default"].check()) == ["echomq.E001", "echomq.E002"]


@pytest.mark.parametrize("options", [{"MAX_ATTEMPTS": 1_000_001}, {"BACKOFF_MS": 31_536_000_001},
                                     {"LEASE_MS": 31_536_000_001}, {"LEASE_MS": 99}])
def test_check_reports_options_above_what_the_queue_takes(settings, options):
    settings.TASKS = {"default": {**settings.TASKS["default"], "OPTIONS": options}}
    assert [e.id for e in task_backends["default"].check()] == ["echomq.E002"]


def test_a_task_that_cannot_be_imported_fails_like_a_raising_one(valkey):
    result = jobs.add.enqueue(1, 1)
    key = f"emq:{{default}}:job:{result.id}"
    import json

    record = json.loads(valkey.hget(key, "payload"))
    valkey.hset(key, "payload", json.dumps({**record, "task": "tests.tasks.jobs.gone"}))
    assert run_pending("default", Runner(backend())) == ["scheduled"]  # retried, as deploys can lag
    result.refresh()
    assert result.status == "READY" and result.errors[0].exception_class is ImportError
    valkey.hset(f"emq:{{default}}:task:{result.id}", "task", "tests.tasks.jobs.gone")
    with pytest.raises(TaskResultDoesNotExist, match="no longer a task"):
        backend().get_result(result.id)


def test_the_result_scripts_run_on_redis7(settings):
    """The task's two scripts on the machine's Redis 7.0 (db 15), as the queue's are."""
    import redis as redis_py

    from echomq.contrib import django as emq_django
    from tests.conftest import REDIS7_URL

    client = redis_py.Redis.from_url(REDIS7_URL, socket_connect_timeout=1)
    try:
        client.ping()
    except redis_py.exceptions.ConnectionError:
        pytest.skip(f"no Redis at {REDIS7_URL}")
    client.flushdb()
    emq_django.reset_client(REDIS7_URL)
    try:
        result = jobs.which_attempt.enqueue("r7")
        assert run_pending("default", Runner(backend())) == ["completed"]
        again = backend().get_result(result.id)
        assert (again.status, again.return_value) == ("SUCCESSFUL", {"label": "r7", "attempt": 1})
    finally:
        client.flushdb()
        client.close()


def test_a_job_the_reaper_dead_letters_reads_failed():
    """Its worker died every time, so nobody wrote the result: get_result
    reads the job's dead state and says FAILED, with the reaper's reason."""
    from echomq.contrib.django.tasks import WorkerLost

    result = jobs.add.enqueue(1, 1)
    q = get_queue("default")
    job = q.claim(lease_ms=1)  # claimed by a worker that dies at once
    from tests.games.procs import wait_for

    wait_for(lambda: q.reap(max_stalls=0) == 1, timeout=10, what="the lease to expire")
    result.refresh()
    assert job.id == result.id and result.status == "FAILED"
    assert result.errors[-1].exception_class is WorkerLost and "stalled" in result.errors[-1].traceback


def test_a_foreign_job_on_a_task_queue_is_dead_lettered_not_dropped():
    q = get_queue("default")
    job_id, _ = q.enqueue(b'{"guess": "GES0000000000"}')  # someone else's payload
    assert run_pending("default", Runner(backend())) == ["dead"]
    [dead] = q.dead_jobs()
    assert dead["id"] == job_id and "not a task payload" in dead["last_error"]


@pytest.mark.parametrize("argv, words", [
    (["--queue", "nope"], "not in TASKS['default']['QUEUES']: nope"),
    (["--concurrency", "0"], "--concurrency must be at least 1"),
    (["--lease-ms", "50"], "--lease-ms must be at least 100"),
    (["--backend", "missing"], "missing"),
])
def test_run_tasks_refuses_bad_options_before_starting(argv, words):
    from django.core.management import call_command
    from django.core.management.base import CommandError
    from django.tasks.exceptions import InvalidTaskBackend

    with pytest.raises((CommandError, InvalidTaskBackend), match=re.escape(words)):
        call_command("run_tasks", *argv)


# --- issue 22: SystemExit / KeyboardInterrupt, waiting for a result -------------
@pytest.mark.parametrize("fn, cls", [(jobs.exits, SystemExit), (jobs.interrupted, KeyboardInterrupt)])
def test_system_exit_and_keyboard_interrupt_fail_the_task_once(valkey, fn, cls):
    """As Django's own backends record it: FAILED, the class, its traceback
    and finished_at; not run again (the job is dead-lettered with the error)."""
    result = fn.enqueue("once")
    assert run_pending("default", Runner(backend())) == ["dead"]
    result.refresh()
    assert (result.status, result.attempts) == (TaskResultStatus.FAILED, 1)
    assert result.finished_at is not None and result.finished_at >= result.started_at
    assert [e.exception_class for e in result.errors] == [cls]
    assert result.errors[0].traceback.startswith("Traceback") and cls.__name__ in result.errors[0].traceback
    assert int(valkey.get("test:runs:once")) == 1 and run_pending("default", Runner(backend())) == []
    assert [d["id"] for d in get_queue("default").dead_jobs()] == [result.id]


def test_wait_result_is_told_when_the_task_finishes(valkey):
    import threading

    result = jobs.add.enqueue(20, 22)
    out = []
    waiter = threading.Thread(target=lambda: out.append(backend().wait_result(result, timeout=30)))
    waiter.start()
    while waiter.is_alive() and not valkey.hget(f"emq:{{default}}:job:{result.id}", "wait"):
        waiter.join(0.005)  # until it is registered
    assert waiter.is_alive()
    assert run_pending("default", Runner(backend())) == ["completed"]
    waiter.join(30)
    assert (out[0].status, out[0].return_value) == (TaskResultStatus.SUCCESSFUL, 42)
    again = backend().wait_result(result.id, timeout=1)  # finished already: at once
    assert again.status == TaskResultStatus.SUCCESSFUL


def test_wait_result_times_out_and_refuses_bad_input(valkey):
    result = jobs.add.enqueue(1, 1)
    with pytest.raises(TimeoutError):
        backend().wait_result(result, timeout=0.05)
    with pytest.raises(TaskResultDoesNotExist):
        backend().wait_result(ids.mint("JOB"), timeout=1)
    from echomq import ArgumentError

    for bad in (0, -1, float("nan"), "5"):
        with pytest.raises(ArgumentError):
            backend().wait_result(result, timeout=bad)


def test_await_result_in_async_code(valkey):
    import asyncio

    result = jobs.always_fails.enqueue("awaited")

    async def go():
        waiting = asyncio.create_task(backend().await_result(result, timeout=30))
        while not valkey.hget(f"emq:{{default}}:job:{result.id}", "wait"):
            await asyncio.sleep(0.005)
        await asyncio.to_thread(run_pending, "default", Runner(backend()))
        q = get_queue("default")
        valkey.zadd(q.k_schedule, {result.id: 0})  # its retry is due now
        q.promote()
        await asyncio.to_thread(run_pending, "default", Runner(backend()))
        return await waiting

    done = asyncio.run(go())
    assert done.status == TaskResultStatus.FAILED and len(done.errors) == 2


# --- an empty QUEUES: Django reads it as "any queue", but no worker would serve one --
def test_an_empty_queues_is_refused_everywhere_and_nothing_is_written(settings, valkey):
    from django.core.management import call_command
    from django.core.management.base import CommandError

    settings.TASKS = {"default": {**settings.TASKS["default"], "QUEUES": []}}
    b = task_backends["default"]
    assert b.queues == set()
    assert [e.id for e in b.check()] == ["echomq.E003"]
    with pytest.raises(InvalidTask, match="QUEUES is empty"):
        jobs.add.enqueue(1, 2)
    assert valkey.dbsize() == 0
    with pytest.raises(CommandError, match=re.escape("TASKS['default']['QUEUES'] is empty")):
        call_command("run_tasks", "--burst")
    with pytest.raises(CommandError, match="is empty"):
        call_command("run_tasks", "--queue", "default", "--burst")


def test_queues_left_unset_means_the_default_queue(settings):
    settings.TASKS = {"default": {k: v for k, v in settings.TASKS["default"].items() if k != "QUEUES"}}
    b = task_backends["default"]
    assert b.queues == {"default"} and b.check() == []
    assert b.get_result(jobs.add.enqueue(1, 2).id).status == "READY"
