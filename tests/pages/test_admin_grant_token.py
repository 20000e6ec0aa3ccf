"""A grant form that granted nothing (every player refused: a debit larger
than the balance) must leave its one-time token unused: otherwise the same
form, corrected and sent again, answers "already applied" while nothing was
ever granted, and an AdminGrant row is written with no audit entry."""
import pytest
from django.contrib.admin.models import LogEntry

from games import wallet
from games.models import AdminGrant, LedgerEntry

from .test_admin import staff  # noqa: F401

pytestmark = pytest.mark.django_db


def test_a_grant_refused_for_every_player_can_be_corrected_and_sent_again(staff, make_player, valkey):
    a = make_player("gina", keys=0)
    url = "/admin/games/player/"
    ask = staff.post(url, {"action": "grant_currency", "_selected_action": [a.pk]})
    token = ask.context["form"]["token"].value()
    form = {"action": "grant_currency", "_selected_action": [a.pk], "apply": "1", "currency": "keys",
            "reason": "ticket 12", "token": token}
    refused = staff.post(url, {**form, "amount": "-5"}, follow=True)
    assert "already applied" not in refused.content.decode()
    assert not AdminGrant.objects.exists() and not LogEntry.objects.exists()
    assert wallet.balances(a)["keys"] == 0
    fixed = staff.post(url, {**form, "amount": "5"}, follow=True)
    assert "already applied" not in fixed.content.decode()
    assert wallet.balances(a)["keys"] == 5
    assert LedgerEntry.objects.filter(reference="ticket 12").count() == 1
    assert LogEntry.objects.count() == 1 and AdminGrant.objects.count() == 1
