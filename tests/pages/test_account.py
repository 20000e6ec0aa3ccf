"""Sign-up, log in/out, the wallet and notifications; and who may see what."""
import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from games import notifications as notes
from games import settlement, wallet
from games.forms import STARTING_BALANCE
from games.models import LedgerEntry, Notification, Player

pytestmark = pytest.mark.django_db

PASSWORD = "a-long-enough-pass-42"


def test_sign_up_credits_the_starting_balance_through_the_ledger(client):
    assert client.get("/signup/").status_code == 200
    resp = client.post("/signup/", {"username": "newbie", "password1": PASSWORD, "password2": PASSWORD})
    assert resp.status_code == 302 and resp["Location"] == "/"
    player = Player.objects.get(user__username="newbie")
    assert wallet.balances(player) == {"keys": STARTING_BALANCE["keys"], "clips": STARTING_BALANCE["clips"],
                                       "diamonds": 0}
    assert wallet.ledger_sums(player) == wallet.balances(player)
    assert set(LedgerEntry.objects.filter(player=player).values_list("reason", "reference")) == {("grant", "welcome")}
    lobby = client.get("/").content.decode()
    assert "Welcome!" in lobby and "Log out newbie" in lobby


@pytest.mark.parametrize("data, words", [
    ({"username": "x", "password1": PASSWORD, "password2": PASSWORD + "!"}, "password fields didn’t match"),
    ({"username": "x", "password1": "123", "password2": "123"}, "too short"),
    ({"username": "", "password1": PASSWORD, "password2": PASSWORD}, "This field is required."),
])
def test_bad_sign_ups_are_400_and_create_nothing(client, data, words):
    resp = client.post("/signup/", data)
    assert resp.status_code == 400 and words in resp.content.decode()
    assert not get_user_model().objects.exists() and not LedgerEntry.objects.exists()


def test_taken_username(client, make_player):
    make_player("taken")
    resp = client.post("/signup/", {"username": "taken", "password1": PASSWORD, "password2": PASSWORD})
    assert resp.status_code == 400 and "already exists" in resp.content.decode()


@pytest.mark.django_db(transaction=True)
def test_a_name_taken_by_a_racing_sign_up_is_a_400_not_a_500(client, make_player, monkeypatch):
    """Two sign-ups of one new name at once both pass the form's uniqueness
    check; the second INSERT then fails. That one answers like a taken name,
    with nothing written (no second player, no second welcome grant)."""
    from games.forms import SignUpForm

    make_player("racer")  # what the racing sign-up has just committed
    # as if checked before it did: the form's own uniqueness checks pass
    monkeypatch.setattr(SignUpForm, "clean_username", lambda form: form.cleaned_data["username"])
    monkeypatch.setattr(SignUpForm, "validate_unique", lambda form: None)
    resp = client.post("/signup/", {"username": "racer", "password1": PASSWORD, "password2": PASSWORD})
    assert resp.status_code == 400 and "already exists" in resp.content.decode()
    assert get_user_model().objects.filter(username="racer").count() == 1 and Player.objects.count() == 1


def test_log_in_and_log_out_by_post(client):
    get_user_model().objects.create_user("lou", password=PASSWORD)
    assert client.get("/login/").status_code == 200
    bad = client.post("/login/", {"username": "lou", "password": "wrong"})
    assert bad.status_code == 400 and "enter a correct username and password" in bad.content.decode()
    resp = client.post("/login/", {"username": "lou", "password": PASSWORD, "next": "/wallet/"})
    assert resp.status_code == 302 and resp["Location"] == "/wallet/"
    assert client.get("/login/").status_code == 302  # already in
    assert client.get("/logout/").status_code == 405  # logging out changes state: POST only
    assert client.post("/logout/").status_code == 302
    assert client.get("/wallet/").status_code == 302


def test_a_staff_account_can_play(client, make_round):
    admin = get_user_model().objects.create_superuser("boss", password=PASSWORD)
    client.force_login(admin)
    assert client.get("/").status_code == 200
    assert Player.objects.filter(user=admin).exists()


@pytest.mark.parametrize("url", ["/me/", "/wallet/", "/notifications/", "/rounds/RND00000000000/",
                                 "/rounds/RND00000000000/leaderboard/"])
def test_pages_need_a_login(client, url):
    resp = client.get(url)
    assert resp.status_code == 302 and resp["Location"].startswith("/login/?next=")


def test_poll_without_login_is_401_json(client):
    resp = client.get("/rounds/RND00000000000/my-guesses.json")
    assert resp.status_code == 401 and resp.json() == {"error": "Log in first."}


def test_posts_need_a_login(client):
    for url in ("/rounds/RND00000000000/guess/", "/wallet/exchange/", "/notifications/read/"):
        assert client.post(url).status_code == 302


def test_wallet_shows_balances_and_my_ledger_only(play, player, make_player):
    other = make_player("otto", keys=99)
    wallet.grant(player, "diamonds", 25, reference="ticket 7")
    html = play.get("/wallet/").content.decode()
    assert 'data-balance="keys">10<' in html and 'data-balance="diamonds">25<' in html
    assert "ticket 7" in html and "+25 diamonds" in html
    assert other.pk not in html
    assert "+99 keys" not in html.split("<h2>Ledger</h2>")[1]  # otto's grant is not in my ledger


def test_exchange_diamonds_for_keys(play, player):
    wallet.grant(player, "diamonds", 25)
    resp = play.post("/wallet/exchange/", {"keys": "2"})
    assert resp.status_code == 302
    assert wallet.balances(player) == {"keys": 12, "clips": 3, "diamonds": 5}
    resp = play.post("/wallet/exchange/", {"keys": "1"})
    assert resp.status_code == 400 and "Not enough diamonds: this needs 10, you have 5." in resp.content.decode()
    assert play.post("/wallet/exchange/", {"keys": "-1"}).status_code == 400
    assert play.post("/wallet/exchange/", {"keys": "lots"}).status_code == 400
    assert wallet.balances(player)["diamonds"] == 5 and wallet.mismatched_wallets() == []


def test_ledger_is_paginated(play, player):
    for i in range(55):
        wallet.grant(player, "clips", 1, reference=f"n{i}")
    first = play.get("/wallet/").content.decode()
    assert "Page 1 of 2" in first and "n54" in first and ">n0<" not in first
    assert ">n0<" in play.get("/wallet/?page=2").content.decode()
    assert play.get("/wallet/?page=zzz").status_code == 200


def test_notifications_with_an_unread_count(play, player, make_round, django_capture_on_commit_callbacks):
    from games.guesses import submit

    rnd = make_round(title="Sunday", prize_pool=10)
    submit(player, rnd, rnd.keyboard[:6])
    settlement.void_round(rnd.pk)
    notes.deliver(player.pk, rnd.pk, Notification.Kind.VOIDED)
    lobby = play.get("/").content.decode()
    assert 'aria-label="Notifications, 1 unread"' in lobby and '<span class="badge" data-unread>1</span>' in lobby
    page = play.get("/notifications/").content.decode()
    assert "Round Sunday was cancelled; 1 key refunded." in page and 'class="unread"' in page
    assert play.post("/notifications/read/").status_code == 302
    assert Notification.objects.get().read_at is not None
    assert 'aria-label="Notifications, 0 unread"' in play.get("/").content.decode()


def test_csrf_is_enforced_everywhere(player, make_round):
    rnd = make_round()
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(player.user)
    for url, data in ((f"/rounds/{rnd.pk}/guess/", {}), (f"/rounds/{rnd.pk}/lock/", {"lock": "0"}),
                      (f"/rounds/{rnd.pk}/compose/", {"op": "clear"}), ("/wallet/exchange/", {"keys": "1"}),
                      ("/notifications/read/", {}), ("/logout/", {})):
        resp = strict.post(url, data)
        assert resp.status_code == 403 and "That form expired" in resp.content.decode(), url
    assert Client(enforce_csrf_checks=True).post("/signup/", {}).status_code == 403
    assert Client(enforce_csrf_checks=True).post("/login/", {}).status_code == 403


def test_unknown_url_is_the_404_page(play):
    resp = play.get("/no/such/page/")
    assert resp.status_code == 404 and "Not found" in resp.content.decode()
