"""Locked positions: a player pins position i of their guesses in a round
to one keyboard emoji. ``submit`` overlays the locks on what was sent, so a
lock always wins; locks persist across guesses until removed."""
from __future__ import annotations

from django.db import transaction

from . import engine
from .errors import BadPosition, OffKeyboard, RoundClosed, RoundExpired, RoundNotFound
from .models import Lock, Round
from django.utils import timezone


def _open_round(round_or_id) -> Round:
    rid = round_or_id.pk if isinstance(round_or_id, Round) else round_or_id
    rnd = Round.objects.filter(pk=rid).first()
    if rnd is None:
        raise RoundNotFound(rid)
    if rnd.status != Round.Status.OPEN:
        raise RoundClosed(rnd.status)
    if timezone.now() >= rnd.ends_at:
        raise RoundExpired()
    return rnd


def _check_position(position) -> int:
    if not isinstance(position, int) or isinstance(position, bool) or not 0 <= position < engine.SIZE:
        raise BadPosition(position)
    return position


def set_lock(player, round_or_id, position: int, emoji: str) -> Lock:
    """Pin ``position`` to ``emoji`` (replacing any earlier lock there)."""
    position = _check_position(position)
    rnd = _open_round(round_or_id)
    if emoji not in rnd.keyboard:
        raise OffKeyboard([emoji])
    with transaction.atomic():
        lock, _ = Lock.objects.update_or_create(player_id=player.pk, round=rnd, position=position,
                                                defaults={"emoji": emoji})
    return lock


def remove_lock(player, round_or_id, position: int) -> bool:
    position = _check_position(position)
    rid = round_or_id.pk if isinstance(round_or_id, Round) else round_or_id
    deleted, _ = Lock.objects.filter(player_id=player.pk, round_id=rid, position=position).delete()
    return deleted > 0


def locks_for(player_id: str, round_id: str) -> dict[int, str]:
    return dict(Lock.objects.filter(player_id=player_id, round_id=round_id).values_list("position", "emoji"))


def overlay(emojis: list[str], locks: dict[int, str]) -> list[str]:
    """The guess after locks: a lock always wins over the sent emoji."""
    return [locks.get(i, e) for i, e in enumerate(emojis)]
