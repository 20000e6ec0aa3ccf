"""When a round closes: a perfect guess closes a classic round only (the
worker asks only then, and settlement agrees only then, each on its own),
and a blind round cut off between its two settlement steps is retried by
the timer sweep until it is paid."""
from datetime import timedelta

import pytest
from django.utils import timezone

from echomq.contrib.django import get_queue
from games import rounds, settlement
from games.guesses import submit
from games.models import LedgerEntry, Round
from games.workers import score_guess, settle

from .conftest import drain, queue_depth
from .test_worker import job_for

pytestmark = pytest.mark.django_db

S = ["🐶", "🐱", "🐭", "🐹", "🐰", "🦊"]
FIVE_HUNDRED = ["🐼"] + S[1:]


def prizes(round_id):
    return {e.player_id: e.delta for e in LedgerEntry.objects.filter(reason="prize", reference=round_id)}


@pytest.mark.parametrize("kind, asked", [("classic", True), ("blind", False)])
def test_the_worker_asks_to_settle_on_a_600_only_in_a_classic_round(kind, asked, make_player, make_round):
    """Scoring a 600 requests settlement for a classic round, never for a blind one."""
    rnd = make_round(kind=kind, secret=S, prize_pool=10)
    score_guess(job_for(submit(make_player(), rnd, S)))
    job = get_queue(settlement.QUEUE).job(settlement.settle_job_id(rnd.pk))
    assert (job is not None) is asked
    assert queue_depth(settlement.QUEUE) == (1 if asked else 0)


def test_a_600_does_not_make_a_running_blind_round_due(make_player, make_round):
    """Settlement itself refuses to close a blind round on a 600 before its end,
    even when a settle request arrives: it stays open, unrevealed, unpaid."""
    a = make_player()
    rnd = make_round(kind="blind", secret=S, prize_pool=10)
    score_guess(job_for(submit(a, rnd, S)))
    assert settlement.is_due(Round.objects.get(pk=rnd.pk)) is False
    assert settlement.settle_round(rnd.pk).action == "not_due"
    settlement.request_settlement(rnd.pk, "perfect")
    assert drain(settlement.QUEUE, settle)["completed"] == 1
    rnd.refresh_from_db()
    assert rnd.status == "open" and rnd.public_secret is None and prizes(rnd.pk) == {}


def test_a_blind_round_stuck_revealing_is_retried_by_the_timer_sweep(make_player, make_round, monkeypatch):
    """A crash after the blind round is committed to ``revealing`` but before the
    reveal leaves it there; the next timer sweep asks again and it is paid."""
    a = make_player()
    rnd = make_round(kind="blind", secret=S, prize_pool=10)
    score_guess(job_for(submit(a, rnd, FIVE_HUNDRED)))
    Round.objects.filter(pk=rnd.pk).update(ends_at=timezone.now() - timedelta(seconds=1))

    def crash(*args):
        raise RuntimeError("settling process killed before the reveal")

    with monkeypatch.context() as m:
        m.setattr(rounds, "verify_commitment", crash)
        with pytest.raises(RuntimeError):
            settlement.settle_round(rnd.pk)
    assert Round.objects.get(pk=rnd.pk).status == "revealing" and prizes(rnd.pk) == {}

    assert settlement.close_due_rounds() == 1
    assert drain(settlement.QUEUE, settle)["completed"] == 1
    rnd.refresh_from_db()
    assert rnd.status == "settled" and rnd.public_secret == S and prizes(rnd.pk) == {a.pk: 10}
    assert settlement.close_due_rounds() == 0
