"""The lobby, the round page and everything posted from it, through
Django's test client against the real test database and Valkey."""
import re
from datetime import timedelta

import pytest
from django.utils import timezone

from games import engine, settlement
from games.models import Guess, LedgerEntry, Lock, Round
from games.workers import score_guess

from .conftest import drain

pytestmark = pytest.mark.django_db

SECRET = ["🦊", "🐶", "🐰", "🐱", "🐹", "🐭"]  # not in keyboard order
GUESS = ["🐶", "🐱", "🐭", "🐹", "🐰", "🦊"]
TOTAL = engine.score(SECRET, GUESS).total  # 320, 53%


def slots(emojis):
    return {f"slot{i}": e for i, e in enumerate(emojis)}


def charges(player):
    return LedgerEntry.objects.filter(player=player, reason="guess").count()


def test_lobby_lists_open_rounds_with_my_best(play, player, make_round, make_player, django_capture_on_commit_callbacks):
    classic = make_round(secret=SECRET, title="Morning classic", prize_pool=40, guess_price=2)
    blind = make_round(kind="blind", secret=SECRET, title="Night blind")
    closed = make_round(secret=SECRET, title="Over already")
    settlement.void_round(closed.pk)
    expired = make_round(secret=SECRET, title="Time is up", duration=timedelta(seconds=1))
    Round.objects.filter(pk=expired.pk).update(ends_at=timezone.now() - timedelta(seconds=1))
    with django_capture_on_commit_callbacks(execute=True):
        for rnd in (classic, blind):
            play.post(f"/rounds/{rnd.pk}/guess/", slots(GUESS))
    drain("cm", score_guess)

    html = play.get("/").content.decode()
    assert "Morning classic" in html and "Night blind" in html
    open_table = html.split("</table>")[0]
    assert "Over already" not in open_table and "Time is up" not in html  # (a voided round: under "Just ended")
    row = re.search(r"Morning classic.*?</tr>", html, re.S).group(0)
    assert "classic" in row and "2 keys" in row and "💎&nbsp;40" in row and "minutes" in row
    assert f"{TOTAL}/600" in row
    assert "sealed" in re.search(r"Night blind.*?</tr>", html, re.S).group(0)


def test_round_page_has_a_labelled_keyboard(play, make_round):
    rnd = make_round(keyboard_size=24)
    resp = play.get(f"/rounds/{rnd.pk}/")
    html = resp.content.decode()
    assert resp.status_code == 200
    keys = re.findall(r'<button type="submit" formaction="[^"]+/compose/" name="key" value="([^"]+)" '
                      r'class="key" aria-label="([^"]+)"', html)
    assert [k for k, _ in keys] == rnd.keyboard
    assert all(label and label != "emoji" for _, label in keys)
    assert 'aria-label="Lock position 1"' in html and 'aria-label="Backspace"' in html
    assert 'name="csrfmiddlewaretoken"' in html


@pytest.mark.parametrize("rid", ["RND00000000000", "nope", "RND%27%3Cscript%3E", "x" * 300])
def test_unknown_round_is_a_404_page(play, rid):
    for url in (f"/rounds/{rid}/", f"/rounds/{rid}/leaderboard/"):
        resp = play.get(url)
        assert resp.status_code == 404 and "Not found" in resp.content.decode()
    assert play.post(f"/rounds/{rid}/guess/", slots(GUESS)).status_code == 404
    assert play.post(f"/rounds/{rid}/lock/", {"lock": "0", **slots(GUESS)}).status_code == 404
    assert play.post(f"/rounds/{rid}/compose/", {"key": "🐶"}).status_code == 404
    resp = play.get(f"/rounds/{rid}/my-guesses.json")
    assert resp.status_code == 404 and resp.json() == {"error": "That round does not exist."}


def test_compose_without_javascript(play, player, make_round):
    rnd = make_round(secret=SECRET)
    url = f"/rounds/{rnd.pk}/compose/"
    resp = play.post(url, {"key": "🐱"})
    assert resp.status_code == 302
    page = play.get(resp["Location"]).content.decode()
    assert 'name="slot0" value="🐱"' in page and 'name="slot1" value=""' in page
    Lock.objects.create(player=player, round=rnd, position=1, emoji="🐶")
    resp = play.post(url, {"key": "🐭", **slots(["🐱", "", "", "", "", ""])})  # skips locked position 2
    page = play.get(resp["Location"]).content.decode()
    assert 'name="slot1" value="🐶" data-slot data-locked' in page and 'name="slot2" value="🐭"' in page
    resp = play.post(url, {"op": "backspace", **slots(["🐱", "🐶", "🐭", "", "", ""])})
    assert "slot2" not in resp["Location"] and "slot1" in resp["Location"]
    resp = play.post(url, {"op": "clear", **slots(["🐱", "🐶", "🐭", "", "", ""])})
    page = play.get(resp["Location"]).content.decode()
    assert 'name="slot0" value=""' in page and 'name="slot1" value="🐶"' in page  # the lock stays


def test_compose_refuses_an_off_keyboard_key(play, make_round):
    rnd = make_round(keyboard_size=24)
    off = next(e for e in rnd.emoji_set.emojis if e not in rnd.keyboard)
    resp = play.post(f"/rounds/{rnd.pk}/compose/", {"key": off})
    assert resp.status_code == 400 and "not on this keyboard" in resp.content.decode()


def test_the_page_a_guess_redirects_to_confirms_that_guess_and_only_mine(play, player, make_round, make_player,
                                                                         django_capture_on_commit_callbacks):
    """The redirect names the guess it took (no one-time message cookie):
    the page confirms it when it is one of mine, and says nothing of
    another player's guess or a made-up id."""
    rnd = make_round(secret=SECRET)
    other = make_player("bo", keys=5)
    with django_capture_on_commit_callbacks(execute=True):
        resp = play.post(f"/rounds/{rnd.pk}/guess/", slots(GUESS))
    mine = Guess.objects.get(player=player)
    assert resp.status_code == 302 and f"sent={mine.pk}" in resp["Location"]
    assert "messages" not in resp.cookies
    assert f"Guess {' '.join(GUESS)} is in, for 1 key." in play.get(resp["Location"]).content.decode()
    from games.guesses import submit

    theirs = submit(other, rnd, list(reversed(GUESS)))
    for sent in (theirs.pk, "GES00000000000", "<b>"):
        page = play.get(f"/rounds/{rnd.pk}/", {"sent": sent}).content.decode()
        assert "is in, for" not in page and "<b>" not in page
    from games.settlement import void_round

    void_round(rnd.pk)  # refunded: the old address no longer says it is in
    assert "is in, for" not in play.get(resp["Location"]).content.decode()


def test_guess_is_charged_once_queued_then_scored(play, player, make_round, django_capture_on_commit_callbacks):
    rnd = make_round(secret=SECRET)
    page = play.get(f"/rounds/{rnd.pk}/").content.decode()
    token = re.search(r'name="token" value="([0-9a-f]{32})"', page).group(1)
    with django_capture_on_commit_callbacks(execute=True):
        first = play.post(f"/rounds/{rnd.pk}/guess/", {"token": token, **slots(GUESS)})
        again = play.post(f"/rounds/{rnd.pk}/guess/", {"token": token, **slots(GUESS)})  # a double click
    assert first.status_code == again.status_code == 302
    assert Guess.objects.filter(player=player).count() == 1 and charges(player) == 1
    page = play.get(first["Location"]).content.decode()
    assert "is in, for 1 key." in page
    assert re.search(r'class="guess status-queued".*?queued', page, re.S)
    assert play.get(f"/rounds/{rnd.pk}/my-guesses.json").json()["guesses"][0]["status"] == "queued"
    drain("cm", score_guess)
    data = play.get(f"/rounds/{rnd.pk}/my-guesses.json").json()
    assert data["round"] == {"id": rnd.pk, "status": "open", "open": True, "sealed": False}
    [g] = data["guesses"]
    assert (g["status"], g["total"], g["percentage"], g["emojis"]) == ("scored", TOTAL, 53, GUESS)
    assert "breakdown" not in g
    assert f"<strong>{TOTAL}</strong>/600 · 53%" in play.get(f"/rounds/{rnd.pk}/").content.decode()


@pytest.mark.parametrize("sent, status, words", [
    (GUESS[:5], 400, "A guess is exactly 6 emojis; this one has 5."),
    (GUESS[:5] + ["🚗"], 400, "Not on this round&#x27;s keyboard: 🚗"),
])
def test_bad_guesses_are_refused_in_words_and_not_charged(play, player, make_round, sent, status, words):
    rnd = make_round(secret=SECRET)
    resp = play.post(f"/rounds/{rnd.pk}/guess/", slots(sent))
    html = resp.content.decode()
    assert resp.status_code == status and words in html and "Nothing was charged" in html
    assert 'role="alert"' in html and 'name="slot0" value="🐶"' in html  # the draft is kept
    assert charges(player) == 0 and not Guess.objects.exists()


def test_not_enough_keys(client, make_player, make_round):
    poor = make_player("poor", keys=1)
    client.force_login(poor.user)
    rnd = make_round(secret=SECRET, guess_price=2)
    resp = client.post(f"/rounds/{rnd.pk}/guess/", slots(GUESS))
    assert resp.status_code == 303 and "refused=insufficient_funds" in resp["Location"]  # post/redirect/get
    page = client.get(resp["Location"]).content.decode()
    assert "Not enough keys: a guess costs 2 keys, you have 1 key." in page and "Nothing was charged" in page
    assert charges(poor) == 0


def test_closed_and_expired_rounds_refuse(play, player, make_round):
    voided, late = make_round(secret=SECRET), make_round(secret=SECRET)
    settlement.void_round(voided.pk)
    Round.objects.filter(pk=late.pk).update(ends_at=timezone.now() - timedelta(seconds=1))
    resp = play.post(f"/rounds/{voided.pk}/guess/", slots(GUESS))
    assert resp.status_code == 303 and "refused=closed" in resp["Location"]
    assert "This round is voided and takes no more guesses." in play.get(resp["Location"]).content.decode()
    resp = play.post(f"/rounds/{late.pk}/guess/", slots(GUESS))
    assert resp.status_code == 303 and "refused=expired" in resp["Location"]
    assert "This round&#x27;s time is up." in play.get(resp["Location"]).content.decode()
    resp = play.post(f"/rounds/{late.pk}/lock/", {"lock": "0", **slots(GUESS)})
    assert resp.status_code == 409
    assert charges(player) == 0 and not Lock.objects.exists()
    page = play.get(f"/rounds/{voided.pk}/").content.decode()
    assert "Round cancelled" in page and "data-composer" not in page
    assert "Time is up" in play.get(f"/rounds/{late.pk}/").content.decode()


def test_lock_and_unlock_a_position(play, player, make_round, django_capture_on_commit_callbacks):
    rnd = make_round(secret=SECRET)
    resp = play.post(f"/rounds/{rnd.pk}/lock/", {"lock": "2", **slots(GUESS)})
    assert resp.status_code == 302
    assert Lock.objects.get(player=player, round=rnd).emoji == "🐭"
    page = play.get(resp["Location"]).content.decode()
    assert "Position 3 is locked to 🐭." in page and 'aria-label="Unlock position 3"' in page
    # A lock wins over what is sent.
    play.post(f"/rounds/{rnd.pk}/guess/", slots(["🐶", "🐱", "🐶", "🐹", "🐰", "🦊"]))
    assert Guess.objects.get().emojis_final == GUESS
    resp = play.post(f"/rounds/{rnd.pk}/lock/", {"unlock": "2", **slots(GUESS)})
    assert resp.status_code == 302 and not Lock.objects.exists()
    assert "slot2=%F0%9F%90%AD" in resp["Location"]  # the emoji stays in the draft


@pytest.mark.parametrize("data, words", [
    ({"lock": "0"}, "Put an emoji in position 1 before locking it."),
    ({"lock": "9"}, "Select a valid choice."),
    ({"lock": "0", "unlock": "1", "slot0": "🐶"}, "Choose one position"),
    ({}, "Choose one position"),
    ({"lock": "0", "slot0": "🐶 🐱"}, "One emoji per position."),
    ({"lock": "0", "slot0": "🚗"}, "Not on this round&#x27;s keyboard: 🚗"),
])
def test_bad_lock_requests_are_400(play, make_round, data, words):
    rnd = make_round(secret=SECRET)
    resp = play.post(f"/rounds/{rnd.pk}/lock/", data)
    assert resp.status_code == 400 and words in resp.content.decode()
    assert not Lock.objects.exists()


@pytest.mark.parametrize("data", [
    {"slot0": "x" * 65}, {"token": "not-a-token", **slots(GUESS)}, {"slot3": "🐶\n🐱"},
])
def test_malformed_guess_posts_are_400_never_500(play, player, make_round, data):
    rnd = make_round(secret=SECRET)
    resp = play.post(f"/rounds/{rnd.pk}/guess/", data)
    assert resp.status_code == 400 and 'role="alert"' in resp.content.decode()
    assert charges(player) == 0


def test_wrong_methods(play, make_round):
    rnd = make_round(secret=SECRET)
    assert play.post(f"/rounds/{rnd.pk}/").status_code == 405
    assert play.post(f"/rounds/{rnd.pk}/my-guesses.json").status_code == 405


def test_blind_round_shows_commitment_then_the_reveal(play, player, make_round, django_capture_on_commit_callbacks):
    rnd = make_round(kind="blind", secret=SECRET, prize_pool=100)
    with django_capture_on_commit_callbacks(execute=True):
        play.post(f"/rounds/{rnd.pk}/guess/", slots(GUESS))
    drain("cm", score_guess)
    page = play.get(f"/rounds/{rnd.pk}/").content.decode()
    assert rnd.commitment in page and "sealed until the reveal" in page
    # As a whole number: hex tokens on the page may contain its digits.
    assert not re.search(rf"(?<![0-9a-f]){TOTAL}(?![0-9a-f])", page) and "/600" not in page
    g = play.get(f"/rounds/{rnd.pk}/my-guesses.json").json()["guesses"][0]
    assert (g["status"], g["total"], g["percentage"]) == ("sealed", None, None)
    board = play.get(f"/rounds/{rnd.pk}/leaderboard/").content.decode()
    assert "stays hidden" in board and "ann" not in board.split("<main")[1].split("Log out")[-1]

    settlement.settle_round(rnd.pk, force=True)
    page = play.get(f"/rounds/{rnd.pk}/").content.decode()
    assert "".join(f'<span role="img" aria-label="{n}">{e}</span>' for e, n in [
        ("🦊", "fox"), ("🐶", "dog face"), ("🐰", "rabbit face"), ("🐱", "cat face"),
        ("🐹", "hamster"), ("🐭", "mouse face")]) in page
    assert rnd.nonce in page and "equals the commitment" in page
    assert f"You placed #1 with {TOTAL}/600 and won 💎 100." in page
    assert f"<strong>{TOTAL}</strong>/600" in page
    assert "\\x1e".join([*SECRET, rnd.nonce]) in page  # the do-it-yourself check
    board = play.get(f"/rounds/{rnd.pk}/leaderboard/").content.decode()
    assert "ann (you)" in board and "💎 100" in board


def test_leaderboard_ranks_from_valkey(client, make_player, make_round, django_capture_on_commit_callbacks):
    rnd = make_round(secret=SECRET)
    a, b = make_player("amy"), make_player("bo")
    for p, guess in ((a, GUESS), (b, SECRET[:5] + ["🐻"])):
        client.force_login(p.user)
        with django_capture_on_commit_callbacks(execute=True):
            client.post(f"/rounds/{rnd.pk}/guess/", slots(guess))
    drain("cm", score_guess)
    html = client.get(f"/rounds/{rnd.pk}/leaderboard/").content.decode()
    assert html.index("bo (you)") < html.index("amy") and "500/600" in html and f"{TOTAL}/600" in html
    assert "Read from the database" not in html


def test_leaderboard_falls_back_to_the_database_when_valkey_is_down(play, player, make_round, monkeypatch,
                                                                   django_capture_on_commit_callbacks):
    import redis

    from games import leaderboard

    rnd = make_round(secret=SECRET)
    with django_capture_on_commit_callbacks(execute=True):
        play.post(f"/rounds/{rnd.pk}/guess/", slots(GUESS))
    drain("cm", score_guess)

    def down(*a, **k):
        raise redis.exceptions.ConnectionError("down")

    monkeypatch.setattr(leaderboard, "top", down)
    resp = play.get(f"/rounds/{rnd.pk}/leaderboard/")
    assert resp.status_code == 200
    assert f"{TOTAL}/600" in resp.content.decode() and "Read from the database" in resp.content.decode()


def test_cracking_a_classic_round_settles_it(play, player, make_round, django_capture_on_commit_callbacks):
    from games.workers import settle

    rnd = make_round(secret=SECRET, prize_pool=70)
    with django_capture_on_commit_callbacks(execute=True):
        play.post(f"/rounds/{rnd.pk}/guess/", slots(SECRET))
    drain("cm", score_guess)
    drain("cm.settle", settle)
    rnd.refresh_from_db()
    assert rnd.status == "settled"
    page = play.get(f"/rounds/{rnd.pk}/").content.decode()
    assert "The secret" in page and "won 💎 70" in page and "data-composer" not in page
    assert play.get(f"/rounds/{rnd.pk}/my-guesses.json").json()["round"]["status"] == "settled"
