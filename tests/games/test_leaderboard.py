"""The Valkey leaderboard: best total, ties to the earliest, rebuildable."""
import pytest

from games import leaderboard
from games.guesses import submit
from games.workers import score_guess

from .test_worker import job_for

pytestmark = pytest.mark.django_db

S = ["🐶", "🐱", "🐭", "🐹", "🐰", "🦊"]
MISS = "🐼"
MISSES = ["🐼", "🐨", "🐯", "🦁", "🐮", "🐷"]  # six distinct emojis not in S: a guess scoring 0


def test_best_total_wins_ties_go_to_the_earliest_and_rebuild_matches(make_player, make_round, valkey):
    a, b, c = make_player(keys=9), make_player(keys=9), make_player(keys=9)
    rnd = make_round(secret=S)
    ga1 = submit(a, rnd, [MISS] + S[1:])          # 500
    gb1 = submit(b, rnd, [MISS] + S[1:])          # 500, later than a
    gc1 = submit(c, rnd, MISSES[:2] + S[2:])    # 400
    ga2 = submit(a, rnd, MISSES)              # 0: must not lower a's best
    gc2 = submit(c, rnd, S[::-1])                 # 100+... lower than 400? keep best
    # score out of order, some twice
    for g in (gc2, ga2, gb1, ga1, gc1, gb1, ga2):
        score_guess(job_for(g))
    top = leaderboard.top(rnd.pk)
    assert [(s.player_id, s.total) for s in top] == [(a.pk, 500), (b.pk, 500), (c.pk, 400)]
    assert top[0].offset_ms <= top[1].offset_ms
    live = leaderboard.live(rnd.pk)
    assert live == leaderboard.from_db(rnd.pk)
    assert [s.player_id for s in leaderboard.standings_from_db(rnd.pk)] == [a.pk, b.pk, c.pk]
    valkey.delete(leaderboard.key(rnd.pk))
    assert leaderboard.rebuild(rnd.pk) == 3
    assert leaderboard.live(rnd.pk) == live


def test_composite_score_round_trips_and_stays_exact():
    worst = leaderboard.composite(600, 0)
    assert worst < 2**53
    assert leaderboard.split(float(leaderboard.composite(560, 12345))) == (560, 12345)
    assert leaderboard.composite(500, 0) > leaderboard.composite(500, 1) > leaderboard.composite(480, 0)
