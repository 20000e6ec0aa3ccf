"""Locked positions: a player pins position i of their guesses in a round
to one keyboard emoji. ``submit`` overlays the locks on what was sent, so a
lock always wins; locks persist across guesses until removed."""
from __future__ import annotations

import functools

from django.db import connection, transaction
from django.utils import timezone

from . import engine
from .errors import BadPosition, OffKeyboard, RoundClosed, RoundExpired, RoundNotFound
from .models import Lock, Round
from .rows import convert


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
    """Unpin ``position``; only while the round is open, as ``set_lock``
    (a closed round's locks are part of its record: its guesses used them)."""
    position = _check_position(position)
    rnd = _open_round(round_or_id)
    deleted, _ = Lock.objects.filter(player_id=player.pk, round=rnd, position=position).delete()
    return deleted > 0


ROUND_FIELDS = tuple(f.attname for f in Round._meta.concrete_fields)


@functools.cache
def _with_locks_sql(fields: tuple[str, ...], vendor: str, share_lock: bool) -> str:
    qn = connection.ops.quote_name
    columns = {f.attname: f.column for f in Round._meta.concrete_fields}
    lock_of = " FOR SHARE OF r" if share_lock and vendor == "postgresql" else ""
    return (f"SELECT {', '.join('r.' + qn(columns[f]) for f in fields)}, l.{qn('position')}, l.{qn('emoji')} "
            f"FROM {qn(Round._meta.db_table)} r LEFT JOIN {qn(Lock._meta.db_table)} l "
            f"ON l.{qn('round_id')} = r.{qn('id')} AND l.{qn('player_id')} = %s "
            f"WHERE r.{qn('id')} = %s{lock_of}")


def round_with_locks(round_id: str, player_id: str, fields: tuple[str, ...] = ROUND_FIELDS, *,
                     share_lock: bool = False) -> tuple[list | None, dict[int, str]]:
    """The round's ``fields`` (as the ORM reads them) and this player's
    locks on it, in one statement through a plain cursor; (None, {}) when
    there is no such round. ``share_lock`` holds the round row ``FOR
    SHARE`` until the transaction ends (PostgreSQL), as submit needs."""
    with connection.cursor() as cursor:
        cursor.execute(_with_locks_sql(fields, connection.vendor, share_lock), [player_id, round_id])
        rows = cursor.fetchall()
    if not rows:
        return None, {}
    n = len(fields)
    return convert(Round, fields, rows[0][:n]), {row[n]: row[n + 1] for row in rows if row[n] is not None}


def locks_for(player_id: str, round_id: str) -> dict[int, str]:
    return dict(Lock.objects.filter(player_id=player_id, round_id=round_id).values_list("position", "emoji"))


def overlay(emojis: list[str], locks: dict[int, str]) -> list[str]:
    """The guess after locks: a lock always wins over the sent emoji."""
    return [locks.get(i, e) for i, e in enumerate(emojis)]
