"""Typed errors. Scripts answer ``EMQ<CODE> message`` error replies; the queue
maps each code to one of these classes so callers can catch what they mean."""
from __future__ import annotations


class EchoMQError(Exception):
    """Base class of every EchoMQ error."""


class InvalidName(EchoMQError, ValueError):
    """A queue name, job id or lane name is ill-formed; nothing was sent."""


class KindError(InvalidName):
    """A job id whose brand is not ``JOB`` (script reply ``EMQKIND``)."""


class StaleToken(EchoMQError):
    """The fencing token no longer holds the job's lease (``EMQSTALE``).

    The job was reaped and possibly re-claimed by another worker; nothing was
    changed."""


class JobNotFound(EchoMQError, LookupError):
    """No row for that job id (``EMQNOJOB``)."""


class WrongState(EchoMQError):
    """The job is not in the state the operation needs (``EMQSTATE``)."""


class Retry(Exception):
    """Raised by a handler to ask for a retry, optionally after ``delay_ms``;
    ``max_attempts`` overrides the consumer's for this job (a task's own)."""

    def __init__(self, reason: str = "retry requested", delay_ms: int | None = None, *,
                 max_attempts: int | None = None):
        super().__init__(reason)
        self.delay_ms = delay_ms
        self.max_attempts = max_attempts


class Drop(Exception):
    """Raised by a handler: acknowledge the job without running it again."""

    def __init__(self, reason: str = "dropped"):
        super().__init__(reason)


_BY_CODE = {
    "EMQKIND": KindError,
    "EMQSTALE": StaleToken,
    "EMQNOJOB": JobNotFound,
    "EMQSTATE": WrongState,
    "EMQARG": InvalidName,
}


def from_reply(message: str) -> Exception | None:
    """Map a script error reply to its typed error, or None if it is not ours."""
    code = message.split(" ", 1)[0]
    cls = _BY_CODE.get(code)
    return cls(message) if cls else None
