"""The queue dashboard's live tail in a real browser against the live stack:
new events appear on the page as they happen, through its script's poll,
and the type filter holds for the live rows too. Screenshot:
test-artifacts/screenshots/admin-events.png."""
import pytest
from django.contrib.auth.hashers import PBKDF2PasswordHasher, make_password
from playwright.sync_api import expect

from echomq import Queue
from echomq.contrib.django import get_client

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PW = "correct-horse-battery-9"


def test_the_events_page_follows_new_events_live(desktop, live, shot, django_user_model):
    user = django_user_model.objects.create_superuser("tailer")
    user.password = make_password(PW, hasher=PBKDF2PasswordHasher())  # the server knows the default hashers
    user.save(update_fields=["password"])
    q = Queue("tail.demo", get_client())  # no live worker serves this queue
    first, _ = q.enqueue(b"first")
    page = desktop.new_page()
    page.goto(live.url + "/admin/")
    page.get_by_label("Username").fill("tailer")
    page.get_by_label("Password").fill(PW)
    page.get_by_role("button", name="Log in").click()
    page.goto(live.url + "/admin/queues/tail.demo/events/")
    rows = page.locator("#emq-events tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text(first)
    second, _ = q.enqueue(b"second")  # after the page loaded: only the script can show it
    expect(rows.first).to_contain_text(second)
    expect(rows).to_have_count(2)
    shot(page, "admin-events")

    page.goto(live.url + "/admin/queues/tail.demo/events/?type=claimed")
    expect(page.get_by_text("No event matches yet.")).to_be_visible()
    q.enqueue(b"third")
    job = q.claim(lease_ms=60_000)
    expect(rows.first).to_contain_text(job.id)
    expect(rows.first).to_contain_text("claimed")
    expect(rows).to_have_count(1)  # the enqueue was read and left out
    page.get_by_role("link", name=job.id).click()
    expect(page.locator("#history")).to_contain_text("claimed")
