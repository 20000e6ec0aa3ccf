"""Submit's idempotency-key guard, and what the relay reports as relayed."""
from datetime import timedelta

import pytest

from echomq import Queue
from echomq.contrib.django import get_queue
from games import errors, wallet
from games.guesses import enqueue, relay_unsent, submit

from .conftest import queue_depth
from .test_submit import snapshot

pytestmark = pytest.mark.django_db

S = ["🐶", "🐱", "🐭", "🐹", "🐰", "🦊"]


@pytest.mark.parametrize("key", ["", "k" * 65], ids=["empty", "65-chars"])
def test_an_idempotency_key_outside_1_to_64_characters_is_refused(key, make_player, make_round):
    """An empty or 65-character key is a SubmitError with nothing charged,
    written or queued; a 64-character key is taken, and answers its replay."""
    p = make_player(keys=3)
    rnd = make_round(secret=S)
    before = snapshot(p)
    with pytest.raises(errors.SubmitError):
        submit(p, rnd, S, idempotency_key=key)
    assert snapshot(p) == before
    first = submit(p, rnd, S, idempotency_key="k" * 64)
    assert submit(p, rnd, S, idempotency_key="k" * 64) == first
    assert wallet.balances(p)["keys"] == 2


def test_the_relay_counts_as_relayed_only_the_jobs_it_sent(make_player, make_round, monkeypatch):
    """Two guesses with no job; the web's late enqueue of one lands between the
    relay's lookup and its enqueue, so the relay sent one and found one there."""
    rnd = make_round(secret=S)
    lost, late = submit(make_player(), rnd, S), submit(make_player(), rnd, S)  # no commit hook ran: no jobs
    assert queue_depth("cm") == 0
    real = Queue.enqueue_many

    def web_lands_first(self, items):
        enqueue(late)
        return real(self, items)

    monkeypatch.setattr(Queue, "enqueue_many", web_lands_first)
    assert relay_unsent(older_than=timedelta(0)) == {"relayed": 1, "duplicate": 1}
    assert queue_depth("cm") == 2 and get_queue("cm").job(lost.job_id)["state"] == "pending"
