"""Creating rounds, and the blind-round commitment.

A round snapshots its keyboard (a random subset of an emoji set, or all of
it) and draws a secret of six distinct emojis from that keyboard, both with
the OS random source. A blind round also publishes
``sha256_hex(e0 + "\\x1e" + … + e5 + "\\x1e" + nonce)`` at creation, so after
the reveal anyone can check the secret was fixed in advance.
"""
from __future__ import annotations

import hashlib
import logging
import secrets
from functools import partial
from datetime import datetime, timedelta
from typing import Sequence

from django.db import transaction
from django.utils import timezone

from . import emoji_sets, engine
from .models import DEFAULT_KEYBOARD_SIZE, MAX_POOL, EmojiSet, Round
from .tasks import announce_round

log = logging.getLogger("games.rounds")

SEPARATOR = "\x1e"
_random = secrets.SystemRandom()


MAX_WEIGHTS, MAX_WEIGHT = 20, 10_000  # a blind round pays at most 20 ranks


class RoundError(ValueError):
    """A round could not be created as asked."""


def weights_problem(weights) -> str:
    """Why these blind-round payout weights cannot be used, or ''."""
    if (not isinstance(weights, list) or not 1 <= len(weights) <= MAX_WEIGHTS
            or any(not isinstance(w, int) or isinstance(w, bool) or not 0 < w <= MAX_WEIGHT for w in weights)):
        return (f"A list of 1 to {MAX_WEIGHTS} whole numbers from 1 to {MAX_WEIGHT}, best rank first "
                "(e.g. [40, 25, 15, 12, 8]).")
    return ""


def commitment(secret: Sequence[str], nonce: str) -> str:
    """The published commitment of a blind round's secret."""
    return hashlib.sha256(SEPARATOR.join([*secret, nonce]).encode("utf-8")).hexdigest()


def verify_commitment(commitment_hex: str, secret: Sequence[str], nonce: str) -> bool:
    return secrets.compare_digest(commitment(secret, nonce), commitment_hex)


def new_nonce() -> str:
    return secrets.token_hex(16)


def create_round(emoji_set: EmojiSet, *, kind: str = Round.Kind.CLASSIC, currency: str = "keys",
                 guess_price: int = 1, prize_pool: int = 0, duration: timedelta = timedelta(hours=1),
                 keyboard_size: int | None = DEFAULT_KEYBOARD_SIZE, weights: list[int] | None = None,
                 title: str = "", ends_at: datetime | None = None, schedule=None,
                 schedule_job: str | None = None) -> Round:
    """Create and save an open round; ``keyboard_size=None`` uses the whole
    set. ``ends_at`` (a time ahead) replaces now + ``duration``; a round a
    schedule opens names it and its tick's JOB id (``games.schedules``)."""
    kind = Round.Kind(kind)
    try:
        # A repeated emoji could be drawn twice into the secret, which no
        # guess can then match and settlement cannot pay: refuse the set.
        emoji_sets.check(emoji_set.emojis)
    except emoji_sets.EmojiSetError as exc:
        raise RoundError(f"The emoji set {emoji_set.slug!r} cannot make a round: {exc}") from None
    pool = list(emoji_set.emojis)
    size = len(pool) if keyboard_size is None else keyboard_size
    if size < engine.SIZE or size > len(pool):
        raise RoundError(f"keyboard size must be between {engine.SIZE} and {len(pool)}")
    now = timezone.now()
    ends_at = now + duration if ends_at is None else ends_at
    if ends_at <= now:
        raise RoundError("a round must last some time")
    if weights is not None and weights_problem(list(weights)):
        raise RoundError(weights_problem(list(weights)))
    if not isinstance(prize_pool, int) or isinstance(prize_pool, bool) or not 0 <= prize_pool <= MAX_POOL:
        raise RoundError(f"the prize pool is a whole number of diamonds from 0 to {MAX_POOL:,}")
    keyboard = pool if size == len(pool) else _random.sample(pool, size)
    secret = _random.sample(keyboard, engine.SIZE)
    nonce = new_nonce() if kind == Round.Kind.BLIND else ""
    rnd = Round(
        title=title, emoji_set=emoji_set, keyboard=keyboard, secret=secret, kind=kind,
        currency=currency, guess_price=guess_price, prize_pool=prize_pool,
        nonce=nonce, commitment=commitment(secret, nonce) if nonce else "",
        created_at=now, ends_at=ends_at, schedule=schedule, schedule_job=schedule_job,
    )
    if weights is not None:
        rnd.weights = list(weights)
    rnd.full_clean()
    rnd.save(force_insert=True)
    transaction.on_commit(partial(_announce, rnd.pk))
    return rnd


def _announce(round_id: str) -> None:
    """Ask the task worker to tell the players who want to know (on commit:
    a rolled-back creation asks for nothing). Never raises: a round is open
    whether or not its announcement could be queued."""
    try:
        announce_round.enqueue(round_id)
    except Exception as exc:
        log.warning("round %s: the new-round notification was not queued (%s: %s)", round_id,
                    type(exc).__name__, exc)
