"""``Client``: redis-py's ``Redis`` with a short road for single commands.

A command sent through ``redis.Redis`` (redis-py 8) borrows a connection
from the pool (a lock, a check of the process id, a poll of the socket for
stray replies), runs inside the retry loop, dispatches events and feeds
the observability recorders, then gives the connection back (the same
again). On a small request that machinery costs about as much CPU as the
round trip itself -- measured on this project's machine, an MGET through
``redis.Redis`` took about twice the CPU of the same MGET written to a
redis-py connection and read back.

So :class:`Client` sends each single command (and each batch of
:meth:`Client.execute_many`) over a connection that its thread keeps for itself: made by the client's own pool (the same connection
class, timeouts, credentials and fail-fast checks, see
``echomq.contrib.django.failfast``), written and read with redis-py's own
connection methods, its reply parsed by the client's response callbacks,
and retried by the client's own ``Retry`` on a lost connection. Pipelines,
pub/sub, transactions and the cluster client are unchanged: they still use
the pool. A process that forks gets fresh connections in the child.

The cost is one connection per thread that sends commands (the pool also
keeps the ones pipelines borrow), like the database connections a
threaded worker already holds.
"""
from __future__ import annotations

import os
import threading

import redis
from redis.exceptions import ResponseError

_generation = 0  # bumped in a forked child, so a connection of the parent is never shared


def _forked() -> None:
    global _generation
    _generation += 1


os.register_at_fork(after_in_child=_forked)


class Client(redis.Redis):
    """``redis.Redis`` whose single commands go over this thread's own connection."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._own = threading.local()

    def _own_connection(self):
        own = self._own
        conn = getattr(own, "conn", None)
        if conn is None or own.generation != _generation:
            conn = own.conn = _new_connection(self.connection_pool)
            own.generation = _generation
        return conn

    def execute_command(self, *args, **options):
        if self.connection is not None:  # a single-connection client keeps redis-py's own road
            return super().execute_command(*args, **options)
        conn = self._own_connection()
        return conn.retry.call_with_retry(lambda: self._send(conn, args, options), _disconnect(conn))

    def _send(self, conn, args, options):
        try:
            conn.send_command(*args)
            return self.parse_response(conn, args[0], **options)
        except ResponseError:  # a whole reply was read: the connection is fine
            raise
        except BaseException:  # anything else may leave a reply unread: start over on a new socket
            conn.disconnect()
            raise

    def execute_many(self, commands) -> list:
        """Several commands in one round trip on this thread's connection (a
        pipeline without MULTI, and without the pipeline object's own
        machinery): their replies in order, a command's reply error in its
        place as the exception. Retried whole on a lost connection, as a
        redis-py pipeline is: a command that is not idempotent (a rate
        limit's hit) may then count twice, never not at all."""
        conn = self._own_connection()
        return conn.retry.call_with_retry(lambda: self._send_many(conn, commands), _disconnect(conn))

    def _send_many(self, conn, commands):
        try:
            conn.send_packed_command(conn.pack_commands(commands))
            replies = []
            for args in commands:
                try:
                    replies.append(self.parse_response(conn, args[0]))
                except ResponseError as exc:  # read whole: the next reply follows
                    replies.append(exc)
            return replies
        except BaseException:
            conn.disconnect()
            raise

    def close(self) -> None:
        conn = getattr(self._own, "conn", None)
        if conn is not None:
            conn.disconnect()
            self._own.conn = None
        super().close()


def _new_connection(pool):
    """A connection of the pool's class and settings that the pool does not
    count: a thread keeps it for good, so counted it would use up a pool's
    ``max_connections`` as threads come and go (and show in the pool's
    connection metrics as idle for ever). With client-side caching the
    pool wraps its connections, so it makes this one too."""
    if getattr(pool, "cache", None) is not None:
        return pool.make_connection()
    return pool.connection_class(**pool.connection_kwargs)


def _disconnect(conn):
    return lambda error: conn.disconnect()
