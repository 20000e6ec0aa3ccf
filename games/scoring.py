"""Scoring one guess in the database: the queued -> scored transition.

The caller holds the guess row lock inside a transaction and has checked the
guess is still queued, so the attempt is counted exactly once however many
times the job is delivered. The Valkey leaderboard is updated by the caller
after commit (``ZADD GT`` makes that idempotent).
"""
from __future__ import annotations

from django.utils import timezone

from . import engine
from .models import Guess, Round, RoundEntry


def score_locked(guess: Guess, rnd: Round) -> engine.Result:
    result = engine.score(rnd.secret, guess.emojis_final)
    guess.status = Guess.Status.SCORED
    guess.total = result.total
    guess.breakdown = result.breakdown()
    guess.scored_at = timezone.now()
    guess.save(update_fields=["status", "total", "breakdown", "scored_at"])
    entry, _ = RoundEntry.objects.select_for_update().get_or_create(round_id=rnd.pk, player_id=guess.player_id)
    entry.attempts += 1
    better = result.total > entry.best_total
    earlier_tie = result.total == entry.best_total and (not entry.best_guess or guess.id < entry.best_guess)
    if better or earlier_tie:
        entry.best_total, entry.best_guess = result.total, guess.id
    entry.save(update_fields=["attempts", "best_total", "best_guess"])
    return result
