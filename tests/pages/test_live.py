"""The round page as a live, self-explaining game: its SQL budget, the
'In this round' panel from Valkey, the poll, the reveal and share card, and
the addresses a refused form leaves in the browser."""
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from games import engine, leaderboard, live, settlement, share
from games.models import Guess
from games.workers import score_guess

from .conftest import drain

pytestmark = pytest.mark.django_db

SECRET = ["🦊", "🐶", "🐰", "🐱", "🐹", "🐭"]
GUESS = ["🐶", "🐱", "🐭", "🐹", "🐰", "🦊"]
MISS = "🐼"
MISSES = ["🐼", "🐨", "🐯", "🦁", "🐮", "🐷"]  # distinct, none in SECRET: a guess repeats no emoji
ROUND_PAGE_SQL = 1  # player+wallet+unread, the round, my locks and my guesses (session and user: cache)
POLL_SQL = 1  # the round and my guesses (session and user: cache; the player id is in the session)


def slots(emojis):
    return {f"slot{i}": e for i, e in enumerate(emojis)}


def guess_as(client, player, rnd, emojis, capture):
    client.force_login(player.user)
    with capture(execute=True):
        resp = client.post(f"/rounds/{rnd.pk}/guess/", slots(emojis))
    assert resp.status_code == 302, resp.content.decode()[:500]


def text(html: str) -> str:
    """The page's words, tags removed, whitespace collapsed."""
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def queries(client, url):
    with CaptureQueriesContext(connection) as ctx:
        resp = client.get(url)
    assert resp.status_code == 200
    return resp, [q["sql"] for q in ctx.captured_queries]


@pytest.mark.parametrize("kind", ["classic", "blind"])
def test_round_page_sql_is_pinned(client, make_player, make_round, kind, django_capture_on_commit_callbacks):
    rnd = make_round(secret=SECRET, kind=kind)
    others = [make_player(f"p{i}") for i in range(6)]
    for i, p in enumerate(others):
        guess_as(client, p, rnd, SECRET[:i] + MISSES[:6 - i], django_capture_on_commit_callbacks)
        client.get(f"/rounds/{rnd.pk}/")  # each player's name reaches cm:names
    drain("cm", score_guess)
    me = others[2]
    client.force_login(me.user)
    client.get(f"/rounds/{rnd.pk}/")
    resp, sql = queries(client, f"/rounds/{rnd.pk}/")
    assert len(sql) == ROUND_PAGE_SQL, "\n".join(sql)
    html = text(resp.content.decode())
    players = "players with a score" if kind == "classic" else "players in this round"  # no score shows in blind
    assert f"6 {players} · 6 guesses in the last minute" in html
    if kind == "classic":
        assert "p5" in html and "p2 (you)" in html  # the board, from Valkey
    # The poll costs no more than the page.
    resp, sql = queries(client, f"/rounds/{rnd.pk}/my-guesses.json")
    assert len(sql) == POLL_SQL, "\n".join(sql)
    # Settled: still within budget (no locks read, the secret is on the round row).
    settlement.settle_round(rnd.pk, force=True)
    resp, sql = queries(client, f"/rounds/{rnd.pk}/")
    assert len(sql) == ROUND_PAGE_SQL, "\n".join(sql)


def test_neighbours_around_me_and_the_poll_carries_them(client, make_player, make_round,
                                                       django_capture_on_commit_callbacks):
    rnd = make_round(secret=SECRET)
    players = [make_player(f"n{i}") for i in range(10)]
    for i, p in enumerate(players):  # n0 scores 0 ... n5 and on: distinct totals, n9 best
        guess = SECRET[: min(i, 6)] + MISSES[:6 - min(i, 6)]
        guess_as(client, p, rnd, guess, django_capture_on_commit_callbacks)
    drain("cm", score_guess)
    me = players[1]  # 100 points: ranked near the bottom
    client.force_login(me.user)
    data = client.get(f"/rounds/{rnd.pk}/my-guesses.json").json()
    lv = data["live"]
    assert lv["players"] == 10 and lv["recent"] == 10 and lv["recent_words"] == "10 guesses in the last minute"
    assert [r["rank"] for r in lv["top"]] == [1, 2, 3, 4, 5]
    assert lv["rank"] == 9
    assert [r["rank"] for r in lv["around"]] == [7, 8, 9, 10]
    mine = [r for r in lv["around"] if r["me"]]
    assert mine == [{"rank": 9, "name": "n1", "total": 100, "me": True}]
    assert data["best"] == 100


def test_a_second_look_at_the_board_reads_no_names_from_valkey(client, make_player, make_round, valkey,
                                                               django_capture_on_commit_callbacks):
    """Names read once are kept by the process for a minute: the next poll
    sends no HMGET of cm:names (one round trip for the whole panel)."""
    rnd = make_round(secret=SECRET)
    players = [make_player(f"m{i}") for i in range(3)]
    for i, p in enumerate(players):
        guess_as(client, p, rnd, SECRET[:i] + MISSES[:6 - i], django_capture_on_commit_callbacks)
    drain("cm", score_guess)
    live._name_memo.clear()

    def hmgets():
        return valkey.info("commandstats").get("cmdstat_hmget", {}).get("calls", 0)

    first = client.get(f"/rounds/{rnd.pk}/my-guesses.json").json()["live"]["top"]
    before = hmgets()
    again = client.get(f"/rounds/{rnd.pk}/my-guesses.json").json()["live"]["top"]
    assert hmgets() == before and again == first
    assert [r["name"] for r in again] == ["m2", "m1", "m0"]


def test_blind_round_panel_counts_players_but_shows_no_board(client, make_player, make_round,
                                                            django_capture_on_commit_callbacks):
    rnd = make_round(secret=SECRET, kind="blind")
    a, b = make_player("bl1"), make_player("bl2")
    guess_as(client, a, rnd, GUESS, django_capture_on_commit_callbacks)
    guess_as(client, b, rnd, SECRET, django_capture_on_commit_callbacks)
    drain("cm", score_guess)
    data = client.get(f"/rounds/{rnd.pk}/my-guesses.json").json()
    assert data["live"]["players"] == 2 and data["live"]["top"] == [] and data["live"]["rank"] is None
    assert data["best"] is None
    html = client.get(f"/rounds/{rnd.pk}/").content.decode()
    assert "The board stays hidden until the reveal" in html and "600" not in html.split("In this round")[1]


def test_activity_counts_a_redelivered_guess_once_and_forgets_old_ones(valkey):
    pipe = valkey.pipeline()
    now = 10_000_000
    live.record_activity(pipe, "RNDx", "GES1", now - 70_000)
    live.record_activity(pipe, "RNDx", "GES2", now - 1000)
    live.record_activity(pipe, "RNDx", "GES2", now)  # redelivered: NX keeps the first time
    live.record_activity(pipe, "RNDx", "GES3", now)
    pipe.execute()
    assert valkey.zrange(live.activity_key("RNDx"), 0, -1, withscores=True) == [(b"GES2", now - 1000),
                                                                                (b"GES3", now)]


def test_live_view_degrades_when_valkey_is_down(play, make_round, monkeypatch):
    import redis

    rnd = make_round(secret=SECRET)

    class Down:  # every command fails to connect
        def __getattr__(self, name):
            def down(*args, **kwargs):
                raise redis.exceptions.ConnectionError("down")
            return down

    monkeypatch.setattr(live, "get_client", lambda: Down())
    resp = play.get(f"/rounds/{rnd.pk}/")
    assert resp.status_code == 200 and "Live view unavailable" in resp.content.decode()
    assert play.get(f"/rounds/{rnd.pk}/my-guesses.json").json()["live"] is None


def test_after_the_round_marks_are_revealed_and_the_share_card_has_no_secret(
        play, player, make_round, django_capture_on_commit_callbacks):
    rnd = make_round(secret=SECRET, prize_pool=30)
    for g in (GUESS, SECRET[:3] + MISSES[:3]):
        with django_capture_on_commit_callbacks(execute=True):
            play.post(f"/rounds/{rnd.pk}/guess/", slots(g))
    drain("cm", score_guess)
    open_page = play.get(f"/rounds/{rnd.pk}/").content.decode()
    assert "🟩" not in open_page and "mark-" not in open_page  # no per-position feedback while open
    assert "marks" not in play.get(f"/rounds/{rnd.pk}/my-guesses.json").json()["guesses"][0]

    settlement.settle_round(rnd.pk, force=True)
    page = play.get(f"/rounds/{rnd.pk}/").content.decode()
    card = re.search(r'data-share-text>(.*?)</pre>', page, re.S).group(1)
    first = engine.score(SECRET, GUESS).breakdown()
    second = engine.score(SECRET, SECRET[:3] + MISSES[:3]).breakdown()
    assert card.splitlines()[1:] == ["2 guesses · best 320/600", share.grid_row(first), share.grid_row(second),
                                     f"http://testserver/watch/{rnd.pk}/"]  # where whoever reads it can look
    assert share.grid_row(second) == "🟩🟩🟩⬜⬜⬜"
    assert not any(e in card for e in rnd.keyboard)  # spoiler-free: no emoji of the round at all
    assert 'class="mark mark-exact"' in page and "data-copy" in page
    g = play.get(f"/rounds/{rnd.pk}/my-guesses.json").json()["guesses"][0]
    assert [m["square"] for m in g["marks"]] == list("🟩🟩🟩⬜⬜⬜")


def test_post_only_addresses_answer_get_with_the_round(play, player, make_round):
    rnd = make_round(secret=SECRET)
    for action in ("guess", "lock", "compose"):
        resp = play.get(f"/rounds/{rnd.pk}/{action}/")
        assert resp.status_code == 302 and resp["Location"] == f"/rounds/{rnd.pk}/"
    # After a refused guess the browser is on /guess/; reopening it shows the round.
    refused = play.post(f"/rounds/{rnd.pk}/guess/", slots(GUESS[:5]))
    assert refused.status_code == 400
    again = play.get(f"/rounds/{rnd.pk}/guess/", follow=True)
    assert again.status_code == 200 and "Your guess" in again.content.decode()
    assert play.get("/wallet/exchange/")["Location"] == "/wallet/"
    assert play.get("/rounds/RND00000000000/guess/", follow=True).status_code == 404
    assert not Guess.objects.exists()


def test_lock_buttons_explain_that_locks_are_free(play, make_round):
    rnd = make_round(secret=SECRET)
    html = play.get(f"/rounds/{rnd.pk}/").content.decode()
    assert re.search(r'aria-label="Lock position 1" title="Lock this position \(free\)', html)
    assert "Locks</strong> 🔒 are free" in html and "Classic round:" in html
    resp = play.post(f"/rounds/{rnd.pk}/lock/", {"lock": "0", **slots(GUESS)}, follow=True)
    assert "Locks are free" in resp.content.decode()
    assert 'title="Locked (free)' in resp.content.decode()


def test_the_composer_warns_about_a_repeated_emoji_without_javascript(play, make_round):
    rnd = make_round(secret=SECRET)
    resp = play.post(f"/rounds/{rnd.pk}/compose/", {"key": "🐶", **slots(["🐶", "", "", "", "", ""])})
    html = play.get(resp["Location"]).content.decode()
    assert re.search(r'data-dupes role="status">⚠️ 🐶 appears twice\. The secret has six different emojis', html)
    clean = play.get(f"/rounds/{rnd.pk}/").content.decode()
    assert 'data-dupes role="status" hidden></p>' in clean


def test_an_unchanged_poll_answers_304_without_reading_the_round(client, make_player, make_round, monkeypatch,
                                                                 django_capture_on_commit_callbacks):
    monkeypatch.setattr(live, "clock", lambda: 1_000_000.0)  # one time bucket throughout
    rnd = make_round(secret=SECRET)
    me, rival = make_player("me"), make_player("rival")
    url = f"/rounds/{rnd.pk}/my-guesses.json"
    guess_as(client, me, rnd, GUESS, django_capture_on_commit_callbacks)
    first = client.get(url)
    assert first.json()["guesses"][0]["status"] == "queued" and "ETag" not in first  # waiting: never reused
    drain("cm", score_guess)
    scored = client.get(url)
    tag = scored["ETag"]
    assert scored.json()["guesses"][0]["status"] == "scored" and tag.startswith('W/"')
    with CaptureQueriesContext(connection) as ctx:
        same = client.get(url, HTTP_IF_NONE_MATCH=tag)
    assert same.status_code == 304 and same.content == b"" and len(ctx.captured_queries) <= 2  # session, user
    # Another player's score reaches me with the next time bucket, not at once.
    guess_as(client, rival, rnd, SECRET[:5] + [MISS], django_capture_on_commit_callbacks)
    drain("cm", score_guess)
    client.force_login(me.user)
    assert client.get(url, HTTP_IF_NONE_MATCH=tag).status_code == 304
    assert live.etag(rnd.pk, me.pk) == tag
    # My own next score changes my tag at once.
    guess_as(client, me, rnd, SECRET[:4] + [MISS, "🐻"], django_capture_on_commit_callbacks)
    drain("cm", score_guess)
    changed = client.get(url, HTTP_IF_NONE_MATCH=tag)
    assert changed.status_code == 200 and changed.json()["live"]["players"] == 2
    # The round closing changes it too, so the page reloads into the reveal.
    tag = changed["ETag"]
    settlement.settle_round(rnd.pk, force=True)
    closed = client.get(url, HTTP_IF_NONE_MATCH=tag)
    assert closed.status_code == 200 and closed.json()["round"]["status"] == "settled"
    # And time: the activity line decays, so a tag lives at most one bucket.
    assert live.etag(rnd.pk, me.pk, now=0) != live.etag(rnd.pk, me.pk, now=live.ETAG_BUCKET_S)


def test_the_snapshot_script_refuses_bad_arguments_and_writes_nothing(valkey):
    import echomq

    keys = [leaderboard.key("RNDx"), live.activity_key("RNDx")]
    valkey.zadd(keys[0], {"PLRa": 1.0})
    before = valkey.dump(keys[0])
    for args in (["", 0, 5, 2, "1"], ["PLRa", "x", 5, 2, "1"], ["PLRa", 0, 0, 2, "1"], ["PLRa", 0, 5, -1, "1"],
                 ["PLRa", 0, 5, 2, "yes"], ["PLRa", 0, 500, 2, "1"]):
        with pytest.raises(echomq.EchoMQError, match="live snapshot: bad arguments"):
            live._SNAPSHOT(valkey, keys, args)
    assert valkey.dump(keys[0]) == before and valkey.keys("*") == [keys[0].encode()]
