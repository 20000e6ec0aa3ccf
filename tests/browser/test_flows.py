"""Real browser, real server, real workers: a player signs up, plays a
classic round to a scored guess, is refused a bad guess, locks a position,
cracks the round and finds the prize in the wallet; the same works with
JavaScript off and on a phone-sized screen; an admin requeues a dead job
from the queue dashboard. Every wait is on an event (Playwright's expect,
or ``wait_for`` on a condition), never a fixed sleep."""
import signal

import pytest
from django.contrib.auth.hashers import PBKDF2PasswordHasher, make_password
from playwright.sync_api import expect

from echomq.contrib.django import get_queue
from games import engine
from games.models import Notification
from games.views.common import emoji_name
from tests.games.procs import wait_for

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PW = "correct-horse-battery-9"
SECRET = ["🦊", "🐶", "🐰", "🐱", "🐹", "🐭"]
GUESS = ["🐶", "🐱", "🐭", "🐹", "🐰", "🦊"]
TOTAL = engine.score(SECRET, GUESS).total


def usable_password(user):
    """The test process hashes with MD5 for speed; the server only knows the
    default hashers, so give the accounts it logs in a PBKDF2 hash."""
    user.password = make_password(PW, hasher=PBKDF2PasswordHasher())
    user.save(update_fields=["password"])
    return user


def tap(page, emojis):
    for e in emojis:
        page.get_by_role("button", name=emoji_name(e), exact=True).click()


def slot(page, i):
    return page.locator("[data-slot-view]").nth(i)


def log_in(page, url, username, password=PW, shot=None, name="login"):
    page.goto(url + "/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    if shot:
        shot(page, name)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Open rounds")).to_be_visible()


def test_sign_up_play_lock_and_crack_a_classic_round(desktop, live, make_round, shot):
    make_round(secret=SECRET, title="Browser classic", prize_pool=90)
    page = desktop.new_page()
    page.goto(live.url + "/signup/")
    page.get_by_label("Username").fill("robin")
    page.get_by_label("Password", exact=True).fill(PW)
    page.get_by_label("Password confirmation").fill(PW)
    shot(page, "signup")
    page.get_by_role("button", name="Create account").click()
    expect(page.get_by_text("Welcome!")).to_be_visible()
    expect(page.get_by_role("link", name="Browser classic")).to_be_visible()
    shot(page, "lobby")
    page.get_by_role("link", name="Browser classic").click()
    expect(page.get_by_role("heading", name="Browser classic")).to_be_visible()
    expect(page.get_by_text("You have 50 keys")).to_be_visible()

    # A bad guess (five emojis) is refused in words with a 400, and costs nothing.
    tap(page, GUESS[:5])
    expect(slot(page, 4)).to_have_text(GUESS[4])
    with page.expect_response(lambda r: r.url.endswith("/guess/")) as answer:
        page.get_by_role("button", name="Guess for 1 key").click()
    assert answer.value.status == 400
    expect(page.get_by_role("alert")).to_contain_text("A guess is exactly 6 emojis; this one has 5.")
    expect(page.get_by_text("You have 50 keys")).to_be_visible()
    shot(page, "round-error")

    # Six emojis, submitted while the score worker is paused: listed as queued,
    # then scored in place by the poll (the document is never reloaded).
    tap(page, GUESS[5:])
    live.score.popen.send_signal(signal.SIGSTOP)
    try:
        page.get_by_role("button", name="Guess for 1 key").click()
        row = page.locator("[data-guess]").first
        expect(row).to_contain_text("queued")
        expect(page.get_by_text("You have 49 keys")).to_be_visible()
        shot(page, "round-queued")
        page.evaluate("window.sameDocument = true")
    finally:
        live.score.popen.send_signal(signal.SIGCONT)
    expect(row).to_contain_text(f"{TOTAL}/600 · {round(TOTAL / 6)}%")
    assert page.evaluate("window.sameDocument === true")
    shot(page, "round-scored")

    # Lock position 1: it survives Clear, and the next tap goes to position 2.
    page.get_by_role("button", name="Lock position 1").click()
    expect(page.get_by_role("button", name="Unlock position 1")).to_have_attribute("aria-pressed", "true")
    expect(page.get_by_text(f"Position 1 is locked to {GUESS[0]}.")).to_be_visible()
    page.get_by_role("button", name="Clear", exact=True).click()
    expect(slot(page, 0)).to_have_text(GUESS[0])
    expect(slot(page, 1)).to_have_text("·")
    tap(page, ["🐼"])
    expect(slot(page, 1)).to_have_text("🐼")
    shot(page, "round-locked")
    page.get_by_role("button", name="Unlock position 1").click()
    expect(page.get_by_role("button", name="Lock position 1")).to_have_attribute("aria-pressed", "false")

    # Crack it: the round settles and the page shows the secret and the prize.
    page.get_by_role("button", name="Clear", exact=True).click()
    tap(page, SECRET)
    page.get_by_role("button", name="Guess for 1 key").click()
    expect(page.get_by_role("heading", name="The secret")).to_be_visible(timeout=30_000)
    expect(page.get_by_text("won 💎 90")).to_be_visible()
    shot(page, "round-settled")
    page.get_by_role("link", name="Leaderboard").click()
    expect(page.get_by_role("row", name="robin (you)")).to_contain_text("600/600")
    shot(page, "leaderboard")

    page.get_by_role("link", name="Wallet").click()
    expect(page.locator('[data-balance="diamonds"]')).to_have_text("90")
    expect(page.get_by_role("cell", name="prize")).to_be_visible()
    shot(page, "wallet")
    wait_for(lambda: Notification.objects.filter(player__user__username="robin").exists(), timeout=30,
             what="the settled notification")
    page.reload()
    expect(page.locator("[data-unread]")).to_have_text("1")
    page.get_by_role("link", name="Notifications, 1 unread").click()
    expect(page.get_by_text("you won 90 diamonds with 600/600")).to_be_visible()
    shot(page, "notifications")
    page.get_by_role("button", name="Mark all as read").click()
    expect(page.get_by_role("link", name="Notifications, 0 unread")).to_be_visible()


def test_playing_with_javascript_off(browser, live, make_player, make_round, shot):
    usable_password(make_player("nojs", keys=5).user)
    make_round(secret=SECRET, title="Plain forms")
    context = browser.new_context(java_script_enabled=False, viewport={"width": 1280, "height": 900})
    try:
        page = context.new_page()
        log_in(page, live.url, "nojs", shot=shot)
        page.get_by_role("link", name="Plain forms").click()
        tap(page, GUESS)  # each tap is a form post and a new page
        expect(slot(page, 5)).to_have_text(GUESS[5])
        page.get_by_role("button", name="Lock position 3").click()
        expect(page.get_by_role("button", name="Unlock position 3")).to_be_visible()
        page.get_by_role("button", name="Backspace").click()
        expect(slot(page, 5)).to_have_text("·")
        tap(page, GUESS[5:])
        page.get_by_role("button", name="Guess for 1 key").click()
        expect(page.get_by_text("is in, for 1 key.")).to_be_visible()

        def scored():
            page.reload()
            return "/600" in page.locator("[data-guess]").first.inner_text()

        wait_for(scored, timeout=30, every=0.3, what="the score after a reload")
        expect(page.locator("[data-guess]").first).to_contain_text(f"{TOTAL}/600")
        shot(page, "round-no-javascript")
    finally:
        context.close()


def test_pages_on_a_phone(phone, live, make_player, make_round, shot):
    usable_password(make_player("pip", keys=8, clips=2).user)
    make_round(secret=SECRET, title="Pocket classic", prize_pool=40)
    make_round(kind="blind", secret=SECRET, title="Pocket blind", prize_pool=200, guess_price=2)
    page = phone.new_page()
    page.goto(live.url + "/signup/")
    shot(page, "phone-signup")
    log_in(page, live.url, "pip", shot=shot, name="phone-login")
    shot(page, "phone-lobby")
    page.get_by_role("link", name="Pocket classic").click()
    tap(page, GUESS)
    page.get_by_role("button", name="Guess for 1 key").click()
    expect(page.locator("[data-guess]").first).to_contain_text("/600")
    page.get_by_role("button", name="Lock position 2").click()
    expect(page.get_by_role("button", name="Unlock position 2")).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= 390  # nothing wider than the screen
    shot(page, "phone-round")
    page.get_by_role("link", name="Leaderboard").click()
    expect(page.get_by_role("row", name="pip (you)")).to_be_visible()
    shot(page, "phone-leaderboard")
    page.goto(live.url + "/")
    page.get_by_role("link", name="Pocket blind").click()
    tap(page, GUESS)
    page.get_by_role("button", name="Guess for 2 keys").click()
    expect(page.locator("[data-guess]").first).to_contain_text("sealed until the reveal")
    expect(page.get_by_text("Commitment")).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    shot(page, "phone-round-blind")
    page.goto(live.url + "/wallet/")
    expect(page.locator('[data-balance="keys"]')).to_have_text("5")
    shot(page, "phone-wallet")
    page.goto(live.url + "/notifications/")
    shot(page, "phone-notifications")
    answer = page.goto(live.url + "/rounds/RND00000000000/")
    assert answer.status == 404
    expect(page.get_by_role("heading", name="Not found")).to_be_visible()
    shot(page, "phone-404")


def test_admin_sees_the_queue_dashboard_and_requeues_a_dead_job(desktop, live, make_round, shot,
                                                                 django_user_model):
    usable_password(django_user_model.objects.create_superuser("root"))
    rnd = make_round(title="Admin view")
    q = get_queue("browser.test")
    jid, _ = q.enqueue(b'{"hello": "world"}')
    job = q.claim(lease_ms=60_000)
    assert job.id == jid
    assert q.retry(job.id, job.attempts, delay_ms=0, max_attempts=1, error="boom: a test failure") == "dead"

    page = desktop.new_page()
    page.goto(live.url + "/admin/queues/")
    page.get_by_label("Username").fill("root")
    page.get_by_label("Password").fill(PW)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("link", name="browser.test", exact=True)).to_be_visible()
    shot(page, "admin-queues")
    page.get_by_role("link", name="browser.test", exact=True).click()
    expect(page.get_by_text("boom: a test failure").first).to_be_visible()
    shot(page, "admin-queue-dead")
    page.get_by_role("button", name=f"Requeue {jid}").click()
    page.get_by_role("button", name="Yes, requeue the job").click()  # the confirmation page
    expect(page.get_by_text(f"Job {jid} requeued")).to_be_visible()
    assert q.job(jid)["state"] == "pending"
    shot(page, "admin-queue-requeued")

    page.goto(live.url + "/admin/games/round/")
    expect(page.get_by_role("link", name=rnd.pk)).to_be_visible()
    shot(page, "admin-rounds")
    page.goto(live.url + "/admin/games/round/add/")
    expect(page.get_by_label("Keyboard size")).to_be_visible()
    shot(page, "admin-round-add")
    page.goto(live.url + f"/admin/games/round/{rnd.pk}/leaderboard/")
    expect(page.get_by_role("button", name="Rebuild from the database")).to_be_visible()
    shot(page, "admin-leaderboard")
