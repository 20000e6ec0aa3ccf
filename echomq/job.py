"""The job a consumer holds."""
from __future__ import annotations

import threading
from dataclasses import dataclass, field

from .errors import Cancelled


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
