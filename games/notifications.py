"""In-app notifications: what one says, and its creation, once.

A closed round's participants are notified by the ``games.tasks.notify``
task (``tasks.notify_round`` asks for one per participant); the
``Notification`` unique constraint on (player, round, kind) makes
:func:`deliver` idempotent, so a repeated task changes nothing.
"""
from __future__ import annotations

from django.db import IntegrityError, transaction

from .models import LedgerEntry, Notification, Player, Round, RoundEntry


def kind_for(rnd: Round) -> str | None:
    """The notification a closed round gives its players (None while it is not closed)."""
    if rnd.status == Round.Status.SETTLED:
        return Notification.Kind.SETTLED
    if rnd.status == Round.Status.VOIDED:
        return Notification.Kind.VOIDED
    return None


def _text(rnd: Round, player_id: str, kind: str) -> tuple[str, dict]:
    name = rnd.title or rnd.pk
    if kind == Notification.Kind.VOIDED:
        refunded = sum(LedgerEntry.objects.filter(player_id=player_id, reason=LedgerEntry.Reason.REFUND,
                                                  reference__in=rnd.guesses.values("id"))
                       .values_list("delta", flat=True))
        unit = rnd.currency if refunded != 1 else rnd.currency.removesuffix("s")
        return f"Round {name} was cancelled; {refunded} {unit} refunded.", {"refunded": refunded}
    prize = sum(LedgerEntry.objects.filter(player_id=player_id, reason=LedgerEntry.Reason.PRIZE,
                                           reference=rnd.pk).values_list("delta", flat=True))
    entry = RoundEntry.objects.filter(round=rnd, player_id=player_id).first()
    best = entry.best_total if entry else 0
    payout = next((p for p in rnd.result.get("payouts", []) if p["player"] == player_id), None)
    rank = payout and payout["rank"]
    verb = "revealed" if rnd.kind == Round.Kind.BLIND else "settled"
    if prize:
        text = f"Round {name} {verb}: you won {prize} diamond{'' if prize == 1 else 's'} with {best}/600."
        if payout and payout.get("tied", 1) > 1:  # the tie rule of games.payouts: tied players share
            text += f" You tied for #{payout['place']}: {payout['tied']} players split the pool."
    else:
        text = f"Round {name} {verb}: your best was {best}/600. Better luck next round."
    return text, {"prize": prize, "best_total": best, "rank": rank}


def deliver(player_id: str, round_id: str, kind: str) -> Notification | None:
    """Create the notification once; None when the player or round is gone."""
    rnd = Round.objects.filter(pk=round_id).first()
    if rnd is None or not Player.objects.filter(pk=player_id).exists():
        return None
    existing = Notification.objects.filter(player_id=player_id, round=rnd, kind=kind).first()
    if existing:
        return existing
    text, data = _text(rnd, player_id, kind)
    try:
        with transaction.atomic():
            return Notification.objects.create(player_id=player_id, round=rnd, kind=kind, text=text[:300], data=data)
    except IntegrityError:
        return Notification.objects.get(player_id=player_id, round=rnd, kind=kind)


def unread(player) -> list[Notification]:
    return list(Notification.objects.filter(player=player, read_at__isnull=True))
