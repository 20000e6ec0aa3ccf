"""Submitting a guess: validate, overlay locks, charge, record, enqueue.

Charging the price and writing the queued ``Guess`` (with its minted JOB id)
happen in one database transaction, and the enqueue runs only after that
commits. So there are two outcomes and no third: the transaction rolled back
(nothing charged, nothing queued) or it committed (charged once, and the
guess will be scored: by the job enqueued on commit, or -- if Valkey was
unreachable then -- by the job the reaper's relay enqueues later under the
same JOB id, which the queue deduplicates).

The payload names the guess and the round, never the secret; the worker
reads the secret from the database.
"""
from __future__ import annotations

import json
import logging
from datetime import timedelta
from functools import partial
from typing import Sequence

from django.db import IntegrityError, transaction
from django.utils import timezone

from echomq.contrib.django import get_queue

from . import engine, locks, wallet
from . import metrics as game_metrics
from .errors import NotEnoughFunds, OffKeyboard, RoundClosed, RoundExpired, RoundNotFound, SubmitError, WrongLength
from .models import Guess, LedgerEntry, Player, Round

log = logging.getLogger("games.guesses")

QUEUE = "cm"
RELAY_AFTER = timedelta(seconds=5)
MAX_KEY_LENGTH = 64


def _payload(guess_id: str, round_id: str) -> bytes:
    return json.dumps({"guess": guess_id, "round": round_id}).encode()


def payload(guess: Guess) -> bytes:
    """The job's payload: ids only, never the secret."""
    return _payload(guess.id, guess.round_id)


def _existing(player_id: str, key: str | None) -> Guess | None:
    if key is None:
        return None
    return Guess.objects.filter(player_id=player_id, idempotency_key=key).first()


def submit(player: Player, round: Round | str, emojis: Sequence[str], *,
           idempotency_key: str | None = None) -> Guess:
    """Submit a guess; raises a ``SubmitError`` subclass (and changes
    nothing) when refused. With an ``idempotency_key`` a repeated call
    returns the first guess and charges nothing more."""
    if idempotency_key is not None and (not isinstance(idempotency_key, str) or
                                        not 0 < len(idempotency_key) <= MAX_KEY_LENGTH):
        raise SubmitError("The idempotency key must be 1 to 64 characters.")
    first = _existing(player.pk, idempotency_key)
    if first is not None:
        return first
    if isinstance(emojis, (str, bytes)):
        raise TypeError("emojis must be a sequence of emoji strings, not one string")
    sent = list(emojis)
    if len(sent) != engine.SIZE:
        raise WrongLength(len(sent))
    round_id = round.pk if isinstance(round, Round) else round
    try:
        with transaction.atomic():
            guess = _submit_locked(player, round_id, sent, idempotency_key)
    except IntegrityError:
        # Two requests with one key raced past the check: the loser's whole
        # transaction (its charge included) rolled back; answer the winner.
        first = _existing(player.pk, idempotency_key)
        if first is None:
            raise
        return first
    return guess


def _submit_locked(player: Player, round_id: str, sent: list[str], key: str | None) -> Guess:
    # Locking the round row orders submissions against settlement: once a
    # round is closed no later transaction can add a guess to it.
    rnd = Round.objects.select_for_update().filter(pk=round_id).first()
    if rnd is None:
        raise RoundNotFound(round_id)
    if rnd.status != Round.Status.OPEN:
        raise RoundClosed(rnd.status)
    if timezone.now() >= rnd.ends_at:
        raise RoundExpired()
    keyboard = set(rnd.keyboard)
    off = list(dict.fromkeys(e for e in sent if not isinstance(e, str) or e not in keyboard))
    if off:
        raise OffKeyboard([str(e) for e in off])
    final = locks.overlay(sent, locks.locks_for(player.pk, rnd.pk))
    w = wallet.lock_wallet(player)
    again = _existing(player.pk, key)  # re-read under the wallet lock
    if again is not None:
        return again
    price = rnd.guess_price
    if w.balance(rnd.currency) < price:
        raise NotEnoughFunds(rnd.currency, price, w.balance(rnd.currency))
    guess = Guess(player=player, round=rnd, idempotency_key=key, emojis_sent=sent, emojis_final=final,
                  currency=rnd.currency, price=price)
    guess.save(force_insert=True)
    if price:
        wallet.apply(player, rnd.currency, -price, LedgerEntry.Reason.GUESS, guess.id, wallet=w)
    transaction.on_commit(partial(enqueue, guess))
    return guess


def enqueue(guess: Guess) -> str | None:
    """Put the guess's job on its player's lane; never raises. Returns the
    queue's answer, or None when Valkey could not be reached (the guess then
    stays queued in the database and the relay sends it later)."""
    game_metrics.submitted()  # runs once per committed guess
    try:
        _, status = get_queue(QUEUE).enqueue(payload(guess), job_id=guess.job_id, lane=guess.player_id)
        return status
    except Exception as exc:  # a web request must not fail after the charge committed
        log.warning("guess %s stays queued, enqueue failed (%s: %s); the relay will resend it",
                    guess.id, type(exc).__name__, exc)
        return None


def relay_unsent(*, older_than: timedelta = RELAY_AFTER, limit: int = 1000) -> dict:
    """Re-enqueue guesses still queued after ``older_than``.

    A guess whose enqueue was lost (Valkey down at commit, process killed in
    between) is sent now; one that is merely waiting in the queue or being
    scored comes back ``duplicate``, which changes nothing. A guess whose job
    is dead stays dead (also ``duplicate``) until an operator requeues it."""
    cutoff = timezone.now() - older_than
    rows = list(Guess.objects.filter(status=Guess.Status.QUEUED, created_at__lt=cutoff)
                .order_by("id").values_list("id", "job_id", "player_id", "round_id")[:limit])
    if not rows:
        return {"relayed": 0, "duplicate": 0}
    q = get_queue(QUEUE)
    # Most queued guesses are simply waiting in the queue: look their job rows
    # up first (one pipelined EXISTS round trip) and enqueue only the missing.
    pipe = q.client.pipeline(transaction=False)
    for _, jid, _, _ in rows:
        pipe.exists(q.job_key(jid))
    missing = [row for row, there in zip(rows, pipe.execute()) if not there]
    answers = q.enqueue_many([{"payload": _payload(gid, rid), "job_id": jid, "lane": pid}
                              for gid, jid, pid, rid in missing])
    relayed = sum(1 for _, status in answers if status != "duplicate")
    answers += [(None, "duplicate")] * (len(rows) - len(missing))
    if relayed:
        log.info("relay: re-sent %d queued guess(es) that had no job", relayed)
    return {"relayed": relayed, "duplicate": len(answers) - relayed}
