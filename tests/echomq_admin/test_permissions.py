"""The dashboard's two permissions: a user who may only view gets a 403 on
every POST (and every confirmation page) and nothing changes in Valkey or
the admin log; the operate permission and the superuser can act."""
from __future__ import annotations

import pytest
from django.contrib.admin.models import LogEntry

from .conftest import make_dead
from .snapshot import valkey_snapshot

pytestmark = pytest.mark.django_db


def _jobs(queue):
    dead = make_dead(queue)
    pending, _ = queue.enqueue(b"waiting")
    return dead, pending


POSTS = {
    "pause": ("/admin/queues/cm/pause/", {}),
    "resume": ("/admin/queues/cm/resume/", {}),
    "requeue": ("/admin/queues/cm/jobs/{dead}/requeue/", {"confirm": "yes"}),
    "requeue, unconfirmed": ("/admin/queues/cm/jobs/{dead}/requeue/", {}),
    "remove a dead job": ("/admin/queues/cm/jobs/{dead}/remove/", {"confirm": "yes"}),
    "remove a pending job": ("/admin/queues/cm/jobs/{pending}/remove/", {"confirm": "yes"}),
    "remove with an option": ("/admin/queues/cm/jobs/{pending}/remove/", {"option": "refund", "confirm": "yes"}),
    "remove, unconfirmed": ("/admin/queues/cm/jobs/{pending}/remove/", {}),
    "cancel": ("/admin/queues/cm/jobs/{pending}/cancel/", {"confirm": "yes"}),
    "cancel, unconfirmed": ("/admin/queues/cm/jobs/{pending}/cancel/", {}),
    "bulk requeue": ("/admin/queues/cm/dead/", {"action": "requeue", "ids": ["{dead}"], "confirm": "yes"}),
    "bulk remove": ("/admin/queues/cm/dead/", {"action": "remove", "ids": ["{dead}"], "confirm": "yes"}),
    "bulk, unconfirmed": ("/admin/queues/cm/dead/", {"action": "remove", "ids": ["{dead}"]}),
}


@pytest.mark.parametrize("post", list(POSTS))
def test_every_post_is_refused_to_a_viewer_and_changes_nothing(viewer_client, queue, emq, post):
    dead, pending = _jobs(queue)
    queue.pause()  # so "resume" would change something too
    url, data = POSTS[post]
    data = {k: [x.format(dead=dead) for x in v] if isinstance(v, list) else v for k, v in data.items()}
    before = valkey_snapshot(emq)
    resp = viewer_client.post(url.format(dead=dead, pending=pending), data)
    assert resp.status_code == 403
    assert "echomq.operate_queues" in resp.content.decode()
    assert valkey_snapshot(emq) == before
    assert not LogEntry.objects.exists()


def test_confirmation_pages_are_refused_to_a_viewer(viewer_client, queue, emq):
    dead, pending = _jobs(queue)
    before = valkey_snapshot(emq)
    for url in (f"/admin/queues/cm/jobs/{dead}/requeue/", f"/admin/queues/cm/jobs/{pending}/remove/",
                f"/admin/queues/cm/jobs/{pending}/cancel/"):
        assert viewer_client.get(url).status_code == 403, url
    assert valkey_snapshot(emq) == before


def test_the_operate_permission_alone_is_not_enough(client, queue, emq, django_user_model):
    """Operate without view is refused too: every page needs the view permission."""
    from echomq.contrib.django.models import OPERATE

    from .conftest import staff_user

    dead, _ = _jobs(queue)
    client.force_login(staff_user(django_user_model, "blind", OPERATE))
    before = valkey_snapshot(emq)
    assert client.post(f"/admin/queues/cm/jobs/{dead}/requeue/", {"confirm": "yes"}).status_code == 403
    assert valkey_snapshot(emq) == before


@pytest.mark.parametrize("who", ["operator", "superuser"])
def test_operators_and_the_superuser_can_act(who, client, staff_client, queue, django_user_model):
    if who == "superuser":
        client.force_login(django_user_model.objects.create_superuser("root", password="pw-root-123"))
        staff_client = client
    dead, pending = _jobs(queue)
    assert staff_client.post("/admin/queues/cm/pause/").status_code == 302
    assert queue.counts()["paused"] is True
    assert staff_client.post("/admin/queues/cm/resume/").status_code == 302
    assert staff_client.post(f"/admin/queues/cm/jobs/{dead}/requeue/", {"confirm": "yes"}).status_code == 302
    assert queue.job(dead)["state"] == "pending"
    assert staff_client.post(f"/admin/queues/cm/jobs/{pending}/remove/", {"confirm": "yes"}).status_code == 302
    assert queue.job(pending) is None
    other, _ = queue.enqueue(b"again")
    assert staff_client.post(f"/admin/queues/cm/jobs/{other}/cancel/", {"confirm": "yes"}).status_code == 302
    assert queue.job(other) is None
    assert LogEntry.objects.count() == 5
