"""Settlement: payouts, the blind reveal, exactly once under racing closers,
voiding with refunds, notifications through the notify task."""
import threading
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.tasks import task_backends
from django.utils import timezone

from echomq.contrib.django import get_queue
from echomq.contrib.django.tasks import Runner
from games import rounds, settlement, tasks, wallet
from games.guesses import submit
from games.models import LedgerEntry, Notification, Round, RoundEntry
from games.workers import score_guess, settle

from .conftest import drain, queue_depth
from .test_worker import job_for

pytestmark = pytest.mark.django_db

S = ["🐶", "🐱", "🐭", "🐹", "🐰", "🦊"]
MISS = "🐼"
MISSES = ["🐼", "🐨", "🐯", "🦁", "🐮", "🐷"]  # six distinct emojis not in S: a guess scoring 0


def expire(rnd):
    Round.objects.filter(pk=rnd.pk).update(ends_at=timezone.now() - timedelta(seconds=1))


def prizes(round_id):
    return {e.player_id: e.delta for e in LedgerEntry.objects.filter(reason="prize", reference=round_id)}


def test_classic_winner_takes_all_ties_split_and_house_keeps_the_remainder(make_player, make_round):
    a, b, c = make_player(), make_player(), make_player()
    rnd = make_round(secret=S, prize_pool=101)
    for p, guess in ((a, [MISS] + S[1:]), (b, [MISS] + S[1:]), (c, MISSES)):
        score_guess(job_for(submit(p, rnd, guess)))
    assert settlement.settle_round(rnd.pk).action == "not_due"
    expire(rnd)
    out = settlement.settle_round(rnd.pk)
    assert out.action == "settled" and out.house == 1
    assert prizes(rnd.pk) == {a.pk: 50, b.pk: 50}
    rnd.refresh_from_db()
    assert rnd.status == "settled" and rnd.result["house"] == 1 and rnd.public_secret == S
    assert wallet.mismatched_wallets() == []


def test_settlement_scores_guesses_still_queued(make_player, make_round):
    a, b = make_player(), make_player()
    rnd = make_round(secret=S, prize_pool=10)
    score_guess(job_for(submit(a, rnd, [MISS] + S[1:])))
    late = submit(b, rnd, S)  # submitted in time, not yet scored by a worker
    out = settlement.settle_round(rnd.pk, force=True)
    assert out.action == "settled" and prizes(rnd.pk) == {b.pk: 10}
    late.refresh_from_db()
    assert late.status == "scored" and late.total == 600
    score_guess(job_for(late, 2))  # the worker's delivery arrives afterwards: no second attempt
    assert RoundEntry.objects.get(round=rnd, player=b).attempts == 1


def test_perfect_guess_closes_classic_round_through_the_queue(make_player, make_round,
                                                             django_capture_on_commit_callbacks):
    a = make_player()
    rnd = make_round(secret=S, prize_pool=30)
    with django_capture_on_commit_callbacks(execute=True):
        submit(a, rnd, S)
    drain("cm", score_guess)
    assert drain(settlement.QUEUE, settle)["completed"] == 1
    rnd.refresh_from_db()
    assert rnd.status == "settled" and prizes(rnd.pk) == {a.pk: 30}
    assert drain(settlement.QUEUE, settle)["completed"] == 0


def test_blind_round_reveals_pays_top_k_with_dust_to_rank_one_and_commitment_verifies(make_player, make_round):
    players = [make_player(keys=5) for _ in range(7)]
    rnd = make_round(kind="blind", secret=S, prize_pool=1001, weights=[40, 25, 15, 12, 8])
    published = rnd.commitment
    assert len(rnd.nonce) == 32 and int(rnd.nonce, 16) >= 0 and rnd.nonce == rnd.nonce.lower()
    totals = []
    for i, p in enumerate(players[:6]):  # the 7th never scores above 0
        guess = S[: 6 - i] + MISSES[:i]   # 600, 500, ..., 100
        score_guess(job_for(submit(p, rnd, guess)))
        totals.append(600 - 100 * i)
    score_guess(job_for(submit(players[6], rnd, MISSES)))
    assert rnd.public_secret is None and rnd.public_nonce is None
    expire(rnd)
    out = settlement.settle_round(rnd.pk)
    assert out.action == "settled"
    rnd.refresh_from_db()
    shares = [1001 * w // 100 for w in (40, 25, 15, 12, 8)]
    shares[0] += 1001 - sum(shares)
    assert prizes(rnd.pk) == {p.pk: s for p, s in zip(players[:5], shares)}
    assert sum(prizes(rnd.pk).values()) == 1001
    assert rnd.status == "settled" and rnd.commitment == published
    assert rounds.verify_commitment(published, rnd.public_secret, rnd.public_nonce)
    manual = __import__("hashlib").sha256(("\x1e".join(rnd.public_secret) + "\x1e" + rnd.public_nonce).encode()).hexdigest()
    assert manual == published


def test_blind_with_fewer_players_than_weights_renormalises(make_player, make_round):
    a, b = make_player(), make_player()
    rnd = make_round(kind="blind", secret=S, prize_pool=100)
    score_guess(job_for(submit(a, rnd, S)))
    score_guess(job_for(submit(b, rnd, [MISS] + S[1:])))
    settlement.settle_round(rnd.pk, force=True)
    assert prizes(rnd.pk) == {a.pk: 62, b.pk: 38}  # 100*40//65 = 61 (+1 dust), 100*25//65 = 38


def test_tampered_blind_round_is_voided_and_refunded(make_player, make_round):
    a = make_player(keys=3)
    rnd = make_round(kind="blind", secret=S, prize_pool=100)
    submit(a, rnd, S)
    Round.objects.filter(pk=rnd.pk).update(secret=S[::-1])  # the secret changed after the commitment
    out = settlement.settle_round(rnd.pk, force=True)
    assert out.action == "voided" and prizes(rnd.pk) == {}
    assert wallet.balances(a)["keys"] == 3 == wallet.ledger_sums(a)["keys"]


def test_void_refunds_every_guess_once(make_player, make_round):
    a = make_player(keys=4)
    rnd = make_round(secret=S, guess_price=2)
    score_guess(job_for(submit(a, rnd, S[::-1])))
    submit(a, rnd, S[1:] + S[:1])
    assert wallet.balances(a)["keys"] == 0
    assert settlement.void_round(rnd.pk).action == "voided"
    assert settlement.void_round(rnd.pk).action == "already"
    assert settlement.settle_round(rnd.pk, force=True).action == "already"
    assert wallet.balances(a)["keys"] == 4 == wallet.ledger_sums(a)["keys"]
    assert LedgerEntry.objects.filter(player=a, reason="refund").count() == 2


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("kind", ["classic", "blind"])
def test_three_racing_closers_pay_once(kind, make_player, make_round):
    a, b = make_player(), make_player()
    rnd = make_round(kind=kind, secret=S, prize_pool=90)
    score_guess(job_for(submit(a, rnd, S)))
    score_guess(job_for(submit(b, rnd, [MISS] + S[1:])))
    expire(rnd)
    barrier, outcomes = threading.Barrier(3), []

    def closer(how):
        try:
            barrier.wait()
            if how == "admin":
                outcomes.append(settlement.settle_round(rnd.pk, force=True).action)
            else:
                outcomes.append(settlement.settle_round(rnd.pk).action)
        finally:
            connection.close()

    threads = [threading.Thread(target=closer, args=(how,)) for how in ("timer", "perfect", "admin")]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert sorted(outcomes) == ["already", "already", "settled"]
    assert sum(prizes(rnd.pk).values()) == 90
    assert LedgerEntry.objects.filter(reason="prize", reference=rnd.pk).count() == (1 if kind == "classic" else 2)
    assert wallet.mismatched_wallets() == []


def test_racing_settle_requests_collapse_at_admission(make_round):
    rnd = make_round(secret=S)
    answers = [settlement.request_settlement(rnd.pk, why) for why in ("timer", "perfect", "admin")]
    assert answers == ["enqueued", "duplicate", "duplicate"]
    assert queue_depth(settlement.QUEUE) == 1


def test_timer_sweep_closes_due_rounds(make_player, make_round):
    a = make_player()
    due, later = make_round(secret=S, prize_pool=5), make_round(secret=S)
    score_guess(job_for(submit(a, due, [MISS] + S[1:])))
    expire(due)
    assert settlement.close_due_rounds() == 1
    drain(settlement.QUEUE, settle)
    due.refresh_from_db(), later.refresh_from_db()
    assert (due.status, later.status) == ("settled", "open")
    assert settlement.close_due_rounds() == 0


def test_notifications_are_created_once_through_the_notify_task(make_player, make_round,
                                                               django_capture_on_commit_callbacks):
    a, b = make_player(), make_player()
    rnd = make_round(secret=S, prize_pool=40, title="Demo")
    score_guess(job_for(submit(a, rnd, S)))
    score_guess(job_for(submit(b, rnd, MISSES)))
    with django_capture_on_commit_callbacks(execute=True) as asked:
        settlement.settle_round(rnd.pk, force=True)
        settlement.settle_round(rnd.pk, force=True)  # a redelivered settle asks again
    assert len(asked) == 4 and queue_depth(tasks.QUEUE) == 4
    assert get_queue(tasks.QUEUE).counts()["lanes"] == 2  # one lane per player
    seen = drain(tasks.QUEUE, Runner(task_backends["default"]))
    results = [tasks.notify.get_result(k.rsplit(":", 1)[1]) for k in get_queue(tasks.QUEUE).keys() if ":task:" in k]
    assert seen["completed"] == 4, [r.errors for r in results]
    assert sorted(r.status for r in results) == ["SUCCESSFUL"] * 4
    notes = {n.player_id: n for n in Notification.objects.filter(round=rnd)}
    assert len(notes) == 2  # four tasks, one notification per player
    assert "won 40 diamonds" in notes[a.pk].text and notes[a.pk].data["prize"] == 40
    assert notes[b.pk].data == {"prize": 0, "best_total": 0, "rank": None}
    assert get_queue(tasks.QUEUE).counts()["dead"] == 0


def test_a_notify_task_records_its_notification_and_a_rollback_asks_for_none(make_player, make_round,
                                                                            django_capture_on_commit_callbacks):
    a = make_player()
    rnd = make_round(secret=S, prize_pool=10)
    score_guess(job_for(submit(a, rnd, S)))
    settlement.settle_round(rnd.pk, force=True)
    with django_capture_on_commit_callbacks(execute=True) as asked:
        with pytest.raises(RuntimeError), transaction.atomic():
            tasks.notify_round(rnd.pk)
            raise RuntimeError("rolled back")
    assert asked == [] and queue_depth(tasks.QUEUE) == 0
    with django_capture_on_commit_callbacks(execute=True):
        assert tasks.notify_round(rnd.pk) == 1
    q = get_queue(tasks.QUEUE)
    [job_id] = [k.rsplit(":", 1)[1] for k in q.keys() if ":job:" in k]
    result = tasks.notify.get_result(job_id)
    assert result.args == [a.pk, rnd.pk, "settled"] and q.job(job_id)["lane"] == a.pk
    drain(tasks.QUEUE, Runner(task_backends["default"]))
    result.refresh()
    assert result.status == "SUCCESSFUL"
    assert result.return_value == Notification.objects.get(player=a, round=rnd).pk


def test_a_round_is_due_from_the_instant_it_stops_taking_guesses(make_round, monkeypatch):
    """One boundary for both sides: at ``ends_at`` exactly, a submit finds
    the round closed and settlement finds it due (the sweep too); a
    microsecond before, it is open and not due. No instant is both, and none
    is neither."""
    from games.guesses import _Open

    rnd = make_round(secret=S)
    for at, open_, due in ((rnd.ends_at - timedelta(microseconds=1), True, False), (rnd.ends_at, False, True)):
        monkeypatch.setattr(timezone, "now", lambda at=at: at)
        seen = _Open(rnd.status, rnd.ends_at, frozenset(rnd.keyboard), rnd.currency, rnd.guess_price)
        assert (seen.is_open, settlement.is_due(rnd)) == (open_, due), at
        assert (rnd.pk in set(Round.objects.filter(status="open", ends_at__lte=at).values_list("pk", flat=True))) \
            == due
