"""The pure engine against the spec's vectors."""
import pytest

from games import engine

A, B, C, D, E, F, X = "🐶", "🐕‍🦺", "🐻‍❄️", "🦊", "🐼", "🐨", "🦄"
SECRET = [A, B, C, D, E, F]


@pytest.mark.parametrize("guess,total", [
    ([A, B, C, D, E, F], 600),
    ([B, A, C, D, E, F], 560),
    ([F, B, C, D, E, A], 400),
    ([X, B, C, D, E, F], 500),
    ([X, X, X, X, X, X], 0),
    ([F, E, D, C, B, A], 100 - 100 + 100 - 60 + 100 - 20 + 100 - 20 + 100 - 60 + 0),
])
def test_spec_vectors(guess, total):
    result = engine.score(SECRET, guess)
    assert result.total == total
    assert result.percentage == round(total / 600 * 100)


def test_breakdown_labels_by_distance():
    # position i holds the secret's emoji from position 0: distance = i
    labels = [engine.score(SECRET, [A if k == i else X for k in range(6)]).marks[i].label for i in range(6)]
    assert labels == ["EXACT", "ADJACENT", "NEAR", "NEAR", "FAR", "MAX"]
    points = [engine.score(SECRET, [A if k == i else X for k in range(6)]).total for i in range(6)]
    assert points == [100, 80, 60, 40, 20, 0]
    miss = engine.score(SECRET, [X] * 6).marks[0]
    assert (miss.label, miss.found_at, miss.points) == ("MISS", None, 0)


def test_repeats_score_each_position_and_multicodepoint_is_one_emoji():
    result = engine.score(SECRET, [B, B, B, B, B, B])
    assert [m.points for m in result.marks] == [80, 100, 80, 60, 40, 20]
    assert result.breakdown()[1] == {"position": 1, "emoji": B, "found_at": 1, "points": 100, "label": "EXACT"}
    assert engine.score(SECRET, SECRET).perfect


def test_engine_refuses_bad_input():
    with pytest.raises(ValueError):
        engine.score([A, A, C, D, E, F], SECRET)
    with pytest.raises(ValueError):
        engine.score(SECRET, SECRET[:5])
