"""The job a consumer holds."""
from __future__ import annotations

import threading
from dataclasses import dataclass, field

from .checks import MAX_MS
from .errors import ArgumentError, Cancelled, EchoMQError


@dataclass(frozen=True, slots=True)
class Job:
    """A claimed job. ``attempts`` is the fencing token: pass it back to
    complete, retry, extend or release; it holds only while this claim does.

    ``cancelled`` turns true when the consumer's heartbeat learns that an
    operator cancelled the job (``Queue.cancel``); a long handler calls
    ``job.check()`` between steps, which raises ``Cancelled`` then, so it
    stops before committing an effect the queue has already dropped."""

    id: str
    payload: bytes
    attempts: int
    lane: str | None = None
    queue: str = ""
    # The cancel flag's Event, made on first use (_cancel_event): most jobs
    # are never cancelled nor waited on, and a consumer builds thousands a second.
    _cancel: threading.Event | None = field(default=None, compare=False, repr=False)
    _queue: object = field(default=None, compare=False, repr=False)  # the Queue that claimed it

    @property
    def token(self) -> int:
        return self.attempts

    @property
    def cancelled(self) -> bool:
        event = self._cancel
        return event is not None and event.is_set()

    def check(self) -> None:
        """Raise ``Cancelled`` if the job was cancelled (a handler's check point)."""
        if self.cancelled:
            raise Cancelled(f"job {self.id} was cancelled")

    def wait_cancelled(self, timeout: float | None = None) -> bool:
        """Block up to ``timeout`` s; True as soon as the job is cancelled (a
        sleeping handler's interruptible sleep). ``None`` waits for as long
        as it takes; otherwise a number of seconds from 0 (just look) to
        MAX_MS / 1000, else ``ArgumentError``."""
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                    or not 0 <= timeout <= MAX_MS / 1000):
            raise ArgumentError(f"timeout must be None or a number of seconds in [0, {MAX_MS // 1000}], "
                                f"got {timeout!r}")
        return self._cancel_event().wait(timeout)

    def _cancel_event(self) -> threading.Event:
        """The cancel flag's Event: made once, under a lock, so the handler
        waiting on it and the heartbeat setting it share the same one."""
        event = self._cancel
        if event is None:
            with _MAKING:
                event = self._cancel
                if event is None:
                    event = threading.Event()
                    object.__setattr__(self, "_cancel", event)  # frozen: a private cache, set once
        return event

    def _mark_cancelled(self) -> None:
        """(the consumer's heartbeat) The job was cancelled or its lease lost."""
        self._cancel_event().set()

    @classmethod
    def _claimed(cls, id: str, payload: bytes, attempts: int, lane: str | None, queue: str, claimed_by) -> "Job":
        """A job as a claim reply gives it (Queue.parse_claim): the fields set
        straight into its slots, without the dataclass's checked ``__init__``
        -- a consumer builds one per job it claims."""
        job = _new(cls)
        _set_id(job, id)
        _set_payload(job, payload)
        _set_attempts(job, attempts)
        _set_lane(job, lane)
        _set_queue(job, queue)
        _set_cancel(job, None)
        _set_claimed_by(job, claimed_by)
        return job

    # --- issue 22: progress and flows -------------------------------------------
    def _claimed_by(self):
        if self._queue is None:
            raise EchoMQError(f"job {self.id} was not claimed through a queue: it has no lease to report on")
        return self._queue

    def progress(self, value) -> bool:
        """Record how far the job has got (JSON, at most 1 KB): on its row and
        as a ``progress`` event. Fenced by this claim's token (StaleToken once
        the lease is lost)."""
        return self._claimed_by().progress(self.id, self.attempts, value)

    def set_result(self, value) -> bool:
        """Leave this job's result for its flow's parent (JSON, at most 64 KB);
        call it before the handler returns. Fenced as :meth:`progress`."""
        return self._claimed_by().set_result(self.id, self.attempts, value)

    def children_results(self) -> dict:
        """For a flow's parent: how each child ended, with its result or error
        (``Queue.children_results``)."""
        return self._claimed_by().children_results(self.id)


_MAKING = threading.Lock()  # Job._cancel_event: one Event per job, however many threads ask at once
_new = object.__new__
(_set_id, _set_payload, _set_attempts, _set_lane, _set_queue, _set_cancel, _set_claimed_by) = (
    Job.__dict__[name].__set__ for name in ("id", "payload", "attempts", "lane", "queue", "_cancel", "_queue"))
