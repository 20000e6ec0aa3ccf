"""Exact before/after pictures for "nothing changed" assertions: every
Valkey key with its type, value and TTL presence, and chosen database rows."""
from __future__ import annotations


def _cache_prefix() -> bytes:
    from django.conf import settings

    return settings.CACHES["default"].get("KEY_PREFIX", "").encode()


def valkey_snapshot(client) -> dict:
    """Every key but Django's cache (a request may cache its user and
    session there; that is not state an operation changes) and the game's
    counters (``cm:metrics``: each process's flusher thread adds its counts
    about once a second, whatever request is under way)."""
    out = {}
    cache = _cache_prefix()
    for key in sorted(client.scan_iter(count=1000)):
        if (cache and key.startswith(cache)) or key == b"cm:metrics":
            continue
        kind = client.type(key).decode()
        if kind == "string":
            value = client.get(key)
        elif kind == "hash":
            value = sorted(client.hgetall(key).items())
        elif kind == "zset":
            value = client.zrange(key, 0, -1, withscores=True)
        elif kind == "list":
            value = client.lrange(key, 0, -1)
        elif kind == "set":
            value = sorted(client.smembers(key))
        else:
            value = client.dump(key)
        out[key] = (kind, value, client.ttl(key) > 0)
    return out


def db_snapshot(*models) -> dict:
    """Every row of ``models`` (all fields), plus the admin log."""
    from django.contrib.admin.models import LogEntry

    return {m.__name__: list(m.objects.order_by("pk").values()) for m in (*models, LogEntry)}
