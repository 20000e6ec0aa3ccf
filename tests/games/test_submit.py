"""games.guesses.submit: refusals in the spec's order change nothing; locks
win; one idempotency key charges once; the enqueue follows the commit."""
import json
import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

import echomq
from echomq import ids
from echomq.contrib.django import get_queue
from games import errors, locks, wallet
from games.guesses import submit
from games.models import Guess, LedgerEntry, Round

from .conftest import drain, queue_depth

pytestmark = pytest.mark.django_db

S = ["🐶", "🐱", "🐭", "🐹", "🐰", "🦊"]


def snapshot(player):
    return (wallet.balances(player), LedgerEntry.objects.count(), Guess.objects.count(), queue_depth("cm"))


def test_submit_charges_records_and_enqueues_on_the_player_lane(make_player, make_round,
                                                                django_capture_on_commit_callbacks):
    p = make_player(keys=3)
    rnd = make_round(secret=S, guess_price=2)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        g = submit(p, rnd, S)
        assert get_queue("cm").job(g.job_id) is None  # nothing is sent before the commit
    assert len(callbacks) == 1
    assert ids.brand_of(g.id) == "GES" and ids.brand_of(g.job_id) == "JOB"
    assert g.status == "queued" and g.emojis_final == S and g.price == 2
    assert wallet.balances(p)["keys"] == 1 == wallet.ledger_sums(p)["keys"]
    charge = LedgerEntry.objects.get(player=p, reason="guess")
    assert (charge.delta, charge.reference) == (-2, g.id)
    job = get_queue("cm").job(g.job_id)
    assert job["lane"] == p.id and json.loads(job["payload"]) == {"guess": g.id, "round": rnd.id}


@pytest.mark.parametrize("case", ["wrong_length", "no_round", "closed", "expired", "off_keyboard", "funds"])
def test_every_refusal_changes_nothing(case, make_player, make_round):
    p = make_player(keys=1)
    rnd = make_round(secret=S, guess_price=1 if case != "funds" else 5)
    guess, target = list(S), rnd
    expected = {"wrong_length": errors.WrongLength, "no_round": errors.RoundNotFound,
                "closed": errors.RoundClosed, "expired": errors.RoundExpired,
                "off_keyboard": errors.OffKeyboard, "funds": errors.NotEnoughFunds}[case]
    if case == "wrong_length":
        guess = S[:5]
    elif case == "no_round":
        target = ids.mint("RND")
    elif case == "closed":
        Round.objects.filter(pk=rnd.pk).update(status="settled")
    elif case == "expired":
        Round.objects.filter(pk=rnd.pk).update(ends_at=timezone.now() - timedelta(seconds=1))
    elif case == "off_keyboard":
        guess[2] = "🍕"
    before = snapshot(p)
    with pytest.raises(expected) as err:
        submit(p, target, guess)
    assert isinstance(err.value, errors.SubmitError) and err.value.message
    assert snapshot(p) == before


def test_refusals_come_in_the_spec_order(make_player, make_round):
    p = make_player(keys=0)
    rnd = make_round(secret=S)
    Round.objects.filter(pk=rnd.pk).update(status="settled", ends_at=timezone.now() - timedelta(1))
    with pytest.raises(errors.WrongLength):
        submit(p, ids.mint("RND"), ["🍕"] * 7)
    with pytest.raises(errors.RoundNotFound):
        submit(p, ids.mint("RND"), ["🍕"] * 6)
    with pytest.raises(errors.RoundClosed):
        submit(p, rnd, ["🍕"] * 6)
    open_rnd = make_round(secret=S)
    with pytest.raises(errors.OffKeyboard):
        submit(p, open_rnd, ["🍕"] * 6)  # before the funds check
    with pytest.raises(errors.NotEnoughFunds):
        submit(p, open_rnd, S)


def test_locks_win_over_the_sent_emoji_and_persist(make_player, make_round):
    p = make_player(keys=5)
    rnd = make_round(secret=S)
    locks.set_lock(p, rnd, 0, "🐶")
    locks.set_lock(p, rnd, 5, "🦊")
    sent = ["🐻", "🐱", "🐭", "🐹", "🐰", "🐼"]
    g1 = submit(p, rnd, sent)
    g2 = submit(p, rnd, ["🐼", "🐨", "🐯", "🦁", "🐮", "🐷"])
    assert g1.emojis_sent == sent and g1.emojis_final == ["🐶", "🐱", "🐭", "🐹", "🐰", "🦊"]
    assert g2.emojis_final == ["🐶", "🐨", "🐯", "🦁", "🐮", "🦊"]
    assert locks.remove_lock(p, rnd, 0)
    assert submit(p, rnd, ["🐼", "🐨", "🐯", "🦁", "🐮", "🐷"]).emojis_final[0] == "🐼"
    with pytest.raises(errors.OffKeyboard):
        locks.set_lock(p, rnd, 1, "🍕")
    with pytest.raises(errors.BadPosition):
        locks.set_lock(p, rnd, 6, "🐶")


def test_double_submit_with_one_key_charges_once(make_player, make_round, django_capture_on_commit_callbacks):
    p = make_player(keys=5)
    rnd = make_round(secret=S)
    with django_capture_on_commit_callbacks(execute=True):
        g1 = submit(p, rnd, S, idempotency_key="click-1")
    with django_capture_on_commit_callbacks(execute=True):
        g2 = submit(p, rnd, S, idempotency_key="click-1")
    assert g1.pk == g2.pk
    assert Guess.objects.filter(player=p).count() == 1
    assert wallet.balances(p)["keys"] == 4 == wallet.ledger_sums(p)["keys"]
    assert queue_depth("cm") == 1
    assert submit(p, rnd, S[::-1], idempotency_key="click-2").pk != g1.pk


@pytest.mark.django_db(transaction=True)
def test_racing_submits_with_one_key_charge_once(make_player, make_round):
    p = make_player(keys=20)
    rnd = make_round(secret=S)
    start, out = threading.Barrier(6), []

    def go():
        try:
            start.wait()
            out.append(submit(p, rnd.pk, S, idempotency_key="same").pk)
        finally:
            connection.close()

    threads = [threading.Thread(target=go) for _ in range(6)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert len(out) == 6 and len(set(out)) == 1
    assert Guess.objects.filter(player=p).count() == 1
    assert wallet.balances(p)["keys"] == 19 == wallet.ledger_sums(p)["keys"]


def test_free_rounds_charge_clips(make_player, make_round):
    p = make_player(keys=0, clips=2)
    rnd = make_round(secret=S, currency="clips", guess_price=1)
    submit(p, rnd, S)
    assert wallet.balances(p) == {"keys": 0, "clips": 1, "diamonds": 0}


@pytest.mark.django_db(transaction=True)
def test_valkey_down_at_submit_then_relay_scores_it_once(valkey_server, make_player, make_round):
    from echomq.contrib import django as emq_django
    from games.guesses import relay_unsent
    from games.workers import score_guess

    p = make_player(keys=3)
    rnd = make_round(secret=S)
    valkey_server.client().shutdown(nosave=True)
    valkey_server.proc.wait(10)
    emq_django.reset_client(valkey_server.url)
    try:
        g = submit(p, rnd, S)  # logs one line, does not raise
        assert Guess.objects.get(pk=g.pk).status == "queued"
        assert wallet.balances(p)["keys"] == 2 == wallet.ledger_sums(p)["keys"]
        with pytest.raises(echomq.UNAVAILABLE):
            relay_unsent(older_than=timedelta(0))  # still down: the relay fails loudly, the reaper logs it
    finally:
        valkey_server.start()
        emq_django.reset_client(valkey_server.url)
    assert relay_unsent(older_than=timedelta(0)) == {"relayed": 1, "duplicate": 0}
    assert relay_unsent(older_than=timedelta(0)) == {"relayed": 0, "duplicate": 1}
    assert drain("cm", score_guess)["completed"] == 1
    g.refresh_from_db()
    assert g.status == "scored" and g.total == 600
    assert relay_unsent(older_than=timedelta(0)) == {"relayed": 0, "duplicate": 0}
    assert wallet.balances(p)["keys"] == 2 == wallet.ledger_sums(p)["keys"]
    assert LedgerEntry.objects.filter(player=p, reason="guess").count() == 1
