"""The game's background tasks, on Django's Tasks framework (EchoMQ backend).

Notifications: settlement asks for one per participant, enqueued on commit,
each on its player's lane (one busy player cannot hold up the others) and
retried on a database hiccup; a new round asks for one ``announce_round``,
which tells every player who opted in. Both are idempotent (one row per
player, round and kind), so a redelivered task changes nothing.
"""
from __future__ import annotations

from django.tasks import task

from . import notifications

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
