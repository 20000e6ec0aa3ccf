"""What anyone watching a round receives: the public view of one round.

The watch page (``views.watch``) shows it, its poll sends it as JSON with
the same HTML fragment, and whatever later pushes rounds live (the EchoMQ
event stream) sends the very same thing: :func:`view` is the one place
that decides what a watcher may see, :func:`fragment` the one way it is
drawn. A watcher is anyone, logged in or not, so the view holds only what
every player may see:

* while the round is open, never the secret or nonce, and no guess's
  emojis (not even the watcher's own: a watcher has no identity here);
* a blind round's totals and board only once it is revealed (settled):
  until then players and guesses per minute, nothing ranked;
* after settlement the reveal: the secret, the nonce and the commitment
  check, and who was paid what.

Many watchers share one round: a view is built at most once per
``FRESH_S`` per process and round, and its ``version`` (a digest of what
it shows) is the poll's ETag, so an unchanged view answers 304.
"""
from __future__ import annotations

import hashlib
import json
import logging
import threading
import time

from django.template import loader
from django.utils import timezone

import echomq
from echomq.contrib.django import get_client

from . import leaderboard, live, payouts, rounds
from .models import Player, Round
from .views.common import duration, emoji_name

log = logging.getLogger("games.watch")

TOP = 20            # board rows a watcher sees
FRESH_S = 1.0       # an open round's view is rebuilt at most this often per process
CLOSED_FRESH_S = 30.0  # a closed round's view hardly changes
_MEMO_MAX = 2_000
_memo: dict[str, tuple[float, dict]] = {}
_lock = threading.Lock()
# The round's fields a view reads: never the secret or nonce (read, through
# ``public_secret``, only once the round is settled), nor the keyboard.
FIELDS = ("id", "title", "kind", "status", "currency", "guess_price", "prize_pool", "weights", "commitment",
          "created_at", "ends_at", "settled_at", "result")


def _counts(round_id: str, board: bool) -> tuple[int | None, int | None, list]:
    """Players with a score, guesses scored in the last minute and (when
    ``board``) the top of the board, from Valkey; Nones and the database's
    board when it does not answer."""
    try:
        pipe = get_client().pipeline(transaction=False)
        pipe.zcard(leaderboard.key(round_id))
        pipe.zcount(live.activity_key(round_id), int(time.time() * 1000) - live.ACTIVITY_WINDOW_MS, "+inf")
        players, per_minute = pipe.execute()
        return players, per_minute, leaderboard.top(round_id, TOP) if board else []
    except echomq.UNAVAILABLE as exc:
        log.warning("watch view of %s from the database, Valkey unreachable: %s", round_id, exc)
        return None, None, leaderboard.standings_from_db(round_id)[:TOP] if board else []


def _names(player_ids) -> dict[str, str]:
    ids_ = sorted(set(player_ids))
    return dict(Player.objects.filter(pk__in=ids_).values_list("pk", "user__username")) if ids_ else {}


def build(rnd: Round) -> dict:
    """The public view of ``rnd`` now (see the module doc), JSON-ready."""
    at = int(time.time() * 1000)  # reads start now: what was recorded before is in the view
    sealed = rnd.kind == Round.Kind.BLIND and not rnd.revealed
    voided = rnd.status == Round.Status.VOIDED
    players, per_minute, standings = _counts(rnd.pk, board=not sealed and not voided)
    paid = (rnd.result or {}).get("payouts", []) if rnd.revealed else []
    names = _names([s.player_id for s in standings] + [p["player"] for p in paid])
    now = timezone.now()
    is_open = rnd.is_open
    out = {
        "round": {
            "id": rnd.pk, "title": rnd.title or rnd.pk, "kind": rnd.kind, "status": rnd.status, "open": is_open,
            "pool": rnd.prize_pool, "price": rnd.guess_price, "currency": rnd.currency,
            "ends_at": rnd.ends_at.isoformat(),
            "seconds_left": max(int((rnd.ends_at - now).total_seconds()), 0) if is_open else 0,
            "commitment": rnd.commitment if rnd.kind == Round.Kind.BLIND else "",
            "rules": payouts.explain_round(rnd)["summary"],
        },
        "sealed": sealed,
        "players": players,
        "per_minute": per_minute,
        "board": [{"place": payouts.place(rnd.kind, standings, s)[0], "name": names.get(s.player_id, "(gone)"),
                   "total": s.total} for s in standings],
        "reveal": None,
    }
    secret = rnd.public_secret  # None until settled
    if secret is not None:
        nonce = rnd.public_nonce
        out["reveal"] = {
            "secret": [[e, emoji_name(e)] for e in secret],
            "nonce": nonce or "",
            "check_ok": rounds.verify_commitment(rnd.commitment, secret, nonce) if rnd.commitment and nonce else None,
            "payouts": [{"place": p.get("place", p["rank"]), "name": names.get(p["player"], "(gone)"),
                         "total": p["total"], "prize": p["prize"]} for p in paid],
            "house": (rnd.result or {}).get("house", 0),
        }
    out["version"] = hashlib.sha256(json.dumps(out, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:20]
    out["at"] = at  # when it was read (ms), outside the version: a rebuild of the same view is the same version
    return out


def load(round_id: str) -> Round | None:
    """The round with the fields a view reads (never the sealed ones)."""
    return Round.objects.only(*FIELDS).filter(pk=round_id).first()


def view(round_id: str) -> dict | None:
    """The round's public view, shared by this process's watchers for up to
    ``FRESH_S`` (``CLOSED_FRESH_S`` once closed); None: no such round."""
    now = time.monotonic()
    memo = _memo.get(round_id)
    if memo is not None and memo[0] > now:
        return memo[1]
    rnd = load(round_id)
    if rnd is None:
        return None
    out = build(rnd)
    fresh = FRESH_S if rnd.status in (Round.Status.OPEN, Round.Status.REVEALING) else CLOSED_FRESH_S
    with _lock:
        if len(_memo) >= _MEMO_MAX:
            _memo.clear()
        _memo[round_id] = (now + fresh, out)
    return out


def forget(round_id: str | None = None) -> None:
    """Drop the memo (one round's, or all): tests, and whoever knows a view changed."""
    with _lock:
        if round_id is None:
            _memo.clear()
        else:
            _memo.pop(round_id, None)


def fragment(data: dict) -> str:
    """The live part of the watch page (``games/_watch.html``) for a view:
    the page embeds it and the poll (later, the stream) replaces it whole."""
    return loader.get_template("games/_watch.html").template.render(
        v=data, time_left=duration(data["round"]["seconds_left"]))
