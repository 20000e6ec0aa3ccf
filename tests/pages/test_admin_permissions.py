"""Every write of the game console checks its own named permission: a staff
user who may only view gets a 403 and nothing changes -- the database rows
and the Valkey keys before and after are identical. The superuser and the
right group can."""
import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission

from games.guesses import submit
from games.models import EmojiSet, Guess, LedgerEntry, Notification, Player, Round, RoundEntry, RoundSchedule, Wallet
from games.permissions import GROUPS
from games.workers import score_guess
from tests.echomq_admin.snapshot import db_snapshot, valkey_snapshot

from .conftest import drain

pytestmark = pytest.mark.django_db

MODELS = (Round, Guess, LedgerEntry, Wallet, RoundEntry, Notification, EmojiSet, Player, RoundSchedule)
VIEW_ALL = [f"view_{m}" for m in ("round", "player", "guess", "wallet", "ledgerentry", "emojiset", "roundentry",
                                  "roundschedule")]


def staff_with(*codenames, name="viewer"):
    user = get_user_model().objects.create_user(name, password="pw-x-12345", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="games", codename__in=codenames))
    return user


@pytest.fixture
def world(make_player, make_round, django_capture_on_commit_callbacks):
    """An open classic round with two scored guesses and one still queued."""
    rnd = make_round(title="Guarded", prize_pool=50)
    a, b = make_player("amy", keys=5), make_player("ben", keys=5)
    with django_capture_on_commit_callbacks(execute=True):
        submit(a, rnd, rnd.keyboard[:6])
        submit(b, rnd, rnd.keyboard[1:7])
    drain("cm", score_guess)
    with django_capture_on_commit_callbacks(execute=True):
        submit(a, rnd, rnd.keyboard[2:8])
        schedule = RoundSchedule.objects.create(name="Hourly", emoji_set=rnd.emoji_set, cron="0 * * * *")
        paused = RoundSchedule.objects.create(name="Paused", emoji_set=rnd.emoji_set, every_seconds=600, active=False)
    return {"round": rnd, "a": a, "b": b, "schedule": schedule, "paused": paused}


def schedule_form(schedule=None, **over) -> dict:
    """The schedule form as the admin posts it."""
    emoji = EmojiSet.objects.first()
    return {"name": "Sneaky schedule", "active": "on", "emoji_set": emoji.pk, "keyboard_size": "24", "kind": "classic",
            "currency": "keys", "guess_price": "1", "prize_pool": "0", "minutes": "30", "cron": "",
            "every_minutes": "15", "tz": "UTC", "when_open": "skip", **over}


def writes(world):
    """(name, method, url, data) for every write of the console."""
    rnd, a, b = world["round"], world["a"], world["b"]
    rounds, players = "/admin/games/round/", "/admin/games/player/"
    emoji = EmojiSet.objects.first()
    return [
        ("grant: ask", "post", players, {"action": "grant_currency", "_selected_action": [a.pk, b.pk]}),
        ("grant: apply", "post", players, {"action": "grant_currency", "_selected_action": [a.pk], "apply": "1",
                                           "currency": "diamonds", "amount": "1000000", "reason": "me",
                                           "token": "t" * 32}),
        ("settle now: ask", "post", rounds, {"action": "settle_now", "_selected_action": [rnd.pk]}),
        ("settle now: confirm", "post", rounds, {"action": "settle_now", "_selected_action": [rnd.pk],
                                                 "confirm": "yes"}),
        ("void: ask", "post", rounds, {"action": "void", "_selected_action": [rnd.pk]}),
        ("void: confirm", "post", rounds, {"action": "void", "_selected_action": [rnd.pk], "confirm": "yes"}),
        ("rebuild action", "post", rounds, {"action": "rebuild_leaderboards", "_selected_action": [rnd.pk]}),
        ("rebuild button", "post", f"/admin/games/round/{rnd.pk}/leaderboard/", {}),
        ("round add", "post", "/admin/games/round/add/", {
            "title": "Sneaky", "emoji_set": emoji.pk, "keyboard_size": "24", "kind": "classic", "currency": "keys",
            "guess_price": "1", "prize_pool": "0", "minutes": "60", "weights": "[40]"}),
        ("round change", "post", f"/admin/games/round/{rnd.pk}/change/", {"title": "renamed",
                                                                           "ends_at_0": "2030-01-01",
                                                                           "ends_at_1": "00:00:00"}),
        ("emoji set delete", "post", "/admin/games/emojiset/", {"action": "delete_selected",
                                                                 "_selected_action": [emoji.pk], "post": "yes"}),
        ("emoji set change", "post", f"/admin/games/emojiset/{emoji.pk}/change/", {
            "slug": "x", "title": "x", "emojis": '["a"]'}),
        ("player delete", "post", f"/admin/games/player/{a.pk}/delete/", {"post": "yes"}),
        ("schedule add", "post", "/admin/games/roundschedule/add/", schedule_form()),
        ("schedule change", "post", f"/admin/games/roundschedule/{world['schedule'].pk}/change/",
         schedule_form(name="Renamed", every_minutes="5")),
        ("schedule delete", "post", f"/admin/games/roundschedule/{world['schedule'].pk}/delete/", {"post": "yes"}),
        ("schedule delete action", "post", "/admin/games/roundschedule/", {
            "action": "delete_selected", "_selected_action": [world["schedule"].pk], "post": "yes"}),
        ("schedule pause", "post", "/admin/games/roundschedule/", {"action": "pause",
                                                                    "_selected_action": [world["schedule"].pk]}),
        ("schedule resume", "post", "/admin/games/roundschedule/", {"action": "resume",
                                                                     "_selected_action": [world["paused"].pk]}),
    ]


WRITES = ["grant: ask", "grant: apply", "settle now: ask", "settle now: confirm", "void: ask", "void: confirm",
          "rebuild action", "rebuild button", "round add", "round change", "emoji set delete", "emoji set change",
          "player delete", "schedule add", "schedule change", "schedule delete", "schedule delete action",
          "schedule pause", "schedule resume"]


@pytest.mark.parametrize("write", WRITES)
def test_a_view_only_user_is_refused_and_nothing_changes(client, world, valkey, write):
    by_name = {w[0]: w for w in writes(world)}
    assert list(by_name) == WRITES  # every write of the console is tried
    name, method, url, data = by_name[write]
    client.force_login(staff_with(*VIEW_ALL))
    before = (db_snapshot(*MODELS), valkey_snapshot(valkey))
    resp = getattr(client, method)(url, data)
    assert resp.status_code == 403, (name, resp.status_code, resp.content.decode()[:400])
    assert (db_snapshot(*MODELS), valkey_snapshot(valkey)) == before, name


def test_view_only_users_see_no_action_they_cannot_run(client, world):
    client.force_login(staff_with(*VIEW_ALL))
    rounds = client.get("/admin/games/round/").content.decode()
    assert 'value="void"' not in rounds and 'value="settle_now"' not in rounds
    assert 'value="grant_currency"' not in client.get("/admin/games/player/").content.decode()
    board = client.get(f"/admin/games/round/{world['round'].pk}/leaderboard/").content.decode()
    assert "Rebuild from the database" not in board


def test_one_permission_opens_one_action(client, world, valkey):
    """settle_round opens Settle and Void, but not Grant or Rebuild."""
    client.force_login(staff_with(*VIEW_ALL, "settle_round"))
    rnd, a = world["round"], world["a"]
    assert client.post("/admin/games/player/", {"action": "grant_currency",
                                                "_selected_action": [a.pk]}).status_code == 403
    assert client.post("/admin/games/round/", {"action": "rebuild_leaderboards",
                                               "_selected_action": [rnd.pk]}).status_code == 403
    resp = client.post("/admin/games/round/", {"action": "void", "_selected_action": [rnd.pk], "confirm": "yes"})
    assert resp.status_code == 302 and Round.objects.get(pk=rnd.pk).status == "voided"


def test_the_superuser_can_do_everything(client, world, valkey):
    client.force_login(get_user_model().objects.create_superuser("root", password="pw-root-123"))
    by_name = {w[0]: w for w in writes(world)}
    for name in ("grant: ask", "grant: apply", "settle now: ask", "rebuild action", "rebuild button",
                 "round add", "void: ask", "void: confirm"):
        _, method, url, data = by_name[name]
        resp = getattr(client, method)(url, data)
        assert resp.status_code in (200, 302), (name, resp.status_code)
    assert Round.objects.filter(title="Sneaky").exists()
    assert Round.objects.get(pk=world["round"].pk).status == "voided"
    assert LedgerEntry.objects.filter(reason="grant", reference="me", delta=1_000_000).count() == 1


@pytest.mark.parametrize("group, allowed", [
    ("Game master", {"grant", "settle", "void", "rebuild", "schedule"}),
    ("Support", set()),
    ("Queue operator", set()),
])
def test_the_groups(client, world, group, allowed):
    user = get_user_model().objects.create_user(group.replace(" ", ""), password="pw-x-12345", is_staff=True)
    user.groups.add(Group.objects.get(name=group))
    client.force_login(user)
    rnd, a = world["round"], world["a"]
    tries = {
        "schedule": ("/admin/games/roundschedule/", {"action": "pause",
                                                     "_selected_action": [world["schedule"].pk]}),
        "grant": ("/admin/games/player/", {"action": "grant_currency", "_selected_action": [a.pk]}),
        "rebuild": ("/admin/games/round/", {"action": "rebuild_leaderboards", "_selected_action": [rnd.pk]}),
        "settle": ("/admin/games/round/", {"action": "settle_now", "_selected_action": [rnd.pk]}),
        "void": ("/admin/games/round/", {"action": "void", "_selected_action": [rnd.pk]}),
    }
    for what, (url, data) in tries.items():
        status = client.post(url, data).status_code
        assert (status in (200, 302)) == (what in allowed), (group, what, status)
    assert client.get("/admin/games/guess/").status_code == 200  # everyone reads guesses
    # Schedules: the Game master writes them, Support reads them, the Queue operator neither.
    assert client.get("/admin/games/roundschedule/").status_code == (403 if group == "Queue operator" else 200)


def test_each_schedule_write_has_its_own_permission(client, world, valkey, django_capture_on_commit_callbacks):
    """change_roundschedule edits, pauses and resumes; add and delete need
    their own. The mirror in Valkey moves only with an allowed write."""
    from echomq.contrib.django import get_queue

    s = world["schedule"]
    client.force_login(staff_with(*VIEW_ALL, "change_roundschedule"))
    assert client.post("/admin/games/roundschedule/add/", schedule_form()).status_code == 403
    assert client.post(f"/admin/games/roundschedule/{s.pk}/delete/", {"post": "yes"}).status_code == 403
    assert client.post("/admin/games/roundschedule/", {"action": "delete_selected", "_selected_action": [s.pk],
                                                        "post": "yes"}).status_code == 403
    with django_capture_on_commit_callbacks(execute=True):
        resp = client.post("/admin/games/roundschedule/", {"action": "pause", "_selected_action": [s.pk]})
    assert resp.status_code == 302 and not RoundSchedule.objects.get(pk=s.pk).active
    [mirror] = [r for r in get_queue("cm.tasks").schedules() if r["name"] == s.mirror_name]
    assert mirror["paused"]
    with django_capture_on_commit_callbacks(execute=True):
        resp = client.post(f"/admin/games/roundschedule/{s.pk}/change/", schedule_form(name="Quarterly",
                                                                                        every_minutes="15"))
    assert resp.status_code == 302, resp.content.decode()[:2000]
    changed = RoundSchedule.objects.get(pk=s.pk)
    assert (changed.name, changed.cron, changed.every_seconds, changed.active) == ("Quarterly", "", 900, True)
    [mirror] = [r for r in get_queue("cm.tasks").schedules() if r["name"] == s.mirror_name]
    assert (mirror["every_ms"], mirror["paused"]) == (900_000, False)
    assert RoundSchedule.objects.count() == 2


def test_groups_hold_exactly_the_listed_permissions():
    for name, perms in GROUPS.items():
        held = {f"{p.content_type.app_label}.{p.codename}" for p in Group.objects.get(name=name).permissions.all()}
        assert held == set(perms), name
    assert not any("secret" in p for perms in GROUPS.values() for p in perms)


def test_seed_demo_makes_one_operator_per_group(settings, tmp_path, client):
    import io

    from django.core.management import call_command

    settings.VAR_DIR = tmp_path
    out = io.StringIO()
    call_command("seed_demo", "--hours", "1", stdout=out)
    text = out.getvalue()
    User = get_user_model()
    for name, group in (("gamemaster", "Game master"), ("support", "Support"), ("queueops", "Queue operator")):
        user = User.objects.get(username=name)
        assert user.is_staff and not user.is_superuser
        assert list(user.groups.values_list("name", flat=True)) == [group]
        password = (tmp_path / f"demo-{name}.password").read_text().strip()
        assert f"operator {name} ({group}): log in at /admin/ as {name}" in text
        assert password and password not in text  # only ./dev run's banner shows passwords
        assert user.check_password(password)
    again = io.StringIO()
    call_command("seed_demo", "--hours", "1", stdout=again)
    assert "user support exists (password in" in again.getvalue()
    assert "operator support (Support): log in at /admin/ as support" in again.getvalue()
    assert User.objects.filter(username__in=["gamemaster", "support", "queueops"]).count() == 3


def _change_end(client, rnd, when, title="renamed"):
    local = when.astimezone(__import__("zoneinfo").ZoneInfo("UTC"))
    return client.post(f"/admin/games/round/{rnd.pk}/change/", {
        "title": title, "ends_at_0": local.strftime("%Y-%m-%d"), "ends_at_1": local.strftime("%H:%M:%S")})


def test_change_round_alone_cannot_move_a_rounds_end(client, world, valkey):
    """Moving the end closes (or stretches) a round -- and a blind round
    reveals its secret when it closes: change_round may rename, not that."""
    from datetime import timedelta

    from django.utils import timezone

    rnd = world["round"]
    client.force_login(staff_with(*VIEW_ALL, "change_round"))
    resp = _change_end(client, rnd, timezone.now() - timedelta(days=1))
    assert resp.status_code == 302
    after = Round.objects.get(pk=rnd.pk)
    assert after.title == "renamed" and after.ends_at == rnd.ends_at and after.status == "open"


def test_a_settler_may_move_the_end_only_to_a_time_ahead(client, world, valkey):
    from datetime import timedelta

    from django.utils import timezone

    rnd = world["round"]
    client.force_login(staff_with(*VIEW_ALL, "change_round", "settle_round"))
    resp = _change_end(client, rnd, timezone.now() - timedelta(minutes=5))
    assert resp.status_code == 200 and "The end must be in the future" in resp.content.decode()
    assert Round.objects.get(pk=rnd.pk).ends_at == rnd.ends_at
    later = (timezone.now() + timedelta(hours=3)).replace(microsecond=0)
    assert _change_end(client, rnd, later).status_code == 302
    assert Round.objects.get(pk=rnd.pk).ends_at == later
    from django.contrib.admin.models import LogEntry

    assert LogEntry.objects.filter(object_id=rnd.pk, change_message__contains="Ends at").exists()


def test_a_closed_rounds_end_is_read_only_for_everyone(client, world, valkey):
    from datetime import timedelta

    from django.utils import timezone

    from games import settlement

    rnd = world["round"]
    settlement.settle_round(rnd.pk, force=True)
    ended = Round.objects.get(pk=rnd.pk).ends_at  # settled early: when it actually ended
    client.force_login(get_user_model().objects.create_superuser("root2", password="pw-root-123"))
    resp = _change_end(client, rnd, timezone.now() + timedelta(days=2))
    assert resp.status_code == 302
    assert Round.objects.get(pk=rnd.pk).ends_at == ended
