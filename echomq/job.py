"""The job a consumer holds."""
from __future__ import annotations

import threading
from dataclasses import dataclass, field

from .errors import Cancelled, EchoMQError


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
    _cancel: threading.Event = field(default_factory=threading.Event, compare=False, repr=False)
    _queue: object = field(default=None, compare=False, repr=False)  # the Queue that claimed it

    @property
    def token(self) -> int:
        return self.attempts

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def check(self) -> None:
        """Raise ``Cancelled`` if the job was cancelled (a handler's check point)."""
        if self._cancel.is_set():
            raise Cancelled(f"job {self.id} was cancelled")

    def wait_cancelled(self, timeout: float | None = None) -> bool:
        """Block up to ``timeout`` s; True as soon as the job is cancelled (a
        sleeping handler's interruptible sleep)."""
        return self._cancel.wait(timeout)

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
