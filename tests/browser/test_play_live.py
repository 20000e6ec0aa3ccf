"""Real browser, real server and workers: a visitor's landing page, the
round page that explains itself, live updates of the board without a
reload, the duplicate-emoji warning, the post-round reveal with its share
card, and the profile -- on a desktop and on a phone. Every wait is on an
event (Playwright's expect, or wait_for on a condition)."""
import pytest
from playwright.sync_api import expect

from echomq.contrib.django import get_queue  # noqa: F401  (the live stack's Valkey is the test one)
from games import settlement
from games.guesses import submit
from games.models import Guess
from tests.games.procs import wait_for

from .test_flows import GUESS, SECRET, log_in, tap, usable_password

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
# Others' scores reach an open page within the poll's ETag bucket (10 s) plus
# one poll (3 s); the full leaderboard refreshes every 5 s. Waits are events
# with this ceiling, not sleeps.
LIVE = 30_000


def scored(guess):
    wait_for(lambda: Guess.objects.get(pk=guess.pk).status == "scored", timeout=30, what="the score worker")


def no_sideways_scroll(page, width=390):
    assert page.evaluate("document.documentElement.scrollWidth") <= width


def test_landing_page_for_a_visitor(desktop, phone, live, make_round, shot):
    make_round(secret=SECRET, title="Landing classic", prize_pool=80)
    make_round(kind="blind", secret=SECRET, title="Landing blind", prize_pool=300)
    page = desktop.new_page()
    page.goto(live.url + "/")
    expect(page.get_by_role("heading", name="Crack the six-emoji code")).to_be_visible()
    expect(page.get_by_role("heading", name="The rules in five lines")).to_be_visible()
    expect(page.get_by_role("heading", name="A sample board")).to_be_visible()
    expect(page.get_by_text("Top 5 share the pool (💎 300)")).to_be_visible()
    expect(page.get_by_role("link", name="Sign up and play")).to_be_visible()
    shot(page, "landing")
    page.get_by_role("link", name="Log in").first.click()
    expect(page.get_by_role("heading", name="Log in")).to_be_visible()
    page.goto(live.url + "/rules/")
    expect(page.get_by_role("heading", name="Classic rounds")).to_be_visible()
    shot(page, "rules")
    mobile = phone.new_page()
    mobile.goto(live.url + "/")
    expect(mobile.get_by_role("link", name="Sign up and play")).to_be_visible()
    no_sideways_scroll(mobile)
    shot(mobile, "phone-landing")


def test_round_page_explains_itself_and_updates_live(desktop, live, make_player, make_round, shot):
    me = usable_password(make_player("lena", keys=10).user)
    rival = make_player("rival", keys=10)
    rnd = make_round(secret=SECRET, title="Live classic", prize_pool=50)
    page = desktop.new_page()
    log_in(page, live.url, me.username)
    page.get_by_role("link", name="Live classic").click()
    explain = page.locator("details.explain")
    expect(explain).to_have_attribute("open", "")  # open until the first guess
    expect(explain).to_contain_text("Locks 🔒 are free")
    expect(explain).to_contain_text("How this round pays: Best total takes the pool (💎 50)")
    expect(page.get_by_role("button", name="Lock position 1")).to_have_attribute("title", "Lock this position (free): "
                                                                                 "your next guesses keep its emoji until you unlock it.")
    # The composer warns about a repeated emoji before anything is sent.
    tap(page, [GUESS[0], GUESS[0]])
    expect(page.locator("[data-dupes]")).to_contain_text("appears twice")
    shot(page, "round-duplicate-warning")
    page.get_by_role("button", name="Clear", exact=True).click()
    expect(page.locator("[data-dupes]")).to_be_hidden()
    shot(page, "round-explained")

    # Another player's guess reaches my board and the activity line without a reload.
    page.evaluate("window.sameDocument = true")
    g = submit(rival, rnd, SECRET[:5] + ["🐼"])
    scored(g)
    panel = page.locator("[data-live]")
    expect(panel.locator("[data-live-players]")).to_have_text("1", timeout=LIVE)
    expect(panel).to_contain_text("1 guess in the last minute", timeout=LIVE)
    expect(panel.locator("[data-live-board]")).to_contain_text("rival", timeout=LIVE)
    tap(page, GUESS)
    page.get_by_role("button", name="Guess for 1 key").click()
    expect(page.locator("[data-guess]").first).to_contain_text("/600")
    expect(panel.locator("[data-live-board] li.me")).to_contain_text("lena (you)", timeout=LIVE)
    page.evaluate("window.sameDocument = true")
    g2 = submit(rival, rnd, SECRET[:4] + ["🐼", "🐻"])
    scored(g2)
    expect(panel).to_contain_text("3 guesses in the last minute", timeout=LIVE)
    assert page.evaluate("window.sameDocument === true")
    shot(page, "round-live")

    # The full leaderboard refreshes in place too.
    page.get_by_role("link", name="All standings").click()
    expect(page.get_by_role("row", name="lena (you)")).to_be_visible()
    page.evaluate("window.sameDocument = true")
    late = make_player("latecomer", keys=5)
    scored(submit(late, rnd, ["🐼", "🐻", "🐨", "🐯", "🦁", "🐮"][:5] + [SECRET[5]]))
    expect(page.get_by_role("row", name="latecomer")).to_be_visible(timeout=LIVE)
    assert page.evaluate("window.sameDocument === true")
    shot(page, "leaderboard-live")


def test_after_the_round_reveal_share_card_and_profile(desktop, phone, live, make_player, make_round, shot):
    me = usable_password(make_player("sam", keys=10).user)
    other = make_player("tia", keys=10)
    rnd = make_round(secret=SECRET, title="Reveal classic", prize_pool=40)
    desktop.grant_permissions(["clipboard-read", "clipboard-write"], origin=live.url)
    page = desktop.new_page()
    log_in(page, live.url, me.username)
    page.get_by_role("link", name="Reveal classic").click()
    tap(page, GUESS)
    page.get_by_role("button", name="Guess for 1 key").click()
    expect(page.locator("[data-guess]").first).to_contain_text("/600")
    scored(submit(other, rnd, ["🐼"] + SECRET[1:]))  # 500: tia wins
    settlement.settle_round(rnd.pk, force=True)
    page.reload()
    expect(page.get_by_role("heading", name="The secret")).to_be_visible()
    expect(page.locator(".mark").first).to_be_visible()  # per-position feedback, revealed
    card = page.locator("[data-share-text]")
    expect(card).to_contain_text("1 guess · best")
    text = card.inner_text()
    assert not any(e in text for e in SECRET + GUESS)
    page.get_by_role("button", name="Copy").click()
    expect(page.locator("[data-copied]")).to_have_text("Copied.")
    assert page.evaluate("navigator.clipboard.readText()") == text
    shot(page, "round-reveal-share")

    page.get_by_role("link", name="Profile").click()
    expect(page.get_by_role("heading", name="Your profile")).to_be_visible()
    expect(page.locator('[data-stat="played"]')).to_have_text("1")
    expect(page.locator('[data-stat="wins"]')).to_have_text("0")
    expect(page.locator('[data-stat="streak"]')).to_have_text("1")
    shot(page, "profile")

    mobile = phone.new_page()
    log_in(mobile, live.url, me.username)
    mobile.goto(live.url + f"/rounds/{rnd.pk}/")
    expect(mobile.locator("[data-share-text]")).to_be_visible()
    no_sideways_scroll(mobile)
    shot(mobile, "phone-round-reveal")
    mobile.goto(live.url + "/me/")
    expect(mobile.locator('[data-stat="played"]')).to_have_text("1")
    no_sideways_scroll(mobile)
    shot(mobile, "phone-profile")
    mobile.goto(live.url + "/wallet/")
    no_sideways_scroll(mobile)
    shot(mobile, "phone-wallet-ledger")
