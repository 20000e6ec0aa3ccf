"""Helpers for the protocol tests: exact snapshots of a queue's state."""
from __future__ import annotations


def snapshot(client, q, *, jobs_only: bool = False) -> dict:
    """Every key of queue ``q`` with its full value, so a test can assert that
    an operation changed nothing at all. ``jobs_only`` leaves out the wake
    lists, which a live consumer empties as it parks (they hold no job state)."""
    out = {}
    for key in q.keys():
        if jobs_only and ":wake" in key:
            continue
        kind = client.type(key).decode()
        if kind == "hash":
            out[key] = ("hash", client.hgetall(key))
        elif kind == "zset":
            out[key] = ("zset", client.zrange(key, 0, -1, withscores=True))
        elif kind == "list":
            out[key] = ("list", client.lrange(key, 0, -1))
        elif kind == "set":
            out[key] = ("set", sorted(client.smembers(key)))
        elif kind == "stream":  # the event stream (emq:{q}:events): every entry, ids included
            out[key] = ("stream", client.xrange(key))
        else:
            out[key] = (kind, client.dump(key))
    return out


def server_ms(client) -> int:
    """The server's clock in ms (what the scripts read with TIME)."""
    s, us = client.time()
    return s * 1000 + us // 1000
