"""Every console write leaves a LogEntry -- who, when, what and why -- that
the object's history and "Recent operator actions" show, newest first."""
import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth import get_user_model

from echomq.contrib.django import get_queue
from games.guesses import submit
from games.models import Round

pytestmark = pytest.mark.django_db


@pytest.fixture
def root(client):
    client.force_login(get_user_model().objects.create_superuser("root", password="pw-root-123"))
    return client


def test_grant_needs_a_reason_and_logs_amount_currency_and_reason(root, make_player):
    p = make_player("gus", keys=0)
    base = {"action": "grant_currency", "_selected_action": [p.pk], "apply": "1", "currency": "diamonds",
            "amount": "25", "token": "a" * 32}
    resp = root.post("/admin/games/player/", base)
    assert resp.status_code == 200 and "This field is required" in resp.content.decode()
    assert not LogEntry.objects.exists()
    root.post("/admin/games/player/", {**base, "reason": "ticket 42"})
    entry = LogEntry.objects.get()
    assert (entry.user.username, entry.object_id) == ("root", p.pk)
    assert "+25 diamonds" in entry.change_message and "reason: ticket 42" in entry.change_message
    assert "ticket 42" in root.get(f"/admin/games/player/{p.pk}/history/").content.decode()


def test_settle_void_and_rebuild_are_logged(root, make_round, make_player, django_capture_on_commit_callbacks):
    a, b = make_round(title="A"), make_round(title="B")
    with django_capture_on_commit_callbacks(execute=True):
        submit(make_player("vic"), b, b.keyboard[:6])
    root.post("/admin/games/round/", {"action": "settle_now", "_selected_action": [a.pk], "confirm": "yes"})
    root.post("/admin/games/round/", {"action": "void", "_selected_action": [b.pk], "confirm": "yes"})
    root.post("/admin/games/round/", {"action": "rebuild_leaderboards", "_selected_action": [a.pk]})
    root.post(f"/admin/games/round/{a.pk}/leaderboard/")
    log = [(e.object_id, e.change_message) for e in LogEntry.objects.order_by("pk")]
    assert [oid for oid, _ in log] == [a.pk, b.pk, a.pk, a.pk]
    assert log[0][1].startswith("Settle now: asked the settle queue") and get_queue("cm.settle").counts()["pending"]
    assert log[1][1] == "Voided: 1 guess charge refunded through the ledger."
    assert log[2][1].startswith("Rebuilt the leaderboard") and log[3][1].startswith("Rebuilt the leaderboard")
    # Voiding again changes nothing and logs nothing.
    root.post("/admin/games/round/", {"action": "void", "_selected_action": [b.pk], "confirm": "yes"})
    assert LogEntry.objects.count() == 4 and Round.objects.get(pk=b.pk).status == "voided"


def test_recent_operator_actions_lists_everything_newest_first(root, make_round, valkey):
    rnd = make_round(title="Logged")
    root.post("/admin/games/round/", {"action": "rebuild_leaderboards", "_selected_action": [rnd.pk]})
    jid, _ = get_queue("cm").enqueue(b"{}")
    get_queue("cm").enqueue(b"{}")  # so the queue still exists after the remove
    assert root.post(f"/admin/queues/cm/jobs/{jid}/remove/", {"confirm": "yes"}).status_code == 302
    assert root.post("/admin/queues/cm/pause/").status_code == 302
    index = root.get("/admin/").content.decode()
    assert "Recent operator actions" in index and "Codemojex admin" in index
    page = root.get("/admin/games/operatoraction/")
    assert page.status_code == 200
    rows = list(page.context["cl"].result_list)
    assert [r.object_id for r in rows] == ["cm", f"cm/{jid}", rnd.pk]
    html = page.content.decode()
    assert f'href="/admin/queues/cm/jobs/{jid}/"' in html and f'href="/admin/games/round/{rnd.pk}/change/"' in html
    assert "Paused the queue" in html
    # Read-only, and readable by the three groups but not by plain staff.
    assert root.get("/admin/games/operatoraction/add/").status_code == 403


def test_every_schedule_write_is_logged(root, emoji_set, django_capture_on_commit_callbacks):
    """Add, change, pause, resume, delete: one LogEntry each, on the
    schedule, saying what changed; a refused form logs nothing."""
    from django.contrib.admin.models import ADDITION, CHANGE, DELETION

    from games.models import RoundSchedule

    form = {"name": "Evening blind", "active": "on", "emoji_set": emoji_set.pk, "keyboard_size": "24",
            "kind": "blind", "currency": "keys", "guess_price": "2", "prize_pool": "300", "minutes": "45",
            "cron": "0 20 * * *", "every_minutes": "", "tz": "Europe/Paris", "when_open": "skip"}
    assert root.post("/admin/games/roundschedule/add/", {**form, "cron": "0 20 31 2 *"}).status_code == 200
    assert not LogEntry.objects.exists()
    with django_capture_on_commit_callbacks(execute=True):
        assert root.post("/admin/games/roundschedule/add/", form).status_code == 302
        s = RoundSchedule.objects.get()
        url = f"/admin/games/roundschedule/{s.pk}/change/"
        assert root.post(url, {**form, "prize_pool": "500", "when_open": "alongside"}).status_code == 302
        for action in ("pause", "resume"):
            root.post("/admin/games/roundschedule/", {"action": action, "_selected_action": [s.pk]})
        assert root.post(f"/admin/games/roundschedule/{s.pk}/delete/", {"post": "yes"}).status_code == 302
    log = [(e.action_flag, e.object_id, e.get_change_message()) for e in LogEntry.objects.order_by("pk")]
    assert [(flag, oid) for flag, oid, _ in log] == [(ADDITION, str(s.pk))] + [(CHANGE, str(s.pk))] * 3 + [
        (DELETION, str(s.pk))]
    assert log[1][2] == "Changed Starting pool and If its last round is still open."
    assert log[2][2].startswith("Paused") and log[3][2].startswith("Resumed")
    assert get_queue("cm.tasks").schedules() == []  # the delete took the mirror with it
    page = root.get("/admin/games/operatoraction/").content.decode()
    assert page.count("Evening blind") >= 5
