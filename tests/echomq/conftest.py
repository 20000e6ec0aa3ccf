"""The Redis 7.0 twin of ``any_server`` for the protocol tests, on a database
of its own per pytest process (1..14 by pid) rather than the shared db 15:
the machine's Redis is shared by concurrent test sessions, whose FLUSHDB or
consumers on db 15 would otherwise change keys between a test's snapshots.
A session that sets ECHOMQ_REDIS7_URL uses the database that URL names (it
was given one of its own)."""
from __future__ import annotations

import os

import pytest
import redis

from ..conftest import REDIS7_URL


@pytest.fixture(params=["valkey", "redis7"])
def any_server(request, valkey_server):
    """A flushed client on Valkey, then on Redis 7.0 (skipped with a reason
    when no Redis answers at ECHOMQ_REDIS7_URL)."""
    if request.param == "valkey":
        client = valkey_server.client()
        client.flushall()
    else:
        client = redis.Redis.from_url(REDIS7_URL, socket_connect_timeout=1)
        kw = client.connection_pool.connection_kwargs
        client.close()
        client = redis.Redis(host=kw.get("host", "127.0.0.1"), port=kw.get("port", 6379),
                             password=kw.get("password"), socket_connect_timeout=1,
                             db=kw.get("db", 0) if "ECHOMQ_REDIS7_URL" in os.environ else 1 + os.getpid() % 14)
        try:
            client.ping()
        except redis.exceptions.ConnectionError:
            pytest.skip(f"no Redis at {REDIS7_URL}")
        client.flushdb()
    yield client
    if request.param == "redis7":
        client.flushdb()  # leave the shared server as we found it
    client.close()
