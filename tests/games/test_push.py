"""Live push (games.push), driven in-process: the ASGI application of the live
process on a real Valkey and the test database, guesses scored by the real
handler (their ``completed`` events written by the real scripts), the hub's
real reader thread. What each stream sends, and what it never sends: a
sealed total, another player's emojis, an open round's secret."""
from __future__ import annotations

import asyncio
import json
import re

import pytest
from django.core.management import call_command
from django.test import Client

from echomq.contrib import django as emq_django
from games import settlement, tasks
from games.guesses import submit
from games.push import asgi as live_asgi
from games.push import hub as hub_module
from games.workers import score_guess, settle

from .conftest import drain

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = ["🐶", "🐱", "🐭", "🐹", "🐰", "🦊"]
RIVAL = ["🐻", "🐼", "🐭", "🐹", "🐰", "🦊"]   # 400
MINE = ["🐶", "🐱", "🐭", "🐹", "🐯", "🦁"]    # 400
WAIT_S = 15


class Response:
    """One request to the live ASGI application, read as Server-Sent Events."""

    def __init__(self, path: str, cookie: str = "", origin: str = "", method: str = "GET"):
        self.inbox: asyncio.Queue = asyncio.Queue()
        self.outbox: asyncio.Queue = asyncio.Queue()
        headers = [(b"host", b"testserver")]
        if cookie:
            headers.append((b"cookie", cookie.encode()))
        if origin:
            headers.append((b"origin", origin.encode()))
        self.scope = {"type": "http", "method": method, "path": path, "headers": headers, "query_string": b""}
        self.buffer = b""
        self.events: list[tuple[str, dict]] = []
        self.raw = b""

    async def start(self) -> "Response":
        await self.inbox.put({"type": "http.request", "body": b"", "more_body": False})
        self.task = asyncio.create_task(live_asgi.application(self.scope, self.inbox.get, self.outbox.put))
        start = await asyncio.wait_for(self.outbox.get(), WAIT_S)
        self.status = start["status"]
        self.headers = {k.decode(): v.decode() for k, v in start["headers"]}
        if self.status != 200:
            body = await asyncio.wait_for(self.outbox.get(), WAIT_S)
            self.body = json.loads(body["body"])
        return self

    async def next(self, name: str, where=lambda data: True) -> dict:
        """The next event called ``name`` whose data satisfies ``where``."""
        async with asyncio.timeout(WAIT_S):
            while True:
                while b"\n\n" in self.buffer:
                    block, self.buffer = self.buffer.split(b"\n\n", 1)
                    fields = dict(line.split(": ", 1) for line in block.decode().split("\n") if ": " in line)
                    if "event" in fields:
                        data = json.loads(fields["data"])
                        self.events.append((fields["event"], data))
                        if fields["event"] == name and where(data):
                            return data
                message = await self.outbox.get()
                self.raw += message.get("body", b"")
                self.buffer += message.get("body", b"")
                if not message.get("more_body"):
                    raise AssertionError(f"the stream ended before a {name!r}: {self.events}")

    async def close(self) -> None:
        await self.inbox.put({"type": "http.disconnect"})
        await asyncio.wait_for(self.task, WAIT_S)


@pytest.fixture
def hub():
    hub_module.reset_hub()
    yield
    live = hub_module._hub
    if live is not None and live.loop is not None and not live.loop.is_closed():
        live.loop.run_until_complete(live.stop())
    hub_module.reset_hub()


def run(scenario):
    """Run a scenario on a fresh loop that stays open for the hub's stop."""
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(scenario())
    finally:  # the hub stops even when the scenario failed: its reader must not outlive the test
        live = hub_module._hub
        try:
            if live is not None:
                loop.run_until_complete(live.stop())
        finally:
            hub_module.reset_hub()
            loop.close()
    assert live is None or live._reader is None or not live._reader.is_alive()


def cookie_of(player) -> str:
    c = Client()
    c.force_login(player.user)
    return f"sessionid={c.cookies['sessionid'].value}"


async def scored(player, rnd, emojis):
    """Submit and score a guess in worker threads (the ORM is synchronous)."""
    def work():
        g = submit(player, rnd, emojis)
        drain("cm", score_guess)
        return g
    return await asyncio.to_thread(work)


def no_secret(blob: bytes, secret=SECRET) -> None:
    text = blob.decode()
    for form in (" ".join(secret), "".join(secret), json.dumps(secret, ensure_ascii=False)):
        assert form not in text
    for emoji in secret:  # no guess of anyone's is ever sent to a watcher, and a view holds no keyboard
        assert emoji not in text, emoji


def test_the_round_page_gets_my_score_and_my_rivals_board_and_never_their_emojis(make_player, make_round, hub):
    me, rival = make_player("lena"), make_player("rival")
    rnd = make_round(secret=SECRET, title="Pushed classic")
    cookie = cookie_of(me)

    async def scenario():
        page = await Response(f"/live/rounds/{rnd.pk}/", cookie=cookie).start()
        assert page.status == 200 and page.headers["content-type"].startswith("text/event-stream")
        first = await page.next("mine")
        assert first["round"] == {"id": rnd.pk, "status": "open", "open": True, "sealed": False}
        assert first["guesses"] == [] and first["live"]["players"] == 0
        await scored(rival, rnd, RIVAL)
        panel = await page.next("panel", lambda d: d["live"]["players"] == 1)
        assert panel["live"]["top"] == [{"rank": 1, "name": "rival", "total": 400, "me": False}]
        assert "guesses" not in panel  # a rival's score brings the board, not anybody's guesses
        g = await scored(me, rnd, MINE)
        mine = await page.next("mine", lambda d: d["guesses"] and d["guesses"][0]["status"] == "scored")
        assert mine["guesses"][0] == {**mine["guesses"][0], "id": g.id, "emojis": MINE, "total": 400}
        assert mine["best"] == 400
        await page.close()
        emojis = page.raw.decode()
        assert " ".join(RIVAL) not in emojis and json.dumps(RIVAL, ensure_ascii=False) not in emojis
        assert "🐻" not in emojis and "🐼" not in emojis  # the rival's own emojis (not in my guess)
        assert " ".join(SECRET) not in emojis and json.dumps(SECRET, ensure_ascii=False) not in emojis

    run(scenario)


def test_a_sealed_blind_round_streams_no_total_and_no_board(make_player, make_round, hub):
    me, rival = make_player("bo"), make_player("cy")
    rnd = make_round(kind="blind", secret=SECRET, title="Pushed blind")
    cookie = cookie_of(me)

    async def scenario():
        page = await Response(f"/live/rounds/{rnd.pk}/", cookie=cookie).start()
        board = await Response(f"/live/rounds/{rnd.pk}/board/", cookie=cookie).start()
        watch = await Response(f"/live/watch/{rnd.pk}/").start()
        await page.next("mine")
        assert (await board.next("board"))["rows"] is None
        await watch.next("watch")
        await scored(rival, rnd, RIVAL)
        await scored(me, rnd, MINE)
        mine = await page.next("mine", lambda d: d["guesses"] and d["guesses"][0]["status"] == "sealed")
        assert mine["guesses"][0]["total"] is None and mine["guesses"][0]["percentage"] is None
        assert mine["best"] is None and mine["live"]["top"] == [] and mine["live"]["rank"] is None
        panel = await page.next("panel", lambda d: d["live"]["players"] == 2)
        assert panel["live"]["top"] == [] and panel["live"]["around"] == [] and panel["live"]["rank"] is None
        seen = await watch.next("watch", lambda d: d["players"] == 2)
        assert seen["sealed"] and seen["board"] == [] and seen["reveal"] is None
        for stream in (page, board, watch):
            await stream.close()
            # no total, in any form: 400 as a number of its own (not inside a
            # longer run of digits or letters: the "at" time in ms, a version hash)
            assert not re.search(rb"(?<![0-9A-Za-z])400(?![0-9A-Za-z])", stream.raw.replace(b"http", b"")), \
                stream.events
        no_secret(watch.raw)
        no_secret(board.raw)

    run(scenario)


def test_the_watch_page_is_pushed_without_a_log_in_and_shows_the_secret_only_after_settlement(
        make_player, make_round, hub):
    rival = make_player("rival")
    rnd = make_round(secret=SECRET, title="Watched", prize_pool=70)

    async def scenario():
        watch = await Response(f"/live/watch/{rnd.pk}/").start()
        assert watch.status == 200
        first = await watch.next("watch")
        assert first["board"] == [] and "html" in first and first["round"]["id"] == rnd.pk
        await scored(rival, rnd, RIVAL)
        seen = await watch.next("watch", lambda d: d["board"])
        assert seen["board"] == [{"place": 1, "name": "rival", "total": 400}] and seen["reveal"] is None
        no_secret(watch.raw)
        await asyncio.to_thread(lambda: (settlement.request_settlement(rnd.pk, "admin"),
                                         drain(settlement.QUEUE, settle)))
        done = await watch.next("watch", lambda d: d["reveal"] is not None)
        assert done["round"]["status"] == "settled"
        assert [e for e, _ in done["reveal"]["secret"]] == SECRET
        await watch.close()

    run(scenario)


def test_the_header_badge_and_the_lobby_are_pushed(make_player, make_round, hub):
    me, rival = make_player("nia"), make_player("rival")
    rnd = make_round(secret=SECRET, title="Lobby round")
    cookie = cookie_of(me)

    async def scenario():
        lobby = await Response("/live/lobby/", cookie=cookie).start()
        me_page = await Response("/live/me/", cookie=cookie).start()
        assert (await lobby.next("lobby"))["rounds"] == [rnd.pk]
        await scored(rival, rnd, RIVAL)
        counts = await lobby.next("lobby", lambda d: d["playing"].get(rnd.pk) == 1)
        assert counts["rounds"] == [rnd.pk]
        await scored(me, rnd, MINE)

        def settle_and_notify():
            settlement.request_settlement(rnd.pk, "admin")
            drain(settlement.QUEUE, settle)
            call_command("run_tasks", "--burst", "--queue", tasks.QUEUE)
        await asyncio.to_thread(settle_and_notify)
        assert (await me_page.next("unread", lambda d: d["unread"] == 1))
        assert (await lobby.next("unread", lambda d: d["unread"] == 1))
        assert (await lobby.next("lobby", lambda d: d["rounds"] == []))["playing"] == {}
        await lobby.close()
        await me_page.close()

    run(scenario)


@pytest.mark.parametrize("path", [
    "/live/", "/live/rounds/", "/live/rounds/nope/", "/live/watch/RND0000000000/", "/live/watch/🐶/",
    "/live/rounds/GES0KHTOWnGLuC/", "/live/watch/" + "R" * 300 + "/", "/live/lobby", "/live/me/x/",
    "/live/rounds/%00/", "/live/../admin/", "/elsewhere/",
])
def test_unknown_streams_are_404(path, hub):
    async def scenario():
        resp = await Response(path).start()
        assert resp.status == 404 and resp.body["error"]

    run(scenario)


def test_refusals_say_why_and_never_500(make_player, make_round, hub, settings):
    me = make_player("ola")
    rnd = make_round(secret=SECRET)
    cookie = cookie_of(me)
    settings.LIVE_ORIGINS = ["http://127.0.0.1:8000"]

    async def scenario():
        assert (await Response(f"/live/rounds/{rnd.pk}/", method="POST", cookie=cookie).start()).status == 405
        for path in (f"/live/rounds/{rnd.pk}/", f"/live/rounds/{rnd.pk}/board/", "/live/lobby/", "/live/me/"):
            for bad in ("", "sessionid=", "sessionid=" + "x" * 5000, "sessionid=\x00\x01", "sessionid=a b;c",
                        "sessionid=" + cookie.split("=")[1][::-1], "=;=;sessionid", "sessionid=🐶"):
                refused = await Response(path, cookie=bad).start()
                assert refused.status == 401 and refused.body == {"error": "Log in first."}, (path, bad)
        foreign = await Response(f"/live/watch/{rnd.pk}/", origin="https://evil.example").start()
        assert foreign.status == 403
        allowed = await Response(f"/live/watch/{rnd.pk}/", origin="http://127.0.0.1:8000").start()
        assert allowed.status == 200
        assert allowed.headers["access-control-allow-origin"] == "http://127.0.0.1:8000"
        assert allowed.headers["access-control-allow-credentials"] == "true"
        await allowed.next("watch")
        await allowed.close()
        gone = await Response("/live/rounds/RND0KHTOWnGLuC/", cookie=cookie).start()
        assert gone.status in (404,) and gone.body["error"]

    run(scenario)


def test_streams_are_refused_while_the_events_cannot_be_read(make_round, hub):
    rnd = make_round(secret=SECRET)
    emq_django.reset_client("redis://127.0.0.1:9/0")  # nothing listens there

    async def scenario():
        live = hub_module.get_hub()
        await live.start()
        await asyncio.wait_for(live.wait_state("down"), WAIT_S)
        refused = await Response(f"/live/watch/{rnd.pk}/").start()
        assert refused.status == 503 and refused.headers["retry-after"] == "30"

    run(scenario)


def test_hostile_input_to_every_stream_is_a_4xx_and_changes_nothing(make_player, make_round, hub, valkey):
    """test_fuzz's hostile values, as ids, paths, cookies, origins and
    methods of the live URLs (they are no Django routes, so its route walk
    does not reach them): every answer a 4xx or a stream, never a 500, and
    no state key in Valkey written."""
    from tests.pages.test_fuzz import BAD_IDS, HOSTILE, STATE_KEYS

    me = make_player("fuzzy")
    rnd = make_round(secret=SECRET)
    cookie = cookie_of(me)
    before = sorted(k for k in valkey.keys("*") if k.startswith(STATE_KEYS))
    values = [v for v in HOSTILE + BAD_IDS if "\r" not in v and "\n" not in v]

    async def scenario():
        for value in values:
            for path in (f"/live/rounds/{value}/", f"/live/rounds/{value}/board/", f"/live/watch/{value}/",
                         f"/live/{value}/", f"/live/lobby/{value}"):
                for who in ("", cookie):
                    resp = await Response(path, cookie=who).start()
                    assert 400 <= resp.status < 500, (path, resp.status)
            for kind in (f"rounds/{rnd.pk}/", "me/"):
                resp = await Response(f"/live/{kind}", cookie="sessionid=" + value).start()
                assert resp.status == 401, (value, resp.status)
            resp = await Response(f"/live/watch/{rnd.pk}/", origin=value).start()
            assert resp.status in (200, 403), (value, resp.status)
            if resp.status == 200:
                await resp.close()
        for method in ("POST", "PUT", "DELETE", "OPTIONS", "PATCH", "BREW"):
            assert (await Response(f"/live/watch/{rnd.pk}/", method=method).start()).status == 405

    run(scenario)
    assert sorted(k for k in valkey.keys("*") if k.startswith(STATE_KEYS)) == before
