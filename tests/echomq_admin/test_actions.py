"""Requeue, remove, pause and resume, each checked in Valkey afterwards."""
from __future__ import annotations

import pytest

from .conftest import make_dead

pytestmark = pytest.mark.django_db

YES = {"confirm": "yes"}


def messages_of(resp) -> list[str]:
    return [str(m) for m in resp.context["messages"]]


def test_requeue_moves_a_dead_job_back_to_pending(staff_client, queue):
    jid = make_dead(queue, b"again")
    assert queue.counts()["dead"] == 1
    resp = staff_client.post(f"/admin/queues/cm/jobs/{jid}/requeue/", YES, follow=True)
    assert resp.redirect_chain == [("/admin/queues/cm/", 302)]
    assert f"Job {jid} requeued with a fresh set of attempts." in messages_of(resp)
    counts = queue.counts()
    assert (counts["dead"], counts["pending"]) == (0, 1)
    assert queue.job(jid)["state"] == "pending"
    assert queue.pending_ids() == [jid]
    # and a worker gets it again, with a fresh budget of attempts
    job = queue.claim(lease_ms=60_000)
    assert job.id == jid and job.payload == b"again"
    assert queue.retry(job.id, job.attempts, max_attempts=2, error="once more") == "scheduled"


def test_requeue_from_the_job_page_returns_there(staff_client, queue):
    jid = make_dead(queue)
    resp = staff_client.post(f"/admin/queues/cm/jobs/{jid}/requeue/",
                             {"next": f"/admin/queues/cm/jobs/{jid}/", **YES})
    assert resp["Location"] == f"/admin/queues/cm/jobs/{jid}/"
    assert staff_client.get(resp["Location"]).context["job"]["state"] == "pending"


def test_next_must_be_local(staff_client, queue):
    jid = make_dead(queue)
    resp = staff_client.post(f"/admin/queues/cm/jobs/{jid}/requeue/",
                             {"next": "https://evil.example/phish", **YES})
    assert resp["Location"] == "/admin/queues/cm/"


def test_remove_deletes_the_job(staff_client, queue):
    jid = make_dead(queue)
    resp = staff_client.post(f"/admin/queues/cm/jobs/{jid}/remove/", YES, follow=True)
    assert f"Job {jid} removed (it was dead)." in messages_of(resp)
    assert queue.job(jid) is None
    assert queue.counts()["dead"] == 0
    assert not [k for k in queue.keys() if jid in k]
    assert staff_client.get(f"/admin/queues/cm/jobs/{jid}/").status_code == 404
    # a second click is a readable 404, not a crash
    assert staff_client.post(f"/admin/queues/cm/jobs/{jid}/remove/", YES).status_code == 404


def test_remove_from_the_job_page_lands_on_the_queue(staff_client, queue):
    jid, _ = queue.enqueue(b"x")
    resp = staff_client.post(f"/admin/queues/cm/jobs/{jid}/remove/",
                             {"next": f"/admin/queues/cm/jobs/{jid}/", **YES})
    assert resp["Location"] == "/admin/queues/cm/"
    assert queue.counts()["pending"] == 0


def test_pause_and_resume(staff_client, queue):
    queue.enqueue(b"x")
    resp = staff_client.post("/admin/queues/cm/pause/", follow=True)
    assert queue.counts()["paused"] is True
    assert queue.claim(lease_ms=1000) is None
    assert b"Resume queue" in resp.content and b"paused" in resp.content
    overview = staff_client.get("/admin/queues/")
    assert b'<span class="emq-badge paused">paused</span>' in overview.content
    staff_client.post("/admin/queues/cm/resume/")
    assert queue.counts()["paused"] is False
    assert queue.claim(lease_ms=1000) is not None


def test_pause_a_configured_queue_that_has_no_keys_yet(staff_client, emq):
    from echomq import Queue

    assert staff_client.post("/admin/queues/cm.settle/pause/").status_code == 302
    assert Queue("cm.settle", emq).counts()["paused"] is True


def test_bulk_requeue_and_remove(staff_client, queue):
    a, b, c = (make_dead(queue) for _ in range(3))
    pending, _ = queue.enqueue(b"not dead")
    resp = staff_client.post("/admin/queues/cm/dead/",
                             {"action": "requeue", "ids": [a, b, pending], **YES}, follow=True)
    msgs = messages_of(resp)
    assert "2 dead jobs requeued." in msgs
    assert any(pending in m for m in msgs)
    assert queue.job(a)["state"] == queue.job(b)["state"] == "pending"

    resp = staff_client.post("/admin/queues/cm/dead/",
                             {"action": "remove", "ids": [c, pending], **YES}, follow=True)
    assert "1 dead job removed." in messages_of(resp)
    assert queue.job(c) is None
    assert queue.job(pending)["state"] == "pending"  # bulk remove touches dead letters only

    resp = staff_client.post("/admin/queues/cm/dead/", {"action": "remove"}, follow=True)
    assert "No jobs were selected, so nothing changed." in messages_of(resp)


def test_every_action_is_in_the_admin_log(staff_client, queue):
    from django.contrib.admin.models import LogEntry

    a, b = make_dead(queue), make_dead(queue)
    pending, _ = queue.enqueue(b"x")
    staff_client.post("/admin/queues/cm/pause/")
    staff_client.post("/admin/queues/cm/resume/")
    staff_client.post(f"/admin/queues/cm/jobs/{a}/requeue/", YES)
    staff_client.post(f"/admin/queues/cm/jobs/{pending}/remove/", YES)
    staff_client.post("/admin/queues/cm/dead/", {"action": "remove", "ids": [b], **YES})
    log = [(e.user.username, e.object_id, e.change_message) for e in LogEntry.objects.order_by("pk")]
    assert [row[:2] for row in log] == [("ops", "cm"), ("ops", "cm"), ("ops", f"cm/{a}"), ("ops", f"cm/{pending}"),
                                        ("ops", f"cm/{b}")]
    assert log[0][2].startswith("Paused") and log[1][2].startswith("Resumed")
    assert "Requeued" in log[2][2] and "it was pending" in log[3][2] and "Removed the dead job" in log[4][2]
    page = staff_client.get("/admin/games/operatoraction/")
    assert page.status_code == 403  # the log page needs its own view permission


def test_confirmation_pages_say_what_will_happen(staff_client, queue):
    jid = make_dead(queue, error="kaput")
    page = staff_client.get(f"/admin/queues/cm/jobs/{jid}/requeue/").content.decode()
    assert "goes back to the queue with a fresh set of attempts" in page and "kaput" in page
    assert queue.job(jid)["state"] == "dead"
    active, _ = queue.enqueue(b"y")
    assert queue.claim(lease_ms=60_000).id == active
    page = staff_client.get(f"/admin/queues/cm/jobs/{active}/remove/").content.decode()
    assert "deleted from queue cm" in page and "A worker is running it right now" in page
    bulk = staff_client.post("/admin/queues/cm/dead/", {"action": "requeue", "ids": [jid]}).content.decode()
    assert "Yes, requeue the job" in bulk and f'name="ids" value="{jid}"' in bulk
    assert queue.job(jid)["state"] == "dead" and queue.job(active)["state"] == "active"
