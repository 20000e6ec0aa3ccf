"""The landing page, the rules, the profile, and the wording fixes."""
import re
from datetime import timedelta

import pytest
from django.utils import timezone

from games import payouts, settlement, wallet
from games.models import Guess
from games.views import common
from games.views.pages import SAMPLE_GUESSES, SAMPLE_SECRET, streak
from games.workers import score_guess

from .conftest import drain
from .test_live import text

pytestmark = pytest.mark.django_db

SECRET = ["🦊", "🐶", "🐰", "🐱", "🐹", "🐭"]


def test_landing_page_for_visitors(client, make_round):
    make_round(secret=SECRET, title="Morning classic", prize_pool=40)
    make_round(kind="blind", secret=SECRET, title="Night blind", prize_pool=500)
    resp = client.get("/")
    html = resp.content.decode()
    words = text(html)
    assert resp.status_code == 200 and "Crack the six-emoji code" in words
    assert 'href="/signup/"' in html and 'href="/login/"' in html
    assert len(re.findall(r"<li>", html.split('class="five"')[1].split("</ol>")[0])) == 5
    assert "Morning classic" in words and "Pool 💎 40" in words and "Pool 💎 500" in words
    assert "Top 5 share the pool (💎 500) by weights 40/25/15/12/8" in words
    # The sample board is scored by the engine and shows no real round's secret.
    from games import engine

    for guess in SAMPLE_GUESSES:
        assert f"<strong>{engine.score(SAMPLE_SECRET, guess).total}</strong>/600" in html


def test_logged_in_front_door_is_the_lobby(play, make_round):
    make_round(secret=SECRET, title="Morning classic")
    html = play.get("/").content.decode()
    assert "Open rounds" in html and "Sign up and play" not in html
    assert "Best total takes the pool" in html


def test_rules_page_matches_the_payout_code(client):
    words = text(client.get("/rules/").content.decode())
    for line in payouts.explain("classic", 100)["lines"] + payouts.explain("blind", 100, [40, 25, 15, 12, 8])["lines"]:
        assert line in words
    assert "#1 💎 40 #2 💎 25" in words  # the blind table for a pool of 100
    assert "2 tied at the top, each 💎 50 3 tied at the top, each 💎 33" in words
    assert "10 diamonds buy 1 key" in words


def test_round_page_shows_how_this_round_pays(play, make_round):
    classic = make_round(secret=SECRET, prize_pool=90)
    blind = make_round(kind="blind", secret=SECRET, prize_pool=90, weights=[2, 1])
    c = text(play.get(f"/rounds/{classic.pk}/").content.decode())
    assert "How this round pays: Best total takes the pool (💎 90); players tied at the best total split it evenly." in c
    assert "weight" not in c and "40/25" not in c
    b = text(play.get(f"/rounds/{blind.pk}/").content.decode())
    assert "Top 2 share the pool (💎 90) by weights 2/1" in b and "#1 💎 60 #2 💎 30" in b


def test_profile_counts_rounds_wins_best_and_streak(play, player, make_round, make_player,
                                                    django_capture_on_commit_callbacks):
    won = make_round(secret=SECRET, prize_pool=25, title="Won it")
    sealed = make_round(kind="blind", secret=SECRET, title="Still sealed")
    for rnd, guess in ((won, SECRET), (sealed, SECRET)):
        with django_capture_on_commit_callbacks(execute=True):
            play.post(f"/rounds/{rnd.pk}/guess/", {f"slot{i}": e for i, e in enumerate(guess)})
    drain("cm", score_guess)
    settlement.settle_round(won.pk, force=True)
    Guess.objects.filter(round=won).update(created_at=timezone.now() - timedelta(days=1))
    resp = play.get("/me/", follow=True)
    words = text(resp.content.decode())
    assert resp.redirect_chain[-1][0] == "/players/ann/"
    assert "2 rounds played" in words and "1 win 💎 25 won in all" in words and "2 days streak" in words
    assert "Won it · classic · 600 /600" in words and "Still sealed" not in words
    make_player("zed")
    assert "0 rounds played" in text(play.get("/players/zed/").content.decode())
    assert play.get("/players/nobody/").status_code == 404


def test_streak_counts_days_in_a_row_ending_today_or_yesterday():
    today = timezone.now().date()
    d = lambda n: today - timedelta(days=n)  # noqa: E731
    assert streak([d(0), d(1), d(2), d(4)], today) == 3
    assert streak([d(1), d(2)], today) == 2
    assert streak([d(2), d(3)], today) == 0
    assert streak([], today) == 0


@pytest.mark.parametrize("n, signed, words", [
    (1, False, "1 key"), (2, False, "2 keys"), (0, False, "0 keys"),
    (-1, True, "−1 key"), (-2, True, "−2 keys"), (1, True, "+1 key"),
])
def test_amounts_follow_the_size_not_the_sign(n, signed, words):
    assert common.amount(n, "keys", signed=signed) == words


@pytest.mark.parametrize("seconds, words", [
    (0, "less than a minute"), (59, "less than a minute"), (-5, "less than a minute"), (60, "1 minute"),
    (150, "2 minutes"), (3600 + 300, "1 hour 5 minutes"), (2 * 86400 + 3600 + 60, "2 days 1 hour"),
])
def test_durations_in_words(seconds, words):
    assert common.duration(seconds) == words


def test_ending_soon_and_just_now_read_as_less_than_a_minute(play, make_round):
    rnd = make_round(secret=SECRET, duration=timedelta(seconds=30))
    html = play.get(f"/rounds/{rnd.pk}/").content.decode()
    assert "Ends in <time" in html and "less than a minute</time>" in html and "0 minutes" not in html
    assert "0 minutes" not in play.get("/").content.decode()


def test_wallet_ledger_is_readable(play, player, make_round, django_capture_on_commit_callbacks):
    rnd = make_round(secret=SECRET, title="Morning classic", prize_pool=10)
    with django_capture_on_commit_callbacks(execute=True):
        play.post(f"/rounds/{rnd.pk}/guess/", {f"slot{i}": e for i, e in enumerate(SECRET)})
    drain("cm", score_guess)
    settlement.settle_round(rnd.pk, force=True)
    wallet.grant(player, "keys", 2, reference="RNDticket 12/3")  # a note that looks like a round id
    resp = play.get("/wallet/")
    html = resp.content.decode()
    assert resp.status_code == 200
    assert "−1 key" in html and "-1 keys" not in html and "+10 diamonds" in html
    assert f'<a href="/rounds/{rnd.pk}/" title="{rnd.pk}">Morning classic</a>' in html  # the prize
    assert f'<a href="/rounds/{rnd.pk}/" title="{Guess.objects.get().pk}">Guess in Morning classic</a>' in html
    assert "RNDticket 12/3" in html


def test_favicon(client):
    assert client.get("/favicon.ico")["Location"].endswith("games/favicon.svg")
    assert 'rel="icon"' in client.get("/rules/").content.decode()


def test_one_key_is_singular_everywhere_on_the_wallet(client, make_player):
    p = make_player("uno", keys=1, clips=2, diamonds=1)
    client.force_login(p.user)
    html = client.get("/wallet/").content.decode()
    assert '<strong data-balance="keys">1</strong> key <small>' in html
    assert '<strong data-balance="clips">2</strong> clips <small>' in html
    assert "Wallet: 1 key, 2 clips, 1 diamond" in html


def test_classic_leaderboard_gives_tied_players_one_place(client, make_player, make_round,
                                                          django_capture_on_commit_callbacks):
    rnd = make_round(secret=SECRET, prize_pool=20)
    half = ["🐼", SECRET[1], "🐻", SECRET[3], "🐨", "🐯"]
    for name in ("amy", "bo"):
        p = make_player(name)
        client.force_login(p.user)
        with django_capture_on_commit_callbacks(execute=True):
            client.post(f"/rounds/{rnd.pk}/guess/", {f"slot{i}": e for i, e in enumerate(half)})
    drain("cm", score_guess)
    settlement.settle_round(rnd.pk, force=True)
    html = client.get(f"/rounds/{rnd.pk}/leaderboard/").content.decode()
    places = re.findall(r"<tr(?: class=\"me\" aria-current=\"true\")?>\s*<td>(\d+)</td><th scope=\"row\">(\w+)", html)
    assert places == [("1", "amy"), ("1", "bo")]
    assert "equal totals share a place" in html and html.count("💎 10") == 2
    page = text(client.get(f"/rounds/{rnd.pk}/").content.decode())
    assert "You tied for #1 (2 players share the pool) with 200/600 and won 💎 10." in page


def test_lobby_and_landing_show_how_many_are_playing(client, make_player, make_round,
                                                     django_capture_on_commit_callbacks):
    rnd = make_round(secret=SECRET, title="Busy one")
    for name in ("p1", "p2", "p3"):
        p = make_player(name)
        client.force_login(p.user)
        with django_capture_on_commit_callbacks(execute=True):
            client.post(f"/rounds/{rnd.pk}/guess/", {f"slot{i}": e for i, e in enumerate(SECRET[:5] + ["🐼"])})
    drain("cm", score_guess)
    assert "<span data-playing>3 playing</span>" in client.get("/").content.decode()
    client.logout()
    assert "<span data-playing>3 playing</span>" in client.get("/").content.decode()
