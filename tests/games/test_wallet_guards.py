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
