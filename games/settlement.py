"""Closing a round, exactly once.

Three closers can race: the reaper's timer sweep, the score worker after a
perfect classic guess, and an admin. Each only *asks*, by enqueueing on
``cm.settle`` under one deterministic JOB id per round (so racing requests
collapse at admission); the handler -- or anyone calling ``settle_round``
directly -- locks the round row and acts only if the round is still open
(or revealing), so the second closer finds it settled and does nothing.

Before ranking, settlement scores any guess of the round still queued (the
round lock keeps new ones out), so a guess submitted in time always counts.

Payouts, in diamonds, through the ledger, in the settling transaction, by
the rules in ``games.payouts`` (classic: tied best totals split the pool,
the dust to the house; blind: top K by weights, ties to the earliest, the
dust to rank 1). A blind round passes through ``revealing`` (committed) and
the commitment is checked against the secret and nonce before anything is
paid; a mismatch voids the round.
* void: every guess charge is refunded through the ledger; queued guesses
  become ``refunded`` and are never scored.

Players are notified by the ``games.tasks.notify`` task, enqueued on commit.
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field

from django.db import transaction
from django.utils import timezone

from echomq import ids
from echomq.contrib.django import get_queue

from . import leaderboard, live, payouts, rounds, tasks, wallet
from .models import Currency, Guess, LedgerEntry, Round
from .scoring import score_locked

log = logging.getLogger("games.settlement")

QUEUE = "cm.settle"
CLOSEABLE = (Round.Status.OPEN, Round.Status.REVEALING)


@dataclass
class Outcome:
    round_id: str
    action: str  # settled | voided | already | not_due | gone
    payouts: list = field(default_factory=list)
    house: int = 0


def settle_job_id(round_id: str) -> str:
    """One JOB id per round, derived from the round's snowflake."""
    return ids.encode("JOB", ids.parse(round_id)[1])


def request_settlement(round_id: str, why: str = "timer") -> str | None:
    """Ask for the round to be closed; duplicates collapse. Never raises."""
    try:
        _, status = get_queue(QUEUE).enqueue(json.dumps({"round": round_id, "why": why}).encode(),
                                             job_id=settle_job_id(round_id))
        return status
    except Exception as exc:
        log.warning("settlement request for %s not sent (%s: %s); the timer sweep will ask again",
                    round_id, type(exc).__name__, exc)
        return None


def _has_perfect(rnd: Round) -> bool:
    return rnd.guesses.filter(status=Guess.Status.SCORED, total=600).exists()


def is_due(rnd: Round) -> bool:
    if rnd.status == Round.Status.REVEALING:
        return True
    return timezone.now() >= rnd.ends_at or (rnd.kind == Round.Kind.CLASSIC and _has_perfect(rnd))


def _score_stragglers(rnd: Round) -> list[Guess]:
    queued = list(Guess.objects.select_for_update().filter(round=rnd, status=Guess.Status.QUEUED).order_by("id"))
    for g in queued:
        score_locked(g, rnd)
    return queued


# The payout rules live in ``games.payouts`` (one source for the pages too).
classic_payouts = payouts.classic
blind_payouts = payouts.blind


def _record_scores(rnd_id: str, scored: list[Guess]) -> None:
    """Leaderboard effects of guesses settlement scored itself."""
    for g in scored:
        try:
            live.record(rnd_id, g.player_id, g.id, g.total)
        except Exception as exc:
            log.warning("leaderboard update for %s failed (%s); rebuild_leaderboards will fix it", g.id, exc)


def settle_round(round_id: str, *, force: bool = False) -> Outcome:
    """Close the round if it is open and due (or ``force``); idempotent.

    A second call -- a racing closer or a redelivered job -- finds the round
    settled, pays nothing and only re-asks for the (deduplicated)
    notifications."""
    done: Outcome | None = None
    with transaction.atomic():
        rnd = Round.objects.select_for_update(no_key=True).filter(pk=round_id).first()
        if rnd is None:
            return Outcome(round_id, "gone")
        if rnd.status not in CLOSEABLE:
            done = Outcome(round_id, "already")
        elif not (force or is_due(rnd)):
            return Outcome(round_id, "not_due")
        else:
            stragglers = _score_stragglers(rnd)
            if rnd.kind == Round.Kind.CLASSIC:
                done = _pay(rnd)
            elif rnd.status == Round.Status.OPEN:
                rnd.status = Round.Status.REVEALING  # committed before the reveal
                rnd.save(update_fields=["status"])
    if done is not None and done.action == "already":
        tasks.notify_round(round_id)
        return done
    _record_scores(round_id, stragglers)
    if done is None:  # blind: reveal, check the commitment, pay
        with transaction.atomic():
            rnd = Round.objects.select_for_update(no_key=True).get(pk=round_id)
            if rnd.status != Round.Status.REVEALING:
                done = Outcome(round_id, "already")
            elif not rounds.verify_commitment(rnd.commitment, rnd.secret, rnd.nonce):
                log.error("round %s: commitment does not match secret and nonce; voiding it", round_id)
                done = _void(rnd, "commitment mismatch")
            else:
                done = _pay(rnd)
    tasks.notify_round(round_id)
    live.touch(round_id)  # open pages poll in full and show the result
    if done.action != "already":
        log.info("round %s %s: payouts %s, house keeps %s", round_id, done.action,
                 [(p.player_id, amt) for p, amt in done.payouts], done.house)
    return done


def _ended_now(rnd: Round) -> list[str]:
    """Record when the round actually ended: a round closed before its end
    time (a perfect guess, an admin's "Settle now" or "Void") ends now, and
    ``result["scheduled_end"]`` keeps the end it had. The fields to save."""
    now = timezone.now()
    rnd.settled_at = now
    if rnd.ends_at > now:
        rnd.result = {**(rnd.result or {}), "scheduled_end": rnd.ends_at.isoformat()}
        rnd.ends_at = now
    return ["status", "settled_at", "ends_at", "result"]


def _pay(rnd: Round) -> Outcome:
    """Rank, credit prizes, mark settled. Caller holds the round lock."""
    standings = leaderboard.standings_from_db(rnd.pk)
    paid, house = payouts.split(rnd.kind, standings, rnd.prize_pool, list(rnd.weights))
    for s, amount in sorted(paid, key=lambda p: p[0].player_id):  # fixed lock order
        wallet.apply(s.player_id, Currency.DIAMONDS, amount, LedgerEntry.Reason.PRIZE, rnd.pk)
    rnd.status = Round.Status.SETTLED
    rnd.result = {
        "kind": rnd.kind, "pool": rnd.prize_pool, "house": house,
        "payouts": [payouts.row(rnd.kind, standings, s, amt) for s, amt in paid],
        "players": len(standings),
    }
    rnd.save(update_fields=_ended_now(rnd))
    return Outcome(rnd.pk, "settled", paid, house)


def _void(rnd: Round, reason: str) -> Outcome:
    charged = Guess.objects.select_for_update().filter(round=rnd, price__gt=0).exclude(
        status=Guess.Status.REFUNDED).order_by("player_id", "id")
    refunded = 0
    for g in charged:
        wallet.apply(g.player_id, g.currency, g.price, LedgerEntry.Reason.REFUND, g.pk)
        refunded += 1
    Guess.objects.filter(round=rnd, status=Guess.Status.QUEUED).update(status=Guess.Status.REFUNDED)
    rnd.status = Round.Status.VOIDED
    rnd.result = {"voided": reason, "refunded_guesses": refunded}
    rnd.save(update_fields=_ended_now(rnd))
    return Outcome(rnd.pk, "voided")


def void_round(round_id: str, reason: str = "voided by an operator") -> Outcome:
    """Cancel an open round and refund every guess charge; idempotent."""
    with transaction.atomic():
        rnd = Round.objects.select_for_update(no_key=True).filter(pk=round_id).first()
        if rnd is None:
            return Outcome(round_id, "gone")
        if rnd.status not in CLOSEABLE:
            return Outcome(round_id, "already")
        done = _void(rnd, reason)
    tasks.notify_round(round_id)
    live.touch(round_id)
    log.info("round %s voided (%s): %s guess charge(s) refunded", round_id, reason, rnd.result["refunded_guesses"])
    return done


def close_due_rounds(limit: int = 200) -> int:
    """The timer sweep: ask to settle every open round that is due."""
    now = timezone.now()
    due = set(Round.objects.filter(status=Round.Status.OPEN, ends_at__lte=now).values_list("pk", flat=True)[:limit])
    due |= set(Round.objects.filter(status=Round.Status.REVEALING).values_list("pk", flat=True)[:limit])
    due |= set(Round.objects.filter(status=Round.Status.OPEN, kind=Round.Kind.CLASSIC,
                                    guesses__status=Guess.Status.SCORED, guesses__total=600)
               .values_list("pk", flat=True).distinct()[:limit])
    for rid in sorted(due):
        request_settlement(rid, "timer")
    return len(due)
