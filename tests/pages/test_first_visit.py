"""What a new player and a new admin tripped over (issue 23, part 5): each
case as they met it, pinned."""
from __future__ import annotations

import pytest

from games.views.common import emoji_name

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("emoji, name", [
    ("🐈‍⬛", "black cat"), ("🐕‍🦺", "service dog"), ("🐻‍❄️", "polar bear"), ("🐦‍⬛", "black bird"),
    ("🐶", "dog face"), ("❄️", "snowflake"), ("❄", "snowflake"), ("🏳️‍🌈", "rainbow flag"),
])
def test_emoji_keys_are_named_as_the_unicode_emoji_data_names_them(emoji, name):
    assert emoji_name(emoji) == name


def test_a_string_the_emoji_data_does_not_know_still_gets_a_label():
    assert emoji_name("\u00e9") == "latin small letter e with acute"
    assert emoji_name("\u200d") == "emoji"


def test_the_keyboard_labels_sequences_by_their_own_names(play, make_round):
    rnd = make_round()  # the whole animals set, 🐈‍⬛ and 🐕‍🦺 among them
    page = play.get(f"/rounds/{rnd.pk}/").content.decode()
    assert 'value="🐈‍⬛" class="key" aria-label="black cat"' in page
    assert 'value="🐕‍🦺" class="key" aria-label="service dog"' in page
    assert "cat black large square" not in page and "safety vest" not in page


# -- the player pages -----------------------------------------------------------
import io  # noqa: E402
import logging  # noqa: E402
import re  # noqa: E402
from datetime import timedelta  # noqa: E402

from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.utils import timezone  # noqa: E402

from games import leaderboard, settlement  # noqa: E402
from games.demo import SETTLED_TITLE  # noqa: E402
from games.guesses import submit  # noqa: E402
from games.models import Guess, LedgerEntry, Player, Round  # noqa: E402
from games.workers import score_guess  # noqa: E402

from .conftest import S, drain  # noqa: E402

GUESS = {f"slot{i}": e for i, e in enumerate(S)}


def test_the_landing_shows_totals_as_a_classic_round_does_and_says_when_marks_appear(client):
    html = client.get("/").content.decode()
    during = html.split('data-sample="during"')[1].split("</ol>")[0]
    after = html.split('data-sample="after"')[1].split("</ol>")[0]
    assert "/600 · " in during and "mark" not in during and "🟩" not in during
    assert 'class="mark mark-' in after
    assert "When the round ends, the secret is revealed and each of your guesses gets its marks" in html


def test_a_refused_repeat_redirects_back_and_says_why_where_the_composer_is(play, player, make_round):
    rnd = make_round(secret=S)
    assert play.post(f"/rounds/{rnd.pk}/guess/", GUESS).status_code == 302
    again = play.post(f"/rounds/{rnd.pk}/guess/", GUESS)
    assert again.status_code == 303  # See Other: a reload of what follows GETs the page, never posts again
    assert again["Location"].startswith(f"/rounds/{rnd.pk}/?") and again["Location"].endswith("#guess-error")
    page = play.get(again["Location"])
    html = page.content.decode()
    assert page.status_code == 200 and "You already guessed " + " ".join(S) in html
    composer = html.split("data-composer>")[1].split("</form>")[0]
    assert 'id="guess-error"' in composer and "Nothing was charged" in composer  # in the composer, not mid-page
    assert html.count('id="guess-error"') == 1
    assert Guess.objects.filter(player=player).count() == 1
    assert LedgerEntry.objects.filter(player=player, reason="guess").count() == 1


@pytest.mark.parametrize("code", ["repeated_guess", "insufficient_funds", "closed", "expired", "nope", "<b>"])
def test_a_refusal_the_page_does_not_bear_out_says_nothing(play, make_round, code):
    """A stale or hand-made ``refused=`` never puts a false sentence on the page."""
    rnd = make_round(secret=S)  # open, nothing guessed, 10 keys for a 1-key guess
    html = play.get(f"/rounds/{rnd.pk}/", {"refused": code, **GUESS}).content.decode()
    assert 'id="guess-error"' not in html


def test_sign_up_says_a_common_password_under_password_and_keeps_what_was_typed(client, settings):
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "signup": ""}
    resp = client.post("/signup/", {"username": "newbie", "password1": "password", "password2": "password"})
    assert resp.status_code == 400 and "no-store" in resp["Cache-Control"]
    html = resp.content.decode()
    field = r'<div class="field(?: invalid)?">'
    blocks = {m[1]: m[0] for m in re.finditer(field + r'\s*<label for="id_(\w+)"(?:(?!' + field + ').)*', html, re.S)}
    assert "This password is too common." in blocks["password1"]
    assert "This password is too common." not in blocks["password2"] and 'field invalid' not in blocks["password2"]
    p1 = re.search(r'<input[^>]*name="password1"[^>]*>', html)[0]
    p2 = re.search(r'<input[^>]*name="password2"[^>]*>', html)[0]
    assert 'value="password"' in p1 and "autofocus" in p1  # kept, to amend, and focused
    assert "value=" not in p2  # the confirmation of a refused password goes
    assert html.index("This password is too common.") < html.index('name="password2"')
    # Only the name refused: both passwords stay.
    get_user_model().objects.create_user("taken", password="x")
    html = client.post("/signup/", {"username": "taken", "password1": "a-Long-pass-77",
                                    "password2": "a-Long-pass-77"}).content.decode()
    assert html.count('value="a-Long-pass-77"') == 2


def test_the_blind_panel_counts_my_guess_right_after_it(play, player, make_round, make_player,
                                                        django_capture_on_commit_callbacks):
    rnd = make_round(kind="blind", secret=S)
    other = make_player("olga")
    with django_capture_on_commit_callbacks(execute=True):
        submit(other, rnd, list(reversed(S)))
    drain("cm", score_guess)
    with django_capture_on_commit_callbacks(execute=True):
        assert play.post(f"/rounds/{rnd.pk}/guess/", GUESS).status_code == 302  # queued, not scored yet
    html = play.get(f"/rounds/{rnd.pk}/").content.decode()
    panel = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html.split("data-live>")[1].split("</aside>")[0]))
    assert "2 players in this round · 2 guesses in the last minute" in panel
    data = play.get(f"/rounds/{rnd.pk}/my-guesses.json").json()["live"]
    assert (data["players"], data["recent"]) == (2, 2)
    drain("cm", score_guess)  # scored: counted by Valkey now, not twice
    data = play.get(f"/rounds/{rnd.pk}/my-guesses.json").json()["live"]
    assert (data["players"], data["recent"]) == (2, 2)
    lobby = play.get("/").content.decode()
    assert "2 playing" in lobby


def test_the_lobby_keeps_prize_and_price_on_one_line_and_the_phone_keeps_balances(play, make_round):
    from pathlib import Path

    make_round(prize_pool=100)
    html = play.get("/").content.decode()
    assert '<td data-label="Prize pool" class="num">💎&nbsp;100</td>' in html
    css = (Path(__file__).parents[2] / "games/static/games/site.css").read_text()
    assert ".num {" in css and "white-space: nowrap" in css.split(".num {")[1].split("}")[0]
    assert not re.search(r"\.bal\s*\{[^}]*display:\s*none", css)  # no width hides the balances


def test_an_admin_opening_the_site_becomes_a_player_who_can_play(client, make_round):
    boss = get_user_model().objects.create_superuser("boss", password="pw-boss-123")
    client.force_login(boss)
    html = client.get("/").content.decode()
    player = Player.objects.get(user=boss)
    assert "🔑50" in html and player.wallet.keys == 50 and player.wallet.clips == 20
    assert LedgerEntry.objects.filter(player=player, reference="welcome").count() == 2
    client.get("/")
    client.get("/wallet/")
    assert LedgerEntry.objects.filter(player=player).count() == 2  # once
    rnd = make_round()
    assert client.post(f"/rounds/{rnd.pk}/guess/", {f"slot{i}": e for i, e in enumerate(rnd.keyboard[:6])}
                       ).status_code == 302


def test_a_signed_up_player_is_welcomed_once(client, settings):
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "signup": ""}
    client.post("/signup/", {"username": "nina", "password1": "a-Long-pass-77", "password2": "a-Long-pass-77"})
    player = Player.objects.get(user__username="nina")
    client.get("/")
    assert LedgerEntry.objects.filter(player=player).count() == 2 and player.wallet.keys == 50


# -- settlement and the demo -----------------------------------------------------
def test_a_round_settled_early_records_when_it_ended(make_round, make_player):
    rnd = make_round(secret=S, prize_pool=10)
    due = rnd.ends_at
    submit(make_player("al"), rnd, S[::-1])
    drain("cm", score_guess)
    settlement.settle_round(rnd.pk, force=True)
    rnd.refresh_from_db()
    assert rnd.ends_at == rnd.settled_at < due
    assert rnd.result["scheduled_end"] == due.isoformat()
    late = make_round(secret=S)
    Round.objects.filter(pk=late.pk).update(ends_at=timezone.now() - timedelta(seconds=5))
    settlement.settle_round(late.pk)
    late.refresh_from_db()
    assert late.ends_at < late.settled_at and "scheduled_end" not in late.result  # on time: unchanged
    voided = make_round()
    settlement.void_round(voided.pk)
    voided.refresh_from_db()
    assert voided.ends_at == voided.settled_at and "scheduled_end" in voided.result


def test_the_demo_yesterday_round_ended_yesterday(settings, tmp_path, valkey):
    settings.VAR_DIR = tmp_path
    call_command("seed_demo", stdout=io.StringIO())
    rnd = Round.objects.get(title=SETTLED_TITLE)
    now = timezone.now()
    assert rnd.created_at < rnd.ends_at == rnd.settled_at < now - timedelta(hours=23)
    assert "scheduled_end" not in rnd.result
    assert all(rnd.created_at <= g.created_at <= rnd.ends_at for g in rnd.guesses.all())


def test_seeding_warns_of_nothing_and_starting_the_reaper_heals_quietly(settings, tmp_path, valkey, caplog):
    settings.VAR_DIR = tmp_path
    with caplog.at_level(logging.INFO):
        call_command("seed_demo", stdout=io.StringIO())
        first = leaderboard.heal()  # the reaper's first pass: every board new to it, none lost
    assert first["healed"] >= 3 and first["restored"] == 0
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert not [r for r in caplog.records if r.name == "games.leaderboard"]
    rnd = Round.objects.filter(status="open", kind="classic").first()
    valkey.delete(leaderboard.key(rnd.pk), leaderboard.sentinel(rnd.pk))  # a flush lost this board
    caplog.clear()
    with caplog.at_level(logging.INFO):
        again = leaderboard.heal()
    assert again["restored"] > 0
    [said] = [r for r in caplog.records if r.name == "games.leaderboard"]
    assert said.levelno == logging.WARNING and "restored" in said.getMessage() and rnd.pk in said.getMessage()


@pytest.mark.django_db(transaction=True)  # flush truncates: on PostgreSQL not inside a test's transaction
def test_reset_demo_starts_over_and_refuses_in_production(settings, tmp_path, valkey, make_player):
    from games.permissions import sync_groups

    sync_groups()  # an earlier transactional test's flush empties the groups the migration made
    settings.VAR_DIR = tmp_path
    call_command("seed_demo", stdout=io.StringIO())
    make_player("stranger")
    old_admin = (tmp_path / "demo-admin.password").read_text()
    out = io.StringIO()
    call_command("reset_demo", "--yes", stdout=out)
    assert not get_user_model().objects.filter(username="stranger").exists()
    assert Round.objects.filter(status="open").count() == 3 and Round.objects.filter(title=SETTLED_TITLE).count() == 1
    assert (tmp_path / "demo-admin.password").read_text() != old_admin
    assert get_user_model().objects.get(username="gamemaster").groups.filter(name="Game master").exists()
    settings.DEBUG, settings.DEV = False, False
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="developer's install"):
        call_command("reset_demo", "--yes", stdout=io.StringIO())
    assert Round.objects.count() == 4


# -- the admin ----------------------------------------------------------------------
@pytest.fixture
def root(client):
    client.force_login(get_user_model().objects.create_superuser("root", password="pw-root-123"))
    return client


@pytest.fixture
def played(make_round, make_player, django_capture_on_commit_callbacks):
    """A classic round with alice's guess queued (its job waits in ``cm``)."""
    rnd = make_round(secret=S, prize_pool=100, title="Admin's view")
    alice = make_player("alice")
    with django_capture_on_commit_callbacks(execute=True):
        g = submit(alice, rnd, S[::-1])
    return rnd, alice, g


def crumbs(html: str) -> list[str]:
    bar = re.search(r'<ol class="breadcrumbs">(.*?)</ol>', html, re.S)
    assert bar, "no admin breadcrumb bar"
    return [re.sub(r"<[^>]+>", "", li).strip() for li in re.findall(r"<li[^>]*>(.*?)</li>", bar[1], re.S)]


def test_queue_and_confirmation_pages_have_the_admin_breadcrumb_bar(root, played):
    rnd, alice, g = played
    assert crumbs(root.get("/admin/queues/").content.decode()) == ["Home", "Queues"]
    assert crumbs(root.get("/admin/queues/cm/").content.decode()) == ["Home", "Queues", "cm"]
    assert crumbs(root.get(f"/admin/queues/cm/jobs/{g.job_id}/").content.decode()) == ["Home", "Queues", "cm",
                                                                                      g.job_id]
    assert crumbs(root.get(f"/admin/queues/cm/jobs/{g.job_id}/remove/").content.decode())[:3] == [
        "Home", "Queues", "cm"]
    html = root.post("/admin/games/round/", {"action": "settle_now", "_selected_action": [rnd.pk]}).content.decode()
    assert crumbs(html) == ["Home", "Codemojex", "Rounds", "Settle"]
    assert crumbs(root.get(f"/admin/games/round/{rnd.pk}/leaderboard/").content.decode())[-1] == "Leaderboard"
    assert '<div class="breadcrumbs">' not in html  # Django 6's bar is an <ol>


def test_lanes_show_player_names(root, played):
    rnd, alice, g = played
    html = root.get("/admin/queues/cm/").content.decode()
    lanes = html.split('id="lanes"')[1].split("</table>")[0]
    assert f"alice <span" in lanes and alice.pk in lanes  # the name, the id beside it
    lane = root.get(f"/admin/queues/cm/lanes/{alice.pk}/").content.decode()
    assert crumbs(lane)[-1] == "lane alice"
    assert "alice <span" in root.get(f"/admin/queues/cm/jobs/{g.job_id}/").content.decode()


def test_the_dashboard_names_lanes_only_through_a_resolver(root, played):
    """EchoMQ knows no players: without the game's resolver a lane is its id."""
    from echomq.contrib.django import resolvers

    rnd, alice, g = played
    saved = resolvers.resolver_for("cm")
    resolvers.unregister("cm")
    try:
        lanes = root.get("/admin/queues/cm/").content.decode().split('id="lanes"')[1].split("</table>")[0]
    finally:
        resolvers.register("cm", saved)
    assert "alice" not in lanes and alice.pk in lanes


def test_a_classic_round_admin_page_has_no_blind_weights_and_says_its_result(root, played):
    rnd, alice, g = played
    html = root.get(f"/admin/games/round/{rnd.pk}/change/").content.decode()
    assert "field-weights" not in html and "field-commitment" not in html
    assert "Written when the round closes." in html
    drain("cm", score_guess)
    settlement.settle_round(rnd.pk, force=True)
    html = root.get(f"/admin/games/round/{rnd.pk}/change/").content.decode()
    result = html.split("field-outcome")[1][:2000]
    assert "#1 alice" in result and "💎 100" in result and "Closed early: it was due to end" in result
    assert '"payouts"' not in html and "{&quot;" not in html  # not the raw JSON
    blind = Round.objects.create(**{**{f.attname: getattr(rnd, f.attname) for f in Round._meta.concrete_fields
                                       if f.attname not in ("id",)}, "kind": "blind", "commitment": "0" * 64,
                                    "status": "open", "result": {}})
    html = root.get(f"/admin/games/round/{blind.pk}/change/").content.decode()
    assert "field-weights" in html and "field-commitment" in html


def test_settle_preview_reads_right_for_one_winner_and_for_a_tie(root, played, make_player,
                                                                 django_capture_on_commit_callbacks):
    from games.admin import settle_preview

    rnd, alice, g = played
    drain("cm", score_guess)
    text = settle_preview(rnd)
    assert "As it stands alice takes the whole pool, 💎 100, with" in text
    assert "each" not in text and "1 player takes" not in text
    with django_capture_on_commit_callbacks(execute=True):
        submit(make_player("bob"), rnd, S[::-1])
        submit(make_player("cy"), rnd, S[::-1])
    drain("cm", score_guess)
    text = settle_preview(rnd)
    assert re.search(r"As it stands 3 players tie at \d+/600 \(alice, bob, cy\) and share the pool of 💎 100: "
                     r"💎 33 each, the house keeps 💎 1\.", text), text


def test_one_key_is_one_key_and_a_classic_guess_is_hidden_until_settled(root, played):
    rnd, alice, g = played
    job = root.get(f"/admin/queues/cm/jobs/{g.job_id}/").content.decode()
    assert "1 key" in job and "1 keys" not in job
    remove = root.get(f"/admin/queues/cm/jobs/{g.job_id}/remove/").content.decode()
    assert "charged 1 key and" in remove and "credits 1 key back" in remove
    html = root.get(f"/admin/games/guess/{g.pk}/change/").content.decode()
    assert "hidden until the round is settled" in html and "sealed until the reveal" not in html


def test_a_round_announcement_lane_is_named_after_its_round(root, emoji_set, django_capture_on_commit_callbacks):
    from games import rounds

    with django_capture_on_commit_callbacks(execute=True):
        rnd = rounds.create_round(emoji_set, title="Fresh one")
    html = root.get("/admin/queues/cm.tasks/").content.decode()
    assert f"round Fresh one <span" in html and rnd.pk in html
