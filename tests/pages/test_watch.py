"""A round anyone can watch (issue 23, part 3): the watch page and its poll,
for a visitor with no account. What they show is ``games.watch.view``:
never the secret, the nonce or any guess's emojis while the round is open,
never a sealed blind total; the reveal once settled. No input makes a 500."""
from __future__ import annotations

import json
import re

import pytest
from django.test import Client

from games import live, settlement, watch
from games.guesses import submit
from games.workers import score_guess

from .conftest import drain, secret_forms

pytestmark = pytest.mark.django_db

SECRET = ["🦊", "🐶", "🐰", "🐱", "🐹", "🐭"]
ANN = ["🐶", "🐱", "🐭", "🐹", "🐰", "🦊"]      # 320
BEA = ["🦊", "🐶", "🐼", "🐭", "🐹", "🐱"]      # 420


@pytest.fixture(autouse=True)
def _fresh_views():
    watch.forget()
    yield
    watch.forget()


@pytest.fixture
def played(make_round, make_player, django_capture_on_commit_callbacks):
    def make(kind="classic", who=("ann", "bea")):
        rnd = make_round(kind=kind, secret=SECRET, prize_pool=100, title=f"Watch {kind}")
        with django_capture_on_commit_callbacks(execute=True):
            submit(make_player(who[0]), rnd, ANN)
            submit(make_player(who[1]), rnd, BEA)
        drain("cm", score_guess)
        return rnd
    return make


def text(html: str) -> str:
    from html import unescape

    return re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", html)).replace("\xa0", " "))


def assert_private(body: str, rnd):
    for form in secret_forms(rnd):
        assert form not in body, form
    for e in rnd.keyboard:  # no guess, no lock, no key: not one emoji of the round's set
        assert e not in body, e


def test_a_visitor_watches_an_open_classic_round(client, played):
    rnd = played("classic")
    resp = client.get(f"/watch/{rnd.pk}/")
    assert resp.status_code == 200
    html = resp.content.decode()
    words = text(html)
    assert "bea 420/600" in words and "ann 320/600" in words
    assert words.index("bea") < words.index("ann")
    assert "2 players with a score" in words and "2 guesses per minute" in words and "Ends in" in words
    assert "💎 100 in the pool" in words
    assert_private(html, rnd)
    data = client.get(f"/watch/{rnd.pk}/live.json").json()
    assert data["board"] == [{"place": 1, "name": "bea", "total": 420}, {"place": 2, "name": "ann", "total": 320}]
    assert (data["players"], data["per_minute"], data["sealed"], data["reveal"]) == (2, 2, False, None)
    assert data["round"]["open"] and data["round"]["seconds_left"] > 3000
    assert_private(json.dumps(data, ensure_ascii=False), rnd)
    assert "bea" in data["html"] and 'data-version="' + data["version"] in data["html"]


def test_a_sealed_blind_round_shows_no_total_no_board_no_name(client, played):
    rnd = played("blind")
    for body in (client.get(f"/watch/{rnd.pk}/").content.decode(),
                 client.get(f"/watch/{rnd.pk}/live.json").content.decode()):
        assert_private(body, rnd)
        for word in ("420", "320", "600", "ann", "bea"):  # whole words: hex ids and hashes hold any digits
            assert not re.search(rf"(?<![0-9A-Za-z]){word}(?![0-9A-Za-z])", body), word
        assert rnd.commitment in body
    data = client.get(f"/watch/{rnd.pk}/live.json").json()
    assert (data["sealed"], data["board"], data["players"], data["per_minute"]) == (True, [], 2, 2)


def test_the_view_never_reads_an_open_rounds_secret(played):
    for kind in ("classic", "blind"):
        rnd = watch.load(played(kind, who=(f"a-{kind}", f"b-{kind}")).pk)
        watch.build(rnd)
        assert {"secret", "nonce"} <= rnd.get_deferred_fields()  # never loaded


@pytest.mark.parametrize("kind", ["classic", "blind"])
def test_the_reveal_after_settlement(client, played, kind):
    rnd = played(kind)
    settlement.settle_round(rnd.pk, force=True)
    rnd.refresh_from_db()
    watch.forget()
    data = client.get(f"/watch/{rnd.pk}/live.json").json()
    assert [e for e, _ in data["reveal"]["secret"]] == SECRET
    assert data["reveal"]["payouts"][0]["name"] == "bea" and data["reveal"]["payouts"][0]["total"] == 420
    assert data["board"][0] == {"place": 1, "name": "bea", "total": 420}
    if kind == "blind":
        assert data["reveal"]["nonce"] == rnd.nonce and data["reveal"]["check_ok"] is True
    words = text(client.get(f"/watch/{rnd.pk}/").content.decode())
    assert "The secret" in words and "bea 420/600 💎" in words and "Ends in" not in words
    for body in (json.dumps(data, ensure_ascii=False), words):  # still no guess's emojis
        assert " ".join(ANN) not in body and " ".join(BEA) not in body


def test_a_voided_round_is_cancelled_and_never_revealed(client, played):
    rnd = played("blind")
    settlement.void_round(rnd.pk)
    watch.forget()
    body = client.get(f"/watch/{rnd.pk}/").content.decode()
    assert "Round cancelled" in body and rnd.nonce not in body
    assert_private(body, rnd)


def test_the_poll_answers_304_until_the_view_changes(client, played, make_player, django_capture_on_commit_callbacks):
    rnd = played("classic")
    first = client.get(f"/watch/{rnd.pk}/live.json")
    tag = first["ETag"]
    assert tag == f'W/"{first.json()["version"]}"' and "no-cache" in first["Cache-Control"]
    same = client.get(f"/watch/{rnd.pk}/live.json", headers={"If-None-Match": tag})
    assert same.status_code == 304 and same["ETag"] == tag and same.content == b""
    with django_capture_on_commit_callbacks(execute=True):
        submit(make_player("cyd"), rnd, SECRET[:5] + ["🐼"])  # 500: a new leader
    drain("cm", score_guess)
    watch.forget()
    moved = client.get(f"/watch/{rnd.pk}/live.json", headers={"If-None-Match": tag})
    assert moved.status_code == 200 and moved.json()["board"][0]["name"] == "cyd" and moved["ETag"] != tag


def test_watchers_share_one_view_a_second(played, django_assert_max_num_queries):
    rnd = played("classic")
    watch.view(rnd.pk)
    with django_assert_max_num_queries(0):
        for _ in range(50):
            watch.view(rnd.pk)


def test_the_page_works_on_the_database_when_valkey_is_down(client, played, monkeypatch):
    import echomq

    rnd = played("classic")

    def down(*a, **k):
        raise echomq.Unavailable("down for the test")

    monkeypatch.setattr(watch, "get_client", down)
    resp = client.get(f"/watch/{rnd.pk}/")
    assert resp.status_code == 200 and "bea 420/600" in text(resp.content.decode())
    assert client.get(f"/watch/{rnd.pk}/live.json").json()["players"] is None


def test_the_share_card_links_the_watch_page(play, player, make_round, django_capture_on_commit_callbacks):
    rnd = make_round(secret=SECRET)
    with django_capture_on_commit_callbacks(execute=True):
        submit(player, rnd, ANN)
    drain("cm", score_guess)
    settlement.settle_round(rnd.pk, force=True)
    html = play.get(f"/rounds/{rnd.pk}/").content.decode()
    card = html.split("data-share-text>")[1].split("</pre>")[0]
    assert card.rstrip().endswith(f"http://testserver/watch/{rnd.pk}/")
    assert f'href="/watch/{rnd.pk}/"' in html


def test_the_lobby_shows_what_just_ended(play, played):
    rnd = played("classic", who=("al", "bea"))
    settlement.settle_round(rnd.pk, force=True)
    html = play.get("/").content.decode()
    ended = text(html.split("data-ended>")[1].split("</ul>")[0])
    assert "Watch classic" in ended and "bea won 💎 100" in ended
    assert f'href="/watch/{rnd.pk}/"' in html and "Coming next" not in html  # no schedules yet


BAD_IDS = ["RND00000000000", "nope", "RND", "RND0000000000000000", "x" * 300, "🐶", "RND\u200d000000000",
           "RND%27%3Cscript%3E", "%2e%2e", "RND0000000000%20", "GES00000000000", "PLR00000000000", "%FF%FE",
           "%00", "RND%00"]


@pytest.mark.parametrize("bad", BAD_IDS)
def test_no_500_on_any_round_id(client, bad):
    page = client.get(f"/watch/{bad}/")
    poll = client.get(f"/watch/{bad}/live.json")
    assert page.status_code in (400, 404) and poll.status_code in (400, 404), (page.status_code, poll.status_code)


def test_no_500_on_odd_methods_queries_and_headers(played):
    rnd = played("classic")
    c = Client(raise_request_exception=False)
    for url in (f"/watch/{rnd.pk}/", f"/watch/{rnd.pk}/live.json"):
        assert c.post(url).status_code in (403, 405)
        assert c.put(url).status_code == 405 and c.delete(url).status_code == 405
        assert c.head(url).status_code == 200
        for query in ("?x=%00", "?refused=closed", "?" + "a=1&" * 500, "?slot0=%FF"):
            assert c.get(url + query).status_code in (200, 400), query
        for headers in ({"Accept": "text/html"}, {"Accept": "\x00"}, {"If-None-Match": "*"},
                        {"If-None-Match": 'W/"' + "x" * 5000 + '"'}, {"Accept-Language": "🐶"}):
            assert c.get(url, headers=headers).status_code in (200, 304), headers


def test_activity_is_the_last_minute(client, played, valkey):
    rnd = played("classic")
    valkey.delete(live.activity_key(rnd.pk))
    watch.forget()
    assert client.get(f"/watch/{rnd.pk}/live.json").json()["per_minute"] == 0
