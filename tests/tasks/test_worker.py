"""The Tasks backend with a real ``manage.py run_tasks`` worker process on
real Valkey: success, failure after N attempts, run_after, and a SIGKILLed
worker whose task runs again with its result recorded once."""
from __future__ import annotations

import signal
from datetime import timedelta

import pytest
from django.tasks import TaskResultStatus
from django.utils import timezone

from echomq.contrib.django import get_queue
from tests.games.procs import Proc, wait_for

from . import jobs

pytestmark = pytest.mark.slow


def worker(valkey_server, tmp_path, name="tasks", *extra):
    proc = Proc(["run_tasks", "--queue", "default", "--concurrency", "2", *extra], valkey_server.url, tmp_path, name)
    wait_for(lambda: proc.ready("consumer tasks/default") or proc.popen.poll() is not None, timeout=60,
             what="the worker to start")
    assert proc.popen.poll() is None, proc.output()
    return proc


def finished(result):
    def check():
        result.refresh()
        return result.is_finished
    return check


def test_enqueue_runs_to_successful_with_its_return_value(valkey_server, tmp_path):
    proc = worker(valkey_server, tmp_path)
    try:
        results = [jobs.add.enqueue(i, 10) for i in range(5)] + [jobs.async_double.enqueue(8)]
        for r in results:
            wait_for(finished(r), timeout=30, what=f"task {r.id}")
        assert [r.status for r in results] == [TaskResultStatus.SUCCESSFUL] * 6
        assert [r.return_value for r in results] == [10, 11, 12, 13, 14, 16]
        assert all(r.attempts == 1 and r.worker_ids[0].endswith(f":{proc.popen.pid}") for r in results)
    finally:
        code = proc.terminate()
    assert code == 0 and "run_tasks stopped: completed=6" in proc.output(), proc.output()


def test_a_failing_task_is_failed_after_its_attempts_and_dead(valkey_server, valkey, tmp_path):
    proc = worker(valkey_server, tmp_path)
    try:
        result = jobs.always_fails.enqueue("nope")
        wait_for(finished(result), timeout=30, what="the failing task")
    finally:
        proc.terminate()
    assert result.status == TaskResultStatus.FAILED and result.attempts == 2  # the task's max_attempts
    assert [e.exception_class for e in result.errors] == [ValueError] * 2
    assert "ValueError: nope" in result.errors[-1].traceback
    assert int(valkey.get("test:fails:nope")) == 2
    assert [d["id"] for d in get_queue("default").dead_jobs()] == [result.id]


def test_run_after_is_honoured(valkey_server, tmp_path):
    proc = worker(valkey_server, tmp_path)
    try:
        at = timezone.now() + timedelta(seconds=3)
        later = jobs.add.using(run_after=at).enqueue(1, 2)
        now = jobs.add.enqueue(3, 4)
        wait_for(finished(now), timeout=30, what="the immediate task")
        asked = timezone.now()
        later.refresh()
        if asked < at:  # (on a machine too loaded to get here within 3 s, the last line still checks)
            assert later.status == TaskResultStatus.READY  # the worker is idle, yet it waits
        wait_for(finished(later), timeout=30, what="the deferred task")
    finally:
        proc.terminate()
    assert later.return_value == 3 and later.started_at >= at > now.started_at


def test_a_killed_workers_task_runs_again_and_is_recorded_once(valkey_server, valkey, tmp_path):
    first = worker(valkey_server, tmp_path, "first", "--lease-ms", "1000")
    result = jobs.crash_once.enqueue("k")
    assert valkey.blpop(["test:started:k"], timeout=30), first.output()
    result.refresh()
    assert result.status == TaskResultStatus.RUNNING and result.attempts == 1
    first.kill()  # SIGKILL mid-task: no ack, no result
    second = worker(valkey_server, tmp_path, "second", "--lease-ms", "1000")
    try:
        wait_for(finished(result), timeout=60, what="the task to run again")
    finally:
        assert second.terminate() == 0
    assert (result.status, result.return_value, result.attempts) == (TaskResultStatus.SUCCESSFUL, 2, 2)
    assert result.worker_ids[0] != result.worker_ids[1]
    assert int(valkey.get("test:runs:k")) == 2
    counts = get_queue("default").counts()
    assert (counts["completed"], counts["dead"], counts["active"], counts["pending"]) == (1, 0, 0, 0)


def test_sigterm_lets_the_running_task_finish(valkey_server, valkey, tmp_path):
    proc = worker(valkey_server, tmp_path)
    result = jobs.gated.enqueue("t")
    assert valkey.blpop(["test:started:t"], timeout=30), proc.output()
    proc.popen.send_signal(signal.SIGTERM)  # mid-task: stop claiming, finish what is in hand
    wait_for(lambda: "finishing the jobs in hand" in proc.output(), timeout=30, what="the drain to begin")
    assert proc.popen.poll() is None
    valkey.rpush("test:gate:t", "1")
    assert proc.popen.wait(30) == 0, proc.output()
    result.refresh()
    assert (result.status, result.return_value, result.attempts) == (TaskResultStatus.SUCCESSFUL, "opened", 1)
    assert get_queue("default").counts()["completed"] == 1


def test_a_task_calling_sys_exit_fails_once_and_the_worker_goes_on(valkey_server, valkey, tmp_path):
    """A real run_tasks worker: the task is FAILED with SystemExit after one
    run (not treated as a lost worker and run again), the worker keeps
    serving, and wait_result hears of both without polling."""
    from django.tasks import task_backends

    backend = task_backends["default"]
    proc = worker(valkey_server, tmp_path)
    try:
        exited = backend.wait_result(jobs.exits.enqueue("worker"), timeout=30)
        after = backend.wait_result(jobs.add.enqueue(2, 3), timeout=30)
    finally:
        code = proc.terminate()
    assert exited.status == TaskResultStatus.FAILED and exited.attempts == 1 and exited.finished_at
    assert [e.exception_class for e in exited.errors] == [SystemExit]
    assert int(valkey.get("test:runs:worker")) == 1
    assert (after.status, after.return_value) == (TaskResultStatus.SUCCESSFUL, 5)
    assert code == 0, proc.output()
