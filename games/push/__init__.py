"""Live pages: what a scored guess, a closed round and a new notification
push to the pages open on them, as Server-Sent Events.

* :mod:`games.push.hub` -- one per live process: a single reader of the
  EchoMQ event streams (queues ``cm``, ``cm.settle``, ``cm.tasks``) that
  turns ``completed`` events into "this round changed", "this player's
  guess is scored", "this player has a new notification", and fans the
  result out in memory to every open stream;
* :mod:`games.push.payloads` -- what each stream may send, read from Valkey
  and the database when something changed (never from the events, which
  carry ids only): the watch page's view (``games.watch``), a player's own
  guesses and the round page's panel, the leaderboard, the lobby's counts,
  the unread count;
* :mod:`games.push.asgi` -- the ASGI application serving the streams under
  ``/live/`` (``codemojex_site.asgi``), one task per open stream.

The pages find their stream with :func:`stream_url`; without JavaScript, or
while the stream is unavailable, they poll as before (``static/games/play.js``).
"""
from __future__ import annotations

from django.conf import settings

PREFIX = "/live/"

# The streams a page may open: name -> (path after PREFIX, needs a round id)
PATHS = {
    "round": "rounds/{}/",     # a player's round page: my guesses, the panel, the round's status
    "board": "rounds/{}/board/",  # a round's leaderboard page
    "watch": "watch/{}/",      # the public watch page (no log-in)
    "lobby": "lobby/",         # the lobby: players per open round, rounds opening and closing
    "me": "me/",               # any other page of a player: the unread count in the header
}


def stream_url(name: str, round_id: str = "") -> str:
    """The address a page's script opens for its stream (empty: live push is
    off, the page polls). ``LIVE_URL`` is where browsers reach the live
    process: empty behind a proxy that routes ``/live/`` to it (the same
    origin as the pages), or its own origin (``./dev run``)."""
    if not getattr(settings, "LIVE_PUSH", True):
        return ""
    path = PATHS[name].format(round_id) if "{}" in PATHS[name] else PATHS[name]
    return getattr(settings, "LIVE_URL", "").rstrip("/") + PREFIX + path
