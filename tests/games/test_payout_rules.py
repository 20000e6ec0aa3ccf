"""The payout rules at their edges, as settlement pays them: only a tie at
the best total shares a classic pool, nobody above 0 means nobody is paid,
and a blind round never ranks a 0 total."""
import pytest

from games import settlement
from games.guesses import submit
from games.models import LedgerEntry, Round
from games.workers import score_guess

from .test_worker import job_for

pytestmark = pytest.mark.django_db

S = ["🐶", "🐱", "🐭", "🐹", "🐰", "🦊"]
MISSES = ["🐼", "🐨", "🐯", "🦁", "🐮", "🐷"]  # distinct, none in S: a guess scoring 0
FIVE_HUNDRED = [MISSES[0]] + S[1:]               # 500
FOUR_EIGHTY = [S[1], MISSES[0]] + S[2:]          # 80 + 0 + 400 = 480


def prizes(round_id):
    return {e.player_id: e.delta for e in LedgerEntry.objects.filter(reason="prize", reference=round_id)}


def settle(rnd, plays):
    for player, guess in plays:
        score_guess(job_for(submit(player, rnd, guess)))
    out = settlement.settle_round(rnd.pk, force=True)
    assert out.action == "settled"
    return Round.objects.get(pk=rnd.pk)


def test_a_classic_runner_up_20_points_behind_gets_nothing(make_player, make_round):
    """classic: only players tied AT the best total share the pool; 480 is not 500."""
    a, b = make_player(), make_player()
    rnd = settle(make_round(secret=S, prize_pool=100), [(a, FIVE_HUNDRED), (b, FOUR_EIGHTY)])
    assert prizes(rnd.pk) == {a.pk: 100}
    assert rnd.result["house"] == 0
    assert [(p["player"], p["total"], p["prize"]) for p in rnd.result["payouts"]] == [(a.pk, 500, 100)]


def test_a_classic_round_where_everyone_scored_0_pays_nobody(make_player, make_round):
    """classic: a best total of 0 wins nothing; the house keeps the whole pool."""
    a, b = make_player(), make_player()
    rnd = settle(make_round(secret=S, prize_pool=10), [(a, MISSES), (b, MISSES[::-1])])
    assert prizes(rnd.pk) == {}
    assert rnd.result["house"] == 10 and rnd.result["payouts"] == [] and rnd.result["players"] == 2


def test_a_blind_round_does_not_rank_a_0_total(make_player, make_round):
    """blind: only totals above 0 are ranked, so the one scorer's weight alone
    is used and takes the whole pool; the 0-total player gets no share."""
    a, b = make_player(), make_player()
    rnd = settle(make_round(kind="blind", secret=S, prize_pool=100), [(a, FIVE_HUNDRED), (b, MISSES)])
    assert prizes(rnd.pk) == {a.pk: 100}
    assert [(p["rank"], p["player"], p["prize"]) for p in rnd.result["payouts"]] == [(1, a.pk, 100)]
