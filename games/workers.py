"""Queue handlers: scoring (``cm``), settlement (``cm.settle``) and
notifications (``cm.notify``).

Delivery is at-least-once, so every handler is idempotent on its job:

* ``score_guess`` locks the guess row; only the queued -> scored transition
  writes the score and counts the attempt. A redelivery finds it scored and
  re-applies just the idempotent effects (leaderboard ``ZADD GT``, the
  settle request after a perfect classic guess), which a crash may have cut
  off the first time.
* a guess or round that no longer exists, a voided round's guess and a
  malformed payload are acknowledged and dropped (``Drop``), never retried.
* a transient database error asks for a retry after a short delay (and
  drops the thread's connection so the retry opens a fresh one). Worker
  threads keep their database connection between jobs.
"""
from __future__ import annotations

import json
import logging

from django.db import OperationalError, close_old_connections, transaction

from echomq import Drop, Job, Retry
from echomq.contrib.django import get_client

from . import leaderboard, notifications, settlement
from . import metrics as game_metrics
from .models import Guess, Round
from .scoring import score_locked

log = logging.getLogger("games.workers")

STATS_KEY = "cm:stats"


def _stat(field: str, n: int = 1) -> None:
    """Best-effort counters for operators and the soak test's figures."""
    try:
        get_client().hincrby(STATS_KEY, field, n)
    except Exception:
        pass


def _payload(job: Job, *fields: str) -> dict:
    try:
        data = json.loads(job.payload)
        if not isinstance(data, dict) or any(not isinstance(data.get(f), str) for f in fields):
            raise ValueError(f"want string fields {fields}")
    except ValueError as exc:
        raise Drop(f"malformed payload: {exc}") from None
    return data


def score_guess(job: Job) -> None:
    """Score the guess named by the job (idempotent on the JOB id)."""
    data = _payload(job, "guess")
    _stat("deliveries")
    try:
        with transaction.atomic():
            guess = Guess.objects.select_for_update().filter(pk=data["guess"]).first()
            if guess is None:
                raise Drop("guess no longer exists")
            if guess.job_id != job.id:
                raise Drop(f"job {job.id} does not belong to guess {guess.id}")
            rnd = Round.objects.filter(pk=guess.round_id).first()
            if rnd is None:
                raise Drop("round no longer exists")
            fresh = guess.status == Guess.Status.QUEUED
            if fresh:
                if rnd.status == Round.Status.VOIDED:
                    raise Drop("round was voided; the guess was refunded")
                score_locked(guess, rnd)
            elif guess.status != Guess.Status.SCORED:
                raise Drop(f"guess is {guess.status}")
    except OperationalError as exc:  # e.g. SQLite busy, a dropped connection
        close_old_connections()
        raise Retry(f"database: {exc}", delay_ms=250) from None
    _stat("scored" if fresh else "redelivered")
    if fresh:
        log.info("scored %s for %s in %s: %s/600", guess.id, guess.player_id, rnd.id, guess.total)
        game_metrics.scored(guess)
    leaderboard.record(rnd.id, guess.player_id, guess.id, guess.total)
    if rnd.kind == Round.Kind.CLASSIC and guess.total == 600 and rnd.status == Round.Status.OPEN:
        settlement.request_settlement(rnd.id, "perfect")


def settle(job: Job) -> None:
    """Close the round named by the job (exactly once, see settlement)."""
    data = _payload(job, "round")
    try:
        outcome = settlement.settle_round(data["round"], force=data.get("why") == "admin")
    except OperationalError as exc:
        close_old_connections()
        raise Retry(f"database: {exc}", delay_ms=500) from None
    if outcome.action == "gone":
        raise Drop("round no longer exists")
    log.info("settle %s (%s): %s", data["round"], data.get("why"), outcome.action)


def notify(job: Job) -> None:
    data = _payload(job, "player", "round", "kind")
    try:
        note = notifications.deliver(data["player"], data["round"], data["kind"])
    except OperationalError as exc:
        close_old_connections()
        raise Retry(f"database: {exc}", delay_ms=500) from None
    if note is None:
        raise Drop("player or round no longer exists")
    log.info("notified %s: %s", data["player"], note.text)
