"""Sessions that bring their user along (games.sessions): a signed-in
request reads its session and its user in one Valkey round trip, and a
cached identity is never trusted further than the user row it copies."""
import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache

from games.sessions import identity_key, make_identity

pytestmark = pytest.mark.django_db


def commands(valkey) -> dict[str, int]:
    return {name[len("cmdstat_"):]: stat["calls"] for name, stat in valkey.info("commandstats").items()}


def session_key(client) -> str:
    return client.cookies["sessionid"].value


def test_a_signed_in_request_reads_session_and_user_in_one_round_trip(play, valkey):
    assert play.get("/wallet/").status_code == 200  # the first request makes the session's identity
    assert cache.get(identity_key(session_key(play))) is not None
    valkey.config_resetstat()
    assert play.get("/wallet/").status_code == 200
    seen = commands(valkey)
    assert seen.get("mget") == 1, seen  # the session and its identity together
    assert sum(n for name, n in seen.items() if name not in ("mget", "config|resetstat", "info")) == 0, seen


def test_an_identity_naming_another_user_is_not_used(play, player, make_player):
    play.get("/wallet/")
    other = make_player("mallory")
    cache.set(identity_key(session_key(play)), make_identity(other.user, other), 60)  # a corrupted or forged entry
    html = play.get("/wallet/").content.decode()
    assert player.user.username in html and "mallory" not in html
    assert cache.get(identity_key(session_key(play)))["user"]["id"] == player.user.pk  # mended by the real lookup


def test_deactivating_a_user_ends_their_signed_in_sessions_at_once(client, player):
    client.force_login(player.user)
    assert client.get("/wallet/").status_code == 200
    user = get_user_model().objects.get(pk=player.user.pk)
    user.is_active = False
    user.save()
    resp = client.get("/wallet/")
    assert resp.status_code == 302 and "/login/" in resp["Location"]


def test_a_password_change_ends_the_users_other_sessions(client, player, django_user_model):
    from django.test import Client

    other = Client()
    other.force_login(player.user)
    client.force_login(player.user)
    assert other.get("/wallet/").status_code == 200 and client.get("/wallet/").status_code == 200  # both cached
    user = django_user_model.objects.get(pk=player.user.pk)
    user.set_password("a new and long passphrase")
    user.save()
    for c in (client, other):
        resp = c.get("/wallet/")
        assert resp.status_code == 302 and "/login/" in resp["Location"]


def test_logging_out_drops_the_sessions_identity(play):
    play.get("/wallet/")
    key = session_key(play)
    assert cache.get(identity_key(key)) is not None
    play.post("/logout/")
    assert cache.get(identity_key(key)) is None


def test_with_valkey_down_a_signed_in_page_still_works(play, valkey):
    from echomq.contrib import django as emq_django

    play.get("/wallet/")
    emq_django.reset_client("redis://127.0.0.1:1/0")  # nothing listens there: the cache is a miss
    assert play.get("/wallet/").status_code == 200



def test_the_identitys_user_is_the_users_row_without_its_password(play, player):
    """The user an identity stands for answers what requests ask of it
    without a query; anything else (the password included) is read from the
    row when asked for, and a password set on it is Django's own again."""
    from django.contrib.auth import HASH_SESSION_KEY
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from games.sessions import SessionStore, identity_user

    play.get("/wallet/")
    session = SessionStore(session_key(play))
    assert session[HASH_SESSION_KEY]  # read, and its identity with it
    user = identity_user(session, player.user.pk)
    with CaptureQueriesContext(connection) as ctx:
        assert (user.pk, user.get_username(), user.is_active, user.is_staff) == (player.user.pk, "ann", True, False)
        assert user.get_session_auth_hash() == session[HASH_SESSION_KEY] == player.user.get_session_auth_hash()
    assert len(ctx) == 0
    assert user.check_password("nope") is False and user.password == player.user.password  # read when asked
    user.set_password("a new and long passphrase")
    assert user.get_session_auth_hash() != session[HASH_SESSION_KEY]
