"""Submitting a guess: validate, overlay locks, charge, record, enqueue.

Charging the price and writing the queued ``Guess`` (with its minted JOB id)
happen in one database transaction, and the enqueue runs only after that
commits. So there are two outcomes and no third: the transaction rolled back
(nothing charged, nothing queued) or it committed (charged once, and the
guess will be scored: by the job enqueued on commit, or -- if Valkey was
unreachable then -- by the job the reaper's relay enqueues later under the
same JOB id, which the queue deduplicates).

A guess is written one of two ways, and no third. On PostgreSQL the usual
guess is one statement (below); everything else -- SQLite, a free round,
a guess the one statement did not take, refusals included -- is one ORM
transaction of four statements between BEGIN and COMMIT, none of them a
read-then-write:

1. the round and this player's locks on it, in one SELECT that share-locks
   the round row (``FOR SHARE`` on PostgreSQL). Settlement and voiding
   take ``FOR NO KEY UPDATE`` on that row, so a submit either commits
   before they look at the round's guesses or sees the round closed;
   submits do not block each other, and neither does the score worker's
   foreign-key check (``FOR KEY SHARE``) block settlement or it -- which
   the stronger ``FOR UPDATE`` did, a deadlock when a player's first
   guess in a round was being scored as the round closed. (SQLite runs one
   writing transaction at a time.)
2. the charge, ``wallet.charge``: ``UPDATE wallet … WHERE balance >= price
   RETURNING`` (it row-locks the wallet; no row means not enough funds),
3. the ledger row (2 and 3 skipped for a free round),
4. the guess. Its unique constraints make the database the judge of the
   two things that would otherwise need a read under the wallet lock: the
   same idempotency key twice for one player and round (the second insert
   fails, its whole transaction -- charge included -- rolls back, and the
   first guess is the answer), and an exact repeat of the player's earlier
   guess (refused, nothing charged).

On PostgreSQL the usual guess (a priced round, sent with the player's
locked emojis in their slots, as the form does) is one statement in
autocommit instead (``_submit_in_one_statement``): data-modifying CTEs make
the checks of statement 1 and the writes of 2-4 together, so it too has two
outcomes and no third. Its price and currency come from a per-process
cache of the round, and the statement checks them against the row: a
round repriced since (by a shell, a migration: not the admin) takes the
transaction, which reads the row, charges what it says and refreshes the
cache. (The keyboard, checked in Python against the same cache, is not
checked again by the statement: a jsonb containment cost each guess
about 17 us of PostgreSQL's time, and an emoji off a keyboard changed
behind the admin's back charges nothing wrong -- it only cannot score.)
Anything else -- refusals included -- falls through to the transaction,
which decides and says why.

The payload names the guess and the round, never the secret; the worker
reads the secret from the database.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import Sequence

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from echomq import ids
from echomq.contrib.django import get_queue

from . import engine, locks, wallet
from . import metrics as game_metrics
from .rows import mark_saved
from .errors import (NotEnoughFunds, OffKeyboard, RepeatedGuess, RoundClosed, RoundExpired,
                     RoundNotFound, SubmitError, WrongLength)
from .models import Guess, LedgerEntry, Lock, Player, Round

log = logging.getLogger("games.guesses")

QUEUE = "cm"
RELAY_AFTER = timedelta(seconds=5)
MAX_KEY_LENGTH = 64


def _payload(guess_id: str, round_id: str) -> bytes:
    return json.dumps({"guess": guess_id, "round": round_id}).encode()


def payload(guess: Guess) -> bytes:
    """The job's payload: ids only, never the secret."""
    return _payload(guess.id, guess.round_id)


def fingerprint(emojis: Sequence[str]) -> str:
    """What ``Guess.fingerprint`` holds: a digest of the final emojis."""
    return hashlib.blake2b("\x1e".join(emojis).encode(), digest_size=16).hexdigest()


def _existing(player_id: str, round_id: str, key: str | None) -> Guess | None:
    if key is None:
        return None
    return Guess.objects.filter(player_id=player_id, round_id=round_id, idempotency_key=key).first()


def submit(player: Player, round: Round | str, emojis: Sequence[str], *,
           idempotency_key: str | None = None) -> Guess:
    """Submit a guess; raises a ``SubmitError`` subclass (and changes
    nothing) when refused. With an ``idempotency_key`` a repeated call for
    the same round returns the first guess and charges nothing more."""
    key = idempotency_key
    if key is not None and (not isinstance(key, str) or not 0 < len(key) <= MAX_KEY_LENGTH):
        raise SubmitError("The idempotency key must be 1 to 64 characters.")
    if isinstance(emojis, (str, bytes)):
        raise TypeError("emojis must be a sequence of emoji strings, not one string")
    sent = list(emojis)
    round_id = round.pk if isinstance(round, Round) else round
    try:
        if len(sent) != engine.SIZE:
            raise WrongLength(len(sent))
        guess = _submit_in_one_statement(player.pk, round_id, sent, key)
        if guess is None:  # not taken as sent: the transaction decides, and says why if it refuses
            with transaction.atomic():
                guess = _submit_in_transaction(player.pk, round_id, sent, key)
    except IntegrityError:
        # A guess with this key (a double click, or two racing requests: the
        # loser waited on the wallet row, then its insert failed) or with
        # these very emojis is there already; this transaction rolled back.
        first = _existing(player.pk, round_id, key)
        if first is not None:
            return first
        final = _final_if_repeated(player.pk, round_id, sent)
        if final is not None:
            raise RepeatedGuess(final) from None
        raise
    except SubmitError:
        first = _existing(player.pk, round_id, key)  # a replay answers as the first time did
        if first is not None:
            return first
        raise
    transaction.on_commit(partial(enqueue, guess))
    return guess


@dataclass(frozen=True)
class _Open:
    """What a submit needs of its round (statement 1), and nothing else:
    the secret never comes into the web process."""
    status: str
    ends_at: datetime
    keyboard: frozenset
    currency: str
    guess_price: int

    @property
    def is_open(self) -> bool:
        return self.status == Round.Status.OPEN and timezone.now() < self.ends_at


_ROUND_FIELDS = ("status", "ends_at", "keyboard", "currency", "guess_price")


def _round_and_locks(player_id: str, round_id: str) -> tuple[_Open | None, dict[int, str]]:
    """Statement 1: what submit needs of the round (share-locked until the
    transaction ends) and the player's locks on it, through a plain cursor
    (a model instance of the whole row cost more CPU than the statement)."""
    fields, my_locks = locks.round_with_locks(round_id, player_id, _ROUND_FIELDS, share_lock=True)
    if fields is None:
        return None, {}
    status, ends_at, keyboard, currency, price = fields
    return _Open(status, ends_at, frozenset(keyboard), currency, price), my_locks


@dataclass(frozen=True)
class _Fixed:
    """A round's fields that do not change once it exists (the admin shows
    them read-only): each process reads them once per round. Nothing else
    promises they stay fixed, so the one statement checks them against the
    row, and the transaction path refreshes them from its read."""
    keyboard: frozenset
    currency: str
    guess_price: int


_FIXED_MAX = 10_000
_fixed_rounds: dict[str, _Fixed] = {}


def _keep_fixed(round_id: str, fixed: _Fixed) -> _Fixed:
    if _fixed_rounds.get(round_id) != fixed:
        if len(_fixed_rounds) >= _FIXED_MAX:
            _fixed_rounds.clear()
        _fixed_rounds[round_id] = fixed
    return fixed


def _fixed(round_id: str) -> _Fixed | None:
    fixed = _fixed_rounds.get(round_id)
    if fixed is None:
        row = Round.objects.filter(pk=round_id).values_list("keyboard", "currency", "guess_price").first()
        if row is None:
            return None
        fixed = _keep_fixed(round_id, _Fixed(frozenset(row[0]), row[1], row[2]))
    return fixed


def _json(value):
    """A JSONField value as Django adapts it for the database."""
    return connection.ops.adapt_json_value(value, None)


@functools.cache
def _statement(currency: str, final_is_sent: bool = True) -> str:
    """The guess written with its charge, as one statement (PostgreSQL),
    built once per currency: the wallet's charge CTEs (``w`` takes the
    price, ``l`` writes the ledger row) and ``g``, the guess, selecting from
    ``w`` -- so the guess is written only if the charge is, and a refused
    INSERT (a unique constraint) fails the whole statement.

    Two CTEs make the checks the transaction's statement 1 makes: ``r``,
    the round is open (share-locked, as statement 1 does) and still has
    the price and currency the guess was priced with (the process's cache
    of them), and ``bad``, none of the player's locks differs from what was
    sent; the charge is made only if both hold.

    What every guess writes the same (the currency, the open status, a
    queued guess, a guess charge, the ledger referring to the guess by its
    id) is in the statement's text, and the emojis are bound once when the
    final guess is the one sent (``final_is_sent``, the usual case): fewer
    values to bind on every POST."""
    qn = connection.ops.quote_name
    lit = wallet._literal
    final = "%(sent)s" if final_is_sent else "%(final)s"
    guard = (f"r AS (SELECT 1 FROM {qn(Round._meta.db_table)} WHERE {qn('id')} = %(round)s "
             f"AND {qn('status')} = {lit(Round.Status.OPEN)} AND {qn('ends_at')} > %(now)s "
             f"AND {qn('guess_price')} = %(amount)s AND {qn('currency')} = {lit(currency)} FOR SHARE), "
             f"bad AS (SELECT 1 FROM {qn(Lock._meta.db_table)} WHERE {qn('round_id')} = %(round)s "
             f"AND {qn('player_id')} = %(player)s AND {qn('emoji')} <> ({final}::jsonb ->> {qn('position')})), ")
    only_if = " AND EXISTS (SELECT 1 FROM r) AND NOT EXISTS (SELECT 1 FROM bad)"
    values = {"id": "%(guess)s", "job_id": "%(job)s", "player_id": "%(player)s", "round_id": "%(round)s",
              "idempotency_key": "%(key)s", "emojis_sent": "%(sent)s", "emojis_final": final,
              "currency": lit(currency), "price": "%(amount)s", "status": lit(Guess.Status.QUEUED), "total": "NULL",
              "breakdown": "NULL", "created_at": "%(now)s", "scored_at": "NULL", "fingerprint": "%(fingerprint)s"}
    columns = {f.attname: f.column for f in Guess._meta.concrete_fields}
    assert values.keys() == columns.keys(), "every guess column needs a value here"
    charge = wallet.charge_ctes(currency, LedgerEntry.Reason.GUESS, only_if, reference="%(guess)s")
    return (f"WITH {guard}{charge}, "
            f"g AS (INSERT INTO {qn(Guess._meta.db_table)} ({', '.join(qn(columns[a]) for a in values)}) "
            f"SELECT {', '.join(values.values())} FROM w) SELECT 1 FROM w")


def _write_with_charge(guess: Guess) -> bool:
    """Run :func:`_statement` for ``guess`` (unsaved, priced, queued); True
    if it was written with its charge, False (nothing written) if the
    balance was short, or the round or the locks said no."""
    if guess.status != Guess.Status.QUEUED:
        raise ValueError("the one statement writes a queued guess")
    params = wallet.charge_params(guess.player_id, guess.currency, guess.price, guess.id, guess.created_at)
    final_is_sent = guess.emojis_final == guess.emojis_sent
    params.update(round=guess.round_id, guess=guess.id, job=guess.job_id, key=guess.idempotency_key,
                  fingerprint=guess.fingerprint, sent=_json(guess.emojis_sent))
    if not final_is_sent:
        params["final"] = _json(guess.emojis_final)
    del params["reference"]  # the statement refers to the guess's own id
    with connection.cursor() as cursor:
        cursor.execute(_statement(guess.currency, final_is_sent), params)
        written = cursor.fetchone() is not None
    if written:
        mark_saved(guess)
    return written


_GUESS_FIELDS = tuple(f.attname for f in Guess._meta.concrete_fields)


def _new_guess(player_id: str, round_id: str, key: str | None, sent: list[str], final: list[str],
               currency: str, price: int) -> Guess:
    """A new, unsaved, queued guess with its GES and JOB ids minted: what
    ``Guess(player_id=..., ...)`` makes, built from the values in field
    order (keyword construction cost twice the CPU, most of it matching
    names and filling defaults)."""
    values = {"id": ids.mint("GES"), "job_id": ids.mint("JOB"), "player_id": player_id, "round_id": round_id,
              "idempotency_key": key, "emojis_sent": sent, "emojis_final": final, "currency": currency,
              "price": price, "status": Guess.Status.QUEUED, "total": None, "breakdown": None,
              "created_at": timezone.now(), "scored_at": None, "fingerprint": fingerprint(final)}
    return Guess(*[values[name] for name in _GUESS_FIELDS])


def _submit_in_one_statement(player_id: str, round_id: str, sent: list[str], key: str | None) -> Guess | None:
    """The usual guess on PostgreSQL, as one statement in autocommit: no
    BEGIN, no read, no COMMIT. The form sends the locked emojis in their
    slots, so the guess as sent is usually the final guess already; the
    statement writes the charge, its ledger row and the guess only if the
    round is open and no lock of the player's differs from what was sent.

    Answers None, having written nothing, when it cannot take the guess as
    sent -- no such round, a free round, off the keyboard (checked here
    from the round's cached fields), or closed, expired, a lock that
    differs, short of funds, a price or currency that is no longer the
    cached one (checked by the statement): the transaction
    path then decides, and says why if it refuses. The same
    unique constraints judge a replayed key or a repeated guess (an
    IntegrityError, as in the transaction path)."""
    if connection.vendor != "postgresql":
        return None
    fixed = _fixed(round_id)
    if (fixed is None or not fixed.guess_price
            or any(not isinstance(e, str) or e not in fixed.keyboard for e in sent)):
        return None
    guess = _new_guess(player_id, round_id, key, sent, sent, fixed.currency, fixed.guess_price)
    with transaction.atomic() if connection.in_atomic_block else contextlib.nullcontext():
        # (inside a caller's transaction, a savepoint keeps a refused INSERT from spoiling it)
        written = _write_with_charge(guess)
    return guess if written else None


def _submit_in_transaction(player_id: str, round_id: str, sent: list[str], key: str | None) -> Guess:
    rnd, my_locks = _round_and_locks(player_id, round_id)
    if rnd is None:
        raise RoundNotFound(round_id)
    if rnd.status != Round.Status.OPEN:
        raise RoundClosed(rnd.status)
    if not rnd.is_open:
        raise RoundExpired()
    _keep_fixed(round_id, _Fixed(rnd.keyboard, rnd.currency, rnd.guess_price))  # as the row says now
    off = list(dict.fromkeys(e for e in sent if not isinstance(e, str) or e not in rnd.keyboard))
    if off:
        raise OffKeyboard([str(e) for e in off])
    final = locks.overlay(sent, my_locks)
    guess = _new_guess(player_id, round_id, key, sent, final, rnd.currency, rnd.guess_price)
    if guess.price:
        try:
            wallet.charge(player_id, rnd.currency, guess.price, LedgerEntry.Reason.GUESS, guess.id)
        except wallet.InsufficientFunds as short:
            raise NotEnoughFunds(rnd.currency, guess.price, short.available) from None
    guess.save(force_insert=True)
    return guess


def _final_if_repeated(player_id: str, round_id: str, sent: list[str]) -> list[str] | None:
    """After a unique-constraint refusal with no key match: the final emojis
    if the player has made this exact guess in the round before."""
    final = locks.overlay(sent, locks.locks_for(player_id, round_id))
    if Guess.objects.filter(player_id=player_id, round_id=round_id, fingerprint=fingerprint(final)).exists():
        return final
    return None


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
    for _, jid, pid, _ in rows:
        pipe.exists(q.job_key(jid, lane=pid))  # a sharded queue keeps the job on its lane's shard
    missing = [row for row, there in zip(rows, pipe.execute()) if not there]
    answers = q.enqueue_many([{"payload": _payload(gid, rid), "job_id": jid, "lane": pid}
                              for gid, jid, pid, rid in missing])
    relayed = sum(1 for _, status in answers if status != "duplicate")
    answers += [(None, "duplicate")] * (len(rows) - len(missing))
    if relayed:
        log.info("relay: re-sent %d queued guess(es) that had no job", relayed)
    return {"relayed": relayed, "duplicate": len(answers) - relayed}
