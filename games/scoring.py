"""Scoring guesses in the database: the queued -> scored transition.

The caller holds the guess row locks inside a transaction and has checked
the guesses are still queued, so each attempt is counted exactly once however
many times its job is delivered. The Valkey leaderboard is updated by the
caller after commit (``ZADD GT`` makes that idempotent).

``lock_batch`` and ``score_many`` are the worker's path: the batch's guess
rows locked and read with their rounds in one SELECT, then written with one
UPDATE of the guesses and one upsert of the round entries (one statement on
PostgreSQL, two on SQLite);
``score_locked`` is one guess at a time, for settlement's stragglers.
"""
from __future__ import annotations

from django.db import DEFAULT_DB_ALIAS, connections
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


# What scoring a batch reads: of the guess, what the worker checks, scores,
# writes and measures (created_at: the submit-to-scored latency metric); of
# its round, what scoring and the perfect-guess check need.
GUESS_FIELDS = ("id", "job_id", "player_id", "round_id", "emojis_final", "status", "total", "breakdown", "scored_at",
                "created_at")
ROUND_FIELDS = ("id", "secret", "kind", "status")
_lock_sql: dict[tuple, tuple[str, list]] = {}  # (vendor, alias, n) -> (SQL, one converter list per column)


def _loaded(model, attnames) -> list:
    return [f for f in model._meta.concrete_fields if f.attname in attnames]


def _lock_statement(connection, n: int) -> tuple[str, list]:
    """The SELECT of ``lock_batch`` for ``n`` ids, and each column's
    converters (the ORM's own, from the fields), built once per batch size:
    compiling the equivalent queryset cost more CPU than scoring the batch."""
    key = (connection.vendor, connection.alias, n)
    found = _lock_sql.get(key)
    if found is not None:
        return found
    qn = connection.ops.quote_name
    # Model.from_db takes the loaded values in the model's field order.
    cols = [f.get_col("g") for f in _loaded(Guess, GUESS_FIELDS)]
    cols += [f.get_col("r") for f in _loaded(Round, ROUND_FIELDS)]
    if len(cols) != len(GUESS_FIELDS) + len(ROUND_FIELDS):
        raise RuntimeError("GUESS_FIELDS and ROUND_FIELDS must name concrete fields by attname")
    select = ", ".join(f"{qn(c.alias)}.{qn(c.target.column)}" for c in cols)
    lock = ""
    if connection.features.has_select_for_update:  # SQLite has none: its write lock serialises workers
        of = (qn("g"),) if connection.features.has_select_for_update_of else ()
        lock = " " + connection.ops.for_update_sql(of=of)
    sql = (f"SELECT {select} FROM {qn(Guess._meta.db_table)} {qn('g')} "
           f"INNER JOIN {qn(Round._meta.db_table)} {qn('r')} ON ({qn('g')}.{qn('round_id')} = {qn('r')}.{qn('id')}) "
           f"WHERE {qn('g')}.{qn('id')} IN ({', '.join(['%s'] * n)}) ORDER BY {qn('g')}.{qn('id')} ASC{lock}")
    converters = [(i, (convs, c)) for i, c in enumerate(cols)
                  if (convs := connection.ops.get_db_converters(c) + c.get_db_converters(connection))]
    _lock_sql[key] = found = (sql, converters)
    return found


def lock_batch(guess_ids) -> dict[str, Guess]:
    """Inside a transaction: lock the guess rows in id order (one lock order
    for every worker; the rounds are read, not locked) and answer {id: guess}
    with ``GUESS_FIELDS`` loaded and ``guess.round`` holding ``ROUND_FIELDS``
    -- what ``select_for_update(of=("self",)).select_related("round").only(…)``
    gives, in one statement, without compiling a queryset per batch."""
    ids = sorted(guess_ids)
    if not ids:
        return {}
    connection = connections[DEFAULT_DB_ALIAS]  # resolved once: each ``db.connection.x`` is a thread-local lookup
    sql, converters = _lock_statement(connection, len(ids))
    with connection.cursor() as cursor:
        cursor.execute(sql, ids)
        rows = cursor.fetchall()
    n, alias, out = len(GUESS_FIELDS), connection.alias, {}
    for row in rows:
        values = list(row)
        for i, (convs, col) in converters:
            for conv in convs:
                values[i] = conv(values[i], col, connection)
        guess = Guess.from_db(alias, GUESS_FIELDS, values[:n])
        Guess.round.field.set_cached_value(guess, Round.from_db(alias, ROUND_FIELDS, values[n:]))
        out[guess.pk] = guess
    return out


def score_many(scored: list[Guess]) -> None:
    """Write a batch of guesses that ``apply_score`` has scored: one UPDATE
    and one round-entry upsert, whatever the batch size. On PostgreSQL both
    go in one statement (the UPDATE as a data-modifying CTE, which runs to
    completion whether or not the INSERT reads it); SQLite has no such CTE,
    so it takes two."""
    if not scored:
        return
    connection = connections[DEFAULT_DB_ALIAS]  # resolved once: each ``db.connection.x`` is a thread-local lookup
    values, update, u_params = _update_scored(connection, scored)
    insert, e_params = _add_to_entries(connection, scored)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(f"WITH v (id, total, breakdown, scored_at) AS ({values}), scored AS ({update}) {insert}",
                           u_params + e_params)
        else:
            cursor.execute(f"WITH v (id, total, breakdown, scored_at) AS ({values}) {update}", u_params)
            cursor.execute(insert, e_params)


def _update_scored(connection, scored: list[Guess]) -> tuple[str, str, list]:
    """One ``UPDATE … FROM (VALUES …) v`` for the batch (PostgreSQL and
    SQLite alike; ``bulk_update``'s CASE per field costs a hundred times the
    CPU): the VALUES list, the UPDATE reading it as ``v``, and their params."""
    qn, pg = connection.ops.quote_name, connection.vendor == "postgresql"
    t = qn(Guess._meta.db_table)
    values = "VALUES " + ", ".join(["(%s, %s, %s, %s)"] * len(scored))
    update = (f"UPDATE {t} SET {qn('status')} = %s, {qn('total')} = v.total, "
              f"{qn('breakdown')} = v.breakdown{'::jsonb' if pg else ''}, {qn('scored_at')} = v.scored_at "
              f"FROM v WHERE {t}.{qn('id')} = v.id")
    prep, adapt = Guess._meta.get_field("breakdown").get_db_prep_value, connection.ops.adapt_datetimefield_value
    params = [v for g in scored for v in (g.id, g.total, prep(g.breakdown, connection), adapt(g.scored_at))]
    return values, update, params + [Guess.Status.SCORED]


def _add_to_entries(connection, scored: list[Guess]) -> tuple[str, list]:
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
    return sql, params


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
