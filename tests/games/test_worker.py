"""The score handler: idempotent on the JOB id, drops what cannot be scored."""
import itertools
import json

import pytest

from echomq import Drop, Job, ids
from echomq.contrib.django import get_queue
from games import leaderboard, settlement
from games.guesses import submit
from games.models import Guess, Round, RoundEntry
from games.workers import score_guess, score_guesses

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


def _fifty_guesses(make_player, make_round):
    """50 queued guesses by 5 players in two rounds, ten per player, so the
    entry upsert adds up several attempts per entry."""
    rounds = [make_round(secret=S), make_round(secret=S)]
    players = [make_player(keys=10) for _ in range(5)]
    perms = itertools.permutations(S[::-1])
    return [submit(players[i % 5], rounds[i % 2], list(next(perms))) for i in range(50)]


def test_a_batch_of_fifty_is_scored_in_five_statements(make_player, make_round, valkey,
                                                       django_assert_num_queries):
    from django.db import connection

    guesses = _fifty_guesses(make_player, make_round)
    # BEGIN (SAVEPOINT here), lock the guesses with their rounds, one UPDATE,
    # one entry upsert, COMMIT (RELEASE): 0.1 statements per guess, goal <= 3.
    # PostgreSQL runs the UPDATE and the upsert as one statement: four.
    with django_assert_num_queries(4 if connection.vendor == "postgresql" else 5):
        results = score_guesses([job_for(g) for g in guesses])
    assert results == [None] * 50
    assert Guess.objects.filter(status="scored").count() == 50
    for rnd_id in {g.round_id for g in guesses}:
        assert leaderboard.live(rnd_id) == leaderboard.from_db(rnd_id) != {}
    # each entry equals what one-by-one scoring gives: attempts counted, the best and earliest
    for e in RoundEntry.objects.all():
        mine = Guess.objects.filter(round_id=e.round_id, player_id=e.player_id).order_by("-total", "id")
        assert (e.attempts, e.best_total, e.best_guess) == (mine.count(), mine[0].total, mine[0].id)
    stats = {k.decode(): int(v) for k, v in valkey.hgetall("cm:stats").items()}
    assert stats == {"deliveries": 50, "scored": 50}


def test_a_redelivered_batch_changes_nothing_and_each_job_gets_its_own_outcome(make_player, make_round, valkey):
    guesses = _fifty_guesses(make_player, make_round)[:6]
    assert score_guesses([job_for(g) for g in guesses[:3]]) == [None] * 3
    before = {e.pk: (e.attempts, e.best_total, e.best_guess) for e in RoundEntry.objects.all()}
    scored_at = dict(Guess.objects.filter(status="scored").values_list("id", "scored_at"))
    valkey.delete(*[leaderboard.key(g.round_id) for g in guesses])  # lost after the first commit
    batch = [job_for(g, attempts=2) for g in guesses[:3]] + [
        job_for(guesses[3]),                                                         # fresh
        Job(ids.mint("JOB"), b"not json", 1, None, "cm"),                            # malformed
        Job(ids.mint("JOB"), json.dumps({"guess": guesses[4].id}).encode(), 1, None, "cm"),  # not its job
        Job(ids.mint("JOB"), json.dumps({"guess": ids.mint("GES")}).encode(), 1, None, "cm"),  # gone
    ]
    results = score_guesses(batch)
    assert results[:4] == [None] * 4 and all(isinstance(r, Drop) for r in results[4:])
    assert dict(Guess.objects.filter(id__in=[g.id for g in guesses[:3]]).values_list("id", "scored_at")) == scored_at
    entries = {e.pk: (e.attempts, e.best_total, e.best_guess) for e in RoundEntry.objects.all()}
    assert sum(a for a, _, _ in entries.values()) == sum(a for a, _, _ in before.values()) + 1
    for rnd_id in {g.round_id for g in guesses[:4]}:
        assert leaderboard.live(rnd_id) == leaderboard.from_db(rnd_id)
    assert Guess.objects.get(pk=guesses[4].pk).status == "queued"


def test_an_unscorable_guess_fails_alone(make_player, make_round):
    bad_round, good_round = make_round(secret=S), make_round(secret=S)
    p = make_player(keys=5)
    bad, good = submit(p, bad_round, S[::-1]), submit(p, good_round, S[::-1])
    Round.objects.filter(pk=bad_round.pk).update(secret=["🐶"] * 6)  # a broken set (issue 12) must not block others
    results = score_guesses([job_for(bad), job_for(good)])
    assert isinstance(results[0], ValueError) and results[1] is None
    assert Guess.objects.get(pk=good.pk).status == "scored" and Guess.objects.get(pk=bad.pk).status == "queued"


def test_lock_batch_loads_what_the_orm_would_in_one_statement(make_player, make_round, valkey,
                                                               django_assert_num_queries):
    """scoring.lock_batch reads the batch without compiling a queryset; what
    it loads must equal the ORM's own reading, converted alike (JSON, aware
    datetimes), and touching it must cost no further query."""
    from django.db import transaction

    from games.scoring import GUESS_FIELDS, ROUND_FIELDS, lock_batch

    guesses = _fifty_guesses(make_player, make_round)[:4]
    score_guesses([job_for(guesses[0])])  # one scored: breakdown and scored_at set
    with transaction.atomic():
        with django_assert_num_queries(1):
            got = lock_batch([g.id for g in guesses] + [ids.mint("GES")])  # a missing id is just absent
            assert sorted(got) == sorted(g.id for g in guesses)
            for g in got.values():
                for f in GUESS_FIELDS:
                    getattr(g, f)
                for f in ROUND_FIELDS:
                    getattr(g.round, f)
    for g in got.values():
        orm = Guess.objects.select_related("round").get(pk=g.pk)
        assert {f: getattr(g, f) for f in GUESS_FIELDS} == {f: getattr(orm, f) for f in GUESS_FIELDS}
        assert {f: getattr(g.round, f) for f in ROUND_FIELDS} == {f: getattr(orm.round, f) for f in ROUND_FIELDS}
    scored = got[guesses[0].id]
    assert scored.status == "scored" and isinstance(scored.breakdown, (dict, list)) and scored.scored_at.tzinfo
    assert lock_batch([]) == {}


def test_run_scoreworker_batches_with_a_window_by_default(monkeypatch, valkey):
    """The score worker's Consumer gets --batch-window-ms (default 20 ms), so
    guesses a few ms apart share a claim, a transaction and an ack."""
    from django.core.management import call_command

    from games.management.commands import run_scoreworker

    ran = []
    monkeypatch.setattr(run_scoreworker, "run_consumers", ran.extend)
    call_command("run_scoreworker")
    call_command("run_scoreworker", "--batch-window-ms", "0")
    assert [(c.batch, c.batch_window_ms) for c in ran] == [(50, 20), (50, 0)]
    assert all(c.handler_many is score_guesses for c in ran)
