"""Real browser, real server and workers (issue 23): a visitor watches a
round move and end without reloading, and the phone keeps the balances in
the header while the lobby keeps each prize on one line."""
import pytest
from playwright.sync_api import expect

from games import settlement
from games.guesses import submit

from .test_flows import SECRET, log_in, usable_password
from .test_play_live import LIVE, no_sideways_scroll, scored

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_visitor_watches_a_round_move_and_end_without_a_reload(desktop, phone, live, make_player, make_round,
                                                                 shot):
    rival = make_player("rival", keys=10)
    rnd = make_round(secret=SECRET, title="Watched classic", prize_pool=70)
    page = desktop.new_page()
    page.goto(f"{live.url}/watch/{rnd.pk}/")  # no log-in
    box = page.locator("[data-watch]")
    expect(box).to_contain_text("No scores yet.")
    page.evaluate("window.sameDocument = true")
    scored(submit(rival, rnd, SECRET[:5] + ["🐼"]))
    expect(box.get_by_role("row", name="rival")).to_contain_text("500/600", timeout=LIVE)
    expect(box).to_contain_text("1 guess per minute")
    shot(page, "watch-live")
    mobile = phone.new_page()
    mobile.goto(f"{live.url}/watch/{rnd.pk}/")
    expect(mobile.get_by_role("row", name="rival")).to_be_visible()
    no_sideways_scroll(mobile)
    shot(mobile, "phone-watch")
    settlement.settle_round(rnd.pk, force=True)
    expect(box.get_by_role("heading", name="The secret")).to_be_visible(timeout=LIVE)
    expect(box).to_contain_text("💎 70")
    assert page.evaluate("window.sameDocument === true")
    shot(page, "watch-settled")


def test_the_phone_keeps_the_balances_and_the_lobby_a_prize_on_one_line(desktop, phone, live, make_player,
                                                                        make_round, shot):
    me = usable_password(make_player("pia", keys=12, clips=3).user)
    make_round(secret=SECRET, title="Big pool", prize_pool=100_000)
    mobile = phone.new_page()
    log_in(mobile, live.url, me.username)
    expect(mobile.locator("header .bal")).to_be_visible()
    expect(mobile.locator("header .bal")).to_contain_text("🔑12")
    no_sideways_scroll(mobile)
    shot(mobile, "phone-lobby-balances")
    page = desktop.new_page()
    log_in(page, live.url, me.username)
    cell = page.get_by_role("row", name="Big pool").locator('td[data-label="Prize pool"]')
    expect(cell).to_have_text("💎\u00a0100000")
    lines = cell.evaluate("td => { const r = document.createRange(); r.selectNodeContents(td); "
                          "return new Set([...r.getClientRects()].map(b => Math.round(b.top))).size; }")
    assert lines == 1
