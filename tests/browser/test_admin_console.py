"""The admin console in a real browser against the live stack: from a guess
to its job and back, the honest remove-and-refund of a queued guess, the
confirmation pages of Void, Settle now and Requeue, and a view-only support
user who is refused. Screenshots go to test-artifacts/screenshots/admin-*.
Every wait is on an event (Playwright's expect, or ``wait_for``)."""
import re

import pytest
from django.contrib.auth.hashers import PBKDF2PasswordHasher, make_password
from django.contrib.auth.models import Group
from playwright.sync_api import expect

from echomq.contrib.django import get_queue
from games.guesses import submit
from games.models import Guess, LedgerEntry, Round
from games.permissions import sync_groups
from tests.games.procs import wait_for

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PW = "correct-horse-battery-9"


def with_password(user):
    """The server only knows the default hashers (the tests use MD5)."""
    user.password = make_password(PW, hasher=PBKDF2PasswordHasher())
    user.save(update_fields=["password"])
    return user


def admin_login(page, url, username):
    page.goto(url + "/admin/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(PW)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("link", name="Codemojex admin")).to_be_visible()


def run_action(page, url, model, pk, label):
    page.goto(f"{url}/admin/games/{model}/")
    page.locator(f'input[name="_selected_action"][value="{pk}"]').check()
    page.locator('select[name="action"]').select_option(label=label)
    page.locator('button[name="index"]').first.click()


def test_the_console_traces_guesses_and_asks_before_it_acts(desktop, live, make_player, make_round, shot,
                                                           django_user_model):
    """One story, so no test database flush happens under the live server
    while its processes cache content type ids (LogEntry rows refer to them)."""
    with_password(django_user_model.objects.create_superuser("root"))
    guess_to_job_and_back_and_an_honest_remove(desktop, live, make_player, make_round, shot)
    void_settle_and_requeue_ask_first(desktop, live, make_player, make_round, shot)


def guess_to_job_and_back_and_an_honest_remove(desktop, live, make_player, make_round, shot):
    rnd = make_round(title="Traced", guess_price=2)
    amy = make_player("amy", keys=10)
    cm = get_queue("cm")
    cm.pause()  # the live score worker must leave the guess queued
    try:
        guess = submit(amy, rnd, rnd.keyboard[:6])
        wait_for(lambda: cm.job(guess.job_id) is not None, timeout=10, what="the guess's job")
        page = desktop.new_page()
        admin_login(page, live.url, "root")
        expect(page.get_by_role("heading", name="Codemojex console")).to_be_visible()

        # Guess -> job
        page.goto(f"{live.url}/admin/games/guess/{guess.pk}/change/")
        shot(page, "admin-guess")
        page.get_by_role("link", name=guess.job_id).click()
        expect(page).to_have_url(re.compile(f"/admin/queues/cm/jobs/{guess.job_id}/$"))
        expect(page.get_by_role("heading", name=f"Guess {guess.pk} by amy")).to_be_visible()
        shot(page, "admin-job-of-guess")
        # ... and back: job -> guess, job -> player
        page.get_by_role("link", name=f"guess {guess.pk}").click()
        expect(page).to_have_url(re.compile(f"/admin/games/guess/{guess.pk}/change/$"))
        page.go_back()
        page.get_by_role("link", name=re.compile(r"^player amy")).click()
        expect(page).to_have_url(re.compile(f"/admin/games/player/{amy.pk}/change/$"))

        # Remove: the confirmation says the job would come back, and offers the refund.
        page.goto(f"{live.url}/admin/queues/cm/jobs/{guess.job_id}/")
        page.get_by_role("link", name="Remove…").click()
        expect(page.locator("#emq-on-remove")).to_contain_text("relay sends its job again")
        shot(page, "admin-confirm-remove-guess-job")
        page.get_by_role("button", name="Remove and refund this guess").click()
        expect(page.get_by_text(f"Refunded guess {guess.pk}")).to_be_visible()
        shot(page, "admin-removed-and-refunded")
        assert Guess.objects.get(pk=guess.pk).status == "refunded"
        assert LedgerEntry.objects.filter(reason="refund", reference=guess.pk).count() == 1
        assert cm.job(guess.job_id) is None

        # Search the dashboard by the player's name: the finished job is found.
        page.goto(f"{live.url}/admin/queues/")
        page.get_by_label("Find jobs").fill("amy")
        page.get_by_role("button", name="Search").click()
        expect(page.get_by_role("link", name=guess.job_id)).to_be_visible()
        shot(page, "admin-queue-search")
    finally:
        cm.resume()


def void_settle_and_requeue_ask_first(desktop, live, make_player, make_round, shot):
    voidee, settlee = make_round(title="To void"), make_round(title="To settle", prize_pool=40)
    ann = make_player("ann", keys=5)
    g = submit(ann, voidee, voidee.keyboard[:6])
    wait_for(lambda: Guess.objects.get(pk=g.pk).status == "scored", timeout=30, what="the live score worker")
    page = desktop.new_page()

    run_action(page, live.url, "round", voidee.pk, "Void and refund every guess…")
    expect(page.locator(f'[data-round="{voidee.pk}"]')).to_contain_text("1 guess charge refunded, 1 key back to 1 player")
    shot(page, "admin-confirm-void")
    assert Round.objects.get(pk=voidee.pk).status == "open"  # asking changed nothing
    page.get_by_role("button", name="Yes, void this round").click()
    expect(page.get_by_text(f"{voidee.pk}: voided, 1 guess charge refunded.")).to_be_visible()
    shot(page, "admin-voided")

    run_action(page, live.url, "round", settlee.pk, "Settle now (through the settle queue)…")
    expect(page.locator(f'[data-round="{settlee.pk}"]')).to_contain_text("The round closes now")
    shot(page, "admin-confirm-settle")
    page.get_by_role("button", name="Yes, settle this round now").click()
    expect(page.get_by_text(f"{settlee.pk}: settlement enqueued")).to_be_visible()
    wait_for(lambda: Round.objects.get(pk=settlee.pk).status == "settled", timeout=30, what="settlement")

    q = get_queue("browser.admin")
    jid, _ = q.enqueue(b'{"hello": "world"}')
    job = q.claim(lease_ms=60_000)
    assert q.retry(job.id, job.attempts, delay_ms=0, max_attempts=1, error="boom") == "dead"
    page.goto(f"{live.url}/admin/queues/browser.admin/")
    page.get_by_role("button", name=f"Requeue {jid}").click()
    expect(page.get_by_text("goes back to the queue with a fresh set of attempts")).to_be_visible()
    shot(page, "admin-confirm-requeue")
    assert q.job(jid)["state"] == "dead"
    page.get_by_role("button", name="Yes, requeue the job").click()
    expect(page.get_by_text(f"Job {jid} requeued")).to_be_visible()
    assert q.job(jid)["state"] == "pending"

    page.goto(f"{live.url}/admin/games/operatoraction/")
    expect(page.get_by_role("cell", name=re.compile("Requeued the dead job"))).to_be_visible()
    shot(page, "admin-operator-actions")


def test_a_support_user_reads_but_is_refused_every_write(desktop, live, make_round, django_user_model, shot):
    sync_groups()  # a transactional test's flush empties the groups the migration made
    user = with_password(django_user_model.objects.create_user("helpdesk", is_staff=True))
    user.groups.add(Group.objects.get(name="Support"))
    rnd = make_round(title="Support view")
    page = desktop.new_page()
    admin_login(page, live.url, "helpdesk")
    page.goto(f"{live.url}/admin/games/round/")
    expect(page.get_by_role("link", name=rnd.pk)).to_be_visible()
    expect(page.locator('select[name="action"]')).to_have_count(0)  # no action to offer
    shot(page, "admin-support-rounds")
    page.goto(f"{live.url}/admin/games/round/?secret__0=x")
    expect(page.get_by_role("alert")).to_contain_text("secret until its round is revealed")
    shot(page, "admin-secret-filter-refused")
    page.goto(f"{live.url}/admin/queues/cm/")
    expect(page.get_by_role("button", name="Pause queue")).to_have_count(0)
    # Posting anyway, with a valid CSRF token, is refused by the permission check.
    token = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    answer = page.request.post(f"{live.url}/admin/queues/cm/pause/",
                               headers={"X-CSRFToken": token, "Referer": f"{live.url}/admin/queues/cm/"})
    assert answer.status == 403 and "echomq.operate_queues" in answer.text()
    assert get_queue("cm").counts()["paused"] is False
