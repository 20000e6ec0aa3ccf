"""In-app notifications, created by the game's tasks (``games.tasks``).

* "The round you played is settled" (or voided): after a round closes,
  settlement asks for one ``notify`` task per participant
  (``tasks.notify_round``), enqueued with
  ``transaction.on_commit`` (so a rolled-back settlement asks for nothing)
  on the ``cm.tasks`` queue, each on its player's lane.
* "A new round opened": creating a round asks, on commit, for one
  ``announce_round`` task, which tells every player who opted in on their
  profile (``Player.notify_new_rounds``), a thousand rows per INSERT.

A redelivered job asks again; the ``Notification`` unique constraint on
(player, round, kind) makes delivery idempotent, so the extra tasks change
nothing. Arguments carry ids only.
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


ANNOUNCE_BATCH = 1000


def opened_text(rnd: Round) -> str:
    name = rnd.title or rnd.pk
    unit = rnd.currency if rnd.guess_price != 1 else rnd.currency.removesuffix("s")
    minutes = max(int((rnd.ends_at - rnd.created_at).total_seconds() // 60), 1)
    hours, mins = divmod(minutes, 60)
    runs = " ".join(p for p in (f"{hours} h" if hours else "", f"{mins} min" if mins else "") if p)
    return (f"A new {rnd.kind} round opened: {name}. A guess costs {rnd.guess_price} {unit}, "
            f"the pool is 💎 {rnd.prize_pool}; it runs {runs}.")


def announce(round_id: str) -> int:
    """Tell every player who asked (``notify_new_rounds``) that the round
    opened; answers how many notifications were made now (0 when the round
    is gone or no longer open, and for a second delivery)."""
    rnd = Round.objects.filter(pk=round_id).only(
        "id", "title", "kind", "status", "currency", "guess_price", "prize_pool", "created_at", "ends_at").first()
    if rnd is None or not rnd.is_open:
        return 0
    text = opened_text(rnd)[:300]
    told = set(Notification.objects.filter(round_id=round_id, kind=Notification.Kind.OPENED)
               .values_list("player_id", flat=True))
    made = 0
    wanted = Player.objects.filter(notify_new_rounds=True).order_by("pk").values_list("pk", flat=True)
    batch: list[Notification] = []
    for player_id in wanted.iterator(chunk_size=ANNOUNCE_BATCH):
        if player_id in told:
            continue
        batch.append(Notification(player_id=player_id, round_id=round_id, kind=Notification.Kind.OPENED,
                                  text=text, data={"round": round_id}))
        if len(batch) == ANNOUNCE_BATCH:
            made += len(Notification.objects.bulk_create(batch, ignore_conflicts=True))
            batch = []
    if batch:
        made += len(Notification.objects.bulk_create(batch, ignore_conflicts=True))
    return made


def unread(player) -> list[Notification]:
    return list(Notification.objects.filter(player=player, read_at__isnull=True))
