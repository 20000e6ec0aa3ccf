"""Rate limits: failed log-ins per account and per address (django-axes),
sign-ups per address, guesses per player per second; each refusal is a
readable 429 page with Retry-After, and changes nothing."""
from __future__ import annotations

import pytest
import redis
from axes.models import AccessAttempt
from django.contrib.auth import get_user_model

from games import ratelimit
from games.models import Guess, LedgerEntry

pytestmark = pytest.mark.django_db

PASSWORD = "a-long-enough-pass-42"
LIMIT = 10  # settings.AXES_FAILURE_LIMIT's default: the LIMITth failure locks


def log_in(client, username, password, addr="10.0.0.1", **headers):
    return client.post("/login/", {"username": username, "password": password}, REMOTE_ADDR=addr, **headers)


def assert_429(resp, words):
    text = resp.content.decode()
    assert resp.status_code == 429 and "Too many tries" in text and words in text, text[:500]
    assert int(resp["Retry-After"]) > 0


def test_forty_wrong_passwords_lock_the_account(client, settings):
    assert settings.AXES_FAILURE_LIMIT == LIMIT
    get_user_model().objects.create_user("lou", password=PASSWORD)
    answers = [log_in(client, "lou", f"guess-{i}").status_code for i in range(40)]
    assert answers[:LIMIT - 1] == [400] * (LIMIT - 1) and answers[LIMIT - 1:] == [429] * (41 - LIMIT)
    resp = log_in(client, "lou", PASSWORD)  # even the right password waits out the cool-off
    assert_429(resp, "Too many failed log-ins")
    assert "_auth_user_id" not in client.session


def test_failures_count_per_account_across_addresses(client):
    get_user_model().objects.create_user("lou", password=PASSWORD)
    for i in range(LIMIT - 1):
        assert log_in(client, "lou", "wrong", addr=f"10.0.1.{i}").status_code == 400
    assert log_in(client, "lou", "wrong", addr="10.0.1.99").status_code == 429
    assert_429(log_in(client, "lou", PASSWORD, addr="10.0.2.1"), "Too many failed log-ins")
    # another account from a fresh address is not affected
    get_user_model().objects.create_user("mia", password=PASSWORD)
    assert log_in(client, "mia", PASSWORD, addr="10.0.2.2").status_code == 302


def test_failures_count_per_address_across_accounts(client):
    get_user_model().objects.create_user("mia", password=PASSWORD)
    for i in range(LIMIT - 1):
        assert log_in(client, f"nobody{i}", "wrong", addr="10.0.3.1").status_code == 400
    assert log_in(client, "nobody99", "wrong", addr="10.0.3.1").status_code == 429
    assert_429(log_in(client, "mia", PASSWORD, addr="10.0.3.1"), "Too many failed log-ins")
    assert log_in(client, "mia", PASSWORD, addr="10.0.3.2").status_code == 302


def test_a_forged_forwarded_for_does_not_dodge_the_address_limit(client):
    """Without BEHIND_PROXY the X-Forwarded-For header is the client's own
    word: every attempt still counts against REMOTE_ADDR."""
    for i in range(LIMIT):
        log_in(client, f"nobody{i}", "wrong", addr="10.0.4.1", HTTP_X_FORWARDED_FOR=f"192.0.2.{i}")
    assert set(AccessAttempt.objects.values_list("ip_address", flat=True)) == {"10.0.4.1"}
    get_user_model().objects.create_user("mia", password=PASSWORD)
    assert log_in(client, "mia", PASSWORD, addr="10.0.4.1", HTTP_X_FORWARDED_FOR="192.0.2.99").status_code == 429


def test_behind_a_proxy_the_last_forwarded_hop_is_the_address(rf, settings):
    request = rf.get("/", REMOTE_ADDR="10.9.9.9", HTTP_X_FORWARDED_FOR="6.6.6.6, 203.0.113.7")
    settings.BEHIND_PROXY = False
    assert ratelimit.client_ip(request) == "10.9.9.9"
    settings.BEHIND_PROXY = True
    assert ratelimit.client_ip(request) == "203.0.113.7"  # the hop our proxy appended; 6.6.6.6 is forgeable
    assert ratelimit.client_ip(rf.get("/", REMOTE_ADDR="10.9.9.9")) == "10.9.9.9"


def sign_up(client, name, addr="10.1.0.1", password2=PASSWORD):
    return client.post("/signup/", {"username": name, "password1": PASSWORD, "password2": password2},
                       REMOTE_ADDR=addr)


def test_sign_ups_per_address(client, settings):
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "signup": "3/h"}
    for i in range(3):  # refused forms give their hit back
        assert sign_up(client, f"typo{i}", password2="nope").status_code == 400
    for i in range(3):
        assert sign_up(client, f"new{i}").status_code == 302
        client.post("/logout/")
    users, ledger = get_user_model().objects.count(), LedgerEntry.objects.count()
    resp = sign_up(client, "onemore")
    assert_429(resp, "Too many new accounts")
    assert (get_user_model().objects.count(), LedgerEntry.objects.count()) == (users, ledger)
    assert 0 < int(resp["Retry-After"]) <= 3600  # until the hour's window turns
    assert sign_up(client, "elsewhere", addr="10.1.0.2").status_code == 302


@pytest.fixture
def frozen_clock(monkeypatch):
    """The limiter's clock, fixed mid-window and moved by hand."""
    now = {"t": 1_800_000_000.5}
    monkeypatch.setattr(ratelimit.time, "time", lambda: now["t"])
    return now


def test_guesses_per_player_per_second(play, player, make_player, make_round, client, frozen_clock, settings):
    assert settings.RATE_LIMITS["guess"] == "3/s"
    rnd = make_round()
    url = f"/rounds/{rnd.pk}/guess/"
    # A different guess each time: repeating one's own guess is refused on its own.
    guesses = [{f"slot{i}": e for i, e in enumerate(rnd.keyboard[n:n + 6])} for n in range(6)]
    assert [play.post(url, guesses[n]).status_code for n in range(3)] == [302] * 3
    resp = play.post(url, guesses[3], HTTP_REFERER=f"http://testserver/rounds/{rnd.pk}/")
    assert_429(resp, "Too many guesses in a second")
    assert f'href="http://testserver/rounds/{rnd.pk}/"' in resp.content.decode()  # the way back
    assert Guess.objects.filter(player=player).count() == 3
    assert LedgerEntry.objects.filter(player=player, reason="guess").count() == 3  # the refused one is free
    other = make_player("bo", keys=5)  # the limit is per player
    client.force_login(other.user)
    assert client.post(url, guesses[3]).status_code == 302
    frozen_clock["t"] += 1  # the next second
    assert play.post(url, guesses[4]).status_code == 302


def test_a_limit_lets_requests_through_when_valkey_is_down(client, monkeypatch, settings):
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "signup": "1/h"}

    class Down:  # every command fails to connect
        def __getattr__(self, name):
            def refused(*args, **kwargs):
                raise redis.exceptions.ConnectionError("refused")
            return refused

    monkeypatch.setattr(ratelimit, "get_client", lambda: Down())
    assert sign_up(client, "a1").status_code == 302
    client.post("/logout/")
    assert sign_up(client, "a2").status_code == 302


@pytest.mark.parametrize("text, rate", [("5/h", (5, 3600)), ("3/s", (3, 1)), ("10/15m", (10, 900)),
                                        (" 2 / d ", (2, 86400))])
def test_parse_rate(text, rate):
    assert ratelimit.parse_rate(text) == ratelimit.Rate(*rate)


@pytest.mark.parametrize("text", ["5", "5/x", "h/5", "-1/s", "", "5/0.5s"])
def test_parse_rate_refuses(text):
    with pytest.raises(ValueError):
        ratelimit.parse_rate(text)


@pytest.mark.parametrize("ttl", ["0", "-5", "1.5", "soon", ""])
def test_the_hit_script_refuses_a_bad_ttl_and_writes_nothing(valkey, ttl):
    import echomq

    with pytest.raises(echomq.ArgumentError, match="rate limit"):
        ratelimit._HIT(valkey, ["cm:rl:test"], [ttl])
    assert not valkey.exists("cm:rl:test")


def test_the_hit_script_counts_for_a_session_only_while_it_is_signed_in(any_server):
    """With a session's entry and identity (a hit riding with the session's
    read) it counts only while both exist; a wrong number of keys is refused
    before anything is counted. Valkey and Redis 7.0 alike."""
    import echomq

    session, identity, counter = "{cm:cache}:s", "{cm:cache}:i", "cm:rl:test"
    any_server.set(session, "x")
    assert ratelimit._HIT(any_server, [counter, session, identity], [2000]) == 0  # no identity: not counted
    any_server.set(identity, "y")
    assert ratelimit._HIT(any_server, [counter, session, identity], [2000]) == 1
    assert ratelimit._HIT(any_server, [counter], [2000]) == 2  # the view's own hit, after the session was checked
    any_server.delete(session)
    assert ratelimit._HIT(any_server, [counter, session, identity], [2000]) == 0
    with pytest.raises(echomq.ArgumentError, match="rate limit"):
        ratelimit._HIT(any_server, [counter, session], [2000])
    assert any_server.get(counter) == b"2" and 0 < any_server.pttl(counter) <= 2000


def test_an_ipv6_client_counts_by_its_64(client, settings):
    """One client holds a whole /64 and may use any address in it: sign-ups
    (each funded) and log-in failures count the /64, not each address."""
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "signup": "3/h"}
    for i in range(3):
        assert sign_up(client, f"six{i}", addr=f"2001:db8:1:2::{i + 1:x}").status_code == 302
        client.post("/logout/")
    assert_429(sign_up(client, "rotated", addr="2001:db8:1:2:ffff:ee:dd:1"), "Too many new accounts")
    assert sign_up(client, "neighbour", addr="2001:db8:1:3::1").status_code == 302  # the next /64
    client.post("/logout/")
    for i in range(LIMIT - 1):
        assert log_in(client, f"nobody{i}", "wrong", addr=f"2001:db8:9:9::{i + 1:x}").status_code == 400
    assert log_in(client, "nobody99", "wrong", addr="2001:db8:9:9:abcd::1").status_code == 429
    assert set(AccessAttempt.objects.values_list("ip_address", flat=True)) == {"2001:db8:9:9::"}


@pytest.mark.parametrize("addr, counted", [
    ("203.0.113.7", "203.0.113.7"),
    ("2001:db8:1:2:3:4:5:6", "2001:db8:1:2::"),
    ("2001:0DB8:0001:0002::9", "2001:db8:1:2::"),
    ("::ffff:203.0.113.7", "203.0.113.7"),
    ("unknown", "unknown"),
])
def test_the_address_a_limit_counts(rf, addr, counted):
    assert ratelimit.client_ip(rf.get("/", REMOTE_ADDR=addr)) == counted
