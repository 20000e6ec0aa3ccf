"""Rounds on a schedule (issue 23, part 1), in one process: the row's EchoMQ
mirror follows every save, pause and delete and comes back after a flush;
a tick opens exactly one round (a redelivery opens nothing more); skip and
alongside; a paused or deleted schedule, or a tick handled too late, opens
nothing; the definition is checked with EchoMQ's own grid; what comes next.
The race of two reaper processes is in test_round_schedule_procs.py."""
import io
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.utils import timezone

from echomq.contrib.django import get_queue
from echomq.schedules import tick_job_id
from games import schedules
from games.models import Round, RoundSchedule
from games.tasks import QUEUE

from .procs import wait_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def make_schedule(emoji_set, django_capture_on_commit_callbacks):
    """A saved schedule, its mirror written (the on-commit sync runs)."""

    def make(**kw):
        kw.setdefault("name", f"Sched {RoundSchedule.objects.count() + 1}")
        if "cron" not in kw:
            kw.setdefault("every_seconds", 600)
        kw.setdefault("minutes", 10)
        s = RoundSchedule(emoji_set=emoji_set, **kw)
        s.full_clean()
        with django_capture_on_commit_callbacks(execute=True):
            s.save()
        return s

    return make


def mirror(s: RoundSchedule) -> dict | None:
    return next((r for r in get_queue(QUEUE).schedules() if r["name"] == s.mirror_name), None)


def tick(s: RoundSchedule, at: datetime, seq: int = 7) -> str:
    """The JOB id of the schedule's tick at ``at`` (the number EchoMQ gives it is any)."""
    return tick_job_id(seq, int(at.timestamp() * 1000))


def now_ms_floor(seconds: int = 600) -> datetime:
    ms = int(timezone.now().timestamp() * 1000) // (seconds * 1000) * seconds * 1000
    return datetime.fromtimestamp(ms / 1000, dt_timezone.utc)


# -- the mirror ---------------------------------------------------------------------
def test_saving_mirrors_the_row_as_a_task_schedule_on_cm_tasks(make_schedule, django_capture_on_commit_callbacks):
    s = make_schedule(every_seconds=600)
    row = mirror(s)
    assert (row["every_ms"], row["cron"], row["tz"], row["paused"], row["lane"]) == (600_000, None, "UTC", False, None)
    assert b'"task":"games.schedules.open_scheduled_round"' in row["payload"]
    assert b'"args":"[%d]"' % s.pk in row["payload"]
    assert row["next_ms"] % 600_000 == 0
    # A change that is not "when" (the price) leaves the timer alone: same revision, same cursor.
    s.guess_price = 3
    with django_capture_on_commit_callbacks(execute=True):
        s.save()
    assert mirror(s)["rev"] == row["rev"] and mirror(s)["cursor"] == row["cursor"]
    # A new "when" replaces it; the time zone goes with a cron line.
    s.every_seconds, s.cron, s.tz = None, "0 20 * * 1-5", "Europe/Paris"
    s.full_clean()
    with django_capture_on_commit_callbacks(execute=True):
        s.save()
    after = mirror(s)
    assert (after["cron"], after["tz"], after["every_ms"]) == ("0 20 * * 1-5", "Europe/Paris", None)
    assert after["rev"] > row["rev"] and after["seq"] == row["seq"]
    local = datetime.fromtimestamp(after["next_ms"] / 1000, s.next_runs(1)[0].tzinfo)
    assert (local.hour, local.minute, local.weekday() < 5) == (20, 0, True)


def test_pause_resume_and_delete_follow_the_row(make_schedule, django_capture_on_commit_callbacks):
    s = make_schedule()
    s.active = False
    with django_capture_on_commit_callbacks(execute=True):
        s.save()
    assert mirror(s)["paused"] and mirror(s)["next_ms"] is None
    s.active = True
    with django_capture_on_commit_callbacks(execute=True):
        s.save()
    assert not mirror(s)["paused"] and mirror(s)["next_ms"] > 0
    with django_capture_on_commit_callbacks(execute=True):
        s.delete()
    assert get_queue(QUEUE).schedules() == []


def test_a_rolled_back_save_mirrors_nothing(emoji_set, django_capture_on_commit_callbacks):
    from django.db import transaction

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        with pytest.raises(RuntimeError):
            with transaction.atomic():
                RoundSchedule.objects.create(name="Never", emoji_set=emoji_set, every_seconds=60)
                raise RuntimeError("rolled back")
    assert callbacks == [] and get_queue(QUEUE).schedules() == []


def test_the_reapers_sync_heals_a_flush_and_fixes_every_drift(make_schedule, valkey, emoji_set, caplog):
    a, b, c = make_schedule(), make_schedule(cron="*/5 * * * *"), make_schedule()
    assert schedules.sync_all() == {}  # all true already: nothing done, nothing said
    valkey.flushall()  # Valkey lost everything
    caplog.clear()
    with caplog.at_level("INFO", logger="games.schedules"):
        assert schedules.sync_all() == {"created": 3}
    assert [r.levelname for r in caplog.records] == ["WARNING"] * 3
    assert all("(it was missing)" in r.getMessage() for r in caplog.records)
    assert {r["name"] for r in get_queue(QUEUE).schedules()} == {a.mirror_name, b.mirror_name, c.mirror_name}
    # Drift the database's way without signals (a bulk update), and Valkey's way (an orphan, a pause).
    RoundSchedule.objects.filter(pk=a.pk).update(active=False)
    RoundSchedule.objects.filter(pk=b.pk).update(cron="0 * * * *")
    get_queue(QUEUE).pause_schedule(c.mirror_name)
    RoundSchedule.objects.filter(pk=c.pk).delete()  # its on-commit sync never runs in this test
    get_queue(QUEUE).schedule(f"{schedules.PREFIX}999999", every_ms=60_000)
    get_queue(QUEUE).schedule("someone-elses", every_ms=60_000)  # not a round schedule's: left alone
    assert schedules.sync_all() == {"paused": 1, "replaced": 1, "removed": 2}
    rows = {r["name"]: r for r in get_queue(QUEUE).schedules()}
    assert set(rows) == {a.mirror_name, b.mirror_name, "someone-elses"}
    assert rows[a.mirror_name]["paused"] and rows[b.mirror_name]["cron"] == "0 * * * *"
    assert schedules.sync_all() == {}


def test_a_row_echomq_refuses_is_said_once_and_the_others_are_still_mirrored(make_schedule, emoji_set, valkey,
                                                                              caplog):
    good = make_schedule()
    bad = RoundSchedule.objects.create(name="30 February", emoji_set=emoji_set, cron="0 0 30 2 *")  # no form
    valkey.flushall()
    with caplog.at_level("INFO", logger="games.schedules"):
        assert schedules.sync_all() == {"created": 1, "refused": 1}
        assert schedules.sync_all() == {"refused": 1}
    said = [r for r in caplog.records if r.levelname == "ERROR"]
    assert len(said) == 1 and "30 February" in said[0].getMessage()
    assert [r["name"] for r in get_queue(QUEUE).schedules()] == [good.mirror_name]
    assert bad.pk


def test_valkey_down_at_the_save_is_a_warning_and_the_save_stands(make_schedule, settings, caplog):
    from echomq import embedded
    from echomq.contrib import django as emq_django

    emq_django.reset_client(f"redis://127.0.0.1:{embedded.free_port()}/0")  # nobody there
    with caplog.at_level("WARNING", logger="games.schedules"):
        s = make_schedule()
    assert RoundSchedule.objects.filter(pk=s.pk).exists()
    assert "the reaper mirrors it when it does" in caplog.text


# -- the tick ----------------------------------------------------------------------
def test_a_tick_opens_one_round_on_the_grid_and_a_redelivery_opens_nothing_more(make_schedule):
    s = make_schedule(every_seconds=600, minutes=10, kind="blind", guess_price=2, prize_pool=70,
                      currency="clips", keyboard_size=30, when_open="alongside")
    at = now_ms_floor()
    job = tick(s, at)
    first = schedules.open_for_tick(s.pk, job)
    rnd = Round.objects.get(pk=first["round"])
    assert (rnd.schedule_id, rnd.schedule_job, rnd.title, rnd.status) == (s.pk, job, s.name, "open")
    assert (rnd.kind, rnd.guess_price, rnd.prize_pool, rnd.currency, len(rnd.keyboard)) == ("blind", 2, 70, "clips", 30)
    assert rnd.ends_at == at + timedelta(minutes=10) and rnd.commitment  # on the grid, not "now + 10 min"
    again = schedules.open_for_tick(s.pk, job)
    assert again == {"round": rnd.pk, "why": "opened by this tick before (a redelivery)"}
    assert Round.objects.count() == 1


def test_the_round_stores_the_tick_unique(make_schedule, emoji_set):
    from django.db import IntegrityError, transaction

    from games.rounds import create_round

    s = make_schedule()
    job = tick(s, now_ms_floor())
    create_round(emoji_set, schedule=s, schedule_job=job)
    with pytest.raises((IntegrityError, ValidationError)), transaction.atomic():
        create_round(emoji_set, schedule=s, schedule_job=job)


@pytest.mark.parametrize("policy, opened", [("skip", 1), ("alongside", 2)])
def test_a_tick_while_the_last_round_is_open_skips_or_opens_alongside(make_schedule, policy, opened):
    s = make_schedule(every_seconds=60, minutes=10, when_open=policy)
    at = now_ms_floor(60)
    first = schedules.open_for_tick(s.pk, tick(s, at - timedelta(minutes=1)))
    second = schedules.open_for_tick(s.pk, tick(s, at))
    assert first["round"] and Round.objects.filter(schedule=s).count() == opened
    if policy == "skip":
        assert second == {"round": None, "why": f"skipped: {first['round']} is still open"}
    else:
        assert second["round"] not in (None, first["round"])


def test_skip_opens_again_once_the_last_round_has_ended(make_schedule):
    """A round every 10 minutes lasting 10: the round of one tick ends as
    the next tick comes, so skip never skips it."""
    from games.rounds import create_round

    s = make_schedule(every_seconds=600, minutes=10, when_open="skip")
    at = now_ms_floor()
    earlier = create_round(s.emoji_set, schedule=s, schedule_job=tick(s, at - timedelta(minutes=10)))
    Round.objects.filter(pk=earlier.pk).update(ends_at=at)  # the last tick's round, over by now (not yet swept)
    assert schedules.open_for_tick(s.pk, tick(s, at))["round"]
    # A closed round does not hold up the next one either.
    Round.objects.filter(schedule=s).update(status="settled")
    assert schedules.open_for_tick(s.pk, tick(s, at + timedelta(seconds=1)))["round"]


def test_a_paused_or_deleted_schedule_or_a_late_tick_opens_nothing(make_schedule, django_capture_on_commit_callbacks):
    s = make_schedule(every_seconds=600, minutes=10)
    at = now_ms_floor()
    s.active = False
    with django_capture_on_commit_callbacks(execute=True):
        s.save()
    assert schedules.open_for_tick(s.pk, tick(s, at)) == {"round": None, "why": "the schedule is paused"}
    late = schedules.open_for_tick(s.pk, tick(s, at - timedelta(minutes=11)))
    assert late["round"] is None
    s.active = True
    s.save()
    late = schedules.open_for_tick(s.pk, tick(s, at - timedelta(minutes=11)))
    assert late["round"] is None and late["why"].startswith("too late: its round would have ended")
    pk = s.pk
    with django_capture_on_commit_callbacks(execute=True):
        s.delete()
    assert schedules.open_for_tick(pk, tick(s, at)) == {"round": None, "why": "the schedule was deleted"}
    assert not Round.objects.exists()


def test_a_schedule_whose_set_cannot_make_a_round_says_so_and_is_not_retried(make_schedule, emoji_set, caplog):
    s = make_schedule(keyboard_size=24)
    RoundSchedule.objects.filter(pk=s.pk).update(keyboard_size=500)  # past the set's size, no form in the way
    out = schedules.open_for_tick(s.pk, tick(s, now_ms_floor()))
    assert out["round"] is None and "keyboard size" in out["why"]
    assert any(r.levelname == "ERROR" for r in caplog.records)


@pytest.mark.django_db(transaction=True)
def test_the_real_path_a_reaper_pass_fires_the_tick_and_run_tasks_opens_the_round(emoji_set):
    """The mirror's tick fired by a Reaper pass and run by ``run_tasks``: the
    task's result records what the tick did, under the tick's JOB id."""
    s = RoundSchedule.objects.create(name="Every second", emoji_set=emoji_set, every_seconds=1, minutes=5,
                                     when_open="alongside")  # autocommit: mirrored at once
    assert mirror(s) is not None
    q = get_queue(QUEUE)
    fired = wait_for(lambda: q.fire_schedules(), timeout=5, every=0.05, what="a tick of the schedule")
    assert fired == 1
    call_command("run_tasks", "--burst", "--queue", QUEUE, stdout=io.StringIO())
    rnd = Round.objects.get(schedule=s)
    assert rnd.schedule_job == mirror(s)["last_job"]
    result = schedules.open_scheduled_round.get_result(rnd.schedule_job)
    assert result.status == "SUCCESSFUL" and result.return_value["round"] == rnd.pk
    assert rnd.ends_at == schedules.tick_time(rnd.schedule_job) + timedelta(minutes=5)


# -- the definition ----------------------------------------------------------------------
@pytest.mark.parametrize("fields, field, words", [
    ({"cron": "61 * * * *"}, "cron", "not a valid cron expression"),
    ({"cron": "0 0 30 2 *"}, "cron", "never fires"),
    ({"cron": "* * * * * *"}, "cron", "no seconds field"),
    ({"cron": "*/5 * * * *", "tz": "Mars/Olympus"}, "tz", "unknown time zone"),
    ({"cron": "*/5 * * * *", "tz": "/etc/passwd"}, "tz", "unknown time zone"),
    ({"every_seconds": 600, "tz": "Europe/Paris"}, "tz", "UTC's clock"),
    ({"cron": "*/5 * * * *", "every_seconds": 600}, "__all__", "not both"),
    ({}, "__all__", "Give a cron line or an interval"),
    ({"cron": "é * * * *"}, "cron", "not a valid cron expression"),
    ({"every_seconds": 600, "keyboard_size": 5}, "keyboard_size", "From 6 to"),
    ({"every_seconds": 600, "minutes": 0}, "minutes", "From 1 to"),
    ({"every_seconds": 600, "prize_pool": 10**13}, "prize_pool", "At most"),
])
def test_a_bad_definition_is_a_clear_error_on_its_field(emoji_set, fields, field, words):
    s = RoundSchedule(name="Bad", emoji_set=emoji_set, **fields)
    with pytest.raises(ValidationError) as err:
        s.full_clean()
    assert any(words.lower() in m.lower() for m in err.value.message_dict.get(field, [])), err.value.message_dict


def test_next_runs_in_the_schedules_time_zone(emoji_set):
    s = RoundSchedule(name="Evenings", emoji_set=emoji_set, cron="0 20 * * *", tz="Asia/Tokyo")
    runs = s.next_runs(3, after=datetime(2026, 6, 1, 10, 0, tzinfo=dt_timezone.utc))  # 19:00 there
    assert [r.isoformat() for r in runs] == ["2026-06-01T20:00:00+09:00", "2026-06-02T20:00:00+09:00",
                                             "2026-06-03T20:00:00+09:00"]


# -- what comes next ------------------------------------------------------------------------
def test_coming_lists_the_active_schedules_next_rounds_soonest_first(make_schedule):
    now = datetime(2026, 6, 1, 12, 3, tzinfo=dt_timezone.utc)
    hourly = make_schedule(name="Hourly", cron="0 * * * *", kind="blind")
    quarter = make_schedule(name="Quarter", every_seconds=900)
    make_schedule(name="Paused", every_seconds=60, active=False)
    assert [(c["title"], c["kind"], c["opens_at"].isoformat()) for c in schedules.coming(now=now)] == [
        ("Quarter", "classic", "2026-06-01T12:15:00+00:00"), ("Hourly", "blind", "2026-06-01T13:00:00+00:00")]
    assert hourly.pk and quarter.pk


def test_coming_knows_skip_waits_for_the_open_round(make_schedule, emoji_set):
    from games.rounds import create_round

    now = timezone.now()
    skip = make_schedule(name="Skip", every_seconds=60, when_open="skip")
    along = make_schedule(name="Along", every_seconds=60, when_open="alongside")
    for s in (skip, along):
        create_round(emoji_set, schedule=s, schedule_job=tick(s, now, seq=s.pk), ends_at=now + timedelta(minutes=30))
    by_title = {c["title"]: c["opens_at"] for c in schedules.coming(now=now)}
    assert by_title["Along"] == skip.next_runs(1, after=now)[0]
    assert by_title["Skip"] == skip.next_runs(1, after=now + timedelta(minutes=30) - timedelta(milliseconds=1))[0]


def test_the_lobby_shows_coming_next_from_a_per_process_copy(client, make_player, make_schedule,
                                                              django_assert_num_queries):
    schedules.forget_coming()
    client.force_login(make_player("lobbyist").user)
    assert "Coming next" not in client.get("/").content.decode()
    make_schedule(name="Soon classic", every_seconds=600)  # a save drops this process's copy
    page = client.get("/").content.decode()
    assert "Coming next" in page and "Soon classic" in page
    with django_assert_num_queries(0):  # the copy, for a few seconds
        assert [c["title"] for c in schedules.coming_soon()] == ["Soon classic"]
    make_schedule(name="Yearly", cron="0 0 1 1 *")
    with django_assert_num_queries(2):
        rows = schedules.coming_soon()
    assert {c["title"] for c in rows} == {"Soon classic", "Yearly"}
    assert [c["opens_at"] for c in rows] == sorted(c["opens_at"] for c in rows)


def test_seed_demo_makes_one_schedule_once(settings, tmp_path, django_capture_on_commit_callbacks):
    settings.VAR_DIR = tmp_path
    out = io.StringIO()
    with django_capture_on_commit_callbacks(execute=True):
        call_command("seed_demo", "--hours", "1", stdout=out)
    [s] = RoundSchedule.objects.all()
    assert (s.every_seconds, s.minutes, s.when_open, s.active) == (600, 10, "skip", True)
    assert mirror(s) is not None and f"round schedule {s.name}: a round every 10 minutes" in out.getvalue()
    again = io.StringIO()
    call_command("seed_demo", "--hours", "1", stdout=again)
    assert RoundSchedule.objects.count() == 1 and "round schedules exist (Ten-minute classic)" in again.getvalue()
