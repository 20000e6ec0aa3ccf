"""Django's Redis cache on the EchoMQ Valkey, fit for sessions and lookups.

The differences from ``django.core.cache.backends.redis.RedisCache``:

* The server is the one EchoMQ uses in this process, looked up on each use:
  ``VALKEY_URL``, or whatever ``echomq.contrib.django`` was pointed at
  (``reset_client``, as the tests do), or the install's embedded server if it
  is running. The cache never starts the embedded server itself: until the
  queue has (its first enqueue does), there is no cache and every read is a
  miss served by the database.
* One ``redis.Redis`` per pool, made once: Django's client builds a new one
  (and its table of response callbacks) for every cache call, which cost
  more CPU than the call itself. Aliases on the same server with the same
  OPTIONS share it; other OPTIONS, another client.
* A cache that cannot be reached is a miss, not a 500: reads answer the
  default and writes (``clear`` too, which on the EchoMQ Valkey drops
  this cache's keys, never the queues') are skipped, with one warning line at
  most every ten seconds; ``incr`` and ``decr``, which have no value to
  answer, raise the ``ValueError`` of a missing key. One that hangs costs
  one short timeout, then fails fast for a few seconds
  (``echomq.contrib.django.failfast``). Everything cached here (sessions
  under ``cached_db``, the logged-in user and player) is also in the
  database, so pages keep working on the database alone while Valkey is
  down.
* Values are JSON (:class:`JSONSerializer`), never pickles: a pickle runs
  whatever it names when it is read, so anyone able to write to Valkey
  could run code in every web process. An entry that is not JSON (written
  by an older version, or by someone else) reads as a miss.
* Tags (:meth:`ValkeyCache.set_tagged`, :meth:`ValkeyCache.delete_tagged`):
  one call drops every key filed under a tag, atomically (a Lua script in
  ``lua/games/``), and an entry made from another one lives no
  longer than its source has left.
"""
from __future__ import annotations

import json
import logging
import threading
import time

from django.core.cache.backends.base import DEFAULT_TIMEOUT
from django.core.cache.backends.redis import RedisCache, RedisCacheClient

import redis

from echomq import UNAVAILABLE, Unavailable
from echomq.client import Client
from echomq.errors import translate
from echomq.scripts import load_from, lua_dir

log = logging.getLogger("codemojex.cache")

DOWN = UNAVAILABLE  # Valkey unreachable, or a cluster failing over
WARN_EVERY_S = 10.0

# The tag scripts (not EchoMQ's bundle) ride with the game's, whose session
# identities are what they file: lua/games/cache_*.lua (games/lua/ installed).
_SCRIPTS = lua_dir("games", "lua/games")
_SET_TAGGED = load_from(_SCRIPTS, "cache_set_tagged")
_DELETE_TAGGED = load_from(_SCRIPTS, "cache_delete_tagged")


class Unreadable(ValueError):
    """A cache entry that is not JSON: read as a miss."""


class JSONSerializer:
    """The cache's values as JSON, which reading cannot turn into code.
    Integers stay bare, as Django's own serializer keeps them, so ``incr``
    works; everything cached must be JSON (dicts, lists, strings, numbers,
    booleans) -- a tuple comes back a list."""

    def dumps(self, obj):
        if type(obj) is int:
            return obj
        return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()

    def loads(self, data):
        try:
            return int(data)
        except ValueError:
            pass
        try:
            return json.loads(data)
        except ValueError as exc:  # UnicodeDecodeError included
            raise Unreadable(f"a cache entry that is not JSON ({exc})") from None


def _unreadable(exc: Unreadable) -> None:
    log.warning("%s; read as a miss (it is replaced on the next write)", exc)


def _readable(loads, keys, values) -> dict:
    """The entries of an MGET that are there and readable: one that is not
    JSON is a miss, for itself alone."""
    found = {}
    for key, value in zip(keys, values):
        if value is not None:
            try:
                found[key] = loads(value)
            except Unreadable as exc:
                _unreadable(exc)
    return found


class _ReusingClient(RedisCacheClient):
    def __init__(self, *args, cluster: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self._client = Client  # single commands on the thread's own connection (echomq.client)
        self._made: dict = {}
        self._cluster = cluster

    def get_client(self, key=None, *, write=False):
        if self._cluster:  # the EchoMQ Valkey is a cluster: one RedisCluster, made once
            client = self._made.get("cluster")
            if client is None:
                from echomq.contrib.django import make_client

                client = self._made.setdefault("cluster", make_client(self._servers[0], True))
            return client
        pool = self._get_connection_pool(write)
        client = self._made.get(id(pool))
        if client is None:
            client = self._made.setdefault(id(pool), self._client(connection_pool=pool))
        return client


    # MGET and MSET cannot span slots on a cluster: per-key calls, pipelined per node.
    # An entry that is not JSON is a miss for itself (Django's get_many fails the batch).
    def get_many(self, keys):
        keys = list(keys)
        client = self.get_client(None)
        values = client.mget_nonatomic(keys) if self._cluster else client.mget(keys)
        return _readable(self._serializer.loads, keys, values)

    def set_many(self, data, timeout):
        if not self._cluster:
            return super().set_many(data, timeout)
        pipe = self.get_client(None, write=True).pipeline(transaction=False)
        for k, v in data.items():
            pipe.set(k, self._serializer.dumps(v), ex=timeout)
        pipe.execute()


def _glob_escape(text: str) -> str:
    """``text`` matched literally by SCAN's MATCH pattern."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


def _frozen(value):
    """OPTIONS as a key: dicts and lists made hashable, the rest as they are
    (numbers, strings, classes, a ``Retry``, which compares by value)."""
    if isinstance(value, dict):
        return frozenset((k, _frozen(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(v) for v in value)
    return value


class ValkeyCache(RedisCache):
    _clients: dict = {}
    _clients_lock = threading.Lock()
    _warned_at = 0.0

    def __init__(self, server, params):
        super().__init__(server or "", params)
        self._class = _ReusingClient
        self._options = {"serializer": JSONSerializer, **self._options}  # not written into settings.CACHES
        self._shape = _frozen(self._options)

    @property
    def _location(self) -> str:
        """This cache's own LOCATION; empty: it lives on the EchoMQ Valkey."""
        return self._servers[0] if self._servers else ""

    def _url(self) -> str:
        from django.conf import settings

        from echomq import embedded
        from echomq.contrib import django as emq

        if self._location:
            return self._location
        conf = getattr(settings, "ECHOMQ", {})
        url = emq._url or conf.get("URL") or embedded.running_url(conf.get("EMBEDDED_DIR") or "var/valkey")
        if not url:
            raise Unavailable("no Valkey yet: none configured and the embedded one is not running")
        return url

    @property
    def _cache(self):
        """One client (with its connection pool) per Valkey URL and OPTIONS
        per process, shared by every thread's cache handle and every alias
        configured alike. An alias with other OPTIONS (a ``db``, a timeout,
        a serializer) has its own: sharing the first one's would read and
        write with that one's settings."""
        from echomq.contrib.django import is_cluster

        url = self._url()
        cluster = not self._location and is_cluster()
        shape = (url, cluster, self._shape)
        client = self._clients.get(shape)
        if client is None:
            with self._clients_lock:
                from echomq.contrib.django.failfast import connection_class

                options = {"connection_class": connection_class(url), **self._options}
                client = self._clients.setdefault(shape, self._class([url], cluster=cluster, **options))
        return client

    def validate_key(self, key) -> None:
        """Valkey keys are binary-safe: none of memcached's warnings (a
        character-by-character scan of every key, twice per request) apply."""

    def _down(self, exc: Exception) -> None:
        now = time.monotonic()
        if now - ValkeyCache._warned_at >= WARN_EVERY_S:
            ValkeyCache._warned_at = now
            log.warning("cache unreachable (%s: %s); serving from the database", type(exc).__name__, exc)

    def get(self, key, default=None, version=None):
        try:
            return super().get(key, default, version)
        except DOWN as exc:
            self._down(exc)
            return default
        except Unreadable as exc:
            _unreadable(exc)
            return default

    def get_many(self, keys, version=None):
        try:
            return super().get_many(keys, version)
        except DOWN as exc:
            self._down(exc)
            return {}

    def get_many_riding(self, keys, rides, version=None):
        """``get_many(keys)``, with each ride's command (``games.rides``)
        sent in the same pipeline: one round trip for all. Each ride that
        went out is marked ``sent`` with its ``reply`` or (typed) ``error``;
        one the server answered NOSCRIPT is left unsent, for its view to
        send itself, and its script is loaded for the next time. Rides go
        out only where the queues' keys are too: the cache on the EchoMQ
        Valkey (no LOCATION of its own), not a cluster."""
        if not rides or self._location:
            return self.get_many(keys, version)
        try:
            wrapper = self._cache
            if wrapper._cluster:
                return self.get_many(keys, version)
            key_map = {self.make_and_validate_key(key, version=version): key for key in keys}
            replies = wrapper.get_client(None).execute_many([("MGET", *key_map), *(r.command for r in rides)])
        except DOWN as exc:
            self._down(exc)
            return {}
        for ride, reply in zip(rides, replies[1:]):
            if isinstance(reply, redis.exceptions.NoScriptError):
                if ride.script is not None:  # (a restarted server) for the next ride; this one the view sends
                    try:
                        wrapper.get_client(None).script_load(ride.script.source)
                    except DOWN as exc:
                        self._down(exc)
                continue
            ride.sent = True
            if isinstance(reply, Exception):
                ride.error = translate(reply)
            else:
                ride.reply = reply
        values = replies[0]
        if isinstance(values, Exception):
            raise values
        return {key_map[k]: v for k, v in _readable(wrapper._serializer.loads, key_map, values).items()}

    def has_key(self, key, version=None):
        try:
            return super().has_key(key, version)
        except DOWN as exc:
            self._down(exc)
            return False

    def touch(self, key, timeout=DEFAULT_TIMEOUT, version=None):
        try:
            return super().touch(key, timeout, version)
        except DOWN as exc:
            self._down(exc)
            return False

    def set(self, key, value, timeout=DEFAULT_TIMEOUT, version=None):
        try:
            super().set(key, value, timeout, version)
        except DOWN as exc:
            self._down(exc)

    def add(self, key, value, timeout=DEFAULT_TIMEOUT, version=None):
        try:
            return super().add(key, value, timeout, version)
        except DOWN as exc:
            self._down(exc)
            return False

    def set_many(self, data, timeout=DEFAULT_TIMEOUT, version=None):
        try:
            return super().set_many(data, timeout, version)
        except DOWN as exc:
            self._down(exc)
            return list(data)

    def delete(self, key, version=None):
        try:
            return super().delete(key, version)
        except DOWN as exc:
            self._down(exc)
            return False

    def incr(self, key, delta=1, version=None):
        """Django's ``incr`` (and ``decr``, which calls it). A cache that
        cannot be reached has no value to add to: it raises the
        ``ValueError`` Django raises for a missing key, so a caller that
        handles a missing key (setting the count afresh, or going without)
        handles this too."""
        try:
            return super().incr(key, delta, version)
        except DOWN as exc:
            self._down(exc)
            raise ValueError(f"Key {key!r} not incremented: cache unreachable") from exc

    def clear(self):
        """Drop every entry of this cache. Django's ``clear`` empties the
        whole db (FLUSHDB); on the EchoMQ Valkey (no LOCATION) that db
        holds the queues too, so there only the keys under this cache's
        KEY_PREFIX go (SCAN, then UNLINK in chunks)."""
        try:
            if self._location:
                return super().clear()
            client = self._cache.get_client(None, write=True)
            chunk = []
            for key in client.scan_iter(match=_glob_escape(self.key_prefix) + ":*", count=1000):
                chunk.append(key)
                if len(chunk) == 1000:
                    client.unlink(*chunk)
                    chunk = []
            if chunk:
                client.unlink(*chunk)
            return True
        except DOWN as exc:
            self._down(exc)
            return False

    # Tags: keys filed under a tag (a Valkey set of their full names, in the
    # same slot: every key here shares the prefix's hash tag), so one call
    # drops them all -- e.g. every cached identity of one user.
    def set_tagged(self, key, value, timeout, tag, *, within=None, version=None) -> int:
        """``set(key, value, timeout)`` and file the key under ``tag``; with
        ``within`` (another key of this cache), no longer than that entry
        has left, and not at all once it is gone. Returns the life given,
        in ms (0: nothing written)."""
        keys = [self.make_and_validate_key(k, version=version) for k in (key, tag)]
        if within is not None:
            keys.append(self.make_and_validate_key(within, version=version))
        try:
            client = self._cache.get_client(keys[0], write=True)
            return _SET_TAGGED(client, keys, [self._cache._serializer.dumps(value), int(timeout * 1000)])
        except DOWN as exc:
            self._down(exc)
            return 0

    def delete_tagged(self, tag, version=None) -> None:
        """Delete every key filed under ``tag``, and the tag, in one step:
        nothing filed meanwhile escapes (``lua/games/cache_delete_tagged.lua``)."""
        members = self.make_and_validate_key(tag, version=version)
        try:
            _DELETE_TAGGED(self._cache.get_client(members, write=True), [members], [])
        except DOWN as exc:
            self._down(exc)

    def delete_many(self, keys, version=None):
        try:
            return super().delete_many(keys, version)
        except DOWN as exc:
            self._down(exc)
