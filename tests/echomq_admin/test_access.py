"""Who may see and change the queues: staff only, CSRF on every POST."""
from __future__ import annotations

import pytest
from django.test import Client

from .conftest import make_dead

pytestmark = pytest.mark.django_db

PAGES = ["/admin/queues/", "/admin/queues/cm/", "/admin/queues/cm/jobs/{jid}/"]
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
        resp = client.post(url.format(jid=jid), {"ids": [jid], "action": "remove"})
        assert resp.status_code == 302 and resp["Location"].startswith("/admin/login/")
    # Nothing changed.
    assert queue.job(jid)["state"] == "dead"
    assert queue.counts()["paused"] is False


def test_staff_without_superuser_see_the_pages(staff_client, queue):
    jid = make_dead(queue)
    for url in PAGES:
        resp = staff_client.get(url.format(jid=jid))
        assert resp.status_code == 200, url
        assert b'id="nav-sidebar"' in resp.content  # inside the admin's frame
        assert resp.context["site_header"]  # admin.site.each_context


def test_inactive_staff_is_refused(client, queue, django_user_model):
    user = django_user_model.objects.create_user("gone", password="pw-gone-123", is_staff=True,
                                                 is_active=False)
    client.force_login(user)
    assert client.get("/admin/queues/").status_code == 302


def test_admin_index_and_sidebar_link_to_the_dashboard(staff_client, emq):
    index = staff_client.get("/admin/")
    assert index.status_code == 200
    assert b"/admin/echomq/dashboard/" in index.content
    assert b"Queues dashboard" in index.content
    resp = staff_client.get("/admin/echomq/dashboard/")
    assert resp.status_code == 302 and resp["Location"] == "/admin/queues/"
    # Nothing to add: there is no model data, only Valkey.
    assert staff_client.get("/admin/echomq/dashboard/add/").status_code in (302, 404)


def test_posts_need_a_csrf_token(django_user_model, queue):
    client = Client(enforce_csrf_checks=True)
    client.force_login(django_user_model.objects.create_user("ops", password="pw-ops-123",
                                                             is_staff=True))
    jid = make_dead(queue)
    for url in ACTIONS:
        resp = client.post(url.format(jid=jid), {"ids": [jid], "action": "remove"})
        assert resp.status_code == 403, url
    assert queue.job(jid)["state"] == "dead"
    assert queue.counts()["paused"] is False

    # The page's own forms carry the token, and posting it works.
    page = client.get("/admin/queues/cm/")
    token = page.context["csrf_token"]
    assert f'value="{token}"'.encode() in page.content
    resp = client.post(f"/admin/queues/cm/jobs/{jid}/requeue/", {"csrfmiddlewaretoken": token})
    assert resp.status_code == 302
    assert queue.job(jid)["state"] == "pending"


def test_mutations_are_post_only(staff_client, queue):
    jid = make_dead(queue)
    for url in ACTIONS:
        assert staff_client.get(url.format(jid=jid)).status_code == 405, url
    assert queue.job(jid)["state"] == "dead"
    assert staff_client.post("/admin/queues/cm/").status_code == 405
