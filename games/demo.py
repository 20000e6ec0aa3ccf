"""Make the demo look alive: other players' guesses and standings in the
open rounds, and one settled round with winners.

Everything goes through the real path -- ``guesses.submit`` charges the
wallet and enqueues the job, the score worker's own handler
(``workers.score_guess``) scores it and updates the Valkey leaderboard and
activity, and ``settlement.settle_round`` pays the prizes through the
ledger and asks for the notifications. The job enqueued by ``submit`` is
still delivered to a running score worker later, which finds the guess
scored and changes nothing (the handler is idempotent).

Idempotent: a round that already has guesses is left alone.
"""
from __future__ import annotations

import json
import random
from datetime import timedelta

from django.db.models import F

from echomq import Job

from . import engine, settlement, workers
from .guesses import submit
from .models import EmojiSet, Guess, Player, Round
from .rounds import create_round

SETTLED_TITLE = "Yesterday's classic"
GUESSES_PER_PLAYER = (1, 3)


def _score(guess: Guess) -> None:
    workers.score_guess(Job(guess.job_id, json.dumps({"guess": guess.id, "round": guess.round_id}).encode(),
                            1, guess.player_id, "cm"))


def _near_miss(rnd: Round, rng: random.Random, closeness: int) -> list[str]:
    """A plausible guess: ``closeness`` secret emojis kept in place, the rest
    distinct others from the keyboard; never the secret itself."""
    secret = list(rnd.secret)
    keep = set(rng.sample(range(engine.SIZE), min(closeness, engine.SIZE - 1)))
    others = [e for e in rnd.keyboard if e not in secret]
    rng.shuffle(others)
    pool = iter(others + [e for e in secret])
    guess = []
    for i in range(engine.SIZE):
        if i in keep:
            guess.append(secret[i])
        else:
            e = next(pool)
            while e in guess or e in (secret[j] for j in keep):
                e = next(pool)
            guess.append(e)
    return guess


def play_round(rnd: Round, players: list[Player], rng: random.Random) -> int:
    """Each player sends a few guesses, each scored by the worker's handler."""
    made = 0
    for n, player in enumerate(players):
        for attempt in range(rng.randint(*GUESSES_PER_PLAYER)):
            g = submit(player, rnd, _near_miss(rnd, rng, closeness=min(n + attempt, 4)))
            _score(g)
            made += 1
    return made


def liven(players: list[Player], out=print, *, seed: int | None = None) -> None:
    """Guesses in every open round without any, and one settled round."""
    rng = random.Random(seed)
    for rnd in Round.objects.filter(status=Round.Status.OPEN).order_by("created_at"):
        if not rnd.is_open or rnd.guesses.exists():
            continue
        n = play_round(rnd, rng.sample(players, max(1, len(players) - 1)), rng)
        out(f"round {rnd}: {n} demo guesses scored")
    if not Round.objects.filter(title=SETTLED_TITLE, status=Round.Status.SETTLED).exists():
        es = EmojiSet.objects.order_by("slug").first()
        rnd = create_round(es, kind=Round.Kind.CLASSIC, currency="keys", guess_price=1, prize_pool=60,
                           title=SETTLED_TITLE, duration=timedelta(hours=1))
        play_round(rnd, players, rng)
        done = settlement.settle_round(rnd.pk, force=True)
        yesterday(rnd.pk)
        out(f"round {rnd}: settled, prizes {[(s.player_id, amt) for s, amt in done.payouts]}")


def yesterday(round_id: str, length: timedelta = timedelta(hours=1)) -> None:
    """Move a round just played and settled to yesterday: it ran for
    ``length`` and ended, on time, a day ago (its guesses move with it), so
    no page shows a settled round that "ends" in the future."""
    rnd = Round.objects.get(pk=round_id)
    shift = timedelta(days=1)
    end = rnd.settled_at - shift
    result = {k: v for k, v in rnd.result.items() if k != "scheduled_end"}  # it ended when it was due
    Round.objects.filter(pk=round_id).update(created_at=end - length, ends_at=end, settled_at=end, result=result)
    Guess.objects.filter(round_id=round_id).update(created_at=F("created_at") - shift,
                                                   scored_at=F("scored_at") - shift)
