"""The dashboard's live tail of a queue's events (filters by type, lane and
job; the JSON its script polls) and the job page's history, progress and
flow, against real Valkey."""
from __future__ import annotations

import pytest

from echomq import ids

from .snapshot import valkey_snapshot

pytestmark = pytest.mark.django_db


def test_the_tail_shows_the_newest_events_and_filters_them(staff_client, queue):
    lane = ids.mint("PLR")
    a, _ = queue.enqueue(b"a", lane=lane)
    b, _ = queue.enqueue(b"b")
    for job in queue.claim_batch(2, lease_ms=60_000):
        queue.complete(job.id, job.attempts)
    resp = staff_client.get("/admin/queues/cm/events/")
    assert resp.status_code == 200
    rows = resp.context["events"]
    assert [(r["type"], r["job"]) for r in rows] == [("completed", a), ("completed", b), ("claimed", a),
                                                     ("claimed", b), ("enqueued", b), ("enqueued", a)]
    html = resp.content.decode()
    assert f'href="/admin/queues/cm/jobs/{a}/"' in html and "echomq/tail.js" in html
    assert resp.context["stats"]["length"] == 5  # an entry per enqueue and per complete; one for the claim of both
    only = staff_client.get(f"/admin/queues/cm/events/?type=claimed&type=completed&lane={lane}")
    assert [(r["type"], r["job"]) for r in only.context["events"]] == [("completed", a), ("claimed", a)]
    one = staff_client.get(f"/admin/queues/cm/events/?job={b}&limit=2")
    assert [r["type"] for r in one.context["events"]] == ["completed", "claimed"]


def test_the_json_poll_answers_what_came_since_and_where_to_go_on(staff_client, queue):
    page = staff_client.get("/admin/queues/cm/events/?type=enqueued")
    cursor = page.context["cursor"]
    jid, _ = queue.enqueue(b"x")
    queue.claim(lease_ms=60_000)
    got = staff_client.get(f"/admin/queues/cm/events/?type=enqueued&format=json&after={cursor}").json()
    assert [(e["type"], e["job"], e["url"]) for e in got["events"]] == [
        ("enqueued", jid, f"/admin/queues/cm/jobs/{jid}/")]
    again = staff_client.get(f"/admin/queues/cm/events/?format=json&after={got['cursor']}").json()
    assert again["events"] == []  # the claim was read (and filtered out) already: the cursor is past it


@pytest.mark.parametrize("query", ["type=finished", "lane=nope", "job=GES0KHTOWnGLuC", "limit=0",
                                   "format=json&after=soon", "format=json&after=1-0,2-0"])
def test_bad_filters_are_a_readable_400_and_change_nothing(staff_client, queue, emq, query):
    queue.enqueue(b"x")
    before = valkey_snapshot(emq)
    resp = staff_client.get(f"/admin/queues/cm/events/?{query}")
    assert resp.status_code == 400 and b"<h1>" in resp.content
    assert valkey_snapshot(emq) == before


def test_the_tail_needs_the_view_permission(player_client, queue):
    resp = player_client.get("/admin/queues/cm/events/")
    assert resp.status_code in (302, 403)


def test_a_job_page_shows_its_history_and_progress(staff_client, queue):
    jid, _ = queue.enqueue(b"x")
    job = queue.claim(lease_ms=60_000)
    job.progress({"scored": 3, "of": 6})
    resp = staff_client.get(f"/admin/queues/cm/jobs/{jid}/")
    story = resp.context["job"]
    assert [e["type"] for e in story["history"]] == ["enqueued", "claimed", "progress"]
    html = resp.content.decode()
    assert 'id="progress"' in html and "&quot;scored&quot;: 3" in html and 'id="history"' in html
    queue.complete(jid, job.attempts)
    gone = staff_client.get(f"/admin/queues/cm/jobs/{jid}/")  # its record and, from the stream, its history
    assert [e["type"] for e in gone.context["job"]["history"]] == ["enqueued", "claimed", "progress", "completed"]


def test_a_flow_on_the_job_pages(staff_client, queue):
    flow = queue.enqueue_flow(b"parent", [b"a", b"b"], on_child_failure="ignore")
    jobs = {j.id: j for j in queue.claim_batch(2, lease_ms=60_000)}
    a, b = flow.children
    jobs[a].set_result({"sum": 5})
    queue.complete(a, jobs[a].attempts)
    queue.retry(b, jobs[b].attempts, max_attempts=1, error="b broke")
    parent = staff_client.get(f"/admin/queues/cm/jobs/{flow.parent}/")
    story = parent.context["job"]
    assert story["flow"] == {"children": 2, "left": 0, "policy": "ignore"}
    assert [(c["id"], c["state"], c["detail"]) for c in story["children"]] == sorted(
        [(a, "completed", '{"sum": 5}'), (b, "dead", '"b broke"')])
    assert 'id="emq-children"' in parent.content.decode()
    child = staff_client.get(f"/admin/queues/cm/jobs/{a}/") if queue.job(a) else None
    dead_child = staff_client.get(f"/admin/queues/cm/jobs/{b}/")
    assert dead_child.context["job"]["parent"] == flow.parent
    assert f'href="/admin/queues/cm/jobs/{flow.parent}/"' in dead_child.content.decode()
    assert child is None  # a completed child's row is gone; its page is the record's
