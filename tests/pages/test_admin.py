"""The game-admin console: rounds (create, columns, settle/void, secret
hidden), grant currency through the ledger, and the leaderboard view."""
import pytest
from django.contrib.auth import get_user_model

from games import leaderboard, wallet
from games.guesses import submit
from games.models import LedgerEntry, Round
from games.workers import score_guess

from .conftest import drain, secret_forms

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff(client):
    user = get_user_model().objects.create_superuser("boss", password="pw-boss-123")
    client.force_login(user)
    return client


def test_create_round_draws_the_secret(staff, emoji_set):
    page = staff.get("/admin/games/round/add/").content.decode()
    assert 'name="keyboard_size"' in page and 'name="emoji_set"' in page and 'name="secret"' not in page
    resp = staff.post("/admin/games/round/add/", {
        "title": "Admin made", "emoji_set": emoji_set.pk, "keyboard_size": "30", "kind": "blind",
        "currency": "keys", "guess_price": "2", "prize_pool": "300", "minutes": "45",
        "weights": "[50, 30, 20]"})
    assert resp.status_code == 302, resp.content.decode()[:2000]
    rnd = Round.objects.get(title="Admin made")
    assert len(rnd.keyboard) == 30 and set(rnd.secret) <= set(rnd.keyboard) and len(set(rnd.secret)) == 6
    assert rnd.weights == [50, 30, 20] and rnd.commitment and rnd.status == "open"
    assert 44 * 60 < (rnd.ends_at - rnd.created_at).total_seconds() <= 45 * 60
    listing = staff.get(resp["Location"]).content.decode()
    assert "was added successfully" in listing and all(f not in listing for f in secret_forms(rnd))
    change = staff.get(f"/admin/games/round/{rnd.pk}/change/").content.decode()
    assert "hidden until settled" in change and all(f not in change for f in secret_forms(rnd))


@pytest.mark.parametrize("bad, field_error", [
    ({"keyboard_size": "99"}, "has only"), ({"keyboard_size": "3"}, "greater than or equal to 6"),
    ({"weights": "[0, -1]"}, "whole numbers from 1 to"), ({"minutes": "0"}, "greater than or equal to 1"),
    ({"weights": "[" + "9" * 5000 + "]"}, "Enter a valid JSON"),  # past Python's integer-string limit
    ({"weights": "[" * 100_000 + "]" * 100_000}, "Enter a valid JSON"),  # past the recursion limit
    ({"weights": "[1000000]"}, "whole numbers from 1 to"), ({"weights": "[" + "1, " * 30 + "1]"}, "1 to 20"),
    ({"prize_pool": str(2**62)}, "At most 1,000,000,000,000 diamonds"),
])
def test_create_round_refuses_bad_input(staff, emoji_set, bad, field_error):
    data = {"title": "x", "emoji_set": emoji_set.pk, "keyboard_size": "24", "kind": "classic",
            "currency": "keys", "guess_price": "1", "prize_pool": "0", "minutes": "60", "weights": "[40]", **bad}
    resp = staff.post("/admin/games/round/add/", data)
    assert resp.status_code == 200 and field_error in resp.content.decode()
    assert not Round.objects.exists()


@pytest.mark.parametrize("emojis", ["[" + "9" * 5000 + "]", "[" * 100_000 + "]" * 100_000])
def test_an_emoji_set_json_python_cannot_parse_is_a_form_error(staff, emojis):
    from games.models import EmojiSet

    resp = staff.post("/admin/games/emojiset/add/", {"slug": "big", "title": "Big", "emojis": emojis})
    assert resp.status_code == 200 and "Enter a valid JSON" in resp.content.decode()
    assert not EmojiSet.objects.filter(slug="big").exists()


def test_round_list_columns_and_actions(staff, make_player, make_round, django_capture_on_commit_callbacks):
    rnd = make_round(title="Listed", prize_pool=30)
    a, b = make_player(keys=5), make_player(keys=5)
    with django_capture_on_commit_callbacks(execute=True):
        for i, p in enumerate((a, a, b)):
            submit(p, rnd, rnd.keyboard[i:i + 6])  # a player may not repeat a guess
    html = staff.get("/admin/games/round/").content.decode()
    for col in ("column-players", "column-guess_count", "column-prize_pool", "column-ends_at", "column-status"):
        assert col in html
    assert '<td class="field-players">2</td>' in html and '<td class="field-guess_count">3</td>' in html
    assert all(f not in html for f in secret_forms(rnd))
    ask = staff.post("/admin/games/round/", {"action": "void", "_selected_action": [rnd.pk]})
    assert ask.status_code == 200 and Round.objects.get(pk=rnd.pk).status == "open"
    assert "3 guess charges refunded, 3 keys back to 2 players" in ask.content.decode()
    resp = staff.post("/admin/games/round/", {"action": "void", "_selected_action": [rnd.pk], "confirm": "yes"})
    assert resp.status_code == 302
    assert Round.objects.get(pk=rnd.pk).status == "voided"
    assert LedgerEntry.objects.filter(reason="refund").count() == 3


def test_settle_now_goes_through_the_settle_queue(staff, make_round):
    from echomq.contrib.django import get_queue
    from games.workers import settle

    rnd = make_round()
    ask = staff.post("/admin/games/round/", {"action": "settle_now", "_selected_action": [rnd.pk]})
    assert "The round closes now" in ask.content.decode() and not get_queue("cm.settle").counts()["pending"]
    staff.post("/admin/games/round/", {"action": "settle_now", "_selected_action": [rnd.pk], "confirm": "yes"})
    drain("cm.settle", settle)
    assert Round.objects.get(pk=rnd.pk).status == "settled"
    assert " ".join(rnd.secret) in staff.get(f"/admin/games/round/{rnd.pk}/change/").content.decode()


def test_grant_currency_action_writes_ledger_rows(staff, make_player, valkey):
    a, b = make_player("gina", keys=0), make_player("hal", keys=1)
    url = "/admin/games/player/"
    ask = staff.post(url, {"action": "grant_currency", "_selected_action": [a.pk, b.pk]})
    assert ask.status_code == 200 and "Grant currency" in ask.content.decode()
    token = ask.context["form"]["token"].value()
    assert len(token) == 32 and f'value="{token}"' in ask.content.decode()
    bad = staff.post(url, {"action": "grant_currency", "_selected_action": [a.pk], "apply": "1",
                           "currency": "keys", "amount": "0", "reason": "x", "token": token})
    assert bad.status_code == 200 and "non-zero" in bad.content.decode()
    grant = {"action": "grant_currency", "_selected_action": [a.pk, b.pk], "apply": "1",
             "currency": "keys", "amount": "7", "reason": "ticket 9", "token": token}
    done = staff.post(url, grant)
    assert done.status_code == 302
    again = staff.post(url, grant, follow=True)  # a double click sends the same form twice
    assert "already applied" in again.content.decode()
    assert wallet.balances(a)["keys"] == 7 and wallet.balances(b)["keys"] == 8
    valkey.flushall()  # Valkey lost everything (a failover, a cut AOF): the database still knows the form
    assert "already applied" in staff.post(url, grant, follow=True).content.decode()
    assert wallet.balances(a)["keys"] == 7 and wallet.balances(b)["keys"] == 8
    assert LedgerEntry.objects.filter(reference="ticket 9", reason="grant").count() == 2
    staff.post(url, {"action": "grant_currency", "_selected_action": [a.pk], "apply": "1",
                     "currency": "keys", "amount": "-100", "reason": "oops", "token": "another-form"})
    assert wallet.balances(a)["keys"] == 7 and wallet.mismatched_wallets() == []
    listing = staff.get(url).content.decode()
    assert '<td class="field-keys">7</td>' in listing


def test_money_guesses_and_notifications_are_read_only(staff):
    for model in ("wallet", "ledgerentry", "guess", "notification"):
        assert staff.get(f"/admin/games/{model}/").status_code == 200
        assert staff.get(f"/admin/games/{model}/add/").status_code == 403


def test_leaderboard_view_reads_valkey_and_rebuilds(staff, make_player, make_round, valkey,
                                                    django_capture_on_commit_callbacks):
    rnd = make_round(kind="blind")
    p = make_player("ivy")
    with django_capture_on_commit_callbacks(execute=True):
        submit(p, rnd, rnd.keyboard[:6])
    drain("cm", score_guess)
    url = f"/admin/games/round/{rnd.pk}/leaderboard/"
    html = staff.get(url).content.decode()
    assert "ivy" in html and "It matches the database." in html  # staff see who is on blind boards
    assert "sealed until the reveal" in html and "/600" not in html  # but not their totals
    assert all(f not in html for f in secret_forms(rnd))
    valkey.delete(leaderboard.key(rnd.pk))
    assert "differs from the database" in staff.get(url).content.decode()
    assert staff.post(url).status_code == 302
    assert leaderboard.live(rnd.pk) == leaderboard.from_db(rnd.pk) != {}
    assert staff.get("/admin/games/round/RND00000000000/leaderboard/").status_code == 404


def test_console_is_staff_only(client, make_player, make_round):
    rnd = make_round()
    client.force_login(make_player("pat").user)
    for url in ("/admin/games/round/", f"/admin/games/round/{rnd.pk}/leaderboard/", "/admin/games/round/add/"):
        resp = client.get(url)
        assert resp.status_code == 302 and "/admin/login/" in resp["Location"]


@pytest.mark.parametrize("ms, words", [(393_000, "6 min 33 s"), (393_999, "6 min 33 s"), (12_000, "12 s"),
                                       (999, "under 1 s"), (3_725_000, "1 h 2 min 5 s"), (7_200_000, "2 h")])
def test_reached_after_reads_as_minutes_and_seconds(ms, words):
    from games.admin import reached_after

    assert reached_after(ms) == words


def test_the_console_says_codemojex(staff):
    html = staff.get("/admin/").content.decode()
    assert "<title>Codemojex console | Codemojex admin</title>" in html
    assert 'id="site-name"><a href="/admin/">Codemojex admin</a>' in html
    assert "Django administration" not in html
