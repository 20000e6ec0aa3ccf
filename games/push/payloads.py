"""What each live stream may send: read fresh from Valkey and the database
when something changed, through the same functions the pages and their
polls answer with, so a push never shows more than a reload would.

* the watch page: ``games.watch.view`` (the one statement of what anyone may
  see) with its HTML fragment -- exactly the poll's JSON;
* a player's round page: their own guesses and the panel
  (``views.play.poll_answer``, the poll's JSON) when one of their guesses is
  scored; the panel alone (``live.snapshot_many``: counts only while a
  blind round is sealed) when a rival scores;
* the leaderboard page: ``views.play.board_rows`` without the "me" mark
  (the page marks its own row), nothing while a blind round is sealed;
* the lobby: the open rounds and how many players have a score in each;
* any signed-in page: the unread notification count.

Every function here is synchronous (the ORM, redis-py) and runs on the
hub's worker threads; ``fresh`` wraps each unit of work as Django wraps a
request, so a thread's database connection is reused and replaced when
broken or old.
"""
from __future__ import annotations

import functools
from importlib import import_module

from django.conf import settings
from django.contrib import auth
from django.db import close_old_connections
from django.db.models import Count
from django.http import HttpRequest, parse_cookie

from echomq import ids

from .. import live, watch
from ..models import Guess, Notification, Player, Round
from ..views.common import SESSION_PLAYER, open_rounds, round_and_my_guesses
from ..views.play import POLL_ROUND_FIELDS, board_rows, poll_answer, round_state, with_my_unscored

# What the round's state and its board read of a round: never the secret or nonce.
STATE_FIELDS = watch.FIELDS


def fresh(func):
    """Run ``func`` as a unit of work: the thread's database connection is
    checked before and after, as Django does around a request."""
    @functools.wraps(func)
    def inner(*args, **kwargs):
        close_old_connections()
        try:
            return func(*args, **kwargs)
        finally:
            close_old_connections()
    return inner


@fresh
def identity(cookie_header: str) -> tuple[str, str] | None:
    """(player id, username) of the signed-in session a stream's request
    carries, or None: no session, an expired or forged one, a user without
    a player yet. Django's own checks: the session store, then
    ``auth.get_user`` (the backend and the session's auth hash)."""
    cookies = parse_cookie(cookie_header or "")
    key = cookies.get(settings.SESSION_COOKIE_NAME)
    if not key or len(key) > 64:
        return None
    request = HttpRequest()
    request.COOKIES = cookies
    request.session = import_module(settings.SESSION_ENGINE).SessionStore(key)
    user = auth.get_user(request)
    if not user.is_authenticated:
        return None
    pair = request.session.get(SESSION_PLAYER)
    if isinstance(pair, list) and len(pair) == 2 and pair[0] == user.pk and isinstance(pair[1], str):
        player_id = pair[1]
    else:
        player_id = Player.objects.filter(user_id=user.pk).values_list("pk", flat=True).first()
    return (player_id, user.get_username()) if player_id else None


def settle_round_of(job_id: str) -> str | None:
    """The round a settle job closes (``settlement.settle_job_id``, inverted)."""
    try:
        brand, n = ids.parse(job_id)
    except (ValueError, TypeError):
        return None
    return ids.encode("RND", n) if brand == "JOB" else None


@fresh
def guesses_of(job_ids: list[str]) -> list[tuple[str, str]]:
    """(round id, player id) of the guesses the jobs scored: one indexed
    query (``Guess.job_id`` is unique) for a batch of events."""
    return sorted(set(Guess.objects.filter(job_id__in=job_ids).values_list("round_id", "player_id")))


def _round(round_id: str) -> Round | None:
    return Round.objects.only(*STATE_FIELDS).filter(pk=round_id).first()


def _watch(round_id: str, fresh_view: bool) -> dict | None:
    if fresh_view:
        watch.forget(round_id)
    data = watch.view(round_id)
    return None if data is None else {**data, "html": watch.fragment(data)}


def _board(rnd: Round) -> dict:
    state = round_state(rnd)
    if state["sealed"]:
        return {"round": state, "rows": None}
    rows, _ = board_rows(rnd)
    for row in rows:
        row.pop("me", None)
    return {"round": state, "rows": rows}


@fresh
def watch_view(round_id: str) -> dict | None:
    """The watch page's view and fragment (the poll's JSON); None: no such round."""
    return _watch(round_id, fresh_view=False)


@fresh
def board(round_id: str) -> dict | None:
    """The leaderboard's rows for everyone reading it; None: no such round."""
    rnd = _round(round_id)
    return None if rnd is None else _board(rnd)


@fresh
def round_update(round_id: str, *, watchers: bool, readers: bool, players: list[str]) -> dict | None:
    """Everything a change of the round sends, read once for all of this
    process's streams on it: the watch view (``watchers``), the board
    (``readers``) and each of ``players``' panel; None: no such round."""
    rnd = _round(round_id)
    if rnd is None:
        return None
    state = round_state(rnd)
    out = {"round": state, "watch": _watch(round_id, fresh_view=True) if watchers else None,
           "board": _board(rnd) if readers else None, "panels": {}}
    if players:
        out["panels"] = live.snapshot_many(round_id, players, board=not state["sealed"]) or {}
    return out


@fresh
def mine(round_id: str, player_id: str) -> dict | None:
    """A player's round page update (the poll's answer); None: no such round."""
    rnd, guesses = round_and_my_guesses(round_id, player_id, POLL_ROUND_FIELDS)
    if rnd is None:
        return None
    sealed = round_state(rnd)["sealed"]
    panels = live.snapshot_many(round_id, [player_id], board=not sealed)
    return poll_answer(rnd, guesses, with_my_unscored(panels.get(player_id) if panels else None, guesses))


@fresh
def lobby() -> dict:
    """The open rounds, soonest to end first, and players with a score in each."""
    rounds = [r.pk for r in open_rounds()]
    return {"rounds": rounds, "playing": live.players_in(rounds)}


@fresh
def unread(player_ids: list[str]) -> dict[str, int]:
    """Unread notifications per player (0 included), one query."""
    counts = dict(Notification.objects.filter(player_id__in=player_ids, read_at__isnull=True)
                  .values("player_id").annotate(n=Count("id")).values_list("player_id", "n"))
    return {pid: counts.get(pid, 0) for pid in player_ids}
