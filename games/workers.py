"""Queue handlers: scoring (``cm``) and settlement (``cm.settle``).
(Notifications are a Django task: ``games.tasks``.)

Delivery is at-least-once, so every handler is idempotent on its job:

* ``score_guesses`` (the score worker's ``handler_many``) takes a batch of
  jobs and, in one transaction, locks their guess rows (reading their
  rounds in the same SELECT, ``scoring.lock_batch``: built once per batch
  size, not compiled per batch) and writes every queued -> scored
  transition with its round-entry attempt in one UPDATE and one upsert
  (``scoring.score_many``; one statement on PostgreSQL): five statements
  for the whole batch, four on PostgreSQL. Only a guess found queued under
  its row lock is scored and counted, so a redelivered job changes nothing
  in the database; it
  re-applies just the idempotent effects (leaderboard ``ZADD GT``, the
  settle request after a perfect classic guess), which a crash may have cut
  off the first time. After the commit, every leaderboard update and the
  stats counters go to Valkey in one pipeline.
* a guess or round that no longer exists, a voided round's guess and a
  malformed payload are acknowledged and dropped (``Drop``), never retried;
  each job of a batch gets its own outcome.
* a transient database error asks for a retry after a short delay (and
  drops the thread's connection so the retry opens a fresh one). Worker
  threads keep their database connection between jobs.
"""
from __future__ import annotations

import json
import logging
import time

from django.db import OperationalError, close_old_connections, transaction

from echomq import Drop, Job, Retry
from echomq.contrib.django import get_client

from . import live, settlement
from . import metrics as game_metrics
from .models import Guess, Round
from .scoring import apply_score, lock_batch, score_many

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
    [result] = score_guesses([job])
    if isinstance(result, BaseException):
        raise result


def score_guesses(jobs: list[Job]) -> list[BaseException | None]:
    """Score the guesses named by a batch of jobs; one result per job (None:
    done; an exception: that job's outcome, see ``Consumer(handler_many=)``)."""
    began = time.monotonic()
    results: dict[str, BaseException | None] = {}
    named: dict[str, list[Job]] = {}
    for job in jobs:
        try:
            named.setdefault(_payload(job, "guess")["guess"], []).append(job)
        except Drop as exc:
            results[job.id] = exc
    try:
        with transaction.atomic():
            fresh, again = _score_batch(named, results)
    except OperationalError as exc:  # e.g. SQLite busy, a dropped connection
        close_old_connections()
        retry = Retry(f"database: {exc}", delay_ms=250)
        return [results.get(j.id) if isinstance(results.get(j.id), Drop) else retry for j in jobs]
    except Exception as exc:  # a bug or a constraint: every job of the batch retries with it
        return [results.get(j.id) if isinstance(results.get(j.id), Drop) else exc for j in jobs]
    for g, _ in fresh:
        game_metrics.scored(g)
    counters = {"deliveries": sum(len(js) for js in named.values()), "scored": len(fresh), "redelivered": len(again)}
    try:
        live.record_many([(rnd.pk, g.player_id, g.id, g.total) for g, rnd in fresh + again],
                                counters=counters, stats_key=STATS_KEY)
    except Exception as exc:  # scored in the database; a redelivery re-applies the leaderboard
        retry = Retry(f"leaderboard not updated: {exc}", delay_ms=500)
        for g, _ in fresh + again:
            results[g.job_id] = retry
    perfect = {rnd.pk for g, rnd in fresh + again
               if rnd.kind == Round.Kind.CLASSIC and g.total == 600 and rnd.status == Round.Status.OPEN}
    for round_id in sorted(perfect):
        settlement.request_settlement(round_id, "perfect")
    if log.isEnabledFor(logging.INFO):  # per batch: only pay for the figures when they are logged
        dropped = sum(isinstance(r, Drop) for r in results.values())
        log.info("scored %d guess(es), %d redelivered, %d dropped, %d failed in %.1f ms", len(fresh), len(again),
                 dropped, sum(isinstance(r, BaseException) for r in results.values()) - dropped,
                 (time.monotonic() - began) * 1000)
    return [results.get(j.id) for j in jobs]


def _score_batch(named: dict[str, list[Job]], results: dict) -> tuple[list, list]:
    """Inside the transaction: lock, check, score. Answers (fresh, again):
    the (guess, round) pairs scored now and those scored before."""
    # One statement: the guesses, row-locked in id order (one lock order for
    # every worker), with what scoring needs of their rounds (not locked).
    guesses = lock_batch(named)
    fresh, again = [], []
    for guess_id, named_by in named.items():
        guess = guesses.get(guess_id)
        for job in named_by:
            rnd = guess.round if guess is not None else None
            if guess is None:
                results[job.id] = Drop("guess no longer exists")
            elif guess.job_id != job.id:
                results[job.id] = Drop(f"job {job.id} does not belong to guess {guess.id}")
            elif rnd is None:
                results[job.id] = Drop("round no longer exists")
            elif guess.status == Guess.Status.QUEUED and rnd.status == Round.Status.VOIDED:
                results[job.id] = Drop("round was voided; the guess was refunded")
            elif guess.status == Guess.Status.QUEUED:
                try:
                    apply_score(guess, rnd)
                except ValueError as exc:  # a round whose secret cannot be scored: retried, then dead
                    results[job.id] = exc
                    continue
                results[job.id] = None
                fresh.append((guess, rnd))
            elif guess.status == Guess.Status.SCORED:
                results[job.id] = None
                again.append((guess, rnd))
            else:
                results[job.id] = Drop(f"guess is {guess.status}")
    score_many([g for g, _ in fresh])
    return fresh, again


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

