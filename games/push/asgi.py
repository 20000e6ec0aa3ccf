"""The live streams as an ASGI application (``codemojex_site.asgi`` serves it).

    GET /live/rounds/<RND>/        a player's round page: ``mine`` (my guesses, the poll's JSON) at once
                                   and when one of mine is scored; ``panel`` when anyone scores
    GET /live/rounds/<RND>/board/  the leaderboard page: ``board`` (its rows)
    GET /live/watch/<RND>/         the public watch page (no log-in): ``watch`` (the watch poll's JSON)
    GET /live/lobby/               the lobby: ``lobby`` (open rounds, players with a score in each)
    GET /live/me/                  any other page of a player: only ``unread``

Every signed-in stream also gets ``unread`` (the header's badge) when a
notification arrives. Each answer is ``text/event-stream``: the state at
once, then each change, a comment line every 15 s while nothing
happens (``hub.HEARTBEAT_S``); after ``LIFETIME_S`` the stream ends and the browser's
``EventSource`` opens it again (so a stream re-checks its session, and
streams spread over the processes as they come and go). A ``down`` event
tells the page to poll for a while instead.

A plain ASGI application rather than a Django view: under Django's ASGI
handler every request runs the (synchronous) middleware on a thread of its
own, kept for as long as the response lasts -- a thread per open stream --
and opens a database connection there. Here a stream is one coroutine and
a mailbox (``hub.Stream``); the session is checked with Django's own
session store and ``auth.get_user`` on the hub's worker threads.

Refusals are short JSON answers: 404 for an unknown path or round (an
``EventSource`` stops on any answer but 200, and the page polls), 405 for a
method other than GET or HEAD, 401 without a signed-in session where one is
needed, 403 for a page of another origin not in ``LIVE_ORIGINS``, 503 while
the events cannot be read.
"""
from __future__ import annotations

import asyncio
import json
import logging
import random
import re
from urllib.parse import urlsplit

from django.conf import settings

from echomq import ids

from . import PREFIX
from .hub import NotFound, Stream, get_hub
from .payloads import identity

log = logging.getLogger("games.push")

LIFETIME_S = 300.0   # then the browser opens the stream again (+ up to 10% so they do not all at once)
RETRY_MS = 2000      # how long an EventSource waits before it opens a dropped stream again
ROUTES = [
    (re.compile(r"rounds/([^/]{1,40})/"), "round"),
    (re.compile(r"rounds/([^/]{1,40})/board/"), "board"),
    (re.compile(r"watch/([^/]{1,40})/"), "watch"),
    (re.compile(r"lobby/"), "lobby"),
    (re.compile(r"me/"), "me"),
]
PUBLIC = {"watch"}
STREAM_HEADERS = [(b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-store"),
                  (b"x-accel-buffering", b"no"), (b"x-content-type-options", b"nosniff")]


def route(path: str) -> tuple[str, str | None] | None:
    """(stream kind, round id or None) for a path under ``/live/``, or None."""
    if not path.startswith(PREFIX):
        return None
    rest = path[len(PREFIX):]
    for pattern, kind in ROUTES:
        m = pattern.fullmatch(rest)
        if m:
            rid = m.group(1) if m.groups() else None
            if rid is not None and not (ids.is_valid(rid) and ids.brand_of(rid) == "RND"):
                return None
            return kind, rid
    return None


def _headers(scope) -> dict[str, str]:
    out = {}
    for name, value in scope.get("headers") or ():
        out[name.decode("latin-1").lower()] = value.decode("latin-1")
    return out


def cors(headers: dict[str, str]) -> list[tuple[bytes, bytes]] | None:
    """The CORS headers a stream answers with (none for the same origin);
    None: another origin, not one of ``LIVE_ORIGINS``."""
    origin = headers.get("origin")
    if not origin:
        return []
    if urlsplit(origin).netloc == headers.get("host"):
        return []
    if origin in getattr(settings, "LIVE_ORIGINS", ()):
        return [(b"access-control-allow-origin", origin.encode("latin-1")),
                (b"access-control-allow-credentials", b"true"), (b"vary", b"Origin")]
    return None


async def refuse(send, status: int, message: str, extra=()) -> None:
    body = json.dumps({"error": message}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"cache-control", b"no-store"),
                            (b"content-length", str(len(body)).encode()), *extra]})
    await send({"type": "http.response.body", "body": body})


async def _until_disconnect(receive, stream: Stream) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            stream.close()
            return


async def serve(scope, receive, send) -> None:
    """One HTTP request under ``/live/``."""
    found = route(scope.get("path", ""))
    if found is None:
        return await refuse(send, 404, "No such stream.")
    method = scope.get("method", "GET")
    if method not in ("GET", "HEAD"):
        return await refuse(send, 405, "Only GET opens a stream.", [(b"allow", b"GET, HEAD")])
    headers = _headers(scope)
    allow = cors(headers)
    if allow is None:
        return await refuse(send, 403, "This origin may not open the stream.")
    kind, rid = found
    hub = get_hub()
    await hub.start()
    if hub.state == "down":
        return await refuse(send, 503, "Live updates are unavailable; the page polls.",
                            [(b"retry-after", b"30"), *allow])
    player = None
    if kind not in PUBLIC:
        who = await hub.run(identity, headers.get("cookie", ""))
        if who is None:
            return await refuse(send, 401, "Log in first.", allow)
        player = who[0]
    stream = Stream(kind, rid, player, lifetime_s=LIFETIME_S * (1 + random.random() / 10))
    try:
        first = await hub.open(stream)
    except NotFound:
        return await refuse(send, 404, "That round does not exist.", allow)
    try:
        await send({"type": "http.response.start", "status": 200, "headers": STREAM_HEADERS + allow})
        if method == "HEAD":
            await send({"type": "http.response.body", "body": b""})
            return
        await send({"type": "http.response.body", "body": f"retry: {RETRY_MS}\n\n".encode() + first,
                    "more_body": True})
        await _pump(stream, receive, send)
    finally:
        hub.close(stream)


async def _pump(stream: Stream, receive, send) -> None:
    """Send the stream's frames as they come until the client goes or the
    hub closes it (down, shutting down, or its lifetime over; the hub also
    puts the heartbeat in the mailbox). Each wake-up is one send."""
    watcher = asyncio.ensure_future(_until_disconnect(receive, stream))
    try:
        while not stream.closed:
            await stream.wake.wait()
            data = stream.take()
            if data:
                await send({"type": "http.response.body", "body": data, "more_body": True})
        await send({"type": "http.response.body", "body": stream.take(), "more_body": False})
    finally:
        watcher.cancel()


async def lifespan(receive, send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await get_hub().start()
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await get_hub().stop()
            await send({"type": "lifespan.shutdown.complete"})
            return


async def application(scope, receive, send) -> None:
    """The streams, and the lifespan that starts and stops the hub."""
    if scope["type"] == "lifespan":
        return await lifespan(receive, send)
    if scope["type"] != "http":  # a websocket: refused
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1003})
        return
    await serve(scope, receive, send)
