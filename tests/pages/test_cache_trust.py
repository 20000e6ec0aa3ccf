"""What the cache on Valkey holds, and for how long: never a password hash,
never a pickle (JSON only, so reading an entry cannot run code), and no
identity that outlives its session or escapes its user's invalidation.
These pin the defects of issue 24, section 1."""
from urllib.parse import urlsplit

import pytest
import redis
from django.core.cache import cache

from games.sessions import identity_key

from .conftest import S

pytestmark = pytest.mark.django_db


def session_key(client) -> str:
    return client.cookies["sessionid"].value

def _everything_in(valkey) -> list[bytes]:
    """Every value stored in Valkey, whatever the key's type."""
    out = []
    for key in valkey.scan_iter("*"):
        kind = valkey.type(key)
        if kind == b"string":
            out.append(valkey.get(key))
        elif kind == b"hash":
            out += [*valkey.hkeys(key), *valkey.hvals(key)]
        elif kind == b"set":
            out += list(valkey.smembers(key))
        elif kind == b"zset":
            out += valkey.zrange(key, 0, -1)
        elif kind == b"list":
            out += valkey.lrange(key, 0, -1)
    return out


def test_no_password_hash_is_ever_written_to_valkey(play, player, make_round, valkey,
                                                     django_capture_on_commit_callbacks):
    """The cache holds what a request needs to know who asks (the id, the
    name, the flags, the session auth hash the session itself carries), not
    the user row: the password hash stays in the database."""
    rnd = make_round()
    with django_capture_on_commit_callbacks(execute=True):
        for _ in range(2):  # the second round brings everything from the cache
            assert play.get("/").status_code == 200
            assert play.get(f"/rounds/{rnd.pk}/").status_code == 200
            assert play.get("/wallet/").status_code == 200
        assert play.post(f"/rounds/{rnd.pk}/guess/", {f"slot{i}": e for i, e in enumerate(S)}).status_code == 302
    assert cache.get(identity_key(session_key(play))) is not None
    password = player.user.password  # "md5$salt$hash" with the tests' hasher
    digest = password.rsplit("$", 1)[-1].encode()
    held = _everything_in(valkey)
    assert held and not [v for v in held if password.encode() in v or digest in v]


def loaded_a_pickle():
    """Named by the pickle below: loading it calls this."""
    loaded_a_pickle.calls += 1


loaded_a_pickle.calls = 0


class _Planted:
    def __reduce__(self):
        return (loaded_a_pickle, ())


def test_a_pickle_planted_in_the_cache_never_runs(play, player, valkey):
    """Anyone who can write to Valkey could plant a pickle that runs code
    when loaded: the cache reads JSON only, and an entry that is not JSON is
    a miss (the session comes from the database; the user stays signed in)."""
    import pickle

    from django.contrib.sessions.backends import cached_db

    assert play.get("/wallet/").status_code == 200
    key = session_key(play)
    for name in (cached_db.KEY_PREFIX + key, identity_key(key)):
        valkey.set(cache.make_key(name), pickle.dumps(_Planted()))
    loaded_a_pickle.calls = 0
    resp = play.get("/wallet/")
    assert loaded_a_pickle.calls == 0
    assert resp.status_code == 200 and player.user.username in resp.content.decode()


def test_an_identity_lives_no_longer_than_its_session(play, valkey):
    """An identity is made from a session: capped at what the session's
    cache entry has left, and at the identity's own life."""
    from django.contrib.sessions.backends import cached_db

    from games.players import CACHE_SECONDS

    assert play.get("/wallet/").status_code == 200
    key = session_key(play)
    assert 0 < valkey.pttl(cache.make_key(identity_key(key))) <= CACHE_SECONDS * 1000
    valkey.pexpire(cache.make_key(cached_db.KEY_PREFIX + key), 5000)  # the session has 5 s left
    valkey.delete(cache.make_key(identity_key(key)))
    assert play.get("/wallet/").status_code == 200  # made again, from the row
    assert cache.get(identity_key(key)) is not None
    assert 0 < valkey.pttl(cache.make_key(identity_key(key))) <= 5000


def test_an_identity_filed_while_its_user_is_invalidated_is_not_lost(valkey, monkeypatch):
    """Invalidation deletes every identity filed under the user in one step:
    one filed by a request racing it -- here, right after invalidation's
    first command to Valkey -- is either deleted or still filed, so the next
    invalidation finds it; never orphaned (it would then outlive every
    change of its user until it expired)."""
    from echomq.client import Client

    from games.sessions import USER_SESSIONS

    tag = USER_SESSIONS + "42"
    cache.set_tagged(identity_key("first"), {"user": 1}, 60, tag)
    real = Client.execute_command
    raced = []

    def racing(self, *args, **options):
        reply = real(self, *args, **options)
        if not raced:
            raced.append(args[0])
            cache.set_tagged(identity_key("racer"), {"user": 2}, 60, tag)  # another request, meanwhile
        return reply

    monkeypatch.setattr(Client, "execute_command", racing)
    cache.delete_tagged(tag)
    monkeypatch.setattr(Client, "execute_command", real)
    assert raced and cache.get(identity_key("first")) is None
    cache.delete_tagged(tag)  # the next change of the user
    assert cache.get(identity_key("racer")) is None


def test_the_projects_clients_use_the_embedded_servers_password(settings, tmp_path):
    """With no VALKEY_URL, the queue's client starts the install's server
    and the cache finds it: both with its password."""
    from urllib.parse import urlsplit

    from echomq import embedded
    from echomq.contrib import django as emq_django

    directory = tmp_path / "valkey"
    settings.ECHOMQ = {**settings.ECHOMQ, "URL": "", "CLUSTER_NODES": 0, "EMBEDDED_DIR": str(directory)}
    emq_django.reset_client(None)
    try:
        assert emq_django.get_client().ping()
        assert urlsplit(emq_django.valkey_url()).password == (directory / embedded.PASSWORD_FILE).read_text()
        emq_django.reset_client(None)  # a web process that has not enqueued yet: the cache looks the server up
        cache.set("trust", {"json": [1, 2]}, 30)
        assert cache.get("trust") == {"json": [1, 2]}
        with pytest.raises(redis.exceptions.AuthenticationError):
            redis.Redis(port=urlsplit(emq_django.valkey_url()).port).ping()
    finally:
        emq_django.reset_client(None)
        embedded.stop(directory)



def test_the_cache_scripts_refuse_bad_arguments_and_run_on_redis7(any_server):
    """set_tagged caps an entry at its source's life and writes nothing once
    the source is gone; delete_tagged drops a tag's keys and the tag; both
    refuse bad arguments before a write. Valkey and Redis 7.0 alike."""
    import echomq
    from codemojex_site.cache import _DELETE_TAGGED, _SET_TAGGED

    key, tag, source = "{cm:cache}:k", "{cm:cache}:tag", "{cm:cache}:src"
    for keys, args in [([key], ["v", 1000]), ([key, tag], ["v"]), ([key, tag], ["v", 0]),
                       ([key, tag], ["v", "1e3"]), ([key, tag], ["v", 31536000001]), ([key, tag], ["v", -5])]:
        with pytest.raises(echomq.ArgumentError, match="set_tagged"):
            _SET_TAGGED(any_server, keys, args)
    for keys, args in [([], []), ([tag], ["x"]), ([tag, key], [])]:
        with pytest.raises(echomq.ArgumentError, match="delete_tagged"):
            _DELETE_TAGGED(any_server, keys, args)
    assert not any_server.exists(key, tag)

    assert _SET_TAGGED(any_server, [key, tag, source], ["v", 60000]) == 0  # no source: nothing written
    any_server.set(source, "s", px=5000)
    assert 0 < _SET_TAGGED(any_server, [key, tag, source], ["v", 60000]) <= 5000
    assert 0 < any_server.pttl(key) <= 5000 and any_server.smembers(tag) == {key.encode()}
    any_server.persist(source)
    assert _SET_TAGGED(any_server, [key + "2", tag], ["w", 60000]) == 60000
    assert any_server.pttl(tag) > 60000  # a minute past its longest-lived key
    assert _DELETE_TAGGED(any_server, [tag], []) == 2
    assert not any_server.exists(key, key + "2", tag)
