"""Requeue, remove, pause and resume, each checked in Valkey afterwards."""
from __future__ import annotations

import pytest

from .conftest import make_dead

pytestmark = pytest.mark.django_db


def messages_of(resp) -> list[str]:
    return [str(m) for m in resp.context["messages"]]


def test_requeue_moves_a_dead_job_back_to_pending(staff_client, queue):
    jid = make_dead(queue, b"again")
    assert queue.counts()["dead"] == 1
    resp = staff_client.post(f"/admin/queues/cm/jobs/{jid}/requeue/", follow=True)
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
                             {"next": f"/admin/queues/cm/jobs/{jid}/"})
    assert resp["Location"] == f"/admin/queues/cm/jobs/{jid}/"
    assert staff_client.get(resp["Location"]).context["job"]["state"] == "pending"


def test_next_must_be_local(staff_client, queue):
    jid = make_dead(queue)
    resp = staff_client.post(f"/admin/queues/cm/jobs/{jid}/requeue/",
                             {"next": "https://evil.example/phish"})
    assert resp["Location"] == "/admin/queues/cm/"


def test_remove_deletes_the_job(staff_client, queue):
    jid = make_dead(queue)
    resp = staff_client.post(f"/admin/queues/cm/jobs/{jid}/remove/", follow=True)
    assert f"Job {jid} removed (it was dead)." in messages_of(resp)
    assert queue.job(jid) is None
    assert queue.counts()["dead"] == 0
    assert not [k for k in queue.keys() if jid in k]
    assert staff_client.get(f"/admin/queues/cm/jobs/{jid}/").status_code == 404
    # a second click is a readable 404, not a crash
    assert staff_client.post(f"/admin/queues/cm/jobs/{jid}/remove/").status_code == 404


def test_remove_from_the_job_page_lands_on_the_queue(staff_client, queue):
    jid, _ = queue.enqueue(b"x")
    resp = staff_client.post(f"/admin/queues/cm/jobs/{jid}/remove/",
                             {"next": f"/admin/queues/cm/jobs/{jid}/"})
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
                             {"action": "requeue", "ids": [a, b, pending]}, follow=True)
    msgs = messages_of(resp)
    assert "2 dead jobs requeued." in msgs
    assert any(pending in m for m in msgs)
    assert queue.job(a)["state"] == queue.job(b)["state"] == "pending"

    resp = staff_client.post("/admin/queues/cm/dead/",
                             {"action": "remove", "ids": [c, pending]}, follow=True)
    assert "1 dead job removed." in messages_of(resp)
    assert queue.job(c) is None
    assert queue.job(pending)["state"] == "pending"  # bulk remove touches dead letters only

    resp = staff_client.post("/admin/queues/cm/dead/", {"action": "remove"}, follow=True)
    assert "No jobs were selected, so nothing changed." in messages_of(resp)
