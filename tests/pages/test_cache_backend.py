"""The cache backend itself (``codemojex_site.cache.ValkeyCache``), on the
test Valkey: aliases with other OPTIONS keep their own client, an entry
that is not JSON is a miss for itself alone, and a Valkey that cannot be
reached is a miss for every method, never a connection error (``incr``
and ``decr``: the ValueError of a missing key)."""
from __future__ import annotations

import pytest
import redis

from codemojex_site.cache import JSONSerializer, ValkeyCache


@pytest.fixture(autouse=True)
def _own_clients(monkeypatch):
    """The clients made here are this test's: none shared with another."""
    monkeypatch.setattr(ValkeyCache, "_clients", {})


class Boxed(JSONSerializer):
    """Every value in a box: what this serializer writes, the plain one reads differently."""

    def dumps(self, obj):
        return super().dumps({"boxed": obj})

    def loads(self, data):
        return super().loads(data)["boxed"]


def test_aliases_on_one_server_with_another_db_keep_their_entries_apart(valkey_server, valkey):
    url = valkey_server.url.removesuffix("/0")  # no db in the URL: the OPTIONS' ``db`` picks it
    first, second = ValkeyCache(url, {}), ValkeyCache(url, {"OPTIONS": {"db": 1}})
    first.set("k", "in db 0")
    second.set("k", "in db 1")
    assert first.get("k") == "in db 0" and second.get("k") == "in db 1"
    assert redis.Redis.from_url(url, db=1).get(second.make_key("k")) == b'"in db 1"'


def test_aliases_on_the_echomq_valkey_with_another_serializer_use_their_own(valkey):
    """No LOCATION (both on the EchoMQ Valkey): the second alias writes
    with its own serializer, not the first alias's."""
    plain, boxed = ValkeyCache("", {}), ValkeyCache("", {"OPTIONS": {"serializer": Boxed}})
    plain.set("plain", [1])
    boxed.set("boxed", 5)
    assert valkey.get(boxed.make_key("boxed")) == b'{"boxed":5}'
    assert boxed.get("boxed") == 5 and plain.get("boxed") == {"boxed": 5} and plain.get("plain") == [1]


def test_aliases_configured_alike_share_one_client(valkey_server):
    from echomq.contrib.django import retry_policy

    def options(**more):  # new dicts (and Retry) each time, as each settings load makes them
        return {"OPTIONS": {"socket_timeout": 1, "retry": retry_policy(), "socket_keepalive_options": {}, **more}}

    first, alike = ValkeyCache(valkey_server.url, options()), ValkeyCache(valkey_server.url, options())
    assert first._cache is alike._cache
    assert ValkeyCache(valkey_server.url, {**options(), "KEY_PREFIX": "other"})._cache is first._cache
    assert ValkeyCache(valkey_server.url, options(socket_timeout=2))._cache is not first._cache


@pytest.fixture
def planted(valkey):
    """The project's cache with one readable entry and one that is not JSON
    (a pickle, as an older version or someone else could have left)."""
    from django.core.cache import cache

    cache.set("good", {"a": 1}, 60)
    valkey.set(cache.make_key("bad"), b"\x80\x04\x95not json")
    return cache


def test_an_entry_that_is_not_json_is_a_miss_for_itself_alone(planted, caplog):
    assert planted.get_many(["good", "bad", "absent"]) == {"good": {"a": 1}}
    assert len([r for r in caplog.records if "not JSON" in r.getMessage()]) == 1


def test_an_entry_that_is_not_json_is_a_miss_for_itself_alone_with_rides(planted, caplog, monkeypatch):
    from games.rides import Ride

    from .test_rides import round_trips

    ride = Ride(command=("PING",), who=(1, "PLR"))
    with round_trips(monkeypatch) as sent:
        assert planted.get_many_riding(["good", "bad", "absent"], [ride]) == {"good": {"a": 1}}
    assert len(sent) == 1 and ride.sent and ride.error is None  # still one round trip, the ride in it
    assert len([r for r in caplog.records if "not JSON" in r.getMessage()]) == 1


@pytest.fixture
def down(monkeypatch):
    """A cache on a port where nothing listens (connections refused), with
    the warning's ten-second quiet reset."""
    from echomq import embedded
    from echomq.contrib.django import retry_policy

    monkeypatch.setattr(ValkeyCache, "_warned_at", 0.0)
    url = f"redis://127.0.0.1:{embedded.free_port()}/0"
    return ValkeyCache(url, {"OPTIONS": {"socket_connect_timeout": 1, "retry": retry_policy()}})


def _warnings(caplog) -> int:
    return len([r for r in caplog.records if "cache unreachable" in r.getMessage()])


def test_a_cache_that_cannot_be_reached_is_a_miss_and_skips_writes(down, caplog):
    from games.rides import Ride

    assert down.get("k", "default") == "default" and down.get_many(["k", "j"]) == {}
    assert down.get_many_riding(["k"], [Ride(command=("PING",), who=(1, "PLR"))]) == {}
    assert down.get_or_set("k", lambda: 7) == 7
    assert not down.has_key("k") and not down.touch("k") and not down.add("k", 1) and not down.delete("k")
    assert down.set("k", 1) is None and down.delete_many(["k", "j"]) is None
    assert down.set_many({"k": 1, "j": 2}) == ["k", "j"]  # Django's answer: the keys not written
    assert down.set_tagged("k", 1, 60, "tag") == 0 and down.delete_tagged("tag") is None
    assert not down.clear()
    assert _warnings(caplog) == 1  # one line, not one per call


def test_incr_and_decr_on_a_cache_that_cannot_be_reached_raise_as_for_a_missing_key(down, caplog):
    """They have no value to answer: the ValueError Django raises for a
    missing key, which callers of incr handle already."""
    with pytest.raises(ValueError, match="cache unreachable"):
        down.incr("hits")
    with pytest.raises(ValueError, match="cache unreachable"):
        down.decr("hits", 2)
    with pytest.raises(ValueError):
        down.incr_version("hits")
    assert _warnings(caplog) == 1


def test_clear_on_the_echomq_valkey_drops_the_cache_and_keeps_the_queues(valkey):
    """With no LOCATION the cache lives beside the queues: Django's FLUSHDB
    would take every job with it."""
    from django.core.cache import cache

    from echomq.contrib.django import get_queue

    job_id, _ = get_queue("default").enqueue(b"keep me")
    cache.set_many({f"k{i}": i for i in range(2500)})  # more than one UNLINK chunk
    queue_keys = {k for k in valkey.scan_iter() if k.startswith(b"emq:")}
    assert queue_keys and cache.get("k7") == 7
    assert cache.clear() is True
    assert cache.get_many([f"k{i}" for i in range(2500)]) == {}
    assert {k for k in valkey.scan_iter()} == queue_keys
    assert get_queue("default").job(job_id)["state"] == "pending"


def test_clear_matches_the_key_prefix_literally(valkey):
    from codemojex_site.cache import _glob_escape

    valkey.set("a*b:1:k", 1)
    valkey.set("axxb:1:k", 1)
    assert [k for k in valkey.scan_iter(match=_glob_escape("a*b") + ":*")] == [b"a*b:1:k"]
    assert _glob_escape("{cm:cache}[x]?\\") == "{cm:cache}\\[x\\]\\?\\\\"


@pytest.fixture
def on_cluster(valkey_cluster, valkey_server, settings):
    """The EchoMQ Valkey is the local cluster (no LOCATION: the cache rides on it)."""
    from echomq.contrib import django as emq_django

    settings.ECHOMQ = {**settings.ECHOMQ, "URL": valkey_cluster.url, "CLUSTER": True}
    emq_django.reset_client(valkey_cluster.url, cluster=True)
    client = emq_django.get_client()
    client.flushall()
    yield client
    emq_django.reset_client(valkey_server.url)


@pytest.mark.slow
@pytest.mark.parametrize("prefix", ["{cm:cache}", "spread"])
def test_on_a_cluster_every_method_works_with_keys_in_one_slot_or_many(on_cluster, prefix):
    """The project's prefix puts every key in one slot; a prefix without a
    hash tag spreads them over the three primaries, where MGET, MSET and
    UNLINK of several keys would be refused (CROSSSLOT) if sent whole."""
    from redis.cluster import RedisCluster

    from echomq.contrib.django import get_queue

    cache = ValkeyCache("", {"KEY_PREFIX": prefix})
    assert isinstance(cache._cache.get_client(None), RedisCluster)
    keys = [f"k{i}" for i in range(300)]
    slots = {on_cluster.keyslot(cache.make_key(k)) for k in keys}
    assert (len(slots) == 1) == (prefix == "{cm:cache}")
    assert cache.set_many({k: {"n": i} for i, k in enumerate(keys)}) == []
    on_cluster.set(cache.make_key("k5"), b"\x80\x04not json")  # a miss for itself alone
    got = cache.get_many([*keys, "absent"])
    assert len(got) == 299 and "k5" not in got and got["k299"] == {"n": 299}
    cache.delete_many(keys[:100])
    assert cache.get_many(keys[:100]) == {} and cache.get("k100") == {"n": 100}
    assert cache.add("hits", 1) and cache.incr("hits", 4) == 5
    job_id, _ = get_queue("default").enqueue(b"keep me")
    assert cache.clear() is True
    assert cache.get_many(keys) == {} and cache.get("hits") is None
    assert get_queue("default").job(job_id)["state"] == "pending"  # the queue's keys stay
