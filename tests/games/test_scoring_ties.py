"""Ties at a best total go to whoever reached it first: the round entry's
``best_guess`` (the worker's batch SQL and settlement's one-guess path
alike, whatever order guesses are scored in), and the ranking that pays a
blind round, ordered to the millisecond."""
import time

import pytest

from echomq import ids
from games import leaderboard, settlement
from games.guesses import submit
from games.models import LedgerEntry, RoundEntry
from games.workers import score_guesses

from .test_worker import job_for

pytestmark = pytest.mark.django_db

S = ["🐶", "🐱", "🐭", "🐹", "🐰", "🦊"]
FIRST_500 = ["🐼"] + S[1:]
SECOND_500 = ["🐨"] + S[1:]


def entry(rnd, player):
    e = RoundEntry.objects.get(round=rnd, player=player)
    return e.attempts, e.best_total, e.best_guess


@pytest.mark.parametrize("scored_first", ["earlier", "later"])
def test_the_worker_keeps_the_earlier_guess_as_best_on_a_tie(scored_first, make_player, make_round):
    """Batch path (one upsert per batch): two 500s scored in separate batches,
    in either order, leave best_guess on the one submitted first."""
    p = make_player()
    rnd = make_round(secret=S)
    early, late = submit(p, rnd, FIRST_500), submit(p, rnd, SECOND_500)
    order = [early, late] if scored_first == "earlier" else [late, early]
    for g in order:
        assert score_guesses([job_for(g)]) == [None]
    assert entry(rnd, p) == (2, 500, early.id)


@pytest.mark.parametrize("worker_scored", [None, "later"])
def test_settlement_keeps_the_earlier_guess_as_best_on_a_tie(worker_scored, make_player, make_round):
    """One-guess path (settlement's stragglers): the earlier of two 500s is the
    best guess, whether both are stragglers or the later one was scored first."""
    p = make_player()
    rnd = make_round(secret=S)
    early, late = submit(p, rnd, FIRST_500), submit(p, rnd, SECOND_500)
    if worker_scored == "later":
        score_guesses([job_for(late)])
    settlement.settle_round(rnd.pk, force=True)
    assert entry(rnd, p) == (2, 500, early.id)


def test_blind_ties_are_ordered_to_the_millisecond(make_player, make_round, monkeypatch):
    """Two equal totals reached 100 ms apart, in the same second of the round:
    the earlier (here the player whose id sorts last) takes rank 1's share."""
    a, b = make_player(), make_player()  # a's id sorts first
    assert a.pk < b.pk
    now_ns = [time.time_ns() // 10**9 * 10**9]  # the start of a whole second
    other_node = (ids._default.node + 1) % (ids.MAX_NODE + 1)  # never reuses an id the real minter gave
    monkeypatch.setattr(ids, "_default", ids.Minter(other_node, clock=lambda: now_ns[0]))
    rnd = make_round(kind="blind", secret=S, prize_pool=100, weights=[3, 1])
    now_ns[0] += 100 * 10**6
    gb = submit(b, rnd, FIRST_500)
    now_ns[0] += 100 * 10**6
    ga = submit(a, rnd, FIRST_500)
    score_guesses([job_for(ga), job_for(gb)])
    settlement.settle_round(rnd.pk, force=True)
    assert {e.player_id: e.delta for e in LedgerEntry.objects.filter(reason="prize", reference=rnd.pk)} == {
        b.pk: 75, a.pk: 25}
    assert [s.player_id for s in leaderboard.standings_from_db(rnd.pk)] == [b.pk, a.pk]
    assert (leaderboard.offset_ms(gb.id, rnd.pk), leaderboard.offset_ms(ga.id, rnd.pk)) == (100, 200)
