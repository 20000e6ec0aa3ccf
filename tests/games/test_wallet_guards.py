"""The wallet's guards: a charge of nothing is refused, and the audit reports
a wallet that disagrees with its ledger in either direction."""
import pytest
from django.db.models import F

from games import wallet
from games.models import LedgerEntry, Wallet

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("amount", [0, -1])
def test_a_charge_must_take_something(amount, make_player):
    """charge(0) (or less) raises WalletError and writes no ledger row."""
    p = make_player(keys=3)
    rows = LedgerEntry.objects.count()
    with pytest.raises(wallet.WalletError):
        wallet.charge(p, "keys", amount, LedgerEntry.Reason.GUESS, "GES0000000000A")
    assert LedgerEntry.objects.count() == rows
    assert wallet.balances(p)["keys"] == 3 == wallet.ledger_sums(p)["keys"]


@pytest.mark.parametrize("drift", [+5, -2])
def test_the_audit_reports_a_wallet_above_or_below_its_ledger(drift, make_player):
    """mismatched_wallets names a wallet changed behind the ledger's back, up or down."""
    p = make_player(keys=3)
    make_player(keys=3)  # an honest wallet next to it is not reported
    Wallet.objects.filter(player=p).update(keys=F("keys") + drift)  # a bug that bypassed wallet.apply
    assert wallet.mismatched_wallets() == [p.pk]


@pytest.mark.parametrize("delta", [0, True, False, 1.0, "1", None])
def test_a_balance_change_must_be_a_non_zero_whole_number(delta, make_player):
    """apply/grant refuse a zero, a bool, a float, a string: WalletError, nothing written."""
    p = make_player(keys=3)
    rows = LedgerEntry.objects.count()
    with pytest.raises(wallet.WalletError):
        wallet.grant(p, "keys", delta)
    assert LedgerEntry.objects.count() == rows
    assert wallet.balances(p)["keys"] == 3 == wallet.ledger_sums(p)["keys"]


def test_a_change_may_spend_the_balance_down_to_exactly_zero(make_player):
    """Zero is a balance, not an overdraft: the last key can be spent, by apply and by charge."""
    p = make_player(keys=3, clips=2)
    entry = wallet.grant(p, "keys", -3)
    assert entry.balance_after == 0
    entry = wallet.charge(p, "clips", 2, LedgerEntry.Reason.GUESS, "GES0000000000A")
    assert entry.balance_after == 0
    assert wallet.balances(p) == wallet.ledger_sums(p)
    assert wallet.balances(p)["keys"] == 0 and wallet.balances(p)["clips"] == 0
    with pytest.raises(wallet.InsufficientFunds):
        wallet.grant(p, "keys", -1)


def test_a_charge_never_overwrites_a_ledger_row_whose_id_it_repeats(make_player, monkeypatch):
    """The charge INSERTs its ledger row: should a TXN id ever repeat, the
    charge fails whole (IntegrityError, the balance untouched) rather than
    rewrite the older row."""
    from django.db import IntegrityError, transaction

    from echomq import ids

    p = make_player(keys=5)
    old = LedgerEntry.objects.get(player=p)
    monkeypatch.setattr(ids, "mint", lambda brand: old.id)
    with pytest.raises(IntegrityError), transaction.atomic():
        wallet.charge(p, "keys", 1, LedgerEntry.Reason.GUESS, "GES0000000000B")
    row = LedgerEntry.objects.get(pk=old.pk)
    assert (row.delta, row.balance_after, row.reason) == (old.delta, old.balance_after, old.reason)
    assert wallet.balances(p)["keys"] == 5 == wallet.ledger_sums(p)["keys"]


@pytest.mark.parametrize("value", ["keys", "guess_refund"])
def test_sql_literals_take_the_codes_own_choice_values(value):
    assert wallet._literal(value) == f"'{value}'"


@pytest.mark.parametrize("value", ["", "keys'; DROP TABLE x; --", "k3ys", "ключ", "keys "])
def test_sql_literals_refuse_anything_but_ascii_letters_and_underscores(value):
    with pytest.raises(ValueError):
        wallet._literal(value)
