"""The payout rules have one home (games.payouts): settlement pays with it
and the pages and notifications describe it, so words and money agree."""
import pytest

from games import payouts, settlement
from games.guesses import submit
from games.models import LedgerEntry, Notification
from games.notifications import deliver
from games.workers import score_guess

from .test_worker import job_for

pytestmark = pytest.mark.django_db

S = ["🐶", "🐱", "🐭", "🐹", "🐰", "🦊"]
MISS = "🐼"
MISSES = ["🐼", "🐨", "🐯", "🦁", "🐮", "🐷"]  # distinct, none in S: a guess repeats no emoji
HALF = [MISSES[0], S[1], MISSES[1], S[3], MISSES[2], MISSES[3]]  # 200


def prizes(round_id):
    return {e.player_id: e.delta for e in LedgerEntry.objects.filter(reason="prize", reference=round_id)}


def play(rnd, guesses):
    for player, guess in guesses:
        score_guess(job_for(submit(player, rnd, guess)))


def test_a_classic_tie_shares_the_pool_and_both_are_told_they_tied_for_first(make_player, make_round):
    """The reported bug: a 160/160 tie paid each 💎10 and told the second '#2'."""
    a, b = make_player("first"), make_player("second")
    rnd = make_round(secret=S, prize_pool=20, currency="clips", title="Free play")
    for p in (a, b):
        from games import wallet
        wallet.grant(p, "clips", 5)
    play(rnd, [(a, HALF), (b, HALF)])
    settlement.settle_round(rnd.pk, force=True)
    assert prizes(rnd.pk) == {a.pk: 10, b.pk: 10}
    rnd.refresh_from_db()
    told = {p["player"]: payouts.told(rnd.kind, p) for p in rnd.result["payouts"]}
    assert told[b.pk] == told[a.pk] == "You tied for #1 (2 players share the pool) with 200/600 and won 💎 10."
    for p in (a, b):
        text = deliver(p.pk, rnd.pk, Notification.Kind.SETTLED).text
        assert "you won 10 diamonds with 200/600. You tied for #1: 2 players split the pool." in text
        assert "#2" not in text


def test_blind_ties_go_to_the_earliest_as_the_rules_say(make_player, make_round):
    a, b = make_player(), make_player()
    rnd = make_round(kind="blind", secret=S, prize_pool=100, weights=[3, 1])
    play(rnd, [(a, HALF), (b, HALF)])
    settlement.settle_round(rnd.pk, force=True)
    assert prizes(rnd.pk) == {a.pk: 75, b.pk: 25}
    rnd.refresh_from_db()
    assert [(p["place"], p["tied"]) for p in rnd.result["payouts"]] == [(1, 1), (2, 1)]
    assert "equal totals go to whoever reached them first" in payouts.explain_round(rnd)["summary"]


@pytest.mark.parametrize("pool", [0, 1, 7, 100, 1001])
def test_the_explained_examples_are_what_settlement_pays(make_player, make_round, pool):
    """The classic table's '2 tied' line and the blind table are computed by
    the paying functions; check them against real settled rounds."""
    classic = make_round(secret=S, prize_pool=pool)
    players = [make_player(keys=5) for _ in range(5)]
    play(classic, [(players[0], HALF), (players[1], HALF), (players[2], MISSES[:5] + [S[5]])])
    settlement.settle_round(classic.pk, force=True)
    table = dict(payouts.explain("classic", pool)["table"])
    assert set(prizes(classic.pk).values()) <= {table["2 tied at the top, each"]}
    blind = make_round(kind="blind", secret=S, prize_pool=pool)
    play(blind, [(p, S[: 5 - i] + MISSES[:1 + i]) for i, p in enumerate(players)])
    settlement.settle_round(blind.pk, force=True)
    paid = prizes(blind.pk)
    expected = dict(payouts.explain("blind", pool, list(blind.weights))["table"])
    assert [paid.get(p.pk, 0) for p in players] == [expected.get(f"#{i}", 0) for i in range(1, 6)]


def test_classic_words_never_mention_blind_weights():
    words = payouts.explain("classic", 100)
    text = " ".join([words["summary"], *words["lines"]])
    assert words["weights"] is None and "40" not in text and "weight" not in text
    assert "split the pool evenly" in text and "house" in text
    blind = payouts.explain("blind", 100, [40, 25, 15, 12, 8])
    assert "40/25/15/12/8" in blind["summary"] and "rank 1" in " ".join(blind["lines"])


def test_place_uses_competition_ranking_for_shared_prizes():
    from games.leaderboard import Standing

    st = [Standing(1, "a", 300, 1), Standing(2, "b", 300, 2), Standing(3, "c", 100, 3)]
    assert [payouts.place("classic", st, s) for s in st] == [(1, 2), (1, 2), (3, 1)]
    assert [payouts.place("blind", st, s) for s in st] == [(1, 1), (2, 1), (3, 1)]


def test_a_result_written_before_places_reads_by_rank_as_a_single_winner():
    """Older results carry neither ``place`` nor ``tied``: the payout reads
    by its rank and as no tie."""
    old = {"rank": 2, "player": "PLR0000000000A", "total": 160, "prize": 5}
    assert payouts.told("classic", old) == "You placed #2 with 160/600 and won 💎 5."
    tied = {**old, "place": 1, "tied": 2}
    assert payouts.told("classic", tied) == "You tied for #1 (2 players share the pool) with 160/600 and won 💎 5."
