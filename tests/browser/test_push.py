"""Real browser, real servers and workers (issue 23): pages updated by push.

A second player's score appears on the first player's round page without a
reload and without a single poll (the page's polls stand down while its
stream is open); the watch page and the header badge move the same way; and
with the stream unreachable the same page falls back to polling and still
shows the score. Every wait is an event (Playwright's expect)."""
import pytest
from playwright.sync_api import expect

from games import settlement
from games.guesses import submit

from .test_flows import GUESS, SECRET, log_in, tap, usable_password
from .test_play_live import LIVE, scored

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
PUSHED = 10_000  # ms: a push arrives within a second; the ceiling is for a loaded machine, not the design


def polls(page, path: str) -> list[str]:
    """Requests the page makes to ``path`` from now on."""
    seen: list[str] = []
    page.on("request", lambda request: seen.append(request.url) if path in request.url else None)
    return seen


def streamed(page) -> None:
    """Wait until the page's stream is open (play.js marks <main>)."""
    expect(page.locator("main[data-pushed='1']")).to_be_attached()


def test_a_rivals_score_reaches_my_round_page_by_push(desktop, live, make_player, make_round, shot):
    me = usable_password(make_player("lena", keys=10).user)
    rival = make_player("rival", keys=10)
    rnd = make_round(secret=SECRET, title="Pushed classic", prize_pool=50)
    page = desktop.new_page()
    log_in(page, live.url, me.username)
    page.get_by_role("link", name="Pushed classic").click()
    streamed(page)
    asked = polls(page, "my-guesses.json")
    page.evaluate("window.sameDocument = true")
    scored(submit(rival, rnd, SECRET[:5] + ["🐼"]))
    panel = page.locator("[data-live]")
    expect(panel.locator("[data-live-board]")).to_contain_text("rival", timeout=PUSHED)
    expect(panel.locator("[data-live-players]")).to_have_text("1")
    expect(panel).to_contain_text("1 guess in the last minute")
    # My own guess: posted, the page comes back with it queued, its score is pushed.
    tap(page, GUESS)
    page.get_by_role("button", name="Guess for 1 key").click()
    expect(page.locator("[data-guess]").first).to_contain_text("/600", timeout=PUSHED)
    expect(panel.locator("[data-live-board] li.me")).to_contain_text("lena (you)", timeout=PUSHED)
    page.evaluate("window.sameDocument = true")
    scored(submit(rival, rnd, SECRET[:4] + ["🐼", "🐻"]))
    expect(panel).to_contain_text("3 guesses in the last minute", timeout=PUSHED)
    assert page.evaluate("window.sameDocument === true")
    assert asked == [], asked  # nothing polled: it all came by push
    shot(page, "round-pushed")

    # The leaderboard page: rows pushed.
    page.get_by_role("link", name="All standings").click()
    expect(page.get_by_role("row", name="lena (you)")).to_be_visible()
    streamed(page)
    page.evaluate("window.sameDocument = true")
    late = make_player("latecomer", keys=5)
    scored(submit(late, rnd, ["🐼", "🐻", "🐨", "🐯", "🦁", SECRET[5]]))
    expect(page.get_by_role("row", name="latecomer")).to_be_visible(timeout=PUSHED)
    assert page.evaluate("window.sameDocument === true")


def test_the_watch_page_and_the_badge_update_by_push(desktop, live, make_player, make_round, shot):
    mo = make_player("mo", keys=10)
    me = usable_password(mo.user)
    rival = make_player("rival", keys=10)
    rnd = make_round(secret=SECRET, title="Pushed watch", prize_pool=70)
    watcher = desktop.new_page()
    watcher.goto(f"{live.url}/watch/{rnd.pk}/")  # no log-in
    streamed(watcher)
    asked = polls(watcher, "live.json")
    box = watcher.locator("[data-watch]")
    expect(box).to_contain_text("No scores yet.")
    watcher.evaluate("window.sameDocument = true")
    scored(submit(rival, rnd, SECRET[:5] + ["🐼"]))
    expect(box.get_by_role("row", name="rival")).to_contain_text("500/600", timeout=PUSHED)
    assert asked == [], asked

    page = desktop.new_page()  # a player on their lobby: the round ends, the badge counts it
    log_in(page, live.url, me.username)
    streamed(page)
    scored(submit(mo, rnd, GUESS))
    expect(page.locator("[data-playing]")).to_have_text("2 playing", timeout=PUSHED)
    page.evaluate("window.sameDocument = true")
    settlement.request_settlement(rnd.pk, "admin")  # the notifier settles it, the task worker notifies
    expect(box.get_by_role("heading", name="The secret")).to_be_visible(timeout=PUSHED)
    expect(page.locator("[data-notes] [data-unread]")).to_have_text("1", timeout=PUSHED)
    assert page.evaluate("window.sameDocument === true") and watcher.evaluate("window.sameDocument === true")
    shot(page, "lobby-badge-pushed")


def test_without_the_stream_the_page_polls_as_before(desktop, live, make_player, make_round):
    me = usable_password(make_player("noa", keys=10).user)
    rival = make_player("rival", keys=10)
    rnd = make_round(secret=SECRET, title="Polled classic", prize_pool=50)
    page = desktop.new_page()
    page.route("**/live/**", lambda route: route.abort())  # the live process is unreachable
    asked = polls(page, "my-guesses.json")
    log_in(page, live.url, me.username)
    page.get_by_role("link", name="Polled classic").click()
    page.evaluate("window.sameDocument = true")
    scored(submit(rival, rnd, SECRET[:5] + ["🐼"]))
    expect(page.locator("[data-live] [data-live-board]")).to_contain_text("rival", timeout=LIVE)
    assert asked and page.evaluate("window.sameDocument === true")
