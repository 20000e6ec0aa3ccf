"""A settler may move an open round's end, but no further ahead than a new
round may last (30 days): the change form took any future time, so a typo
(2062 for 2026, or year 9999) left a round open -- charging guesses, and a
blind one sealed -- for decades, and its schedule's next rounds skipped."""
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from games.models import MAX_ROUND_MINUTES, Round

pytestmark = pytest.mark.django_db


def _change_end(client, rnd, when):
    return client.post(f"/admin/games/round/{rnd.pk}/change/", {
        "title": rnd.title, "ends_at_0": when.strftime("%Y-%m-%d"), "ends_at_1": when.strftime("%H:%M:%S")})


@pytest.mark.parametrize("ahead", [timedelta(minutes=MAX_ROUND_MINUTES + 5), timedelta(days=365 * 36)])
def test_an_end_beyond_a_rounds_longest_life_is_refused(client, make_round, valkey, ahead):
    rnd = make_round(kind="blind")
    client.force_login(get_user_model().objects.create_superuser("root", password="pw-root-123"))
    resp = _change_end(client, rnd, timezone.now() + ahead)
    assert resp.status_code == 200 and "At most 30 days from now" in resp.content.decode()
    assert Round.objects.get(pk=rnd.pk).ends_at == rnd.ends_at


def test_an_end_within_it_is_taken(client, make_round, valkey):
    rnd = make_round()
    client.force_login(get_user_model().objects.create_superuser("root", password="pw-root-123"))
    later = (timezone.now() + timedelta(days=29)).replace(microsecond=0)
    assert _change_end(client, rnd, later).status_code == 302
    assert Round.objects.get(pk=rnd.pk).ends_at == later
