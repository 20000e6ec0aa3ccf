"""Valkey calls that ride with the session's read (games.rides): the guess
POST's rate-limit hit, the round page's live panel and the poll's ETag go
out in the same round trip as the session, once this process has seen the
session -- and a ride made for anyone but the session's own player is
never used."""
from __future__ import annotations

import contextlib
import threading

import pytest
from django.test import Client

from echomq.contrib.django import failfast
from games import rides
from games.models import Guess

from .conftest import S

pytestmark = pytest.mark.django_db

OTHER = ["🐱", "🐶", "🐭", "🐹", "🐰", "🦊"]


@contextlib.contextmanager
def round_trips(monkeypatch):
    """Count the writes to Valkey this process makes: one per round trip
    (a pipeline is one write). A new connection's handshake (AUTH, CLIENT
    SETINFO) and a health check's PING are not counted: on a loaded machine
    a connection dropped after a timeout is made again mid-request."""
    sent = []
    cls, conn = failfast._FailFast, failfast.FailFastConnection
    real_send, real_connect, real_check = cls.send_packed_command, conn.connect_check_health, conn.check_health
    quiet = threading.local()

    def counting(self, command, check_health=True):
        if not getattr(quiet, "on", False):
            sent.append(command)
        return real_send(self, command, check_health)

    def uncounted(real):
        def call(self, *args, **kwargs):
            quiet.on = True
            try:
                return real(self, *args, **kwargs)
            finally:
                quiet.on = False
        return call

    monkeypatch.setattr(cls, "send_packed_command", counting)
    monkeypatch.setattr(conn, "connect_check_health", uncounted(real_connect))
    monkeypatch.setattr(conn, "check_health", uncounted(real_check))
    yield sent
    monkeypatch.setattr(cls, "send_packed_command", real_send)
    monkeypatch.setattr(conn, "connect_check_health", real_connect)
    monkeypatch.setattr(conn, "check_health", real_check)


def commands(valkey) -> dict[str, int]:
    return {name[len("cmdstat_"):]: stat["calls"] for name, stat in valkey.info("commandstats").items()}


def slots(emojis):
    return {f"slot{i}": e for i, e in enumerate(emojis)}


@pytest.fixture(autouse=True)
def _fresh_memo():
    rides._who.clear()
    yield
    rides._who.clear()


def warm(play, rnd, capture):
    """One page and one guess: the process knows the session's player, its
    connections are open and the scripts are loaded."""
    play.get(f"/rounds/{rnd.pk}/")
    with capture(execute=True):
        assert play.post(f"/rounds/{rnd.pk}/guess/", slots(OTHER)).status_code == 302


def test_a_guess_post_counts_its_rate_limit_in_the_sessions_round_trip(play, make_round, valkey, monkeypatch,
                                                                       django_capture_on_commit_callbacks):
    rnd = make_round()
    warm(play, rnd, django_capture_on_commit_callbacks)
    valkey.config_resetstat()
    with round_trips(monkeypatch) as sent, django_capture_on_commit_callbacks(execute=True):
        assert play.post(f"/rounds/{rnd.pk}/guess/", slots(S)).status_code == 302
    assert len(sent) == 2, sent  # the session, its identity and the hit; then the enqueue
    assert commands(valkey).get("evalsha") == 2 and Guess.objects.count() == 2


def test_the_limit_still_holds_when_it_rides(play, make_round, settings, django_capture_on_commit_callbacks):
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "guess": "1/h"}
    rnd = make_round()
    play.get(f"/rounds/{rnd.pk}/")
    with django_capture_on_commit_callbacks(execute=True):
        assert play.post(f"/rounds/{rnd.pk}/guess/", slots(S)).status_code == 302
        refused = play.post(f"/rounds/{rnd.pk}/guess/", slots(OTHER))
    assert refused.status_code == 429 and Guess.objects.count() == 1


def test_a_post_refused_by_its_csrf_check_counts_no_hit(play, make_round, settings,
                                                       django_capture_on_commit_callbacks):
    """The 403 page of a stale form token reads the user (its header) after
    the URL resolved to the guess view, which never runs: no hit rides."""
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "guess": "1/h"}
    rnd = make_round()
    play.get(f"/rounds/{rnd.pk}/")  # the process knows the session's player
    strict = Client(enforce_csrf_checks=True)
    strict.cookies = play.cookies
    for _ in range(2):
        refused = strict.post(f"/rounds/{rnd.pk}/guess/", {**slots(S), "csrfmiddlewaretoken": "x" * 64})
        assert refused.status_code == 403
    with django_capture_on_commit_callbacks(execute=True):
        assert play.post(f"/rounds/{rnd.pk}/guess/", slots(S)).status_code == 302  # the hour's one hit
    assert Guess.objects.count() == 1


def test_a_ride_made_for_another_player_is_not_used(play, player, make_round, make_player, settings,
                                                    django_capture_on_commit_callbacks):
    """A memo naming someone else (it cannot happen: a session key is one
    user's for life) costs the real player nothing and lets nothing pass."""
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "guess": "1/h"}
    rnd = make_round()
    other = make_player("otto")
    play.get(f"/rounds/{rnd.pk}/")
    key = play.cookies["sessionid"].value
    with django_capture_on_commit_callbacks(execute=True):
        assert play.post(f"/rounds/{rnd.pk}/guess/", slots(S)).status_code == 302  # ann's one hit this hour
        rides._who[key] = (other.user.pk, other.pk)  # the next hit rides for otto: not taken, ann's counted
        assert play.post(f"/rounds/{rnd.pk}/guess/", slots(OTHER)).status_code == 429
    rides._who[key] = (other.user.pk, other.pk)
    page = play.get(f"/rounds/{rnd.pk}/").content.decode()
    assert "1 player with a score" not in page  # the live panel is ann's own read, not otto's ride


def test_the_round_page_reads_the_live_panel_in_the_sessions_round_trip(play, make_round, valkey, monkeypatch):
    rnd = make_round()
    play.get(f"/rounds/{rnd.pk}/")
    play.get(f"/rounds/{rnd.pk}/")  # the process has seen the session, and the board on this round's page
    with round_trips(monkeypatch) as sent:
        page = play.get(f"/rounds/{rnd.pk}/").content.decode()
    assert len(sent) == 1, sent
    assert "No scores yet" in page


def test_a_sealed_rounds_board_is_never_read_early(play, make_round, valkey):
    rnd = make_round(kind="blind")
    valkey.config_resetstat()
    for _ in range(3):
        assert play.get(f"/rounds/{rnd.pk}/").status_code == 200
    seen = commands(valkey)
    assert seen.get("zrevrange", 0) == 0 and seen.get("zrevrank", 0) == 0, seen


def test_an_idle_poll_answers_304_in_one_round_trip(play, make_round, monkeypatch):
    rnd = make_round()
    url = f"/rounds/{rnd.pk}/my-guesses.json"
    play.get(url)
    tag = play.get(url)["ETag"]
    with round_trips(monkeypatch) as sent:
        resp = play.get(url, HTTP_IF_NONE_MATCH=tag)
    assert resp.status_code == 304 and len(sent) == 1, sent


def test_nothing_rides_for_a_session_this_process_has_not_seen(play, make_round, monkeypatch,
                                                              django_capture_on_commit_callbacks):
    rnd = make_round()
    warm(play, rnd, django_capture_on_commit_callbacks)
    rides._who.clear()  # as in a process that has not seen it
    with round_trips(monkeypatch) as sent, django_capture_on_commit_callbacks(execute=True):
        assert play.post(f"/rounds/{rnd.pk}/guess/", slots(S)).status_code == 302
    assert len(sent) == 3, sent  # the session, the hit, the enqueue: each on its own
    assert Guess.objects.count() == 2


def _ended_elsewhere(session_key: str) -> None:
    """Another worker logs the session out: its cache entry and its row go,
    while this process still remembers who the key belonged to."""
    from django.contrib.sessions.backends import cached_db
    from django.contrib.sessions.models import Session
    from django.core.cache import cache

    cache.delete(cached_db.KEY_PREFIX + session_key)
    Session.objects.filter(session_key=session_key).delete()


@pytest.mark.parametrize("how", ["logged out elsewhere", "password changed"])
def test_a_dead_session_key_never_counts_a_hit_against_its_former_owner(play, player, make_round, settings, how,
                                                                       django_capture_on_commit_callbacks):
    """A stolen cookie, revoked: whoever keeps posting with it is sent to
    the login page, and counts nothing against the player's guess limit --
    the hit that rides with the session's read counts only for a session
    that is signed in now."""
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "guess": "1/h"}
    rnd = make_round()
    assert play.get(f"/rounds/{rnd.pk}/").status_code == 200  # the process knows the session's player
    stolen = play.cookies["sessionid"].value
    if how == "logged out elsewhere":
        _ended_elsewhere(stolen)
    else:
        player.user.set_password("a new and long passphrase")
        player.user.save()
    thief = Client()
    thief.cookies["sessionid"] = stolen
    for _ in range(3):
        resp = thief.post(f"/rounds/{rnd.pk}/guess/", slots(S))
        assert resp.status_code == 302 and "/login/" in resp["Location"]
    fresh = Client()
    fresh.force_login(player.user)
    with django_capture_on_commit_callbacks(execute=True):
        assert fresh.post(f"/rounds/{rnd.pk}/guess/", slots(S)).status_code == 302  # her one hit this hour
    assert Guess.objects.count() == 1
