"""The round schedules' admin: each schedule's next three ticks, its mirror
in EchoMQ, the rounds it opened (linked, and the round says which tick
opened it); any input is a form error or a 400 page, never a 500, and a
refused form writes nothing."""
import io
from datetime import datetime

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client

from echomq.contrib.django import get_queue
from games import schedules
from games.admin import runs_text
from games.models import Round, RoundSchedule
from tests.games.procs import wait_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def root():
    c = Client(raise_request_exception=False)  # a crash answers 500 here, as in production
    c.force_login(get_user_model().objects.create_superuser("root", password="pw-root-123"))
    return c


@pytest.fixture
def schedule(emoji_set, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):  # mirrored (at once outside a test transaction)
        return RoundSchedule.objects.create(name="Each second", emoji_set=emoji_set, every_seconds=1, minutes=20,
                                            when_open="alongside")


def form(es, **over) -> dict:
    return {"name": "New schedule", "active": "on", "emoji_set": es.pk, "keyboard_size": "24",
            "kind": "classic", "currency": "keys", "guess_price": "1", "prize_pool": "0", "minutes": "30",
            "cron": "", "every_minutes": "15", "tz": "UTC", "when_open": "skip", **over}


@pytest.mark.django_db(transaction=True)  # run_tasks' handler thread has its own connection
def test_the_list_and_the_page_show_next_ticks_the_mirror_and_the_rounds_opened(
        root, schedule, emoji_set, django_capture_on_commit_callbacks):
    hourly = RoundSchedule.objects.create(name="Hourly", emoji_set=emoji_set, cron="0 * * * *", tz="Asia/Tokyo")
    listing = root.get("/admin/games/roundschedule/").content.decode()
    assert runs_text(hourly) in listing and runs_text(hourly).count(":00") == 3 and "Asia/Tokyo" in listing
    assert "cron 0 * * * * (Asia/Tokyo)" in listing and "every 1 s" in listing
    # A real tick: a reaper pass fires it, run_tasks opens its round.
    wait_for(lambda: get_queue("cm.tasks").fire_schedules(), timeout=5, every=0.05, what="a tick")
    call_command("run_tasks", "--burst", "--queue", "cm.tasks", stdout=io.StringIO())
    rnd = Round.objects.get(schedule=schedule)
    listing = root.get("/admin/games/roundschedule/").content.decode()
    assert f'href="/admin/games/round/?schedule__id__exact={schedule.pk}">1</a>' in listing
    page = root.get(f"/admin/games/roundschedule/{schedule.pk}/change/").content.decode()
    assert f"cm.tasks / {schedule.mirror_name}: next tick" in page
    assert f'href="/admin/queues/cm.tasks/jobs/{rnd.schedule_job}/"' in page and ": opened until" in page
    assert f'href="/admin/games/round/{rnd.pk}/change/"' in page and "all 1 of them" in page
    rounds = root.get(f"/admin/games/round/?schedule__id__exact={schedule.pk}")
    assert rounds.status_code == 200 and [r.pk for r in rounds.context["cl"].result_list] == [rnd.pk]
    opened = root.get(f"/admin/games/round/{rnd.pk}/change/").content.decode()
    tick = f"{schedules.tick_time(rnd.schedule_job):%Y-%m-%d %H:%M:%S} UTC"
    assert f'the schedule <a href="/admin/games/roundschedule/{schedule.pk}/change/">Each second</a>' in opened
    assert f"at its tick of {tick}" in opened
    # Paused: the list says so, the mirror too.
    with django_capture_on_commit_callbacks(execute=True):
        root.post("/admin/games/roundschedule/", {"action": "pause", "_selected_action": [schedule.pk]})
    assert "paused: " in root.get("/admin/games/roundschedule/").content.decode()
    assert f"{schedule.mirror_name}: paused;" in root.get(
        f"/admin/games/roundschedule/{schedule.pk}/change/").content.decode()


def test_a_missing_mirror_and_a_silent_valkey_are_said_not_crashed(root, schedule, valkey):
    valkey.flushall()
    page = root.get(f"/admin/games/roundschedule/{schedule.pk}/change/")
    assert page.status_code == 200 and "not there; the reaper mirrors it within seconds" in page.content.decode()
    from echomq import embedded
    from echomq.contrib import django as emq_django

    emq_django.reset_client(f"redis://127.0.0.1:{embedded.free_port()}/0")  # nobody answers there
    page = root.get(f"/admin/games/roundschedule/{schedule.pk}/change/")
    assert page.status_code == 200 and "Valkey did not answer" in page.content.decode()


def test_a_row_with_a_cron_line_that_never_comes_still_lists(root, emoji_set):
    """A row saved around the form (a shell, a bulk update) is shown, not a 500."""
    s = RoundSchedule.objects.create(name="Never", emoji_set=emoji_set, cron="0 0 30 2 *")
    assert "never: this definition has no next tick" in root.get("/admin/games/roundschedule/").content.decode()
    assert root.get(f"/admin/games/roundschedule/{s.pk}/change/").status_code == 200
    assert root.get("/").status_code == 200  # the lobby's "coming next" leaves it out


BAD = {
    "cron not cron": ({"cron": "61 * * * *", "every_minutes": ""}, "Not a valid cron expression"),
    "cron never": ({"cron": "0 0 30 2 *", "every_minutes": ""}, "never fires"),
    "cron seconds": ({"cron": "*/5 * * * * *", "every_minutes": ""}, "no seconds field"),
    "cron too long": ({"cron": "1," * 100 + "2 * * * *", "every_minutes": ""}, "at most 128 characters"),
    "cron control": ({"cron": "0 *\t* * *\x7f", "every_minutes": ""}, "Not a valid cron expression"),
    "cron emoji": ({"cron": "🐶 * * * *", "every_minutes": ""}, "Not a valid cron expression"),
    "tz unknown": ({"cron": "0 * * * *", "every_minutes": "", "tz": "Mars/Olympus"}, "Unknown time zone"),
    "tz path": ({"cron": "0 * * * *", "every_minutes": "", "tz": "../../etc/passwd"}, "Unknown time zone"),
    "tz for every": ({"tz": "Europe/Paris"}, "UTC&#x27;s clock"),
    "both": ({"cron": "0 * * * *"}, "not both"),
    "neither": ({"every_minutes": ""}, "Give a cron line or an interval"),
    "every zero": ({"every_minutes": "0"}, "greater than or equal to 1"),
    "every words": ({"every_minutes": "ten"}, "Enter a whole number"),
    "every huge": ({"every_minutes": "9" * 30}, "less than or equal to"),
    "keyboard": ({"keyboard_size": "500"}, "From 6 to 50"),
    "minutes": ({"minutes": "0"}, "From 1 to"),
    "pool": ({"prize_pool": "9" * 25}, "less than or equal to"),
    "pool over": ({"prize_pool": str(10**13)}, "At most 1,000,000,000,000 diamonds"),
    "price": ({"guess_price": "-1"}, "greater than or equal to 0"),
    "set": ({"emoji_set": "999999"}, "Select a valid choice"),
    "kind": ({"kind": "weird"}, "Select a valid choice"),
    "policy": ({"when_open": "sometimes"}, "Select a valid choice"),
    "name empty": ({"name": ""}, "This field is required"),
    "name long": ({"name": "n" * 200}, "at most 120 characters"),
    "name NUL": ({"name": "a\x00b"}, "NUL"),  # refused before any form: the site's 400 page
}


@pytest.mark.parametrize("case", list(BAD))
def test_a_bad_schedule_form_is_a_form_error_and_writes_nothing(root, emoji_set, valkey, case):
    over, words = BAD[case]
    resp = root.post("/admin/games/roundschedule/add/", form(emoji_set, **over))
    assert resp.status_code == (400 if case == "name NUL" else 200), (case, resp.status_code)
    assert words in resp.content.decode(), case
    assert not RoundSchedule.objects.exists() and not LogEntry.objects.exists()
    assert get_queue("cm.tasks").schedules() == []


def test_a_taken_name_is_a_form_error(root, schedule, emoji_set):
    resp = root.post("/admin/games/roundschedule/add/", form(emoji_set, name=schedule.name))
    assert resp.status_code == 200 and "already exists" in resp.content.decode()


@pytest.mark.parametrize("query", ["?active__exact=maybe", "?cron=x", "?when_open__exact=never", "?o=99",
                                   "?q=%00", "?emoji_set__id__exact=abc"])
def test_odd_schedule_list_queries_are_400(root, schedule, query):
    assert root.get("/admin/games/roundschedule/" + query).status_code == 400


@pytest.mark.parametrize("query", ["?schedule__id__exact=abc", "?schedule__id__exact=99999", "?schedule__name=x"])
def test_the_rounds_filter_by_schedule_takes_no_odd_value(root, schedule, query):
    assert root.get("/admin/games/round/" + query).status_code in (200, 400)


def test_an_every_seconds_row_edited_in_the_admin_asks_for_minutes(root, schedule):
    page = root.get(f"/admin/games/roundschedule/{schedule.pk}/change/").content.decode()
    assert "Now every 1 seconds (set outside the admin)" in page
    assert isinstance(schedule.next_runs(1)[0], datetime)


def test_support_reads_a_schedule_and_changes_nothing(client, schedule, valkey):
    from django.contrib.auth.models import Group

    user = get_user_model().objects.create_user("sup", password="pw-x-12345", is_staff=True)
    user.groups.add(Group.objects.get(name="Support"))
    client.force_login(user)
    page = client.get(f"/admin/games/roundschedule/{schedule.pk}/change/")
    assert page.status_code == 200 and "every 1 s" in page.content.decode() and 'name="cron"' not in page.content.decode()
    listing = client.get("/admin/games/roundschedule/").content.decode()
    assert 'value="pause"' not in listing and "Add round schedule" not in listing
