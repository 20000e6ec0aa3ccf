"""Unlocking is a write like locking: on a round that is settled, voided
or past its end it is refused (409, the round page saying why) and the
lock stays, as a lock is refused there."""
import pytest
from django.utils import timezone

from games import settlement
from games.locks import set_lock
from games.models import Lock, Round

pytestmark = pytest.mark.django_db


def slots(values):
    return {f"slot{i}": v for i, v in enumerate(values)}


@pytest.mark.parametrize("how", ["settled", "voided", "past its end"])
def test_unlocking_on_a_closed_round_is_refused_and_keeps_the_lock(play, player, make_round, how):
    rnd = make_round()
    set_lock(player, rnd, 2, rnd.keyboard[0])
    if how == "settled":
        settlement.settle_round(rnd.pk, force=True)
    elif how == "voided":
        settlement.void_round(rnd.pk)
    else:
        Round.objects.filter(pk=rnd.pk).update(ends_at=timezone.now())
    before = list(Lock.objects.values())
    resp = play.post(f"/rounds/{rnd.pk}/lock/", {"unlock": "2", **slots(rnd.keyboard[:6])})
    assert resp.status_code == 409, resp.status_code
    assert list(Lock.objects.values()) == before


def test_unlocking_on_an_open_round_still_works(play, player, make_round):
    rnd = make_round()
    set_lock(player, rnd, 2, rnd.keyboard[0])
    resp = play.post(f"/rounds/{rnd.pk}/lock/", {"unlock": "2", **slots(rnd.keyboard[:6])})
    assert resp.status_code == 302 and not Lock.objects.exists()
