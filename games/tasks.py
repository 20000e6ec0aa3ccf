"""The game's background tasks, on Django's Tasks framework (EchoMQ backend).

Notifications: settlement asks for one per participant, enqueued on commit,
each on its player's lane (one busy player cannot hold up the others) and
retried on a database hiccup. ``notifications.deliver`` is idempotent (one
row per player, round and kind), so a redelivered task changes nothing.
"""
from __future__ import annotations

from django.tasks import task

from . import notifications

QUEUE = "cm.tasks"


@task(queue_name=QUEUE, lane="player_id", max_attempts=20, backoff_ms=500)
def notify(player_id: str, round_id: str, kind: str) -> int | None:
    """Create the player's notification for a closed round; its id, or None
    when the player or round is gone (nothing to retry)."""
    note = notifications.deliver(player_id, round_id, kind)
    return note.pk if note else None
