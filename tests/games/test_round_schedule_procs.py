"""Rounds on a schedule with real processes: two ``run_reaper`` processes
fire one schedule's ticks while ``run_tasks`` opens the rounds, one reaper
is SIGKILLed and started again between ticks, and every tick from the first
to the last opened exactly one round. Then Valkey is flushed under a running
reaper: the mirrors come back and the ticks go on, none opened twice; a
paused schedule, and then a deleted one, opens nothing while another keeps
ticking."""
import pytest

from echomq import ids
from echomq.contrib.django import get_queue
from games import schedules
from games.models import Round, RoundSchedule
from games.tasks import QUEUE

from .procs import Proc, wait_for, wait_for_progress

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

EVERY_S = 2  # far above a reaper pass (50 ms): no tick falls between two passes, even on a loaded machine


def mirror(s: RoundSchedule) -> dict | None:
    return next((r for r in get_queue(QUEUE).schedules() if r["name"] == s.mirror_name), None)


def ticks_opened(s: RoundSchedule) -> list[int]:
    """The tick (server ms) of each round the schedule opened, in order."""
    return sorted(ids.minted_at_ms(j) for j in Round.objects.filter(schedule=s).values_list("schedule_job", flat=True))


def start(valkey_url, tmp_path, reapers: int):
    # The task worker's own reaper is off: exactly the reapers started here fire the ticks.
    worker = Proc(["run_tasks", "--queue", QUEUE, "--reap-interval-ms", "0"], valkey_url, tmp_path, "tasks")
    return worker, [Proc(["run_reaper", "--interval-ms", "50", "--schedules-every-s", "0.5"], valkey_url, tmp_path,
                         f"reaper{i + 1}") for i in range(reapers)]


def stop(*procs) -> None:
    for p in procs:
        if p.popen.poll() is None:
            p.terminate()


def test_two_reapers_and_a_restart_open_exactly_one_round_per_tick(valkey_server, valkey, emoji_set, tmp_path):
    s = RoundSchedule.objects.create(name="Race", emoji_set=emoji_set, every_seconds=EVERY_S, minutes=30,
                                     when_open="alongside")  # every tick opens one: none hides behind skip
    assert mirror(s) is not None  # saved in autocommit: mirrored at once
    worker, reapers = start(valkey_server.url, tmp_path, 2)
    count = lambda: len(ticks_opened(s))  # noqa: E731
    try:
        wait_for_progress(lambda: count() >= 3, count, stall_s=30, cap_s=90, what="three ticks' rounds")
        reapers[0].kill()  # SIGKILL, mid-race
        n = count()
        wait_for_progress(lambda: count() >= n + 2, count, stall_s=30, cap_s=60, what="ticks with one reaper")
        reapers[0].start()  # again, between ticks
        wait_for(lambda: reapers[0].ready("reaper started"), timeout=60, what="the restarted reaper")
        n = count()
        wait_for_progress(lambda: count() >= n + 3, count, stall_s=30, cap_s=60, what="ticks with both again")
    finally:
        stop(*reapers)
    last = mirror(s)["last_ms"]  # the last tick any reaper fired (the killed one may have fired one unseen)
    try:
        wait_for(lambda: ticks_opened(s) and ticks_opened(s)[-1] == last, timeout=60,
                 what="the worker to open the last fired tick")
        wait_for(lambda: get_queue(QUEUE).counts()["pending"] == 0, timeout=60, what="the task queue drained")
    finally:
        stop(worker)
    ticks = ticks_opened(s)
    assert ticks == list(range(ticks[0], last + 1, EVERY_S * 1000)), \
        "every tick from the first to the last opened exactly one round"
    assert len(ticks) >= 8
    for job in Round.objects.filter(schedule=s).values_list("schedule_job", flat=True):
        result = schedules.open_scheduled_round.get_result(job)
        assert result.status == "SUCCESSFUL" and result.return_value["round"]
    counts = get_queue(QUEUE).counts()
    # Every job the worker ran is a tick or its round's announcement: no tick ran twice, none died.
    assert (counts["completed"], counts["dead"]) == (2 * len(ticks), 0), counts
    assert "reaper started" in reapers[0].output() and reapers[0].starts == 2


def test_the_mirror_heals_after_a_flushall_and_a_paused_or_deleted_schedule_opens_nothing(
        valkey_server, valkey, emoji_set, tmp_path):
    """A second schedule, left alone, is the clock: while it opens rounds,
    the paused (then deleted) one opens none."""
    s = RoundSchedule.objects.create(name="Flushed", emoji_set=emoji_set, every_seconds=1, minutes=30,
                                     when_open="alongside")
    clock = RoundSchedule.objects.create(name="Clock", emoji_set=emoji_set, every_seconds=1, minutes=30,
                                         when_open="alongside")
    worker, reapers = start(valkey_server.url, tmp_path, 1)
    server_ms = lambda: int(valkey.time()[0]) * 1000 + int(valkey.time()[1]) // 1000  # noqa: E731
    ticked = lambda: len(ticks_opened(clock))  # noqa: E731

    def after(schedule, since_ms):
        return sum(t > since_ms for t in ticks_opened(schedule))

    try:
        wait_for_progress(lambda: len(ticks_opened(s)) >= 2, ticked, stall_s=30, cap_s=90,
                          what="rounds before the flush")
        valkey.flushall()  # the mirrors, the queue, the results: all gone
        flushed_at = server_ms()
        wait_for(lambda: mirror(s) is not None and mirror(clock) is not None, timeout=10,
                 what="the mirrors made again")
        wait_for_progress(lambda: after(s, flushed_at) >= 2, ticked, stall_s=30, cap_s=60,
                          what="rounds after the flush")

        s.active = False
        s.save()  # autocommit: the mirror is paused at once
        paused_at = server_ms()
        assert mirror(s)["paused"]
        n = ticked()
        wait_for_progress(lambda: ticked() >= n + 3, ticked, stall_s=30, cap_s=60, what="three ticks while paused")
        assert after(s, paused_at) == 0

        RoundSchedule.objects.filter(pk=s.pk).update(active=True)  # behind the mirror's back: the reaper resumes it
        wait_for(lambda: not mirror(s)["paused"], timeout=10, what="the reaper to resume the mirror")
        resumed_at = server_ms()
        wait_for_progress(lambda: after(s, resumed_at) >= 1, ticked, stall_s=30, cap_s=60, what="a round again")

        name = s.mirror_name
        s.delete()
        deleted_at = server_ms()
        assert name not in {r["name"] for r in get_queue(QUEUE).schedules()}
        n = ticked()
        wait_for_progress(lambda: ticked() >= n + 3, ticked, stall_s=30, cap_s=60, what="three ticks after delete")
        assert sum(t > deleted_at for t in (ids.minted_at_ms(j) for j in Round.objects.filter(
            title="Flushed").values_list("schedule_job", flat=True))) == 0
        assert Round.objects.filter(title="Flushed", schedule=None).exists()  # its rounds stay, unlinked
    finally:
        stop(reapers[0], worker)
    for schedule in (clock,):
        ticks = ticks_opened(schedule)
        assert len(ticks) == len(set(ticks)) and all(t % 1000 == 0 for t in ticks)  # on the grid, none twice
    assert "mirror created on cm.tasks (it was missing)" in reapers[0].output()
    assert "mirror resumed on cm.tasks" in reapers[0].output()
