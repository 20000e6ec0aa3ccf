"""The Lua bundle: one script per transition, loaded from ``lua/``.

Each script's text is assembled at import (``--- @include "name"`` pulls in
``lua/include/name.lua`` once), so its SHA1 is known before any connection
exists. Calls go out as EVALSHA; a NOSCRIPT reply (a restarted or flushed
server) loads the script and tries again, which is safe because a script that
was not found did not run. Errors come back typed (``errors.translate``).

The argument limits are named once, in ``lua/include/args.lua``,
``keep.lua`` and ``events.lua``; :data:`LIMITS` reads them from there for the Python checks.
"""
from __future__ import annotations

import hashlib
import re
from pathlib import Path

import redis

from .errors import translate, translated

LUA_DIR = Path(__file__).resolve().parent.parent / "lua"
_INCLUDE = re.compile(r'^--- @include "([a-z_]+)"\s*$', re.M)


def _assemble(text: str, seen: set[str]) -> str:
    def inline(m: re.Match) -> str:
        name = m.group(1)
        if name in seen:
            return f"-- (include {name}: already above)"
        seen.add(name)
        body = (LUA_DIR / "include" / f"{name}.lua").read_text()
        return f"-- >>> include {name}\n{_assemble(body, seen)}\n-- <<< include {name}"

    return _INCLUDE.sub(inline, text)


class Script:
    """One transition: its assembled source and SHA1."""

    def __init__(self, name: str, source: str):
        self.name = name
        self.source = source
        self.sha = hashlib.sha1(source.encode()).hexdigest()

    def __call__(self, client, keys, args):
        # execute_command rather than client.evalsha: the same command (a
        # cluster routes it by its first key), without redis-py's wrapper
        # that checks every call for deprecated arguments.
        with translated():
            try:
                return client.execute_command("EVALSHA", self.sha, len(keys), *keys, *args)
            except redis.exceptions.NoScriptError:
                client.script_load(self.source)
                return client.execute_command("EVALSHA", self.sha, len(keys), *keys, *args)

    def __repr__(self) -> str:
        return f"<Script {self.name} {self.sha[:10]}>"


def load(name: str) -> Script:
    return Script(name, _assemble((LUA_DIR / f"{name}.lua").read_text(), set()))


NAMES = (
    "enqueue", "claim", "complete", "complete_batch", "retry", "extend", "release",
    "reap", "promote", "requeue", "remove", "cancel", "lane", "pause", "counts",
    "progress", "result", "wait", "enqueue_flow",  # issue 22: events, progress, wait, flows
)
BUNDLE: dict[str, Script] = {name: load(name) for name in NAMES}

_LIMIT = re.compile(r"^local ((?:MAX|KEEP)_[A-Z_]+) = (\d+)", re.M)
LIMITS: dict[str, int] = {
    name: int(value)
    for inc in ("args", "keep", "events")
    for name, value in _LIMIT.findall((LUA_DIR / "include" / f"{inc}.lua").read_text())
}


class Batch:
    """Script calls sent together in one pipelined round trip.

    Reply errors come back as typed exception objects (StaleToken,
    ArgumentError, ...) in place of results; a server that cannot be reached
    raises Unavailable. Calls answered NOSCRIPT did not run: the bundle is loaded and just those calls
    are sent again, in order. Works on ``redis.Redis`` and ``RedisCluster``
    (EVALSHA goes through execute_command, which the cluster routes by key).
    """

    def __init__(self, client):
        self.client = client
        self.calls: list[tuple[Script, tuple, tuple]] = []

    def add(self, name: str, keys, args) -> None:
        self.calls.append((BUNDLE[name], tuple(keys), tuple(args)))

    def __len__(self) -> int:
        return len(self.calls)

    def _send(self, calls) -> list:
        pipe = self.client.pipeline(transaction=False)
        # A cluster pipeline would ask its default node COMMAND GETKEYS for
        # every EVALSHA (a round trip each, and a dead default node fails
        # them all); the first key names the node, from the local slot map.
        # A stale map is answered MOVED, which the pipeline follows.
        route = getattr(self.client, "get_node_from_key", None)
        for script, keys, args in calls:
            opts = {"target_nodes": route(keys[0])} if route is not None and keys else {}
            pipe.execute_command("EVALSHA", script.sha, len(keys), *keys, *args, **opts)
        return pipe.execute(raise_on_error=False)

    def run(self) -> list:
        if not self.calls:
            return []
        with translated():
            results = self._send(self.calls)
            missing = [i for i, r in enumerate(results) if isinstance(r, redis.exceptions.NoScriptError)]
            if missing:
                for script in BUNDLE.values():
                    self.client.script_load(script.source)
                for i, r in zip(missing, self._send([self.calls[i] for i in missing])):
                    results[i] = r
        return [translate(r) if isinstance(r, Exception) else r for r in results]
