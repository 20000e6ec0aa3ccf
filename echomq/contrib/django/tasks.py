"""EchoMQ as the engine of Django's Tasks framework (``django.tasks``).

    TASKS = {"default": {
        "BACKEND": "echomq.contrib.django.tasks.EchoMQBackend",
        "QUEUES": ["default"],            # each one is an EchoMQ queue of that name
        "OPTIONS": {"RESULT_TTL": 86400, "MAX_ATTEMPTS": 3, "BACKOFF_MS": 1000, "LEASE_MS": 30000},
    }}

    @task(lane="player_id", max_attempts=5)
    def send_welcome(player_id): ...

    send_welcome.enqueue("PLR...")        # then: manage.py run_tasks

A task is a JOB on the EchoMQ queue named by its ``queue_name``; ``run_after``
makes it a delayed job; ``lane`` names the argument whose value is the job's
fairness lane. Its result is a hash beside the job, ``emq:{queue}:task:<JOB
id>`` (the queue's hash slot), kept ``RESULT_TTL`` seconds after the task
finishes, so ``get_result(id)`` works from any process with the same TASKS.

The worker (``run_tasks``) runs one ``echomq.Consumer`` per queue with a
:class:`Runner` as handler: it marks the result RUNNING, calls the task and
records SUCCESSFUL or the error. A failure is retried after the task's backoff
until ``max_attempts``, then the result is FAILED and the job dead-lettered
with the same error (visible on the queue pages). Writes to the result are
fenced by the job's token, so a worker that lost its lease records nothing,
and a job whose result is already SUCCESSFUL (its worker died before the ack)
is acknowledged without running again.

A task's ``priority`` (``task.using(priority=...)``, -100..100) is its job's:
higher runs first within its lane (or among the lane-less tasks of its
queue), equal ones in admission order, and lanes stay fair whatever their
jobs' priorities. There is no lease per task: the consumer heart-beats every
job it holds, so a long task never needs a longer lease; the lease is the
worker's (``LEASE_MS`` / ``--lease-ms``).

A task can also run on a schedule: ``ECHOMQ["SCHEDULES"]`` (see
:mod:`.schedules`) names it, and ``run_tasks`` / ``run_reaper`` create the
schedule at startup; each tick is a job carrying :func:`task_payload`.

``backend.wait_result(result, timeout)`` (``await backend.await_result(...)``
in async code) answers the finished result as soon as the task's job ends,
told by the queue rather than by polling; ``TimeoutError`` at the deadline.
A task that raises ``SystemExit`` or ``KeyboardInterrupt`` runs once and is
FAILED with that exception, its traceback and ``finished_at``.
"""
from __future__ import annotations

import json
import logging
import math
import os
import re
import socket
import traceback
from dataclasses import dataclass
from datetime import datetime
from inspect import signature

from asgiref.sync import sync_to_async
from django.core import checks
from django.db import close_old_connections, connections
from django.tasks import TaskContext, TaskResult, TaskResultStatus
from django.tasks.backends.base import BaseTaskBackend
from django.tasks.base import Task, TaskError
from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist
from django.tasks.signals import task_enqueued, task_finished, task_started
from django.utils import timezone
from django.utils.json import normalize_json
from django.utils.module_loading import import_string

from echomq import JobNotFound, Queue, Retry, StaleToken, ids, keyspace, scripts
from echomq.checks import MAX_COUNT, MAX_MS, check_int, check_seconds, check_token
from echomq.errors import ArgumentError, InvalidName

from . import get_client

log = logging.getLogger("echomq.tasks")

DEFAULTS = {"RESULT_TTL": 86_400, "MAX_ATTEMPTS": 3, "BACKOFF_MS": 1_000, "LEASE_MS": 30_000}
FINISHED = (TaskResultStatus.SUCCESSFUL, TaskResultStatus.FAILED)


class WorkerLost(Exception):
    """The reaper dead-lettered the task's job: its workers kept dying mid-task."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EchoMQTask(Task):
    """A Task with EchoMQ's options (``@task(lane=..., max_attempts=..., backoff_ms=...)``).

    ``lane``: the name of an argument whose value (a branded id such as a
    player id) is the job's fairness lane. ``max_attempts`` and
    ``backoff_ms`` (base of the doubling, jittered, 60 s-capped delay between
    attempts) default to the backend's OPTIONS."""

    lane: str | None = None
    max_attempts: int | None = None
    backoff_ms: int | None = None


def task_payload(backend, task, args_json: str, kwargs_json: str, queue_name: str) -> dict:
    """The record a task's job carries (and its result starts from): for an
    enqueue, and for each tick of a task's schedule."""
    return {"task": task.module_path, "backend": backend.alias, "queue": queue_name, "args": args_json,
            "kwargs": kwargs_json, "status": TaskResultStatus.READY.value, "enqueued_at": "",
            "run_after": "", "errors": "[]", "priority": str(int(task.priority))}


def result_key(queue_name: str, result_id: str) -> str:
    keyspace.check_job_id(result_id)
    return keyspace.queue_key(queue_name, f"task:{result_id}")


def _iso(dt: datetime | None) -> str:
    return dt.isoformat() if dt else ""


def _when(text) -> datetime | None:
    return datetime.fromisoformat(text) if text else None


def json_exact(value, what: str) -> str:
    """``value`` as JSON, or InvalidTask when it would not come back equal."""
    try:
        text = json.dumps(value, allow_nan=False, separators=(",", ":"))
        same = json.loads(text) == normalize_json(value)
    except (TypeError, ValueError) as exc:
        raise InvalidTask(f"{what} must be JSON-serialisable: {exc}") from None
    if not same:
        raise InvalidTask(f"{what} do not survive a JSON round trip (dict keys must be strings)")
    return text


# The result record's transitions, each one script call in the queue's slot
# (lua/task_start.lua, lua/task_finish.lua), its arguments checked here first
# with the scripts' own bounds (lua/include/task.lua), so a bad one raises
# ArgumentError and nothing is sent.
_START = scripts.load("task_start")
_FINISH = scripts.load("task_finish")
MAX_WORKER, MAX_TIME = scripts.LIMITS["MAX_WORKER"], scripts.LIMITS["MAX_TIME"]
# The payload's fields a start fills back into a record that expired (TASK_FILL in task.lua).
RECORD_FILL = ("task", "backend", "queue", "args", "kwargs", "status", "enqueued_at", "run_after", "errors",
               "priority")
_TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}[0-9.:+Z-]*\Z")
_STATUSES = ("READY", "FAILED", "SUCCESSFUL")


def check_worker(worker) -> str:
    """A worker id as the record keeps it: 1 to MAX_WORKER bytes, no ','."""
    if not isinstance(worker, str) or not worker or len(worker.encode()) > MAX_WORKER or "," in worker:
        raise ArgumentError(f"worker must be 1 to {MAX_WORKER} bytes without ',', got {worker!r}")
    return worker


def check_time(text, what: str) -> str:
    """An ISO 8601 time as ``datetime.isoformat()`` writes it."""
    if not isinstance(text, str) or len(text.encode()) > MAX_TIME or not _TIME.match(text):
        raise ArgumentError(f"{what} must be an ISO 8601 time (datetime.isoformat()), got {text!r}")
    return text


def _check_json(text, what: str, opening: str = "") -> str:
    """JSON text; ``opening`` its first character ('[' an array, '{' an object)."""
    try:
        if not isinstance(text, str) or not text.startswith(opening):
            raise ValueError
        json.loads(text)
    except ValueError:
        raise ArgumentError(f"{what} must be JSON text{f' opening with {opening}' if opening else ''}, "
                            f"got {text!r:.80}") from None
    return text


def record_fill(record) -> str:
    """What a start may fill back in from a task's payload (a mapping): its
    RECORD_FILL fields as a JSON object; ArgumentError unless each is text."""
    fill = {k: record[k] for k in RECORD_FILL if k in record}
    for k, v in fill.items():
        if not isinstance(v, str):
            raise ArgumentError(f"a task record's {k} must be a string, got {type(v).__name__}")
    return json.dumps(fill, separators=(",", ":"))


def start_call(queue_name: str, job_id: str, token: int, worker: str, now: str, ttl_ms: int,
               fill: str) -> tuple[tuple, tuple]:
    """task_start's KEYS and ARGV (see lua/task_start.lua), each checked."""
    keyspace.check_job_id(job_id)
    _check_json(fill, "record", "{")
    return ((result_key(queue_name, job_id), keyspace.job_key(queue_name, job_id)),
            (keyspace.prefix(queue_name), job_id, check_token(token), check_worker(worker), check_time(now, "now"),
             check_int(ttl_ms, "ttl_ms", 1, MAX_MS), fill))


def finish_call(queue_name: str, job_id: str, token: int, ttl_ms: int, status: str, *, errors: str = "",
                finished_at: str = "", return_value: str = "") -> tuple[tuple, tuple]:
    """task_finish's KEYS and ARGV (see lua/task_finish.lua), each checked:
    READY carries errors; FAILED errors and finished_at; SUCCESSFUL
    finished_at and return_value."""
    keyspace.check_job_id(job_id)
    if status not in _STATUSES:
        raise ArgumentError(f"status must be one of {', '.join(_STATUSES)}, got {status!r}")
    given = {"errors": errors, "finished_at": finished_at, "return_value": return_value}
    wanted = {"READY": ("errors",), "FAILED": ("errors", "finished_at"),
              "SUCCESSFUL": ("finished_at", "return_value")}[status]
    for name, value in given.items():
        if (name in wanted) != (value != ""):
            raise ArgumentError(f"a {status} finish {'needs' if name in wanted else 'takes no'} {name}")
    if errors:
        _check_json(errors, "errors", "[")
    if finished_at:
        check_time(finished_at, "finished_at")
    if return_value:
        _check_json(return_value, "return_value")
    return ((result_key(queue_name, job_id),),
            (keyspace.prefix(queue_name), job_id, check_token(token), check_int(ttl_ms, "ttl_ms", 1, MAX_MS),
             status, errors, finished_at, return_value))


class EchoMQBackend(BaseTaskBackend):
    task_class = EchoMQTask
    supports_defer = True         # run_after -> a delayed job
    supports_async_task = True    # the worker runs coroutines (Task.call)
    supports_get_result = True    # results live in Valkey, readable anywhere
    supports_priority = True      # the job's priority within its lane (-100..100)

    def __init__(self, alias, params):
        super().__init__(alias, params)
        opts = {**DEFAULTS, **self.options}
        self.result_ttl_ms = int(opts["RESULT_TTL"]) * 1000
        self.max_attempts = int(opts["MAX_ATTEMPTS"])
        self.backoff_ms = int(opts["BACKOFF_MS"])
        self.lease_ms = int(opts["LEASE_MS"])

    def check(self, **kwargs):
        errors = []
        if not self.queues:
            errors.append(checks.Error(f"TASKS[{self.alias!r}] QUEUES is empty: name the queues its workers "
                                       "serve (run_tasks serves exactly those)", id="echomq.E003"))
        for name in sorted(self.queues):
            try:
                keyspace.check_queue(name)
            except InvalidName as exc:
                errors.append(checks.Error(f"TASKS[{self.alias!r}] queue: {exc}", id="echomq.E001"))
        if (not 0 < self.result_ttl_ms <= MAX_MS or not 1 <= self.max_attempts <= MAX_COUNT
                or not 0 <= self.backoff_ms <= MAX_MS or not 100 <= self.lease_ms <= MAX_MS):
            errors.append(checks.Error(f"TASKS[{self.alias!r}] OPTIONS: need 0 < RESULT_TTL <= {MAX_MS // 1000} "
                                       f"(a year), 1 <= MAX_ATTEMPTS <= {MAX_COUNT}, 0 <= BACKOFF_MS <= {MAX_MS}, "
                                       f"100 <= LEASE_MS <= {MAX_MS}",
                                       id="echomq.E002"))
        return errors

    # -- the task's options --------------------------------------------------
    def validate_task(self, task):
        super().validate_task(task)
        try:
            keyspace.check_queue(task.queue_name)
        except InvalidName as exc:
            raise InvalidTask(str(exc)) from None
        lane = getattr(task, "lane", None)
        if lane is not None and lane not in signature(task.func).parameters:
            raise InvalidTask(f"lane {lane!r} is not an argument of {task.module_path}")
        for name, minimum, most in (("max_attempts", 1, MAX_COUNT), ("backoff_ms", 0, MAX_MS)):
            value = getattr(task, name, None)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool)
                                      or not minimum <= value <= most):
                raise InvalidTask(f"{name} must be an integer in {minimum}..{most}, got {value!r}")

    def options_for(self, task) -> tuple[int, int]:
        """(max_attempts, backoff_ms) of a task, the backend's where unset."""
        backoff = getattr(task, "backoff_ms", None)
        return (getattr(task, "max_attempts", None) or self.max_attempts,
                self.backoff_ms if backoff is None else backoff)

    def _lane(self, task, args, kwargs) -> str | None:
        name = getattr(task, "lane", None)
        if name is None:
            return None
        try:
            value = signature(task.func).bind(*args, **kwargs).arguments.get(name)
        except TypeError as exc:
            raise InvalidTask(f"arguments do not fit {task.module_path}: {exc}") from None
        try:
            return keyspace.check_lane(value) if value is not None else None
        except InvalidName as exc:
            raise InvalidTask(f"lane argument {name!r}: {exc}") from None

    def queue(self, name: str) -> Queue:
        return Queue(name, get_client())

    # -- enqueue ---------------------------------------------------------------
    def enqueue(self, task, args, kwargs):
        """Validate everything, then write the result record and the job."""
        if not self.queues:  # Django reads an empty QUEUES as "any queue": no worker would serve it
            raise InvalidTask(f"TASKS[{self.alias!r}] QUEUES is empty: no worker serves any queue (check E003)")
        self.validate_task(task)
        args_json, kwargs_json = json_exact(list(args), "args"), json_exact(dict(kwargs), "kwargs")
        lane = self._lane(task, args, kwargs)
        queue = self.queue(task.queue_name)
        now = timezone.now()
        delay_ms = 0
        if task.run_after is not None:
            delay_ms = max(0, math.ceil((task.run_after - now).total_seconds() * 1000))
            # Checked before the result record is written (the job's own check comes after it).
            check_int(delay_ms, "run_after (ms from now)", 0, MAX_MS)
        job_id = ids.mint("JOB")
        record = task_payload(self, task, args_json, kwargs_json, queue.name)
        record.update(enqueued_at=_iso(now), run_after=_iso(task.run_after))
        key = result_key(queue.name, job_id)
        pipe = queue.client.pipeline(transaction=True)
        pipe.hset(key, mapping=record)
        pipe.pexpire(key, self.result_ttl_ms + delay_ms)
        pipe.execute()
        try:
            queue.enqueue(json.dumps(record, separators=(",", ":")), job_id=job_id, lane=lane,
                          delay_ms=delay_ms, priority=int(task.priority))
        except BaseException:
            try:
                queue.client.delete(key)  # no job, so no result either
            except Exception:
                log.warning("task %s: enqueue failed and its READY record stays until it expires", job_id)
            raise
        result = self._result(task, job_id, record)
        task_enqueued.send(type(self), task_result=result)
        return result

    # -- results ---------------------------------------------------------------
    def get_result(self, result_id):
        try:
            keyspace.check_job_id(result_id)
        except InvalidName:
            raise TaskResultDoesNotExist(result_id) from None
        client = get_client()
        names = sorted(self.queues)
        pipe = client.pipeline(transaction=False)
        for name in names:
            pipe.hgetall(result_key(name, result_id))
            pipe.hmget(keyspace.job_key(name, result_id), "state", "last_error")
        replies = pipe.execute()
        for i, name in enumerate(names):
            raw, (state, last_error) = replies[2 * i], replies[2 * i + 1]
            if raw:
                record = {k.decode(): v.decode() for k, v in raw.items()}
                if record["status"] not in FINISHED and state == b"dead":
                    record = self._reaped(record, (last_error or b"").decode())
                try:
                    task = import_string(record["task"])
                except ImportError:
                    task = None
                if not isinstance(task, Task):  # no Task, no TaskResult to build
                    raise TaskResultDoesNotExist(f"{result_id}: {record['task']} is no longer a task")
                return self._result(task, result_id, record)
        raise TaskResultDoesNotExist(result_id)

    # --- issue 22: waiting for a result ------------------------------------------
    def wait_result(self, result, timeout: float) -> TaskResult:
        """The result of ``result`` (a TaskResult or its id) once it has
        finished, SUCCESSFUL or FAILED, waiting at most ``timeout`` seconds.
        The queue tells the waiter when the task's job ends (``Queue.wait``):
        nothing polls. TimeoutError at the deadline; TaskResultDoesNotExist
        for an unknown id. A job cancelled or removed before it ran leaves
        its result unfinished: it is answered as it is."""
        result_id = result.id if isinstance(result, TaskResult) else result
        check_seconds(timeout, "timeout")
        current = self.get_result(result_id)
        if current.is_finished:
            return current
        try:
            self.queue(current.task.queue_name).wait(result_id, timeout)
        except JobNotFound:
            pass  # neither row nor record: the result says what is known
        return self.get_result(result_id)

    async def await_result(self, result, timeout: float) -> TaskResult:
        """:meth:`wait_result` for async code (in a thread of its own, so the
        event loop goes on meanwhile)."""
        return await sync_to_async(self.wait_result, thread_sensitive=False)(result, timeout)

    @staticmethod
    def _reaped(record: dict, last_error: str) -> dict:
        """A job dead-lettered by the reaper never had its result written."""
        errors = json.loads(record.get("errors") or "[]") + [
            {"exception_class_path": f"{WorkerLost.__module__}.{WorkerLost.__qualname__}",
             "traceback": last_error or "the job was dead-lettered"}]
        return {**record, "status": TaskResultStatus.FAILED.value, "errors": json.dumps(errors)}

    def _result(self, task, result_id: str, record: dict) -> TaskResult:
        task = task.using(queue_name=record.get("queue") or task.queue_name, priority=int(record.get("priority", 0)),
                          run_after=_when(record.get("run_after")), backend=self.alias)
        result = TaskResult(
            task=task, id=result_id, status=TaskResultStatus(record["status"]),
            enqueued_at=_when(record.get("enqueued_at")), started_at=_when(record.get("started_at")),
            finished_at=_when(record.get("finished_at")), last_attempted_at=_when(record.get("last_attempted_at")),
            args=json.loads(record["args"]), kwargs=json.loads(record["kwargs"]), backend=self.alias,
            errors=[TaskError(**e) for e in json.loads(record.get("errors") or "[]")],
            worker_ids=[w for w in (record.get("workers") or "").split(",") if w])
        if "return" in record and result.status == TaskResultStatus.SUCCESSFUL:
            object.__setattr__(result, "_return_value", json.loads(record["return"]))
        return result


def tidy_connections() -> None:
    """Drop unusable or expired database connections, as Django does around a
    request; not inside an atomic block (a test calling the Runner directly)."""
    if not any(c.in_atomic_block for c in connections.all(initialized_only=True)):
        close_old_connections()


class Runner:
    """The handler ``run_tasks`` gives each queue's Consumer: one job, one task call."""

    def __init__(self, backend: EchoMQBackend, worker_id: str | None = None):
        self.backend = backend
        self.worker_id = check_worker(worker_id or f"{socket.gethostname()}:{os.getpid()}")

    def __call__(self, job) -> None:
        try:
            record = json.loads(job.payload)
            args, kwargs = json.loads(record["args"]), json.loads(record["kwargs"])
            fill = record_fill(record)
        except (ValueError, KeyError, TypeError) as exc:  # ArgumentError is a ValueError
            # Another producer's job on a task queue (a misconfiguration): keep
            # it, dead-lettered and visible, rather than drop someone's work.
            raise Retry(f"not a task payload ({type(exc).__name__}: {exc}); is this queue shared "
                        "with a direct producer?", delay_ms=0, max_attempts=1) from None
        backend, client = self.backend, get_client()
        try:
            started = _START(client, *start_call(job.queue, job.id, job.attempts, self.worker_id,
                                                 _iso(timezone.now()), backend.result_ttl_ms, fill))
        except StaleToken:
            log.warning("task %s: token %d no longer holds its job (the lease was reaped); not running it",
                        job.id, job.attempts)
            return
        if started == 0:
            log.warning("task %s: its job is gone (removed); not running it", job.id)
            return
        status, base, flat = started
        if status == b"SUCCESSFUL":
            log.info("task %s already succeeded; acknowledging the redelivery", job.id)
            return
        current = {flat[i].decode(): flat[i + 1].decode() for i in range(0, len(flat), 2)}
        try:
            task = import_string(record["task"])
            if not isinstance(task, Task):
                raise InvalidTask(f"{record['task']} is not a task")
        except Exception as exc:  # deploy skew or a typo: fails like the task would
            self._failed(job, current, int(base), exc)
        result = backend._result(task, job.id, current)
        task_started.send(type(backend), task_result=result)
        tidy_connections()
        try:
            if task.takes_context:
                value = task.call(TaskContext(task_result=result), *args, **kwargs)
            else:
                value = task.call(*args, **kwargs)
            returned = json_exact(value, "the return value")
        except Exception as exc:  # the task's failure is data: recorded, then retried
            self._failed(job, current, int(base), exc, task, result)
        except (SystemExit, KeyboardInterrupt) as exc:
            # A library's sys.exit() (or an interrupt raised by the task's own
            # code: a real Ctrl-C goes to the worker's signal handler): the
            # task ran once and failed, recorded as Django's backends do, not
            # run again. The worker goes on with its other jobs.
            self._failed(job, current, int(base), exc, task, result, final=True)
        finally:
            tidy_connections()
        finished = timezone.now()
        self._finish(job, "SUCCESSFUL", finished_at=_iso(finished), return_value=returned)
        object.__setattr__(result, "status", TaskResultStatus.SUCCESSFUL)
        object.__setattr__(result, "finished_at", finished)
        object.__setattr__(result, "_return_value", json.loads(returned))
        task_finished.send(type(backend), task_result=result)

    def _finish(self, job, status: str, **values) -> None:
        """Record how this attempt ended (fenced by the record's latest start)."""
        written = _FINISH(get_client(), *finish_call(job.queue, job.id, job.attempts, self.backend.result_ttl_ms,
                                                     status, **values))
        if not written:
            log.warning("task %s: attempt %d's %s was not recorded (another attempt started since, or one "
                        "succeeded already)", job.id, job.attempts, status)

    def _failed(self, job, record, base, exc, task=None, result=None, final=False):
        """Record the error; FAILED on the last attempt (or when ``final``),
        else READY again. Raises Retry (with one attempt left when final, so
        the job is dead-lettered with the error)."""
        max_attempts, backoff_ms = self.backend.options_for(task)
        errors = json.loads(record.get("errors") or "[]")
        final = final or job.attempts - base >= max_attempts
        if final:
            max_attempts = min(max_attempts, max(1, job.attempts - base))
        path = f"{type(exc).__module__}.{type(exc).__qualname__}"
        text = "".join(traceback.format_exception(exc))
        errors.append({"exception_class_path": path, "traceback": text})
        status = TaskResultStatus.FAILED if final else TaskResultStatus.READY
        finished_at = _iso(timezone.now()) if final else ""
        self._finish(job, status.value, errors=json.dumps(errors), finished_at=finished_at)
        if result is not None:
            object.__setattr__(result, "status", status)
            object.__setattr__(result, "errors", [TaskError(**e) for e in errors])
            if final:
                object.__setattr__(result, "finished_at", _when(finished_at))
                task_finished.send(type(self.backend), task_result=result)
        from echomq.consumer import exponential_backoff

        delay = exponential_backoff(base_ms=max(1, backoff_ms))(job.attempts - base) if backoff_ms else 0
        raise Retry(f"{path}: {exc}\n{text}", delay_ms=delay, max_attempts=max_attempts) from None


def serve(backend: EchoMQBackend, queue_names, *, concurrency: int = 1, lease_ms: int | None = None,
          reap_interval_ms: int = 500, observer=None, consumers_out: list | None = None,
          health_port: int | None = None, health_addr: str = "127.0.0.1", burst: bool = False) -> bool:
    """Run one Consumer per queue (and a reaper over them, which also
    promotes delayed jobs and fires schedules) until SIGTERM/SIGINT; False
    if a consumer died. Their liveness is on ``health_port`` and told to
    systemd (``echomq.health``). ``burst``: drain each queue (every task
    ready now, ``Consumer.drain``) and return instead."""
    from echomq import Consumer, Reaper, health
    from echomq.consumer import ConsumerCrashed
    from echomq.supervise import run_together

    runner = Runner(backend)
    queues = [backend.queue(n) for n in queue_names]
    consumers = [Consumer(q, runner, concurrency=concurrency, lease_ms=lease_ms or backend.lease_ms,
                          max_attempts=backend.max_attempts, name=f"tasks/{q.name}", observer=observer)
                 for q in queues]
    for c in consumers:
        getattr(observer, "watch", lambda c: None)(c)  # in-hand gauge reads 0 from the start
    if consumers_out is not None:
        consumers_out.extend(consumers)
    if burst:
        try:
            for c in consumers:
                c.drain()
        except ConsumerCrashed:
            return False
        return True
    reaper = Reaper(queues, interval_ms=reap_interval_ms) if reap_interval_ms > 0 else None
    loops = consumers + ([reaper] if reaper else [])
    health.watch(loops, port=health_port, addr=health_addr)
    return run_together(loops)
