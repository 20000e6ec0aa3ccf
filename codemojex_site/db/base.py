"""Django's PostgreSQL backend, with a health check that costs no round trip
(and no pattern indexes on ids: see ``schema``).

With ``CONN_HEALTH_CHECKS`` Django sends ``SELECT 1`` the first time each
request uses its persistent connection: a round trip and a statement on
every request, which on the guess POST was one statement in five. A
connection the server has ended (a restart, ``idle_session_timeout``,
``pg_terminate_backend``) has something to read on its socket -- the
server's last message, or the end of the stream -- while a healthy idle
connection has nothing. So look at the socket first (a zero-timeout poll,
no round trip) and ask ``SELECT 1`` only when something is there.

A peer that vanished without closing (a host powered off) leaves nothing to
read; ``SELECT 1`` could not tell that sooner either, it would wait out the
same TCP timeout.
"""
from __future__ import annotations

import select

from django.db.backends.postgresql import base

from .schema import DatabaseSchemaEditor


class DatabaseWrapper(base.DatabaseWrapper):
    SchemaEditorClass = DatabaseSchemaEditor

    def is_usable(self):
        conn = self.connection
        if conn is None or conn.closed or conn.broken:
            return False
        try:
            readable, _, _ = select.select([conn.fileno()], [], [], 0)
        except (OSError, ValueError):
            return False
        return super().is_usable() if readable else True
