"""The pages show what Valkey holds, read live."""
from __future__ import annotations

import json
import re

import pytest

from echomq import Queue, ids
from echomq.contrib.django import get_queue

from .conftest import make_dead

pytestmark = pytest.mark.django_db


def card(resp, name: str) -> int:
    m = re.search(rf'id="count-{name}">(\d+)<'.encode(), resp.content)
    assert m, name
    return int(m[1])


def test_queue_page_counts_match_real_jobs(staff_client, queue):
    dead = make_dead(queue, error="boom: the handler blew up")
    queue.enqueue(b"done")
    done = queue.claim(lease_ms=60_000)
    assert queue.complete(done.id, done.attempts)
    for i in range(4):
        queue.enqueue(f"p{i}".encode())
    claimed = queue.claim(lease_ms=60_000)
    queue.enqueue(b"later", delay_ms=600_000)

    resp = staff_client.get("/admin/queues/cm/")
    assert resp.status_code == 200
    counts = queue.counts()
    assert (counts["pending"], counts["active"], counts["scheduled"], counts["dead"]) == (3, 1, 1, 1)
    for name in ("pending", "active", "scheduled", "dead", "completed", "dead_total"):
        assert card(resp, name) == counts[name], name
    assert card(resp, "completed") == 1

    html = resp.content.decode()
    # active jobs with their lease deadline and attempts
    active = resp.context["active"]
    assert {j["id"] for j in active} >= {claimed.id}
    assert all(j["attempts"] == 1 and j["lease_deadline_rel"].startswith("in ") for j in active)
    assert claimed.id in html
    # the scheduled job and its run-at time
    assert resp.context["scheduled"][0]["run_at_rel"].startswith("in 9m")
    # the dead letter, its error and its buttons
    assert dead in html and "boom: the handler blew up" in html
    assert f'formaction="/admin/queues/cm/jobs/{dead}/requeue/"' in html
    assert f'formaction="/admin/queues/cm/jobs/{dead}/remove/"' in html
    # the chart: one completed and one dead-lettered in the last hour
    chart = resp.context["chart"]
    assert (chart["completed"], chart["dead"], chart["minutes"]) == (1, 1, 60)
    assert len(chart["bars"]) == 60
    assert '<svg class="emq-chart"' in html and 'class="c"' in html and 'class="d"' in html
    assert "1 completed, 1 dead-lettered" in html


def test_pending_and_deepest_lanes(staff_client, queue):
    flat, _ = queue.enqueue(b"flat")
    deep, shallow = ids.mint("PLR"), ids.mint("PLR")
    for _ in range(4):
        queue.enqueue(b"d", lane=deep)
    queue.enqueue(b"s", lane=shallow)
    queue.lanes.pause(shallow)
    resp = staff_client.get("/admin/queues/cm/")
    assert card(resp, "pending") == 6
    lanes = resp.context["lanes"]
    assert [(l["lane"], l["depth"]) for l in lanes] == [(deep, 4), (shallow, 1)]
    assert lanes[1]["paused"] is True
    assert resp.context["pending"] == [flat]
    assert f"/admin/queues/cm/jobs/{flat}/" in resp.content.decode()


@pytest.mark.parametrize("shards", [1, 3])
def test_next_up_lists_ready_jobs_in_claim_order_priority_first(staff_client, emq, settings, shards):
    """The flat ready set as the claims take it: highest priority first,
    then admission order, on a plain queue and across a sharded queue's
    shards (not by id, whatever the priorities)."""
    settings.ECHOMQ = {**settings.ECHOMQ, "QUEUES": {"cm": {"shards": shards}}}
    q = get_queue("cm")
    admitted = [(q.enqueue(b"x", priority=p)[0], p) for p in (0, -5, 7, 0, 7, -5, 3, 0, 7)]
    order = [jid for jid, p in sorted(admitted, key=lambda a: -a[1])]  # stable: admission order within a priority
    resp = staff_client.get("/admin/queues/cm/")
    assert resp.context["pending"] == order
    assert q.pending_ids(4) == order[:4]
    if shards == 1:  # what a claim takes
        assert [j.id for j in q.claim_batch(len(order), lease_ms=60_000)] == order


@pytest.mark.parametrize("shards", [1, 3])
def test_the_lane_page_lists_its_jobs_in_claim_order_on_a_sharded_queue_too(staff_client, emq, settings, shards):
    settings.ECHOMQ = {**settings.ECHOMQ, "QUEUES": {"cm": {"shards": shards}}}
    q = get_queue("cm")
    lane = ids.mint("PLR")
    low, _ = q.enqueue(b"l", lane=lane)
    high, _ = q.enqueue(b"h", lane=lane, priority=9)
    resp = staff_client.get(f"/admin/queues/cm/lanes/{lane}/")
    assert resp.status_code == 200
    assert resp.context["jobs"] == [high, low] and resp.context["lane"]["depth"] == 2


def test_the_lane_page_shows_a_lane_whose_only_job_is_leased(staff_client, queue):
    """A lane with no setting leaves ``lanes`` when its last ready job is
    claimed; its page still shows it while that job runs, then 404s."""
    lane = ids.mint("PLR")
    queue.enqueue(b"x", lane=lane)
    job = queue.claim(lease_ms=60_000)
    resp = staff_client.get(f"/admin/queues/cm/lanes/{lane}/")
    assert resp.status_code == 200
    assert resp.context["lane"]["active"] == 1 and resp.context["lane"]["depth"] == 0
    assert queue.complete(job.id, job.attempts)
    assert staff_client.get(f"/admin/queues/cm/lanes/{lane}/").status_code == 404


def test_overview_lists_configured_and_discovered_queues(staff_client, emq):
    cm = Queue("cm", emq)
    make_dead(cm)
    cm.enqueue(b"a")
    cm.enqueue(b"b")
    other = Queue("mail.digest", emq)  # not configured: found by SCAN
    other.enqueue(b"later", delay_ms=60_000)
    emq.set("emq:{emq}:meta", "not a queue")  # 'emq' is no queue name
    emq.set("unrelated:{cm}:meta", "x")

    resp = staff_client.get("/admin/queues/")
    assert resp.status_code == 200
    names = [row["name"] for row in resp.context["queues"]]
    assert names == ["cm", "cm.settle", "cm.notify", "mail.digest"]
    rows = {row["name"]: row["counts"] for row in resp.context["queues"]}
    assert (rows["cm"]["pending"], rows["cm"]["dead"]) == (2, 1)
    assert rows["mail.digest"]["scheduled"] == 1
    assert rows["cm.settle"]["pending"] == 0
    assert resp.context["totals"]["pending"] == 2
    html = resp.content.decode()
    assert 'href="/admin/queues/mail.digest/"' in html
    assert 'href="/admin/queues/cm.settle/"' in html


def test_discovery_without_configured_queues(staff_client, emq, settings):
    settings.ECHOMQ = {"URL": "unused", "QUEUES": ["bad name!", "cm"]}
    Queue("cm.notify", emq).pause()  # a meta key alone makes a queue
    jid, _ = Queue("x", emq).enqueue(b"a", lane=ids.mint("PLR"))  # lane keys only
    resp = staff_client.get("/admin/queues/")
    assert [row["name"] for row in resp.context["queues"]] == ["cm", "cm.notify", "x"]
    assert resp.context["queues"][1]["counts"]["paused"] is True
    assert staff_client.get("/admin/queues/x/").status_code == 200


def test_empty_overview(staff_client, emq, settings):
    settings.ECHOMQ = {"URL": "unused"}
    resp = staff_client.get("/admin/queues/")
    assert resp.status_code == 200
    assert b"No queues yet" in resp.content


def test_job_page_shows_row_fields_and_pretty_json(staff_client, queue):
    body = {"round": "RND0000000001a", "guess": "😀😃😄😁😆😅", "n": 3}
    jid, _ = queue.enqueue(json.dumps(body, separators=(",", ":")).encode(), lane=ids.mint("PLR"))
    job = queue.claim(lease_ms=60_000)
    assert job.id == jid
    resp = staff_client.get(f"/admin/queues/cm/jobs/{jid}/")
    assert resp.status_code == 200
    page = resp.context["job"]
    assert page["state"] == "active"
    assert page["payload"]["kind"] == "json"
    assert page["payload"]["text"] == json.dumps(body, indent=2, ensure_ascii=False)
    html = resp.content.decode()
    assert "&quot;guess&quot;: &quot;😀😃😄😁😆😅&quot;" in html
    fields = dict((f[0], f[1]) for f in page["fields"])
    assert fields["attempts"] == 1 and fields["state"] == "active"
    assert [t[0] for t in page["times"]] == ["created", "lease_deadline"]
    assert page["lane"]["active"] == 1
    assert "JSON" in html and "lease_deadline" in html


def test_job_page_text_and_binary_payloads(staff_client, queue):
    text, _ = queue.enqueue("héllo <b>world</b>".encode())
    binary, _ = queue.enqueue(b"\x00\xffab")
    resp = staff_client.get(f"/admin/queues/cm/jobs/{text}/")
    assert resp.context["job"]["payload"]["kind"] == "text"
    assert "héllo &lt;b&gt;world&lt;/b&gt;" in resp.content.decode()  # escaped, never markup
    resp = staff_client.get(f"/admin/queues/cm/jobs/{binary}/")
    assert resp.context["job"]["payload"]["kind"] == "hex"
    assert "00000000  00 ff 61 62" in resp.content.decode()
    assert "binary, shown as hex" in resp.content.decode()


def test_dead_job_page_offers_requeue(staff_client, queue):
    jid = make_dead(queue, b"{}", error="boom")
    resp = staff_client.get(f"/admin/queues/cm/jobs/{jid}/")
    html = resp.content.decode()
    assert f'href="/admin/queues/cm/jobs/{jid}/requeue/?next=' in html  # to the confirmation page
    assert "boom" in html
    assert "died" in [t[0] for t in resp.context["job"]["times"]]


def test_find_box_goes_to_the_job(staff_client, queue):
    jid, _ = queue.enqueue(b"x")
    resp = staff_client.get("/admin/queues/cm/find/", {"id": f"  {jid} "})
    assert resp.status_code == 302 and resp["Location"] == f"/admin/queues/cm/jobs/{jid}/"


def test_limit_bounds_the_lists(staff_client, queue):
    for _ in range(5):
        make_dead(queue)
    resp = staff_client.get("/admin/queues/cm/?limit=2")
    assert len(resp.context["dead"]) == 2
    assert b"newest 2 shown" in resp.content


def test_auto_refresh_is_opt_in(staff_client, queue):
    queue.enqueue(b"x")
    assert b'http-equiv="refresh"' not in staff_client.get("/admin/queues/cm/").content
    assert b'http-equiv="refresh" content="5"' in staff_client.get("/admin/queues/cm/?refresh=5").content
