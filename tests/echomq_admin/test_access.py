"""Who may see and change the queues: staff only, the view permission for
every page, the operate permission for every action; CSRF on every POST."""
from __future__ import annotations

import pytest
from django.test import Client

from echomq.contrib.django.models import OPERATE, VIEW

from .conftest import make_dead, staff_user

pytestmark = pytest.mark.django_db

PAGES = ["/admin/queues/", "/admin/queues/cm/", "/admin/queues/cm/jobs/{jid}/", "/admin/queues/?q={jid}"]
ACTIONS = ["/admin/queues/cm/jobs/{jid}/requeue/", "/admin/queues/cm/jobs/{jid}/remove/",
           "/admin/queues/cm/pause/", "/admin/queues/cm/dead/"]


@pytest.mark.parametrize("who", ["anonymous", "player"])
def test_non_staff_are_sent_to_the_admin_login(who, client, queue, django_user_model):
    jid = make_dead(queue)
    if who == "player":
        client.force_login(django_user_model.objects.create_user("p", password="pw-p-12345"))
    for url in PAGES:
        resp = client.get(url.format(jid=jid))
        assert resp.status_code == 302, url
        assert resp["Location"].startswith("/admin/login/?next=/admin/queues/")
    for url in ACTIONS:
        resp = client.post(url.format(jid=jid), {"ids": [jid], "action": "remove", "confirm": "yes"})
        assert resp.status_code == 302 and resp["Location"].startswith("/admin/login/")
    # Nothing changed.
    assert queue.job(jid)["state"] == "dead"
    assert queue.counts()["paused"] is False


def test_staff_without_the_view_permission_get_403(client, queue, django_user_model):
    jid = make_dead(queue)
    client.force_login(staff_user(django_user_model, "plainstaff"))
    for url in PAGES:
        resp = client.get(url.format(jid=jid))
        assert resp.status_code == 403, url
        assert "echomq.view_queues" in resp.content.decode()
    index = client.get("/admin/")
    assert b"Queues dashboard" not in index.content


def test_viewers_see_the_pages_without_action_buttons(viewer_client, queue):
    jid = make_dead(queue)
    for url in PAGES:
        resp = viewer_client.get(url.format(jid=jid))
        assert resp.status_code == 200, url
        assert b'id="nav-sidebar"' in resp.content  # inside the admin's frame
        assert resp.context["site_header"] == "Codemojex admin"
    html = viewer_client.get("/admin/queues/cm/").content.decode()
    assert "Pause queue" not in html and "/requeue/" not in html and "/remove/" not in html
    assert "Remove…" not in viewer_client.get(f"/admin/queues/cm/jobs/{jid}/").content.decode()


def test_inactive_staff_is_refused(client, queue, django_user_model):
    user = django_user_model.objects.create_user("gone", password="pw-gone-123", is_staff=True,
                                                 is_active=False)
    client.force_login(user)
    assert client.get("/admin/queues/").status_code == 302


def test_admin_index_and_sidebar_link_to_the_dashboard(viewer_client, emq):
    index = viewer_client.get("/admin/")
    assert index.status_code == 200
    assert b"/admin/echomq/dashboard/" in index.content
    assert b"Queues dashboard" in index.content
    resp = viewer_client.get("/admin/echomq/dashboard/")
    assert resp.status_code == 302 and resp["Location"] == "/admin/queues/"
    # Nothing to add: there is no model data, only Valkey.
    assert viewer_client.get("/admin/echomq/dashboard/add/").status_code in (302, 404)


def test_posts_need_a_csrf_token(django_user_model, queue):
    client = Client(enforce_csrf_checks=True)
    client.force_login(staff_user(django_user_model, "ops", VIEW, OPERATE))
    jid = make_dead(queue)
    for url in ACTIONS:
        resp = client.post(url.format(jid=jid), {"ids": [jid], "action": "remove", "confirm": "yes"})
        assert resp.status_code == 403, url
    assert queue.job(jid)["state"] == "dead"
    assert queue.counts()["paused"] is False

    # The page's own forms carry the token, and posting it works.
    page = client.get(f"/admin/queues/cm/jobs/{jid}/requeue/")
    token = page.context["csrf_token"]
    assert f'value="{token}"'.encode() in page.content
    resp = client.post(f"/admin/queues/cm/jobs/{jid}/requeue/", {"csrfmiddlewaretoken": token, "confirm": "yes"})
    assert resp.status_code == 302
    assert queue.job(jid)["state"] == "pending"


def test_pause_resume_and_bulk_are_post_only(staff_client, queue):
    jid = make_dead(queue)
    for url in ACTIONS[2:] + ["/admin/queues/cm/resume/"]:
        assert staff_client.get(url.format(jid=jid)).status_code == 405, url
    assert queue.job(jid)["state"] == "dead"
    assert staff_client.post("/admin/queues/cm/").status_code == 405


def test_a_get_on_requeue_or_remove_only_asks(staff_client, queue):
    jid = make_dead(queue)
    for url in ACTIONS[:2]:
        resp = staff_client.get(url.format(jid=jid))
        assert resp.status_code == 200 and b'name="confirm" value="yes"' in resp.content
        # a POST without the confirmation asks again, and changes nothing either
        assert staff_client.post(url.format(jid=jid)).status_code == 200
    assert queue.job(jid)["state"] == "dead"
