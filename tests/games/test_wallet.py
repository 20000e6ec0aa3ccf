"""Wallet and ledger: every change is one ledger row; never negative."""
import pytest
from django.db import IntegrityError, transaction

from echomq import ids
from games import wallet
from games.models import LedgerEntry, LedgerError, Wallet

pytestmark = pytest.mark.django_db


def test_balances_equal_ledger_sums(make_player):
    p = make_player(keys=7, clips=3)
    wallet.grant(p, "keys", -2)
    wallet.grant(p, "diamonds", 25)
    wallet.exchange_diamonds(p, 2)
    assert wallet.balances(p) == {"keys": 7, "clips": 3, "diamonds": 5}  # 7 - 2 + 2
    assert wallet.ledger_sums(p) == wallet.balances(p)
    assert wallet.mismatched_wallets() == []
    rows = list(LedgerEntry.objects.filter(player=p))
    assert all(ids.brand_of(r.id) == "TXN" for r in rows)
    assert rows[-1].balance_after == 7 and rows[-1].reason == "exchange"


def test_refused_change_changes_nothing(make_player):
    p = make_player(keys=1)
    before = LedgerEntry.objects.count()
    with pytest.raises(wallet.InsufficientFunds) as err:
        wallet.grant(p, "keys", -2)
    assert "have 1" in err.value.message
    with pytest.raises(wallet.InsufficientFunds):
        wallet.exchange_diamonds(p, 1)
    assert LedgerEntry.objects.count() == before
    assert wallet.balances(p)["keys"] == 1


def test_database_refuses_negative_balance(make_player):
    p = make_player(keys=1)
    with pytest.raises(IntegrityError), transaction.atomic():
        Wallet.objects.filter(player=p).update(keys=-1)


def test_ledger_is_append_only(make_player):
    p = make_player(keys=1)
    entry = LedgerEntry.objects.get(player=p)
    entry.delta = 100
    with pytest.raises(LedgerError):
        entry.save()
    with pytest.raises(LedgerError):
        entry.delete()
    assert LedgerEntry.objects.get(pk=entry.pk).delta == 1


def test_same_guess_cannot_be_charged_twice_even_by_a_bug(make_player):
    p = make_player(keys=5)
    wallet.apply(p, "keys", -1, "guess", "GES0000000000A")
    with pytest.raises(IntegrityError), transaction.atomic():
        wallet.apply(p, "keys", -1, "guess", "GES0000000000A")
    assert wallet.balances(p)["keys"] == 4 == wallet.ledger_sums(p)["keys"]
