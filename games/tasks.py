"""The game's background tasks, on Django's Tasks framework (EchoMQ backend).

Notifications: settlement asks for one per participant (:func:`notify_round`),
enqueued on commit, each on its player's lane (one busy player cannot hold up
the others) and retried on a database hiccup; a new round asks for one
``announce_round``, which tells every player who opted in. Both are idempotent (one row per
player, round and kind), so a redelivered task changes nothing.
"""
from __future__ import annotations

import logging
from functools import partial

from django.db import transaction
from django.tasks import task

from . import notifications
from .models import Guess, Round

log = logging.getLogger("games.tasks")

QUEUE = "cm.tasks"


@task(queue_name=QUEUE, lane="round_id", max_attempts=20, backoff_ms=500)
def announce_round(round_id: str) -> int:
    """Tell the players who asked that the round opened; how many were told."""
    return notifications.announce(round_id)


@task(queue_name=QUEUE, lane="player_id", max_attempts=20, backoff_ms=500)
def notify(player_id: str, round_id: str, kind: str) -> int | None:
    """Create the player's notification for a closed round; its id, or None
    when the player or round is gone (nothing to retry)."""
    note = notifications.deliver(player_id, round_id, kind)
    return note.pk if note else None


def notify_round(round_id: str) -> int:
    """Ask (on commit) for a notification to every participant of a closed
    round; answers how many were asked for. Never raises: a lost request is
    re-made by the next settle delivery."""
    rnd = Round.objects.filter(pk=round_id).first()
    kind = rnd and notifications.kind_for(rnd)
    if not kind:
        return 0
    players = sorted(set(Guess.objects.filter(round_id=round_id).values_list("player_id", flat=True)))
    for player_id in players:
        transaction.on_commit(partial(_send, player_id, round_id, str(kind)))
    return len(players)


def _send(player_id: str, round_id: str, kind: str) -> None:
    try:
        notify.enqueue(player_id, round_id, kind)
    except Exception as exc:
        log.warning("notification for %s in %s not sent (%s: %s)", player_id, round_id, type(exc).__name__, exc)
