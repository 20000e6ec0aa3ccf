"""The queue page's schedules and rate limit (issue 21): shown with the next
run and last job; pausing and resuming one is an operator's POST, logged."""
from __future__ import annotations

import pytest
from django.contrib.admin.models import LogEntry

from echomq import ids

pytestmark = pytest.mark.django_db


def test_the_queue_page_shows_schedules_their_next_run_last_job_and_the_rate(viewer_client, queue, emq):
    queue.schedule("nightly", cron="0 3 * * *", tz="Europe/Paris")
    queue.schedule("beat", every_ms=1000, payload=b"b")
    cursor = (queue.server_time_ms() // 1000 - 1) * 1000
    emq.hset(f"{queue.prefix}sched:beat", "next", cursor)
    emq.zadd(f"{queue.prefix}schedules", {"beat": cursor})
    queue.fire_schedules()
    queue.set_rate_limit(5, 1000)
    lane = ids.mint("PLR")
    queue.lanes.set_rate(lane, 2, 60_000)
    queue.enqueue_many([{"payload": b"x", "lane": lane}] * 3)
    queue.claim_batch(10, lease_ms=60_000)
    page = viewer_client.get("/admin/queues/cm/")
    html = page.content.decode()
    assert page.status_code == 200
    beat = next(s for s in page.context["schedules"] if s["name"] == "beat")
    assert f'href="/admin/queues/cm/jobs/{beat["last_job"]}/"' in html and "every 1000 ms" in html
    assert "0 3 * * *" in html and "Europe/Paris" in html and "never" in html  # nightly has not run
    assert 'id="rate"' in html and "At most <strong>5</strong> claims per <strong>1000 ms</strong>" in html
    assert "rate-limited" in html and "2 / 60000 ms" in html  # the cooling lane
    assert "/schedules/beat/pause/" not in html  # a viewer gets no buttons


def test_an_operator_pauses_and_resumes_a_schedule_with_a_log_entry(staff_client, queue):
    queue.schedule("beat", every_ms=60_000)
    resp = staff_client.post("/admin/queues/cm/schedules/beat/pause/", follow=True)
    assert resp.status_code == 200 and queue.schedules()[0]["paused"]
    assert b"Resume schedule beat" in resp.content
    staff_client.post("/admin/queues/cm/schedules/beat/resume/")
    assert not queue.schedules()[0]["paused"] and queue.schedules()[0]["next_ms"]
    log = [(e.user.username, e.object_id, e.change_message) for e in LogEntry.objects.order_by("pk")]
    assert [row[:2] for row in log] == [("ops", "cm"), ("ops", "cm")]
    assert log[0][2].startswith("Paused schedule 'beat'") and log[1][2].startswith("Resumed schedule 'beat'")


def test_resuming_a_stored_schedule_that_never_fires_is_a_400_and_changes_nothing(staff_client, queue, emq):
    queue.schedule("feb30", cron="0 0 1 1 *")
    queue.pause_schedule("feb30")
    emq.hset(f"{queue.prefix}sched:feb30", "spec", "0 0 30 2 *")  # stored by an older version, say
    before = emq.hgetall(f"{queue.prefix}sched:feb30")
    resp = staff_client.post("/admin/queues/cm/schedules/feb30/resume/")
    assert resp.status_code == 400 and b"never fires" in resp.content
    assert emq.hgetall(f"{queue.prefix}sched:feb30") == before and queue.schedules()[0]["paused"]
    assert not LogEntry.objects.exists()


@pytest.mark.parametrize("who, method, path, status", [
    ("viewer", "post", "/admin/queues/cm/schedules/beat/pause/", 403),
    ("staff", "get", "/admin/queues/cm/schedules/beat/pause/", 405),
    ("staff", "post", "/admin/queues/cm/schedules/nope/pause/", 404),
    ("staff", "post", "/admin/queues/cm/schedules/bad%20name/resume/", 400),
])
def test_refused_schedule_actions_change_nothing(request, queue, who, method, path, status):
    client = request.getfixturevalue(f"{who}_client")
    queue.schedule("beat", every_ms=60_000)
    before = queue.schedules()
    resp = getattr(client, method)(path)
    assert resp.status_code == status
    assert queue.schedules() == before and not LogEntry.objects.exists()
