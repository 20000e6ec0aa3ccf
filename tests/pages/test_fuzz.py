"""A bounded fuzz of every form and JSON endpoint: hostile bodies, hostile
field values, malformed ids. Every answer must be a 4xx (the admin's own
forms answer a refused form with 200 and the errors, Django's convention:
there, anything below 500), and nothing may be written: the game's rows,
the users, the admin log and Valkey's keys are snapshotted before and
compared after each request.

Hypothesis draws the field values with a fixed budget (``BUDGET`` examples
per form, derandomized) so the suite stays fast and a failure replays the
same way; the hand-picked families (charsets, NUL, huge bodies, ZWJ and
skin-tone sequences, malformed ids) run in full every time.
"""
from __future__ import annotations

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth import get_user_model
from django.test import Client
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

from games.models import (AdminGrant, EmojiSet, Guess, LedgerEntry, Lock, Notification, Player, Round, RoundEntry,
                          RoundSchedule, Wallet)

pytestmark = pytest.mark.django_db

BUDGET = 40  # hypothesis examples per form
FORM = "application/x-www-form-urlencoded"
MODELS = [get_user_model(), Player, Wallet, LedgerEntry, Round, Guess, Lock, RoundEntry, Notification, EmojiSet, AdminGrant,
          LogEntry, RoundSchedule]
KEYBOARD = ["🐶", "🐱", "🐭", "🐹", "🐰", "🦊", "🐻", "🐼", "🐨", "🐯", "🦁", "🐮"]

# Values no field here may accept: emoji look-alikes of keyboard keys (ZWJ,
# skin tones, presentation selectors), control and bidi characters, huge
# strings, numbers in odd spellings, markup.
JOINERS = ["\u200d", "\ufe0f", "\ufe0e", "\U0001f3fb", "\U0001f3ff", "\u20e3", "\u0301", "\u200b"]
HOSTILE = [
    "👩🏽‍💻", "👍🏿", "🐶\u200d", "\u200d🐶", "🐶\ufe0f", "🐶🏿", "🐶\u200d🐱", "🏳️‍🌈", "🇫🇷", "1️⃣",
    "🐶🐱", "🐶 ", " ", "\u202e🐶", "\t", "\r\n", "\x7f", "\ud7ff", "\uffff", "\U0010ffff",
    "x" * 65, "🐶" * 40, "A" * 5000, "<script>alert(1)</script>", "' OR 1=1 --", "%00", "\\x00",
    "-1", "0", "1e9", "1.5", "99999999999999999999", "NaN", "٣", "１", "true", "[]", "{}",
]
BAD_IDS = ["RND00000000000", "nope", "RND", "RND0000000000000000", "x" * 300, "🐶", "RND\u200d000000000",
           "RND%27%3Cscript%3E", "%2e%2e", "RND0000000000%20", "GES00000000000", "PLR00000000000", "%FF%FE"]


# Valkey keys that hold state (queues, leaderboards); caches (sessions,
# names, rate-limit counters) may change on any request.
STATE_KEYS = (b"emq:", b"cm:lb:")


def snapshot(valkey) -> dict:
    rows = {m._meta.label: list(m.objects.order_by("pk").values()) for m in MODELS}
    rows["valkey"] = sorted(k for k in valkey.keys("*") if k.startswith(STATE_KEYS))
    return rows


@pytest.fixture(autouse=True)
def _quiet_limits(settings):
    """The fuzz is about input, not rate: limits off (tested on their own)."""
    settings.RATE_LIMITS = {"signup": "", "guess": ""}
    settings.AXES_FAILURE_LIMIT = 100_000


@pytest.fixture
def rnd(make_round):
    return make_round(keyboard_size=None)


def strict_client(user=None) -> Client:
    """A client with CSRF enforced (as a browser is): the charset bug hid
    behind the CSRF check re-reading the body."""
    c = Client(enforce_csrf_checks=True, raise_request_exception=False)
    if user is not None:
        c.force_login(user)
    c.get("/" if user is not None else "/login/")  # a page with a form: sets the CSRF cookie
    return c


def post(c: Client, url: str, body: bytes, content_type: str = FORM):
    token = c.cookies["csrftoken"].value
    return c.generic("POST", url, body, content_type=content_type, headers={"X-CSRFToken": token})


def urlencode(data: dict) -> bytes:
    from urllib.parse import urlencode as enc

    return enc(data, doseq=True).encode()


@pytest.fixture
def staff():
    return get_user_model().objects.create_superuser("boss", password="pw-boss-123")


def post_urls(rnd, player_user, staff) -> list[tuple[str, object]]:
    """Every POST URL, with the user who may post to it (None: anyone)."""
    r = rnd.pk
    return [
        ("/login/", None), ("/signup/", None), ("/logout/", player_user),
        (f"/rounds/{r}/compose/", player_user), (f"/rounds/{r}/lock/", player_user),
        (f"/rounds/{r}/guess/", player_user), ("/wallet/exchange/", player_user),
        ("/notifications/read/", player_user),
        ("/admin/login/", None), ("/admin/games/round/add/", staff), ("/admin/games/emojiset/add/", staff),
        ("/admin/games/player/", staff), (f"/admin/games/round/{r}/leaderboard/", staff),
        ("/admin/queues/cm/pause/", staff), ("/admin/queues/cm/dead/", staff),
    ]


# -- bodies that cannot be read: every POST URL answers 400, writes nothing --
UNREADABLE = {
    "utf-16": ("username=a&password=b&keys=1".encode("utf-16"), FORM + "; charset=utf-16"),
    "utf-16 quoted": ("keys=1".encode("utf-16-le"), FORM + '; charset="UTF-16LE"'),
    "latin-1": ("username=caf\xe9".encode("latin-1"), FORM + "; charset=latin-1"),
    "unknown charset": (b"keys=1", FORM + "; charset=x-no-such-codec"),
    "multipart utf-16": (b"--B\r\nContent-Disposition: form-data; name=\"keys\"\r\n\r\n1\r\n--B--\r\n",
                         "multipart/form-data; boundary=B; charset=utf-16"),
    "multipart no boundary": (b"--B\r\nContent-Disposition: form-data; name=\"keys\"\r\n\r\n1\r\n--B--\r\n",
                              "multipart/form-data"),
    "NUL in a value": (b"username=a%00b&password=x&keys=1%00", FORM),
    "NUL in a name": (b"user%00name=a&slot0=%F0%9F%90%B6", FORM),
    "raw NUL": (b"username=a\x00b&keys=1", FORM),
    "huge body": (b"note=" + b"A" * (300 * 1024), FORM),
    "too many fields": (b"&".join(b"f%d=1" % i for i in range(1200)), FORM),
}


@pytest.mark.parametrize("family", list(UNREADABLE))
def test_unreadable_bodies_are_400_on_every_post_url(family, rnd, player, staff, valkey):
    body, content_type = UNREADABLE[family]
    clients = {None: strict_client(), player.user: strict_client(player.user), staff: strict_client(staff)}
    before = snapshot(valkey)
    for url, user in post_urls(rnd, player.user, staff):
        resp = post(clients[user], url, body, content_type)
        assert resp.status_code == 400, (family, url, resp.status_code)
        text = resp.content.decode()
        assert "Bad request" in text and "Nothing was changed" in text, (family, url)
        assert snapshot(valkey) == before, (family, url)


class _NotedBody:
    """A request body that notes every read of it (and holds nothing)."""

    def __init__(self):
        self.reads = []

    def read(self, size=-1):
        self.reads.append(size)
        return b""

    readline = read


def post_unread(c: Client, url: str, content_type: str, length: int) -> tuple:
    """POST to ``url`` a body that says it is ``length`` bytes long; the
    answer, and the reads anything made of the body."""
    body = _NotedBody()
    resp = c.generic("POST", url, b"-", content_type=content_type,
                     headers={"X-CSRFToken": c.cookies["csrftoken"].value},
                     **{"wsgi.input": body, "CONTENT_LENGTH": str(length)})
    return resp, body.reads


@pytest.mark.parametrize("content_type", [FORM, "multipart/form-data; boundary=B"])
def test_a_form_larger_than_any_here_is_refused_before_a_byte_is_read(content_type, rnd, player, staff, valkey,
                                                                      settings):
    """File parts count too (Django's own limit leaves them out): a huge
    multipart upload is refused from its Content-Length, on every POST URL."""
    clients = {None: strict_client(), player.user: strict_client(player.user), staff: strict_client(staff)}
    for url, user in post_urls(rnd, player.user, staff):
        resp, reads = post_unread(clients[user], url, content_type, settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1)
        assert resp.status_code == 400 and "larger than any form here" in resp.content.decode(), url
        assert reads == [], url


def test_a_form_to_an_address_with_no_view_is_a_404_and_never_read(player):
    """The form is parsed only once the address has a view that takes one:
    a POST to nowhere is a 404, its body unread, whoever sends it."""
    for c in (strict_client(), strict_client(player.user)):
        for content_type in (FORM, "multipart/form-data; boundary=B", "multipart/form-data"):
            resp, reads = post_unread(c, "/no/such/page/", content_type, 1000)
            assert resp.status_code == 404 and reads == [], content_type


def every_route(rnd) -> list[str]:
    """Every URL the site routes, its parameters filled with real-looking
    values: routes other code adds later are covered without editing this."""
    import re

    from django.urls import URLResolver, get_resolver

    def walk(resolver, prefix=""):
        for p in resolver.url_patterns:
            if isinstance(p, URLResolver):
                yield from walk(p, prefix + str(p.pattern))
            else:
                yield prefix + str(p.pattern)

    fill = {"queue": "cm", "job_id": "JOB0KHTOWnGLuC", "content_type_id": "1", "app_label": "games"}
    urls = set()
    for route in walk(get_resolver()):
        route = route.replace("^(?P<app_label>", "").replace("(?P<url>.*)$", "nowhere/")
        route = re.sub(r"\|[^/]*\)/\$$", "/", route)  # admin's app index: the first app label
        route = re.sub(r"<(?:\w+:)?(\w+)>", lambda m: fill.get(m[1], rnd.pk), route)
        urls.add("/" + route)
    return sorted(urls)


def test_a_utf16_form_is_400_on_every_routed_url(rnd, player, staff, valkey):
    """The report's case against every route there is, as staff (who may
    reach them all) and as a player: 400, nothing written."""
    routes = every_route(rnd)
    assert len(routes) > 100 and "/login/" in routes and f"/rounds/{rnd.pk}/guess/" in routes
    clients = [strict_client(staff), strict_client(player.user)]
    before = snapshot(valkey)
    body = "username=a&password=b&keys=1".encode("utf-16")
    for url in routes:
        for c in clients:
            resp = post(c, url, body, FORM + "; charset=utf-16")
            assert resp.status_code == 400 and "must be sent as UTF-8" in resp.content.decode(), url
    assert snapshot(valkey) == before


def test_the_charset_bug_of_the_issue(rnd, player):
    """The report: a UTF-16 form answered 500 on every form, log-in and
    sign-up included. Now a 400 that says why."""
    for url, user in (("/login/", None), ("/signup/", None), (f"/rounds/{rnd.pk}/guess/", player.user)):
        resp = post(strict_client(user), url, "username=a&password=b".encode("utf-16"),
                    FORM + "; charset=utf-16")
        assert resp.status_code == 400 and "must be sent as UTF-8" in resp.content.decode(), url


def test_error_pages_answer_even_when_the_site_template_cannot(rnd, player, monkeypatch):
    """The 400 page falls back to a plain page when the site template
    cannot render (say the database behind the header is down), instead of
    turning into a 500."""
    from codemojex_site import errors

    def broken(*args, **kwargs):
        raise RuntimeError("the template broke")

    c = strict_client(player.user)
    monkeypatch.setattr(errors.loader, "render_to_string", broken)
    resp = post(c, f"/rounds/{rnd.pk}/guess/", b"keys=1", FORM + "; charset=utf-16")
    assert resp.status_code == 400 and "must be sent as UTF-8" in resp.content.decode()
    resp = Client(raise_request_exception=False).get("/no/such/page/")
    assert resp.status_code == 404 and "Not found" in resp.content.decode()


def test_a_crash_is_the_500_page_even_after_an_unparsed_body(player, monkeypatch):
    """handler500 renders without the request: it neither re-reads a body
    nor asks the database, so a crash answers the readable 500 page."""
    from games.views import account

    def crash(*args, **kwargs):
        raise RuntimeError("bug")

    c = strict_client(player.user)
    monkeypatch.setattr(account.wallet, "balances", crash)
    resp = c.get("/wallet/")
    assert resp.status_code == 500 and "Something went wrong" in resp.content.decode()
    monkeypatch.setattr(account.wallet, "exchange_diamonds", crash)
    resp = post(c, "/wallet/exchange/", b"keys=1")
    assert resp.status_code == 500 and "Something went wrong" in resp.content.decode()


# -- hostile field values, form by form --------------------------------------
def slots(values: list[str]) -> dict:
    return {f"slot{i}": v for i, v in enumerate(values)}


hostile = st.one_of(
    st.sampled_from(HOSTILE),
    st.builds(lambda e, j: e + j, st.sampled_from(KEYBOARD), st.sampled_from(JOINERS)),
    st.builds(lambda j, e: j + e, st.sampled_from(JOINERS), st.sampled_from(KEYBOARD)),
    st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=70),
    st.binary(min_size=1, max_size=12),  # sent as they are: mostly invalid UTF-8
)


def _seen_as(value) -> str:
    """What a form field makes of a value (decoded, stripped)."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    return value.strip()


def hostile_except(*valid) -> st.SearchStrategy:
    """Hostile values that the field would not take as one of ``valid``."""
    allowed = {_seen_as(v) for v in valid}
    return hostile.filter(lambda v: _seen_as(v) not in allowed)


def fuzz(draw_data):
    """A hypothesis test body: draw a form, post it, check 4xx and no write."""
    return hsettings(max_examples=BUDGET, deadline=None, derandomize=True, database=None,
                     suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])(
        given(data=st.data())(draw_data))


def check(c, url, body, before, valkey, *, admin=False):
    resp = post(c, url, body)
    if admin:
        assert resp.status_code < 500, (url, body[:200], resp.status_code)
    else:
        assert 400 <= resp.status_code < 500, (url, body[:200], resp.status_code)
    assert snapshot(valkey) == before, (url, body[:200])


def raw(data: dict) -> bytes:
    """Form-encode; a bytes value goes as its bytes (invalid UTF-8 included)."""
    from urllib.parse import quote_from_bytes

    return "&".join(quote_from_bytes(k.encode()) + "=" +
                    quote_from_bytes(v if isinstance(v, bytes) else str(v).encode("utf-8"))
                    for k, v in data.items()).encode()


def test_fuzz_guess(rnd, player, valkey):
    c, url, before = strict_client(player.user), f"/rounds/{rnd.pk}/guess/", snapshot(valkey)
    off_keyboard = hostile_except(*rnd.keyboard)

    @fuzz
    def run(data):
        values = list(rnd.keyboard[:6])
        for i in data.draw(st.lists(st.integers(0, 5), min_size=1, max_size=6, unique=True)):
            values[i] = data.draw(off_keyboard)
        extra = data.draw(st.sampled_from([{}, {"token": "zz"}, {"token": "0" * 33}, {"token": "\u200d"}]))
        check(c, url, raw({**slots(values), **extra}), before, valkey)

    run()


def test_fuzz_compose_and_lock(rnd, player, valkey):
    c, before = strict_client(player.user), snapshot(valkey)
    positions = [str(i) for i in range(6)]

    @fuzz
    def run(data):
        which = data.draw(st.sampled_from(["compose-key", "compose-op", "lock", "unlock", "lock-slot"]))
        values = data.draw(st.lists(st.sampled_from(rnd.keyboard + [""]), min_size=6, max_size=6))
        if which == "compose-key":
            url, form = "compose", {"key": data.draw(hostile_except("", *rnd.keyboard))}
        elif which == "compose-op":
            url, form = "compose", {"op": data.draw(hostile_except("", "backspace", "clear"))}
        elif which in ("lock", "unlock"):
            url, form = "lock", {which: data.draw(hostile_except("", *positions))}
        else:  # lock a position whose draft holds an off-keyboard value
            values[0] = data.draw(hostile_except(*rnd.keyboard))
            url, form = "lock", {"lock": "0"}
        check(c, f"/rounds/{rnd.pk}/{url}/", raw({**slots(values), **form}), before, valkey)

    run()


def test_fuzz_exchange(player, valkey):
    c, before = strict_client(player.user), snapshot(valkey)  # no diamonds: no exchange can succeed

    @fuzz
    def run(data):
        check(c, "/wallet/exchange/", raw({"keys": data.draw(hostile)}), before, valkey)

    run()


def test_fuzz_sign_up_and_log_in(make_player, valkey):
    make_player("taken")
    c, before = strict_client(), snapshot(valkey)
    good = "a-long-enough-pass-42"

    @fuzz
    def run(data):
        bad = data.draw(hostile)
        field = data.draw(st.sampled_from(["username", "password1", "password2"]))
        form = {"username": "newbie", "password1": good, "password2": good, field: bad}
        if field == "username":
            form["password2"] = good + "!"  # many names are valid: keep the form refused elsewhere
        check(c, "/signup/", raw(form), before, valkey)
        check(c, "/login/", raw({"username": data.draw(st.sampled_from(["taken", bad])), "password": bad}),
              before, valkey)

    run()


def test_fuzz_admin_forms(rnd, staff, player, valkey):
    import json

    c, before = strict_client(staff), snapshot(valkey)
    es = rnd.emoji_set

    @fuzz
    def run(data):
        bad = data.draw(hostile)
        which = data.draw(st.sampled_from(["round", "emojiset", "grant"]))
        if which == "round":
            field = data.draw(st.sampled_from(["emoji_set", "keyboard_size", "weights", "minutes", "kind"]))
            form = {"title": "x", "emoji_set": es.pk, "keyboard_size": "24", "kind": "blind", "currency": "keys",
                    "guess_price": "1", "prize_pool": "0", "minutes": "60", "weights": "[40]", field: bad}
            if field != "weights":
                form["weights"] = "[0]"  # keep the form refused whatever the field makes of ``bad``
            check(c, "/admin/games/round/add/", raw(form), before, valkey, admin=True)
        elif which == "emojiset":
            # Fewer entries than a keyboard: refused, whatever they are.
            emojis = data.draw(st.lists(hostile.filter(lambda v: isinstance(v, str)) | st.sampled_from(KEYBOARD),
                                        max_size=23))
            form = {"slug": "fuzz", "title": "Fuzz", "emojis": json.dumps(emojis, ensure_ascii=False)}
            check(c, "/admin/games/emojiset/add/", raw(form), before, valkey, admin=True)
        else:
            field = data.draw(st.sampled_from(["amount", "currency", "note"]))
            form = {"action": "grant_currency", "_selected_action": player.pk, "apply": "1",
                    "currency": "keys", "amount": "0", "note": "ok", "token": "t" * 32, field: bad}
            if field == "amount":
                form["note"] = "n" * 65  # over the note's 64: refused whatever the amount parses to
            check(c, "/admin/games/player/", raw(form), before, valkey, admin=True)

    run()


SCHEDULE_FIELDS = ["name", "emoji_set", "keyboard_size", "kind", "currency", "guess_price", "prize_pool", "minutes",
                   "cron", "every_minutes", "tz", "when_open"]


@pytest.mark.parametrize("field", SCHEDULE_FIELDS)
def test_fuzz_round_schedule_form(rnd, staff, valkey, field):
    """Any value in any field of the schedule form is a form error (the cron
    line and time zone judged by EchoMQ's grid), never a 500 or a write."""
    c, before = strict_client(staff), snapshot(valkey)
    es = rnd.emoji_set

    @hsettings(max_examples=BUDGET // 4, deadline=None, derandomize=True, database=None,
               suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(data=st.data())
    def run(data):
        # A keyboard larger than the set (or, when the keyboard is drawn, a round
        # of 0 minutes) keeps the form refused; every other field is still judged.
        form = {"name": "Fuzzed", "active": "on", "emoji_set": es.pk, "keyboard_size": "500", "kind": "classic",
                "currency": "keys", "guess_price": "1", "prize_pool": "0", "minutes": "30", "cron": "0 * * * *",
                "every_minutes": "", "tz": "Europe/Paris", "when_open": "skip", field: data.draw(hostile)}
        if field == "keyboard_size":
            form["minutes"] = "0"
        if field == "cron" and data.draw(st.booleans()):  # five fields, so EchoMQ's grid judges it
            form["cron"] = f"{_seen_as(form['cron'])} * * * *"
        check(c, "/admin/games/roundschedule/add/", raw(form), before, valkey, admin=True)

    run()


# -- malformed ids -----------------------------------------------------------
@pytest.mark.parametrize("rid", BAD_IDS)
def test_malformed_round_ids(rid, player, staff, valkey, rnd):
    c, admin = strict_client(player.user), strict_client(staff)
    before = snapshot(valkey)
    for url in (f"/rounds/{rid}/", f"/rounds/{rid}/leaderboard/", f"/rounds/{rid}/my-guesses.json"):
        resp = c.get(url)
        assert resp.status_code == 404, (url, resp.status_code)
    for action in ("guess", "lock", "compose"):
        resp = post(c, f"/rounds/{rid}/{action}/", urlencode({**slots(rnd.keyboard[:6]), "lock": "0"}))
        assert resp.status_code == 404, (action, resp.status_code)
    for url in (f"/admin/games/round/{rid}/change/", f"/admin/games/round/{rid}/leaderboard/",
                f"/admin/games/guess/{rid}/change/", f"/admin/games/player/?q={rid}",
                f"/admin/queues/{rid}/", f"/admin/queues/cm/jobs/{rid}/"):
        assert admin.get(url).status_code < 500, url
    for url in (f"/admin/queues/cm/jobs/{rid}/requeue/", f"/admin/queues/cm/jobs/{rid}/remove/"):
        assert post(admin, url, b"").status_code < 500, url
    assert snapshot(valkey) == before


@pytest.mark.parametrize("query", ["?page=%00", "?slot0=%00", "?q=a%00b", "?%00=1", "?slot0=%FF%FE",
                                   "?page=" + "9" * 400, "?slot0=" + "🐶" * 200])
def test_hostile_queries(query, player, staff, rnd, valkey):
    c, admin = strict_client(player.user), strict_client(staff)
    before = snapshot(valkey)
    for client, url in ((c, f"/rounds/{rnd.pk}/"), (c, "/wallet/"), (c, f"/rounds/{rnd.pk}/my-guesses.json"),
                        (c, "/"), (admin, "/admin/games/player/"), (admin, "/admin/games/round/"),
                        (admin, "/admin/games/ledgerentry/")):
        resp = client.get(url + query)
        assert resp.status_code < 500, (url + query, resp.status_code)
        if "%00" in query:
            assert resp.status_code == 400, url + query
    assert snapshot(valkey) == before


def test_json_poll_without_a_login_and_with_odd_accept_headers(rnd, player):
    anon = Client(raise_request_exception=False)
    assert anon.get(f"/rounds/{rnd.pk}/my-guesses.json").status_code == 401
    c = strict_client(player.user)
    for accept in ("application/json", "*/*", "text/html;q=0.1", "\u200d", "x" * 5000):
        resp = c.get(f"/rounds/{rnd.pk}/my-guesses.json", headers={"Accept": accept})
        assert resp.status_code == 200 and resp.json()["guesses"] == []
