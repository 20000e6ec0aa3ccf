"""The canary: every private (or undocumented) name of Django and redis-py
the project leans on, in one list, checked against the installed versions.

Stock seams come first (Django's and redis-py's public APIs); where the
project leaves them for a measured gain it says so here, so an upgrade that
renames or removes one of these fails this test loudly, naming every name
that is gone and who used it -- instead of a fast path quietly taking the
slow road, or breaking at the first request in production. The majors are
pinned in pyproject.toml (Django 6.1.x, redis-py 8.x); when this fails after
raising a pin, fix the users listed before anything else.

Each entry: where the name lives, the name, how it is looked up, and who
uses it. ``class``: an attribute of the class; ``instance``: of an instance
made as the project makes one; ``source``: the library's own code still
sets or reads that name (for attributes that exist only at run time, on a
request or a session).
"""
from __future__ import annotations

import inspect

import pytest


def _redis_cache():
    from django.core.cache.backends.redis import RedisCache

    return RedisCache("redis://127.0.0.1:1/0", {})


def _redis_cache_client():
    from django.core.cache.backends.redis import RedisCacheClient

    return RedisCacheClient(["redis://127.0.0.1:1/0"])


def _cached_db_session():
    from django.contrib.sessions.backends.cached_db import SessionStore

    return SessionStore()


def _a_model():
    from django.contrib.auth.models import Group

    return Group()


def _redis_client():
    import redis

    return redis.Redis(host="127.0.0.1", port=1)


def _pool():
    import redis

    return redis.ConnectionPool(host="127.0.0.1", port=1)


def _connection():
    import redis

    return redis.Connection(host="127.0.0.1", port=1)


def _unix_connection():
    from redis.connection import UnixDomainSocketConnection

    return UnixDomainSocketConnection(path="/nonexistent")


def _cluster_node():
    from redis.cluster import ClusterNode

    return ClusterNode("127.0.0.1", 1)


def _imported(path: str):
    module, _, name = path.rpartition(".")
    return getattr(__import__(module, fromlist=[name]), name)


# (where, name, how, who uses it and why)
DJANGO = [
    (_redis_cache, "_class", "instance", "codemojex_site/cache.py: ValkeyCache makes its own client class"),
    (_redis_cache, "_servers", "instance", "codemojex_site/cache.py: a LOCATION of its own, or the EchoMQ Valkey"),
    (_redis_cache, "_options", "instance", "codemojex_site/cache.py: OPTIONS (the JSON serializer, timeouts)"),
    ("django.core.cache.backends.redis.RedisCache", "_cache", "class",
     "codemojex_site/cache.py: ValkeyCache._cache, one client per URL and OPTIONS per process"),
    (_redis_cache_client, "_client", "instance", "codemojex_site/cache.py: the cache's commands go through echomq.client.Client"),
    (_redis_cache_client, "_serializer", "instance",
     "codemojex_site/cache.py: get_many, get_many_riding and set_tagged (de)serialize"),
    (_redis_cache_client, "_servers", "instance", "codemojex_site/cache.py: the cluster client's URL"),
    ("django.core.cache.backends.redis.RedisCacheClient", "_get_connection_pool", "class",
     "codemojex_site/cache.py: one client per pool, made once"),
    (_cached_db_session, "_cache", "instance", "games/sessions.py: the session's cache (MGET with the identity)"),
    ("django.contrib.sessions.backends.cached_db.SessionStore", "cache_key_prefix", "class",
     "games/sessions.py: signed_in_keys names the session's cache entry"),
    ("django.contrib.sessions.backends.base", "_session_cache", "source",
     "games/sessions.py: _get_user sends the rides only before the session is read"),
    ("django.contrib.auth.middleware", "_cached_user", "source",
     "games/sessions.py: the request's user, as Django's AuthenticationMiddleware caches it"),
    ("django.middleware.csrf", "csrf_processing_done", "source",
     "games/rides.py: no rate-limit hit rides before the CSRF check has passed"),
    ("django.http.request", "_post", "source", "codemojex_site/errors.py: a refused form leaves an empty POST"),
    ("django.http.request", "_files", "source", "codemojex_site/errors.py: a refused form leaves empty FILES"),
    ("django.db.backends.postgresql.schema.DatabaseSchemaEditor", "_create_like_index_sql", "class",
     "codemojex_site/db/schema.py: no varchar_pattern_ops index on ids"),
    ("django.db.backends.base.schema.BaseDatabaseSchemaEditor", "_create_index_name", "class",
     "games/migrations/0005: the name of the pattern index it drops"),
    ("django.contrib.admin.ModelAdmin", "_get_base_actions", "class",
     "games/admin_guard.py: a declared action the user may not run is refused, not ignored"),
    (_a_model, "_state", "instance", "games/rows.py, games/models.py, games/admin.py: rows written by our own SQL"),
]

REDIS = [
    ("redis.Redis", "parse_response", "class", "echomq/client.py: replies read on the thread's own connection"),
    (_redis_client, "connection", "instance", "echomq/client.py: a single-connection client keeps redis-py's road"),
    (_redis_client, "connection_pool", "instance", "echomq/client.py, echomq/cluster.py: the pool's settings"),
    (_pool, "connection_class", "instance", "echomq/client.py: the thread's own connection, of the pool's class"),
    (_pool, "connection_kwargs", "instance", "echomq/client.py, echomq/cluster.py, echomq/events.py: its settings"),
    (_pool, "cache", "instance", "echomq/client.py: with client-side caching the pool makes the connection"),
    ("redis.ConnectionPool", "make_connection", "class", "echomq/client.py: the same, through the pool"),
    ("redis.Connection", "send_command", "class", "echomq/client.py: single commands"),
    ("redis.Connection", "pack_commands", "class", "echomq/client.py: execute_many, one write for a batch"),
    ("redis.Connection", "send_packed_command", "class",
     "echomq/client.py; echomq/contrib/django/failfast.py overrides it"),
    ("redis.Connection", "read_response", "class", "echomq/contrib/django/failfast.py overrides it"),
    ("redis.Connection", "disconnect", "class", "echomq/client.py: a connection left mid-reply starts over"),
    (_connection, "retry", "instance", "echomq/client.py: the client's own retry policy, per connection"),
    (_connection, "_sock", "instance", "echomq/sharded/parking.py, echomq/events.py: waiting on several sockets at once"),
    (_connection, "host", "instance", "echomq/contrib/django/failfast.py: which server hung"),
    (_connection, "port", "instance", "echomq/contrib/django/failfast.py: which server hung"),
    (_unix_connection, "path", "instance", "echomq/contrib/django/failfast.py: which server hung"),
    ("redis.cluster.RedisCluster", "get_node_from_key", "class", "echomq/cluster.py, echomq/scripts.py: routing"),
    ("redis.cluster.RedisCluster", "get_redis_connection", "class", "echomq/cluster.py: a node's client"),
    (_cluster_node, "redis_connection", "instance", "echomq/cluster.py: a node's client"),
    (_cluster_node, "name", "instance", "echomq/cluster.py: a node's name"),
]


def _present(where, name: str, how: str) -> bool:
    if how == "instance":
        return hasattr(where(), name)
    if how == "class":
        return hasattr(_imported(where), name)
    module = __import__(where, fromlist=["_"])
    return name in inspect.getsource(module)


def test_every_private_name_the_project_uses_is_still_there():
    missing = []
    for where, name, how, who in DJANGO + REDIS:
        label = where if isinstance(where, str) else where.__name__.strip("_").replace("_", " ")
        try:
            ok = _present(where, name, how)
        except Exception as exc:  # noqa: BLE001 -- an import or a constructor that changed is a finding too
            ok, who = False, f"{who} (looking it up raised {type(exc).__name__}: {exc})"
        if not ok:
            missing.append(f"  {label}: {name} -- used by {who}")
    if missing:
        pytest.fail("a Django or redis-py upgrade removed names the project uses:\n" + "\n".join(missing),
                    pytrace=False)


def test_the_pins_cover_the_versions_this_list_was_checked_against():
    """The majors the list above was checked against are the ones
    pyproject.toml allows."""
    import django
    import redis

    assert django.VERSION[:2] == (6, 1), django.get_version()
    assert int(redis.__version__.split(".")[0]) == 8, redis.__version__


def test_the_canary_notices_a_missing_name(monkeypatch):
    """The check itself can fail: a name removed from a class is reported."""
    import redis

    monkeypatch.delattr(redis.Redis, "parse_response")
    assert not _present("redis.Redis", "parse_response", "class")
