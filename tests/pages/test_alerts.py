"""Players hear about it (issue 23, part 4): "a new round opened", for the
players who ask on their profile, and "the round you played is settled",
for everyone who played; both through Django tasks on ``cm.tasks``."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import transaction
from django.tasks import task_backends

from echomq.contrib.django.tasks import Runner
from games import notifications, rounds, settlement, tasks
from games.guesses import submit
from games.models import Notification, Player
from games.workers import score_guess

from tests.games.conftest import queue_depth

from .conftest import S, drain

pytestmark = pytest.mark.django_db


def run_tasks() -> dict:
    return drain(tasks.QUEUE, Runner(task_backends["default"]))


def test_the_profile_opts_in_and_out_of_new_round_notifications(play, player):
    html = play.get(f"/players/{player.user.username}/").content.decode()
    assert 'name="new_rounds"' in html and "checked" not in html.split('name="new_rounds"')[1][:20]
    resp = play.post("/me/alerts/", {"new_rounds": "on"})
    assert resp.status_code == 302 and Player.objects.get(pk=player.pk).notify_new_rounds
    html = play.get(resp["Location"]).content.decode()
    assert "You will hear when a new round opens." in html
    assert 'name="new_rounds" checked' in html
    play.post("/me/alerts/", {})
    assert not Player.objects.get(pk=player.pk).notify_new_rounds


def test_someone_elses_profile_has_no_switch(play, make_player):
    other = make_player("olaf")
    html = play.get(f"/players/{other.user.username}/").content.decode()
    assert 'name="new_rounds"' not in html


def test_a_new_round_tells_the_players_who_asked_once(emoji_set, make_player, django_capture_on_commit_callbacks):
    keen, keener, quiet = make_player("keen"), make_player("keener"), make_player("quiet")
    Player.objects.filter(pk__in=[keen.pk, keener.pk]).update(notify_new_rounds=True)
    with django_capture_on_commit_callbacks(execute=True) as asked:
        rnd = rounds.create_round(emoji_set, title="Fresh", guess_price=2, prize_pool=300,
                                  duration=timedelta(minutes=90))
    assert len(asked) == 1 and queue_depth(tasks.QUEUE) == 1
    assert run_tasks()["completed"] == 1
    notes = Notification.objects.filter(round=rnd, kind="opened")
    assert sorted(n.player_id for n in notes) == sorted([keen.pk, keener.pk])
    assert notes[0].text == "A new classic round opened: Fresh. A guess costs 2 keys, the pool is 💎 300; it runs 1 h 30 min."
    assert notifications.announce(rnd.pk) == 0  # a redelivery tells nobody twice
    assert Notification.objects.filter(round=rnd, kind="opened").count() == 2


def test_a_rolled_back_round_announces_nothing(emoji_set, make_player, django_capture_on_commit_callbacks):
    Player.objects.filter(pk=make_player("keen").pk).update(notify_new_rounds=True)
    with django_capture_on_commit_callbacks(execute=True) as asked:
        with pytest.raises(RuntimeError), transaction.atomic():
            rounds.create_round(emoji_set)
            raise RuntimeError("rolled back")
    assert asked == [] and not Notification.objects.exists()


def test_a_round_closed_before_its_announcement_runs_announces_nothing(emoji_set, make_player):
    Player.objects.filter(pk=make_player("keen").pk).update(notify_new_rounds=True)
    rnd = rounds.create_round(emoji_set)
    settlement.void_round(rnd.pk)
    assert notifications.announce(rnd.pk) == 0 and notifications.announce("RND00000000000") == 0


def test_the_announcement_fans_out_in_batches(emoji_set, make_player, monkeypatch):
    monkeypatch.setattr(notifications, "ANNOUNCE_BATCH", 2)
    keen = [make_player(f"k{i}") for i in range(5)]
    Player.objects.filter(pk__in=[p.pk for p in keen]).update(notify_new_rounds=True)
    rnd = rounds.create_round(emoji_set)
    Notification.objects.create(player=keen[3], round=rnd, kind="opened", text="told already")
    assert notifications.announce(rnd.pk) == 4
    assert Notification.objects.filter(round=rnd).count() == 5


def test_the_round_you_played_is_settled_reaches_the_notifications_page(play, player, make_round,
                                                                       django_capture_on_commit_callbacks):
    rnd = make_round(secret=S, prize_pool=10, title="Played")
    with django_capture_on_commit_callbacks(execute=True):
        submit(player, rnd, S)
    drain("cm", score_guess)
    with django_capture_on_commit_callbacks(execute=True):
        settlement.settle_round(rnd.pk, force=True)
    run_tasks()
    html = play.get("/notifications/").content.decode()
    assert "Round Played settled: you won 10 diamonds with 600/600." in html
    assert 'data-unread>1<' in play.get("/").content.decode()  # the header's badge
