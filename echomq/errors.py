"""Typed errors, and the one place redis-py's errors become ours.

Scripts answer ``EMQ<CODE> message`` error replies; redis-py raises its own
classes for a server that cannot be reached. :func:`translate` maps both to
the tree below (one table each), so code above the core catches what it
means (``Unavailable``, ``StaleToken``, ...) and never imports redis-py's
exception classes:

    EchoMQError
    ├── ArgumentError (ValueError)   bad argument: refused, nothing changed
    │   └── InvalidName              ill-formed queue name, job id or lane
    │       └── KindError            a job id whose brand is not JOB
    ├── StaleToken                   the token no longer holds the lease
    ├── Cancelled                    the job was cancelled while leased
    ├── JobNotFound (LookupError)    no row for that id
    ├── WrongState                   the job is not in the state needed
    ├── EventsLost                   a reader's position was trimmed from the event stream
    └── Unavailable (redis ConnectionError)  Valkey cannot be reached
"""
from __future__ import annotations

import contextlib

import redis


class EchoMQError(Exception):
    """Base class of every EchoMQ error."""


class ArgumentError(EchoMQError, ValueError):
    """A bad argument (wrong type, out of range, not finite, ill-formed):
    refused before anything changed, in Python or by the script (``EMQARG``)."""


class InvalidName(ArgumentError):
    """A queue name, job id or lane name is ill-formed; nothing was sent."""


class KindError(InvalidName):
    """A job id whose brand is not ``JOB`` (script reply ``EMQKIND``)."""


class StaleToken(EchoMQError):
    """The fencing token no longer holds the job's lease (``EMQSTALE``).

    The job was reaped and possibly re-claimed by another worker; nothing was
    changed."""


class Cancelled(EchoMQError):
    """The job was cancelled (``EMQCANCELLED``): the queue dropped it, and a
    late complete, retry or extend of it is refused. ``job.check()`` raises it
    in a handler once its worker has heard of the cancel."""


class JobNotFound(EchoMQError, LookupError):
    """No row for that job id (``EMQNOJOB``)."""


class WrongState(EchoMQError):
    """The job is not in the state the operation needs (``EMQSTATE``)."""


class EventsLost(EchoMQError):
    """The position an event reader resumes from is no longer in the stream:
    the entries after it may have been trimmed (the cap, ``Queue.set_events``).
    ``first`` is the oldest id still there; read the state afresh and go on
    from it. (Conservative: raised whenever the position itself is gone.)"""

    def __init__(self, message: str, first: str):
        super().__init__(message)
        self.first = first


class Unavailable(EchoMQError, redis.exceptions.ConnectionError):
    """Valkey could not be reached or did not answer in time.

    Also a ``redis.exceptions.ConnectionError``, so code written against
    redis-py's classes keeps catching it; new code catches this."""


class Retry(Exception):
    """Raised by a handler to ask for a retry, optionally after ``delay_ms``
    (a non-negative integer; anything else falls back to the backoff);
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


# Script error codes -> our classes.
_BY_CODE = {
    "EMQARG": ArgumentError,
    "EMQKIND": KindError,
    "EMQSTALE": StaleToken,
    "EMQCANCELLED": Cancelled,
    "EMQNOJOB": JobNotFound,
    "EMQSTATE": WrongState,
}

# redis-py errors that mean "the server cannot serve us now" -> Unavailable.
# (BusyLoadingError is a ConnectionError; a read-only replica, a cluster that
# is down or moving a slot are ResponseErrors that mean the same.)
_UNAVAILABLE = (
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    redis.exceptions.ReadOnlyError,
    redis.exceptions.ClusterDownError,
    redis.exceptions.TryAgainError,
    redis.exceptions.MasterDownError,
    redis.exceptions.ClusterError,         # a cluster whose topology is moving
    redis.exceptions.SlotNotCoveredError,  # (a failover in progress)
)


# For code above the core that also calls Valkey through a plain client (a
# leaderboard, a dashboard scan): ``except UNAVAILABLE`` catches the core's
# Unavailable and the raw redis-py errors that mean the same, without naming
# redis-py's classes outside this module.
UNAVAILABLE = (Unavailable,) + _UNAVAILABLE


def from_reply(message: str) -> Exception | None:
    """Map a script error reply to its typed error, or None if it is not ours.
    Redis 7.0 appends ``script: <sha>, on @user_script...`` to errors raised
    inside a script; that tail is cut off."""
    code = message.split(" ", 1)[0]
    cls = _BY_CODE.get(code)
    return cls(message.split(" script: ", 1)[0]) if cls else None


def translate(exc: BaseException) -> BaseException:
    """The typed error for a redis-py exception (or ``exc`` itself when it is
    already ours or not a server error we know)."""
    if isinstance(exc, EchoMQError):
        return exc
    if isinstance(exc, _UNAVAILABLE):
        return Unavailable(f"Valkey unavailable: {type(exc).__name__}: {exc}")
    if isinstance(exc, redis.exceptions.ResponseError):
        return from_reply(str(exc)) or exc
    return exc


class translated(contextlib.ContextDecorator):
    """``with translated():`` re-raises redis-py errors as typed ones (the
    original chained as ``__cause__``). Used around every call the core sends;
    ``@translated()`` does the same for a whole method (the queue's views)."""

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        # translate() alone decides (it answers anything it does not map as
        # itself): redis-py's SlotNotCoveredError, which _UNAVAILABLE maps,
        # is a RedisClusterException and not a RedisError.
        typed = exc if exc is None else translate(exc)
        if typed is exc:
            return False
        raise typed from exc
