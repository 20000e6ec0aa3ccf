"""A server under test: lay a vector's state, call a script, read the state back.

Every key a vector names carries the hash tag ``{conformance}`` (the queue
the vectors use), so a case lives in one cluster slot; the runner owns that
queue on the server it is pointed at and deletes its keys before and after
each case. Works on ``redis.Redis`` and ``redis.cluster.RedisCluster``
(created with ``decode_responses=False``).
"""
from __future__ import annotations

import redis

from ..scripts import Script
from .format import Entry, Window, resolve

QUEUE = "conformance"
TAG = "{" + QUEUE + "}"
MATCH = "*\\{" + QUEUE + "\\}*"  # SCAN pattern: braces escaped


def strip_tail(message: str) -> str:
    """An error reply without the `` script: <sha>, on @user_script:N.`` tail
    that Valkey and Redis 7 append to errors raised inside a script."""
    return message.rpartition(" script: ")[0] if " script: " in message else message


class Server:
    def __init__(self, client):
        self.client = client
        self._cluster = hasattr(client, "get_node_from_key")

    def _opts(self) -> dict:
        # On a cluster, TIME and SCAN go to the node that holds the vectors' slot.
        return {"target_nodes": self.client.get_node_from_key(TAG)} if self._cluster else {}

    def time_ms(self) -> int:
        secs, micros = self.client.execute_command("TIME", **self._opts())
        return int(secs) * 1000 + int(micros) // 1000

    def keys(self) -> list[str]:
        found = self.client.scan_iter(match=MATCH, count=1000, **self._opts())
        return sorted({k.decode() if isinstance(k, bytes) else k for k in found})

    def clean(self) -> None:
        for key in self.keys():
            self.client.delete(key)

    def lay(self, before: dict[str, Entry], t0: int) -> None:
        """Write a vector's state (the case's keys are gone before this);
        ``$now`` + N is laid as t0 + N."""
        c = self.client
        for key, e in before.items():
            if e.kind == "hash":
                c.hset(key, mapping={f: resolve(v, t0) for f, v in e.value.items()})
            elif e.kind == "zset":
                c.zadd(key, {m: resolve(s, t0) for m, s in e.value})
            elif e.kind == "list":
                c.rpush(key, *resolve(e.value, t0))
            elif e.kind == "set":
                c.sadd(key, *e.value)
            elif e.kind == "string":
                c.set(key, resolve(e.value, t0))
            else:
                for entry_id, fields in e.value:
                    c.xadd(key, {f: resolve(v, t0) for f, v in fields.items()}, id=entry_id)
            if e.expire_s is not None:
                c.expire(key, e.expire_s)

    def read(self) -> dict[str, Entry]:
        """Every key of the vectors' queue, with its full value and PTTL."""
        c = self.client
        out = {}
        for key in self.keys():
            kind = c.type(key).decode()
            if kind == "hash":
                value = {f.decode(): v for f, v in c.hgetall(key).items()}
            elif kind == "zset":
                value = [(m.decode(), s) for m, s in c.zrange(key, 0, -1, withscores=True)]
            elif kind == "list":
                value = c.lrange(key, 0, -1)
            elif kind == "set":
                value = sorted(c.smembers(key))
            elif kind == "string":
                value = c.get(key)
            elif kind == "stream":
                value = [(i.decode(), {f.decode(): v for f, v in fields.items()})
                         for i, fields in c.xrange(key)]
            else:
                value = None
            out[key] = Entry(kind, value, pttl=c.pttl(key))
        return out

    def call(self, script: Script, keys: list[str], argv: list) -> tuple[str, object]:
        """Run a script by EVALSHA (loading it on NOSCRIPT): ("reply", value)
        or ("error", message without the server's script tail)."""
        cmd = ("EVALSHA", script.sha, len(keys), *keys, *argv)
        try:
            try:
                return "reply", self.client.execute_command(*cmd)
            except redis.exceptions.NoScriptError:
                self.client.script_load(script.source)
                return "reply", self.client.execute_command(*cmd)
        except redis.exceptions.ResponseError as exc:
            return "error", strip_tail(str(exc))

    def run(self, script: Script, before: dict[str, Entry], keys: list[str], argv: list):
        """One case on a clean slate: (outcome, value, state after, window)."""
        self.clean()
        t0 = self.time_ms()
        self.lay(before, t0)
        outcome, value = self.call(script, keys, argv)
        t1 = self.time_ms()
        after = self.read()
        window = Window(t0, t1, self.time_ms())
        self.clean()
        return outcome, value, after, window
