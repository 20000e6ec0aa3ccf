"""The Lua bundle: one script per transition, loaded from ``lua/``.

The scripts are package data read through ``importlib.resources``: an
installed ``echomq`` carries them in ``echomq/lua/`` (the build maps the
repository's top-level ``lua/`` there, see distributions/README.md), so they
load from a wheel or a zip alike; a checkout or an editable install reads the
top-level ``lua/`` itself (:func:`lua_dir`).

Each script's text is assembled at import (``--- @include "name"`` pulls in
``lua/include/name.lua`` once), so its SHA1 is known before any connection
exists. Calls go out as EVALSHA; a NOSCRIPT reply (a restarted or flushed
server) loads the script and tries again, which is safe because a script that
was not found did not run. Errors come back typed (``errors.translate``).

The argument limits are named once, in ``lua/include/args.lua``,
``keep.lua``, ``priority.lua``, ``unique.lua``, ``sched.lua``, ``events.lua``
and ``task.lua``; :data:`LIMITS` reads them from there for the Python checks.

Another package keeps its own scripts in a directory of its own and loads
them with :func:`load_from` (same ``@include`` handling, from that
directory's ``include/``, and the same NOSCRIPT retry); they are not part of
the bundle. Every script file is read here, so where the files live is
decided in one place.
"""
from __future__ import annotations

import hashlib
import re
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

import redis

from .errors import translate, translated


def lua_dir(package: str, checkout: str) -> Traversable:
    """Where ``package`` keeps its Lua scripts: ``<package>/lua`` inside an
    installed distribution (a wheel or a zip: read through importlib.resources),
    else ``checkout`` under the repository root that holds the package (a
    checkout, or an editable install of one). ``lua_dir("echomq", "lua")``
    is EchoMQ's own bundle."""
    root = resources.files(package)
    inside = root / "lua"
    if inside.is_dir():
        return inside
    if isinstance(root, Path) and (root.parent / checkout).is_dir():
        return root.parent / checkout
    raise FileNotFoundError(f"no Lua scripts for {package}: neither {inside} (an installed package) "
                            f"nor {checkout}/ beside it (a checkout)")


LUA_DIR = lua_dir("echomq", "lua")
_INCLUDE = re.compile(r'^--- @include "([a-z_]+)"\s*$', re.M)


def _assemble(text: str, seen: set[str], directory) -> str:
    def inline(m: re.Match) -> str:
        name = m.group(1)
        if name in seen:
            return f"-- (include {name}: already above)"
        seen.add(name)
        body = (directory / "include" / f"{name}.lua").read_text()
        return f"-- >>> include {name}\n{_assemble(body, seen, directory)}\n-- <<< include {name}"

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


def load_from(directory, name: str) -> Script:
    """The script ``<directory>/<name>.lua`` with its ``--- @include "x"``
    lines filled in from ``<directory>/include/x.lua`` (each once).
    ``directory`` is a ``pathlib.Path`` (or anything with ``/`` and
    ``read_text()``). Calling the Script sends EVALSHA and loads it after a
    NOSCRIPT reply, as for the bundle's own."""
    return Script(name, _assemble((directory / f"{name}.lua").read_text(), set(), directory))


def load(name: str) -> Script:
    """An EchoMQ script from ``lua/`` (the bundle's, or one a contrib module calls itself)."""
    return load_from(LUA_DIR, name)


NAMES = (
    "enqueue", "claim", "complete", "complete_batch", "retry", "extend", "release",
    "reap", "promote", "requeue", "remove", "cancel", "lane", "pause", "counts",
    "rate", "lane_rate", "schedule_set", "schedule_op", "schedule_fire",
    "progress", "result", "wait", "enqueue_flow",  # issue 22: events, progress, wait, flows
)
BUNDLE: dict[str, Script] = {name: load(name) for name in NAMES}

_LIMIT = re.compile(r"^local ((?:MAX|KEEP)_[A-Z_]+) = (\d+)", re.M)
LIMITS: dict[str, int] = {
    name: int(value)
    for inc in ("args", "keep", "priority", "unique", "sched", "events", "task")
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
