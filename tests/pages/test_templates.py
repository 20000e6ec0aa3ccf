"""The player pages are Jinja2 (games/jinja2, games.jinja2_env); the admin
and Django's own templates stay Django templates. The environment keeps
what the Django templates did: Django's escaping, an empty string for a
missing name at any depth, one CSRF token per page, addresses under the
script prefix in force."""
from __future__ import annotations

import re

import pytest
from django.template import engines, loader
from django.template.backends.django import DjangoTemplates
from django.template.backends.jinja2 import Jinja2
from django.urls import set_script_prefix
from django.utils.html import escape

pytestmark = pytest.mark.django_db


def test_player_pages_are_jinja2_and_the_admin_stays_django():
    for name in ("games/round.html", "games/base.html", "404.html", "429.html", "500.html"):
        assert isinstance(loader.get_template(name).backend, Jinja2), name
    for name in ("admin/base_site.html", "admin/games/player/grant.html", "echomq/admin/overview.html"):
        assert isinstance(loader.get_template(name).backend, DjangoTemplates), name


def test_values_are_escaped_the_way_django_escapes_them():
    env = engines["jinja2"]
    nasty = """<b title="x">O'Brien & co</b>"""
    assert env.from_string("{{ v }}").render({"v": nasty}) == escape(nasty)
    assert env.from_string("{{ v }}").render({"v": 7}) == "7"
    assert env.from_string("{{ v.missing.deeper }}|{{ nothing }}").render({"v": {}}) == "|"


def test_the_round_page_has_one_csrf_token_for_all_its_forms(play, make_round):
    rnd = make_round()
    html = play.get(f"/rounds/{rnd.pk}/").content.decode()
    tokens = re.findall(r'name="csrfmiddlewaretoken" value="([^"]+)"', html)
    assert len(tokens) == 2 and tokens[0] == tokens[1]  # log-out form and the composer


@pytest.mark.parametrize("visitor", ["new", "returning"])
def test_the_pages_csrf_token_is_djangos_masked_secret_and_a_checking_client_posts_with_it(
        player, make_round, visitor, django_capture_on_commit_callbacks):
    """The form's token is Django's own (``get_token``): masked afresh on
    each page, the cookie (re)sent, and CsrfViewMiddleware accepts what the
    form posts."""
    from django.middleware.csrf import CSRF_ALLOWED_CHARS, CSRF_TOKEN_LENGTH
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(player.user)
    rnd = make_round()
    if visitor == "returning":
        client.get(f"/rounds/{rnd.pk}/")
    first = client.get(f"/rounds/{rnd.pk}/")
    assert "csrftoken" in first.cookies  # made, or renewed
    secret = client.cookies["csrftoken"].value
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', first.content.decode()).group(1)
    again = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"',
                      client.get(f"/rounds/{rnd.pk}/").content.decode()).group(1)
    assert len(token) == CSRF_TOKEN_LENGTH and set(token) <= set(CSRF_ALLOWED_CHARS)
    assert token != again and secret and client.cookies["csrftoken"].value == secret
    form = {"csrfmiddlewaretoken": token, **{f"slot{i}": e for i, e in enumerate(rnd.keyboard[:6])}}
    with django_capture_on_commit_callbacks(execute=True):
        assert client.post(f"/rounds/{rnd.pk}/guess/", form).status_code == 302
    assert client.post(f"/rounds/{rnd.pk}/guess/", {**form, "csrfmiddlewaretoken": "x" * 64}).status_code == 403


def test_a_page_without_a_form_sets_no_csrf_cookie(client):
    assert "csrftoken" not in client.get("/rules/").cookies
    assert "csrftoken" in client.get("/login/").cookies


def test_addresses_follow_the_script_prefix(make_round):
    from games.jinja2_env import url

    rnd = make_round()
    assert url("round", rnd.pk) == f"/rounds/{rnd.pk}/"
    set_script_prefix("/game/")
    try:
        assert url("round", rnd.pk) == f"/game/rounds/{rnd.pk}/"
        assert url("lobby") == "/game/"
    finally:
        set_script_prefix("/")
    assert url("lobby") == "/"


def test_the_iso_date_shortcut_matches_djangos_c_format():
    import datetime as dt

    from django.template.defaultfilters import date as django_date
    from django.utils.timezone import template_localtime

    from games.jinja2_env import date

    for value in (dt.datetime(2026, 12, 1, 21, 5, 7, 123456, tzinfo=dt.timezone.utc),
                  dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.timezone(dt.timedelta(hours=-5)))):
        assert date(value, "c") == django_date(template_localtime(value), "c")


# What the round page's board loop and the header's format_html made before
# they were put together in Python; the pages must come out byte for byte.
_BOARD_LOOP = ('{% for row in rows %}<li value="{{ row.rank }}"{% if row.me %} class="me"{% endif %}>'
               '<span>{{ row.name }}{% if row.me %} (you){% endif %}</span> <span class="num">{{ row.total }}</span>'
               '</li>{% endfor %}')
_NASTY = """O'Brien & <b title="x">co</b>"""


def test_the_live_board_rows_come_out_as_the_template_loop_made_them():
    from games.views.play import _board_rows

    rows = [{"rank": 1, "name": _NASTY, "total": 600, "me": False},
            {"rank": 2, "name": "ann", "total": 480, "me": True},
            {"rank": 3, "name": "a{b}c %s", "total": 0, "me": False}]
    html = _board_rows(rows)
    assert html == engines["jinja2"].from_string(_BOARD_LOOP).render({"rows": rows})
    assert escape(_NASTY) in html and "<b" not in html and "ann (you)" in html
    assert _board_rows([]) == ""


@pytest.mark.parametrize("unread", [0, 3])
def test_the_header_nav_is_what_format_html_made(rf, unread):
    from types import SimpleNamespace

    from django.utils.html import format_html

    from games import jinja2_env
    from games.views.common import addresses, amount

    page_url = addresses()
    request = rf.get("/")
    request.user = SimpleNamespace(is_authenticated=True, get_username=lambda: _NASTY)
    wallet = SimpleNamespace(keys=1, clips=20, diamonds=300)
    request.player = SimpleNamespace(unread=unread, wallet=wallet)
    csrf = '<input type="hidden" name="csrfmiddlewaretoken" value="t">'
    context = {"request": request, "url": page_url, "csrf_input": jinja2_env.mark_safe(csrf)}
    words = f": {amount(1, 'keys')}, {amount(20, 'clips')}, {amount(300, 'diamonds')}"
    expected = format_html(
        jinja2_env._NAV_PLAYER, lobby=page_url("lobby"), rules=page_url("rules"), me=page_url("me"),
        wallet=page_url("wallet"), wallet_words=words,
        balances=format_html(jinja2_env._BALANCES, 1, 20, 300), notifications=page_url("notifications"),
        unread=unread, badge=format_html(jinja2_env._BADGE, unread) if unread else "",
        logout=page_url("logout"), csrf_input=context["csrf_input"], username=_NASTY)
    assert jinja2_env.header_nav(context) == expected
    assert escape(_NASTY) in expected and csrf in expected


def test_the_round_pages_links_follow_the_script_prefix(make_round):
    from games.views.common import round_addresses

    rnd = make_round()
    assert round_addresses(rnd.pk)["watch"] == f"/watch/{rnd.pk}/"
    set_script_prefix("/game/")
    try:
        links = round_addresses(rnd.pk)
        assert links["lobby"] == "/game/" and links["guess"] == f"/game/rounds/{rnd.pk}/guess/"
        assert links["rules"] == "/game/rules/"
    finally:
        set_script_prefix("/")
    assert round_addresses(rnd.pk)["lobby"] == "/"
