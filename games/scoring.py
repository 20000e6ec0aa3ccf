"""Scoring guesses in the database: the queued -> scored transition.

The caller holds the guess row locks inside a transaction and has checked
the guesses are still queued, so each attempt is counted exactly once however
many times its job is delivered. The Valkey leaderboard is updated by the
caller after commit (``ZADD GT`` makes that idempotent).

``score_many`` is the worker's path: a batch in two statements, one UPDATE
of the guesses and one upsert of the round entries; ``score_locked`` is one
guess at a time, for settlement's stragglers.
"""
from __future__ import annotations

from django.db import connection
from django.utils import timezone

from . import engine
from .models import Guess, Round, RoundEntry

SCORED_FIELDS = ["status", "total", "breakdown", "scored_at"]


def apply_score(guess: Guess, rnd: Round) -> engine.Result:
    """Set the guess's score fields (not saved). Raises ValueError for a
    round whose secret cannot be scored against."""
    result = engine.score(rnd.secret, guess.emojis_final)
    guess.status = Guess.Status.SCORED
    guess.total = result.total
    guess.breakdown = result.breakdown()
    guess.scored_at = timezone.now()
    return result


def score_many(scored: list[Guess]) -> None:
    """Write a batch of guesses that ``apply_score`` has scored: one UPDATE
    and one round-entry upsert, whatever the batch size."""
    if not scored:
        return
    update_scored(scored)
    add_to_entries(scored)


def update_scored(scored: list[Guess]) -> None:
    """One ``UPDATE … FROM (VALUES …)`` for the batch (PostgreSQL and SQLite
    alike); ``bulk_update``'s CASE per field costs a hundred times the CPU."""
    qn, pg = connection.ops.quote_name, connection.vendor == "postgresql"
    t = qn(Guess._meta.db_table)
    sql = ("WITH v (id, total, breakdown, scored_at) AS (VALUES "
           + ", ".join(["(%s, %s, %s, %s)"] * len(scored))
           + f") UPDATE {t} SET {qn('status')} = %s, {qn('total')} = v.total, "
           f"{qn('breakdown')} = v.breakdown{'::jsonb' if pg else ''}, {qn('scored_at')} = v.scored_at "
           f"FROM v WHERE {t}.{qn('id')} = v.id")
    field = Guess._meta.get_field("breakdown")
    params = [v for g in scored for v in (g.id, g.total, field.get_db_prep_value(g.breakdown, connection),
                                          connection.ops.adapt_datetimefield_value(g.scored_at))]
    with connection.cursor() as cursor:
        cursor.execute(sql, params + [Guess.Status.SCORED])


def add_to_entries(scored: list[Guess]) -> None:
    """Count the attempts and raise the best totals of the players' round
    entries in one ``INSERT … ON CONFLICT DO UPDATE`` (PostgreSQL and SQLite).
    The rule is ``score_locked``'s: the best total wins, a tie goes to the
    earlier guess (ids sort by time)."""
    per_entry: dict[tuple[str, str], list] = {}
    for g in sorted(scored, key=lambda g: g.id):
        entry = per_entry.setdefault((g.round_id, g.player_id), [0, -1, ""])
        entry[0] += 1
        if g.total > entry[1]:
            entry[1], entry[2] = g.total, g.id
    rows = sorted(per_entry.items())  # one lock order for every worker
    qn = connection.ops.quote_name
    t = qn(RoundEntry._meta.db_table)
    a, bt, bg = qn("attempts"), qn("best_total"), qn("best_guess")
    better = f"excluded.{bt} > {t}.{bt}"
    earlier_tie = f"(excluded.{bt} = {t}.{bt} AND ({t}.{bg} = '' OR excluded.{bg} < {t}.{bg}))"
    sql = (f"INSERT INTO {t} ({qn('round_id')}, {qn('player_id')}, {a}, {bt}, {bg}) VALUES "
           + ", ".join(["(%s, %s, %s, %s, %s)"] * len(rows))
           + f" ON CONFLICT ({qn('round_id')}, {qn('player_id')}) DO UPDATE SET {a} = {t}.{a} + excluded.{a}, "
           f"{bt} = CASE WHEN {better} THEN excluded.{bt} ELSE {t}.{bt} END, "
           f"{bg} = CASE WHEN {better} OR {earlier_tie} THEN excluded.{bg} ELSE {t}.{bg} END")
    params = [v for (rid, pid), (n, total, gid) in rows for v in (rid, pid, n, total, gid)]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def score_locked(guess: Guess, rnd: Round) -> engine.Result:
    result = apply_score(guess, rnd)
    guess.save(update_fields=SCORED_FIELDS)
    entry, _ = RoundEntry.objects.select_for_update().get_or_create(round_id=rnd.pk, player_id=guess.player_id)
    entry.attempts += 1
    better = result.total > entry.best_total
    earlier_tie = result.total == entry.best_total and (not entry.best_guess or guess.id < entry.best_guess)
    if better or earlier_tie:
        entry.best_total, entry.best_guess = result.total, guess.id
    entry.save(update_fields=["attempts", "best_total", "best_guess"])
    return result
