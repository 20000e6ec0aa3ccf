"""The result record's two scripts as the Runner drives them
(lua/task_start.lua, lua/task_finish.lua), asserting the record's exact state:
a start needs the job's lease, only the attempt of the latest start writes
its end, a SUCCESSFUL record is final, and bad arguments are refused in
Python before anything is sent. (Each script's own refusals, sent past
these checks: tests/echomq/test_arguments.py; every rule one vector each:
lua/conformance/task_start.json, task_finish.json.)"""
from __future__ import annotations

import json

import pytest
from django.tasks import TaskResultStatus, task_backends
from django.utils import timezone

from echomq import ArgumentError, KindError, Retry, ids
from echomq.contrib.django import get_queue
from echomq.contrib.django.tasks import (_FINISH, _START, MAX_TIME, MAX_WORKER, EchoMQBackend, Runner,
                                          finish_call, record_fill, result_key, start_call)

from . import jobs

NOW = "2026-01-02T03:04:05.678901+00:00"
TTL = 86_400_000


def backend() -> EchoMQBackend:
    return task_backends["default"]


def record(valkey, job_id) -> dict:
    return {k.decode(): v.decode() for k, v in valkey.hgetall(result_key("default", job_id)).items()}


def lose_lease(valkey, job):
    """The job's worker stalls past its lease and the reaper hands the job back."""
    q = get_queue("default")
    valkey.zadd(q.k_active, {job.id: 0})
    assert q.reap(max_stalls=5).returned == 1


def test_a_worker_whose_lease_was_reaped_neither_runs_the_task_nor_touches_its_record(valkey, caplog):
    caplog.set_level("INFO", logger="echomq.tasks")
    result = jobs.fails_then_works.enqueue("lost")
    q = get_queue("default")
    first = q.claim(lease_ms=60_000)
    lose_lease(valkey, first)
    second = q.claim(lease_ms=60_000)
    assert (first.id, first.attempts, second.attempts) == (result.id, 1, 2)
    before = record(valkey, result.id)
    Runner(backend(), worker_id="stalled:1")(first)  # wakes up late: its start is stale
    assert record(valkey, result.id) == before and valkey.get("test:runs:lost") is None
    assert f"task {result.id}: token 1 no longer holds its job" in caplog.text
    with pytest.raises(Retry):  # the holder runs it: the task's own first run, which fails
        Runner(backend(), worker_id="holder:2")(second)
    result.refresh()
    assert (result.status, result.worker_ids, len(result.errors)) == (TaskResultStatus.READY, ["holder:2"], 1)
    assert int(valkey.get("test:runs:lost")) == 1


def test_the_latest_start_wins_a_stalled_attempt_records_nothing(valkey):
    """Attempt 1 started, stalled, lost its lease; attempt 2 started and
    succeeded. Attempt 1's late end (either way) writes nothing."""
    result = jobs.add.enqueue(2, 3)
    q = get_queue("default")
    first = q.claim(lease_ms=60_000)
    fill = record_fill(json.loads(first.payload))
    status, _, _ = _START(valkey, *start_call("default", first.id, 1, "stalled:1", NOW, TTL, fill))
    assert status == b"RUNNING" and record(valkey, result.id)["attempt"] == "1"
    lose_lease(valkey, first)
    second = q.claim(lease_ms=60_000)
    Runner(backend(), worker_id="holder:2")(second)
    q.complete(second.id, second.attempts)
    done = record(valkey, result.id)
    assert (done["status"], done["attempt"], done["workers"], done["return"]) == ("SUCCESSFUL", "2",
                                                                                 "stalled:1,holder:2", "5")
    for late in (finish_call("default", first.id, 1, TTL, "FAILED", errors="[]", finished_at=NOW),
                 finish_call("default", first.id, 1, TTL, "SUCCESSFUL", finished_at=NOW, return_value="9")):
        assert _FINISH(valkey, *late) == 0
    assert record(valkey, result.id) == done


def test_a_redelivered_success_is_acknowledged_without_running_again(valkey, caplog):
    """The worker recorded SUCCESSFUL and died before its ack: the job comes
    back, and its next holder acknowledges it without running the task."""
    caplog.set_level("INFO", logger="echomq.tasks")
    result = jobs.fails_then_works.enqueue("redelivered")
    valkey.set("test:runs:redelivered", 1)  # its next run succeeds
    q = get_queue("default")
    first = q.claim(lease_ms=60_000)
    Runner(backend(), worker_id="died:1")(first)  # no ack: it died
    lose_lease(valkey, first)
    done = record(valkey, result.id)
    assert done["status"] == "SUCCESSFUL"
    second = q.claim(lease_ms=60_000)
    Runner(backend(), worker_id="next:2")(second)
    assert q.complete(second.id, second.attempts)
    assert record(valkey, result.id) == done and int(valkey.get("test:runs:redelivered")) == 2
    assert f"task {result.id} already succeeded" in caplog.text


def test_a_removed_job_is_not_run(valkey, caplog):
    caplog.set_level("INFO", logger="echomq.tasks")
    result = jobs.fails_then_works.enqueue("removed")
    q = get_queue("default")
    job = q.claim(lease_ms=60_000)
    q.remove(job.id)
    before = record(valkey, result.id)
    Runner(backend())(job)
    assert record(valkey, result.id) == before and valkey.get("test:runs:removed") is None
    assert f"task {result.id}: its job is gone" in caplog.text


def test_a_start_refills_a_record_that_expired_while_the_job_waited(valkey):
    result = jobs.add.enqueue(4, 5)
    valkey.delete(result_key("default", result.id))
    job = get_queue("default").claim(lease_ms=60_000)
    Runner(backend(), worker_id="w:1")(job)
    result.refresh()
    assert (result.status, result.args, result.return_value, result.worker_ids) == ("SUCCESSFUL", [4, 5], 9,
                                                                                    ["w:1"])
    assert 86_000 < valkey.ttl(result_key("default", result.id)) <= 86_400


GOOD_START = dict(queue_name="default", job_id="JOB0000000000A", token=1, worker="w:1", now=NOW, ttl_ms=TTL,
                  fill='{"task":"m.t"}')


@pytest.mark.parametrize("name, bad", [
    ("job_id", "nope"), ("job_id", ids.mint("PLR")), ("job_id", None),
    ("token", 0), ("token", "1"), ("token", True), ("token", 10**15), ("token", 1.0),
    ("worker", ""), ("worker", "a,b"), ("worker", "w" * (MAX_WORKER + 1)), ("worker", None),
    ("now", ""), ("now", "2026-01-02"), ("now", "2026-01-02 03:04:05"), ("now", "２０２６-01-02T03:04:05"),
    ("now", "2026-01-02T03:04:05." + "0" * (MAX_TIME - 19)), ("now", timezone.now()),
    ("ttl_ms", 0), ("ttl_ms", 31_536_000_001), ("ttl_ms", 1.5), ("ttl_ms", "1000"),
    ("fill", ""), ("fill", "[]"), ("fill", "{"), ("fill", ' {"a":"b"}'), ("fill", {}),
])
def test_a_bad_start_is_refused_before_sending(name, bad):
    with pytest.raises(ArgumentError) as info:
        start_call(**{**GOOD_START, name: bad})
    assert isinstance(info.value, KindError) == (str(bad).startswith("PLR"))


GOOD_FINISH = dict(queue_name="default", job_id="JOB0000000000A", token=1, ttl_ms=TTL, status="SUCCESSFUL",
                   finished_at=NOW, return_value="5")


@pytest.mark.parametrize("change", [
    {"job_id": "nope"}, {"token": 0}, {"ttl_ms": 0}, {"ttl_ms": 31_536_000_001},
    {"status": "RUNNING"}, {"status": "successful"}, {"status": ""},
    {"errors": "[]"},                       # SUCCESSFUL takes no errors
    {"finished_at": ""}, {"finished_at": "yesterday"},
    {"return_value": ""}, {"return_value": "{"},
    {"status": "READY", "return_value": "", "finished_at": "", "errors": ""},      # READY needs errors
    {"status": "READY", "return_value": "", "errors": "[]"},                       # READY takes no finished_at
    {"status": "READY", "return_value": "", "finished_at": "", "errors": "{}"},    # errors are an array
    {"status": "FAILED", "errors": "[]"},                                          # FAILED takes no return_value
    {"status": "FAILED", "return_value": "", "finished_at": "", "errors": "[]"},   # FAILED needs finished_at
])
def test_a_bad_finish_is_refused_before_sending(change):
    with pytest.raises(ArgumentError):
        finish_call(**{**GOOD_FINISH, **change})


def test_the_good_calls_pass_the_python_checks_unchanged():
    keys, args = start_call(**GOOD_START)
    assert keys == ("emq:{default}:task:JOB0000000000A", "emq:{default}:job:JOB0000000000A")
    assert args == ("emq:{default}:", "JOB0000000000A", 1, "w:1", NOW, TTL, '{"task":"m.t"}')
    for status, values in (("READY", {"errors": "[]"}), ("FAILED", {"errors": "[]", "finished_at": NOW}),
                           ("SUCCESSFUL", {"finished_at": NOW, "return_value": "null"})):
        keys, args = finish_call("default", "JOB0000000000A", 1, TTL, status, **values)
        assert args[4:] == (status, values.get("errors", ""), values.get("finished_at", ""),
                            values.get("return_value", ""))


def test_record_fill_sends_the_payload_fields_only_and_refuses_non_text(valkey):
    result = jobs.add.enqueue(1, 2)
    payload = json.loads(get_queue("default").job(result.id)["payload"])
    assert json.loads(record_fill({**payload, "extra": "from a newer producer"})) == payload
    with pytest.raises(ArgumentError):
        record_fill({**payload, "priority": 0})


def test_a_bad_worker_id_is_refused_when_the_runner_is_made():
    for bad in ("a,b", "w" * (MAX_WORKER + 1)):
        with pytest.raises(ArgumentError):
            Runner(backend(), worker_id=bad)
    assert Runner(backend(), worker_id="w" * MAX_WORKER).worker_id == "w" * MAX_WORKER


def test_a_result_ttl_past_a_year_is_reported_by_the_check(settings):
    settings.TASKS = {"default": {**settings.TASKS["default"], "OPTIONS": {"RESULT_TTL": 31_536_001}}}
    assert [e.id for e in task_backends["default"].check()] == ["echomq.E002"]


def test_the_scripts_refuse_what_python_refuses(valkey):
    """Past the Python checks (another runtime), the scripts answer EMQARG
    and change nothing."""
    result = jobs.add.enqueue(1, 1)
    job = get_queue("default").claim(lease_ms=60_000)
    before = record(valkey, result.id)
    keys, args = start_call("default", job.id, job.attempts, "w:1", NOW, TTL, "{}")
    with pytest.raises(ArgumentError, match="EMQARG worker"):
        _START(valkey, keys, (*args[:3], "a,b", *args[4:]))
    with pytest.raises(ArgumentError, match="EMQARG record"):
        _START(valkey, keys, (*args[:6], '{"return":"1"}'))
    keys, args = finish_call("default", job.id, job.attempts, TTL, "READY", errors="[]")
    with pytest.raises(ArgumentError, match="EMQARG finished_at"):
        _FINISH(valkey, keys, (*args[:6], NOW, ""))
    assert record(valkey, result.id) == before
