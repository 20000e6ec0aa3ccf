"""No page or JSON a player can fetch contains a round's secret (in any
spelling) or a blind round's nonce before settlement, nor another player's
guesses."""
import pytest

from games import settlement
from games.guesses import submit
from games.workers import score_guess

from .conftest import drain, secret_forms

pytestmark = pytest.mark.django_db

SECRET = ["🦊", "🐶", "🐰", "🐱", "🐹", "🐭"]
MINE = ["🐶", "🐱", "🐭", "🐹", "🐰", "🦊"]
THEIRS = ["🐼", "🐨", "🐯", "🦁", "🐮", "🐷"]  # nobody else's page may show these


def player_urls(rnd) -> list[str]:
    base = f"/rounds/{rnd.pk}/"
    return ["/", "/wallet/", "/notifications/", base, base + "leaderboard/", base + "my-guesses.json",
            base + "?slot0=🐶", "/rounds/RND00000000000/", f"/watch/{rnd.pk}/", f"/watch/{rnd.pk}/live.json"]


def posts(rnd) -> list[tuple[str, dict]]:
    base = f"/rounds/{rnd.pk}/"
    return [(base + "guess/", {"slot0": "🐶"}), (base + "guess/", {f"slot{i}": "🚗" for i in range(6)}),
            (base + "lock/", {"lock": "3"}), (base + "compose/", {"key": "🚗"})]


def assert_clean(text: str, rnd, where: str):
    for form in secret_forms(rnd):
        assert form not in text, f"{where} leaks {form!r}"
    assert " ".join(THEIRS) not in text and '"' + '", "'.join(THEIRS) + '"' not in text, f"{where} shows another's guess"


@pytest.mark.parametrize("kind", ["classic", "blind"])
def test_no_secret_nonce_or_other_guesses_before_settlement(play, player, make_player, make_round, kind,
                                                           django_capture_on_commit_callbacks):
    rnd = make_round(kind=kind, secret=SECRET, prize_pool=50)
    other = make_player("eve", keys=10)
    with django_capture_on_commit_callbacks(execute=True):
        submit(other, rnd, THEIRS)
        submit(player, rnd, MINE)
    drain("cm", score_guess)
    for url in player_urls(rnd):
        resp = play.get(url)
        assert resp.status_code in (200, 404), url
        assert_clean(resp.content.decode(), rnd, url)
    for url, data in posts(rnd):
        resp = play.post(url, data)
        assert 400 <= resp.status_code < 500, url
        assert_clean(resp.content.decode(), rnd, url)
    # Another player's guesses never show, even after settlement.
    settlement.settle_round(rnd.pk, force=True)
    for url in player_urls(rnd):
        body = play.get(url).content.decode()
        assert " ".join(THEIRS) not in body and '", "'.join(THEIRS) not in body, url
    assert rnd.commitment == "" or rnd.nonce in play.get(f"/rounds/{rnd.pk}/").content.decode()


def test_the_secret_shows_once_settled(play, player, make_round):
    rnd = make_round(secret=SECRET)
    settlement.settle_round(rnd.pk, force=True)
    html = play.get(f"/rounds/{rnd.pk}/").content.decode()
    positions = [html.index(f'">{e}</span>', html.index("The secret")) for e in SECRET]
    assert positions == sorted(positions)


@pytest.mark.parametrize("kind", ["classic", "blind"])
def test_the_round_page_reads_no_secret_or_nonce_until_settled(player, make_round, kind):
    """The round page's one statement hands the web process the secret and
    nonce only once the round is settled: nothing a page does with an open
    round can show what it never had."""
    from games.views.common import load_round_page

    rnd = make_round(kind=kind, secret=SECRET)
    seen = load_round_page(player.user, rnd.pk).round
    assert (seen.pk, seen.secret, seen.nonce) == (rnd.pk, None, None)
    settlement.settle_round(rnd.pk, force=True)
    seen = load_round_page(player.user, rnd.pk).round
    assert seen.secret == SECRET and seen.nonce == rnd.nonce
    assert load_round_page(player.user, "RND00000000000").round is None


@pytest.mark.parametrize("close", ["open", "voided"])
def test_a_blind_rounds_totals_never_show_unless_it_is_revealed(play, player, make_round, close,
                                                               django_capture_on_commit_callbacks):
    """On the profile page and in the admin's round entries: a blind round
    is sealed while open, and forever once voided (it is never revealed)."""
    from django.contrib.auth import get_user_model

    rnd = make_round(kind="blind", secret=SECRET)
    with django_capture_on_commit_callbacks(execute=True):
        g = submit(player, rnd, SECRET[:5] + ["🐼"])  # 500
    drain("cm", score_guess)
    if close == "voided":
        settlement.void_round(rnd.pk)
    profile = play.get(f"/players/{player.user.username}/").content.decode()
    assert "500/600" not in profile and "500" not in profile.split("Best totals")[-1][:400]
    staff = get_user_model().objects.create_superuser("root", password="pw-root-123")
    play.force_login(staff)
    entries = play.get("/admin/games/roundentry/").content.decode()
    words = "sealed until the reveal" if close == "open" else "hidden for good: the round was voided"
    assert g.pk not in entries and ">500<" not in entries and words in entries
