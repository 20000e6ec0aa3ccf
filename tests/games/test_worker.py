"""The score handler: idempotent on the JOB id, drops what cannot be scored."""
import itertools
import json

import pytest

from echomq import Drop, Job, ids
from echomq.contrib.django import get_queue
from games import leaderboard, settlement
from games.guesses import submit
from games.models import Guess, Round, RoundEntry
from games.workers import score_guess

from .conftest import drain

pytestmark = pytest.mark.django_db

S = ["🐶", "🐱", "🐭", "🐹", "🐰", "🦊"]


def job_for(g: Guess, attempts: int = 1) -> Job:
    return Job(g.job_id, json.dumps({"guess": g.id, "round": g.round_id}).encode(), attempts, g.player_id, "cm")


def test_handler_run_twice_gives_one_effect(make_player, make_round, valkey):
    p = make_player(keys=5)
    rnd = make_round(secret=S)
    g = submit(p, rnd, ["🐱", "🐶", "🐭", "🐹", "🐰", "🦊"])
    score_guess(job_for(g))
    g.refresh_from_db()
    first = (g.status, g.total, g.scored_at, leaderboard.live(rnd.pk))
    score_guess(job_for(g, attempts=2))  # redelivered after a crash before the ack
    score_guess(job_for(g, attempts=3))
    g.refresh_from_db()
    assert (g.status, g.total, g.scored_at, leaderboard.live(rnd.pk)) == first
    assert g.total == 560 and [m["label"] for m in g.breakdown][:2] == ["ADJACENT", "ADJACENT"]
    entry = RoundEntry.objects.get(round=rnd, player=p)
    assert (entry.attempts, entry.best_total, entry.best_guess) == (1, 560, g.id)
    assert Guess.objects.filter(player=p).count() == 1
    assert {k.decode(): int(v) for k, v in valkey.hgetall("cm:stats").items()} == {
        "deliveries": 3, "scored": 1, "redelivered": 2}


def test_redelivery_reapplies_a_lost_leaderboard_effect(make_player, make_round, valkey):
    p = make_player(keys=5)
    rnd = make_round(secret=S)
    g = submit(p, rnd, S[::-1])
    score_guess(job_for(g))
    valkey.delete(leaderboard.key(rnd.pk))  # the worker died between commit and ZADD
    score_guess(job_for(g, 2))
    assert leaderboard.live(rnd.pk) == leaderboard.from_db(rnd.pk) != {}
    assert RoundEntry.objects.get(round=rnd, player=p).attempts == 1


def test_drops_what_cannot_be_scored(make_player, make_round):
    p = make_player(keys=5)
    rnd = make_round(secret=S)
    g = submit(p, rnd, S)
    with pytest.raises(Drop):
        score_guess(Job(g.job_id, b"not json", 1, p.pk, "cm"))
    with pytest.raises(Drop):
        score_guess(Job(ids.mint("JOB"), json.dumps({"guess": g.id}).encode(), 1, p.pk, "cm"))  # not its job
    with pytest.raises(Drop):
        score_guess(Job(ids.mint("JOB"), json.dumps({"guess": ids.mint("GES")}).encode(), 1, p.pk, "cm"))
    job = job_for(g)
    Round.objects.filter(pk=rnd.pk).delete()  # cascades to its guesses
    with pytest.raises(Drop):
        score_guess(job)


def test_voided_round_guess_is_dropped_not_scored(make_player, make_round):
    p = make_player(keys=5)
    rnd = make_round(secret=S)
    g = submit(p, rnd, S)
    settlement.void_round(rnd.pk)
    with pytest.raises(Drop):
        score_guess(job_for(g))
    g.refresh_from_db()
    assert g.status == "refunded" and g.total is None


def test_perfect_classic_guess_requests_settlement(make_player, make_round, django_capture_on_commit_callbacks):
    p = make_player(keys=5)
    rnd = make_round(secret=S, prize_pool=100)
    with django_capture_on_commit_callbacks(execute=True):
        submit(p, rnd, S)
    assert drain("cm", score_guess)["completed"] == 1
    job = get_queue(settlement.QUEUE).job(settlement.settle_job_id(rnd.pk))
    assert json.loads(job["payload"]) == {"round": rnd.pk, "why": "perfect"}


def test_lanes_keep_one_masher_from_starving_others(make_player, make_round, django_capture_on_commit_callbacks):
    masher, other = make_player(keys=50), make_player(keys=5)
    rnd = make_round(secret=S)
    with django_capture_on_commit_callbacks(execute=True):
        for guess in itertools.islice(itertools.permutations(S[::-1]), 20):  # 20 different guesses
            submit(masher, rnd, list(guess))
        late = submit(other, rnd, S)
    order = []
    q = get_queue("cm")
    while (job := q.claim(lease_ms=5000)) is not None:
        order.append(job.lane)
        score_guess(job)
        q.complete(job.id, job.attempts)
    assert order.index(other.pk) <= 1
    late.refresh_from_db()
    assert late.status == "scored"
