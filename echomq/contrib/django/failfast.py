"""Connections that stop waiting on a Valkey that stopped answering.

A server that is down refuses connections at once, and everything here
treats that as "unavailable" (a cache miss, a skipped live panel, a guess
left for the relay). A server that *hangs* (a stopped process, a host that
lost its network) is worse: every call waits out the socket timeout, and a
page makes half a dozen calls. So when a call to a server times out, this
process stops sending to that server for ``HUNG_FOR_S`` seconds: calls fail
at once with a ``ConnectionError`` (which the callers already treat as
unavailable), and the first call after the pause tries again.

Every client the project makes uses these connection classes
(``make_client``, and the cache through its ``OPTIONS``).
"""
from __future__ import annotations

import threading
import time

import redis
from redis.connection import SSLConnection, UnixDomainSocketConnection

HUNG_FOR_S = 5.0

_hung_until: dict[tuple, float] = {}
_lock = threading.Lock()


def _where(conn) -> tuple:
    return (getattr(conn, "host", None), getattr(conn, "port", None), getattr(conn, "path", None))


def forget() -> None:
    """Trust every server again (tests)."""
    with _lock:
        _hung_until.clear()


class _FailFast:
    def send_packed_command(self, command, check_health=True):
        until = _hung_until.get(_where(self))
        if until is not None:
            if time.monotonic() < until:
                raise redis.exceptions.ConnectionError(
                    f"Valkey at {self._fail_fast_name()} did not answer within its timeout lately; "
                    f"not waiting on it again for up to {HUNG_FOR_S:g}s")
            with _lock:
                _hung_until.pop(_where(self), None)
        return super().send_packed_command(command, check_health)

    def read_response(self, *args, **kwargs):
        try:
            return super().read_response(*args, **kwargs)
        except redis.exceptions.TimeoutError:
            with _lock:
                _hung_until[_where(self)] = time.monotonic() + HUNG_FOR_S
            raise

    def _fail_fast_name(self) -> str:
        host, port, path = _where(self)
        return path or f"{host}:{port}"


class FailFastConnection(_FailFast, redis.Connection):
    pass


class FailFastSSLConnection(_FailFast, SSLConnection):
    pass


class FailFastUnixConnection(_FailFast, UnixDomainSocketConnection):
    pass


def connection_class(url: str):
    """The fail-fast class for a ``redis://``, ``rediss://`` or ``unix://`` URL."""
    scheme = url.split("://", 1)[0].lower()
    return {"rediss": FailFastSSLConnection, "unix": FailFastUnixConnection}.get(scheme, FailFastConnection)
