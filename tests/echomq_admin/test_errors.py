"""Bad input is a readable 4xx page, never a 500."""
from __future__ import annotations

import pytest

from echomq import ids
from echomq.contrib.django import reset_client

from .conftest import make_dead

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("url, status, words", [
    ("/admin/queues/nope/", 404, "There is no queue &#x27;nope&#x27;"),
    ("/admin/queues/emq/", 400, "is not a queue name"),
    ("/admin/queues/bad%20name/", 400, "is not a queue name"),
    ("/admin/queues/" + "q" * 129 + "/", 400, "is not a queue name"),
    ("/admin/queues/cm/jobs/nope/", 400, "is not a job id"),
    ("/admin/queues/cm/jobs/JOBzzzzzzzzzzz/", 400, "is not a job id"),  # above 2^63-1
    ("/admin/queues/cm/jobs/PLR0KHTOWnGLuC/", 400, "not a JOB id"),
    ("/admin/queues/cm/jobs/JOB0KHTOWnGLuC/", 404, "has no job JOB0KHTOWnGLuC"),
    ("/admin/queues/nope/jobs/JOB0KHTOWnGLuC/", 404, "There is no queue"),
    ("/admin/queues/cm/?limit=0", 400, "limit must be a whole number"),
    ("/admin/queues/cm/?limit=abc", 400, "limit must be a whole number"),
    ("/admin/queues/cm/find/?id=JOB123", 400, "is not a job id"),
    ("/admin/queues/cm/find/", 400, "is not a job id"),
    ("/admin/queues/cm/lanes/nope/", 400, "is not a lane"),
    ("/admin/queues/cm/lanes/PLR0KHTOWnGLuC/", 404, "has no lane PLR0KHTOWnGLuC"),
    ("/admin/queues/cm/lanes/PLR0KHTOWnGLuC/?page=0", 400, "page must be a whole number"),
    ("/admin/queues/cm/lanes/PLR0KHTOWnGLuC/?page=%C2%B2", 400, "page must be a whole number"),
    ("/admin/queues/?q=" + "x" * 65, 400, "at most 64 characters"),
    ("/admin/queues/?q=a%01b", 400, "at most 64 characters"),
    ("/admin/queues/cm/?limit=%C2%B2", 400, "limit must be a whole number"),
    ("/admin/queues/?refresh=1", 400, "refresh must be a whole number"),
    ("/admin/queues/cm/?refresh=abc", 400, "refresh must be a whole number"),
])
def test_bad_input_pages(staff_client, emq, url, status, words):
    resp = staff_client.get(url)
    assert resp.status_code == status, resp.content[:500]
    html = resp.content.decode()
    assert words in html
    assert 'role="alert"' in html and 'id="nav-sidebar"' in html  # an admin page, in words


def test_a_nul_in_the_address_is_refused_before_any_view(staff_client, emq):
    """The site's request guard refuses a NUL anywhere in a path (PostgreSQL
    cannot hold one, so no id or name has one) before the dashboard sees it."""
    resp = staff_client.get("/admin/queues/cm/jobs/JOB%00%00/")
    assert resp.status_code == 400 and "NUL character" in resp.content.decode()


@pytest.mark.parametrize("url, status, words", [
    ("/admin/queues/cm/jobs/nope/requeue/", 400, "is not a job id"),
    ("/admin/queues/cm/jobs/nope/remove/", 400, "is not a job id"),
    ("/admin/queues/cm/jobs/JOB0KHTOWnGLuC/requeue/", 404, "no job JOB0KHTOWnGLuC to requeue"),
    ("/admin/queues/cm/jobs/JOB0KHTOWnGLuC/remove/", 404, "no job JOB0KHTOWnGLuC to remove"),
    ("/admin/queues/nope/pause/", 404, "There is no queue"),
    ("/admin/queues/bad!/resume/", 400, "is not a queue name"),
    ("/admin/queues/nope/jobs/JOB0KHTOWnGLuC/remove/", 404, "There is no queue"),
])
def test_bad_actions(staff_client, emq, url, status, words):
    resp = staff_client.post(url, {"confirm": "yes"})
    assert resp.status_code == status
    assert words in resp.content.decode()


def test_requeue_of_a_job_that_is_not_dead_is_409(staff_client, queue):
    jid, _ = queue.enqueue(b"x")
    resp = staff_client.post(f"/admin/queues/cm/jobs/{jid}/requeue/", {"confirm": "yes"})
    assert resp.status_code == 409
    assert f"Job {jid} is pending, not dead" in resp.content.decode()
    assert queue.job(jid)["state"] == "pending"


def test_requeue_of_a_dead_job_whose_unique_key_another_job_holds_is_409_and_says_so(staff_client, queue):
    jid, _ = queue.enqueue(b"x", unique_key="nightly")
    job = queue.claim(lease_ms=60_000)
    assert queue.retry(job.id, job.attempts, delay_ms=0, max_attempts=1, error="boom") == "dead"
    holder, status = queue.enqueue(b"y", unique_key="nightly")  # the key was released: a new job takes it
    assert status == "enqueued"
    resp = staff_client.post(f"/admin/queues/cm/jobs/{jid}/requeue/", {"confirm": "yes"})
    page = resp.content.decode()
    assert resp.status_code == 409 and "The unique key is taken" in page and holder in page, page[:2000]
    assert "someone got there first" not in page
    assert queue.job(jid)["state"] == "dead" and queue.job(holder)["state"] == "pending"
    resp = staff_client.post("/admin/queues/cm/dead/", {"action": "requeue", "ids": [jid], "confirm": "yes"},
                             follow=True)
    assert "unique key another live job holds" in resp.content.decode()
    assert queue.job(jid)["state"] == "dead"


def test_bulk_with_a_bad_id_changes_nothing(staff_client, queue):
    jid = make_dead(queue)
    resp = staff_client.post("/admin/queues/cm/dead/", {"action": "remove", "ids": [jid, "JOB!"], "confirm": "yes"})
    assert resp.status_code == 400
    assert queue.job(jid)["state"] == "dead"
    resp = staff_client.post("/admin/queues/cm/dead/", {"action": "explode", "ids": [jid], "confirm": "yes"})
    assert resp.status_code == 400 and "Choose requeue or remove" in resp.content.decode()
    assert queue.job(jid)["state"] == "dead"


def test_valkey_down_is_503_not_500(staff_client, emq):
    from echomq import embedded

    reset_client(f"redis://127.0.0.1:{embedded.free_port()}/0")
    resp = staff_client.get("/admin/queues/")
    assert resp.status_code == 503
    assert "Valkey unreachable" in resp.content.decode()


def test_a_lane_id_is_no_job_id(staff_client, queue):
    lane = ids.mint("PLR")
    queue.enqueue(b"x", lane=lane)
    assert staff_client.get(f"/admin/queues/cm/jobs/{lane}/").status_code == 400
