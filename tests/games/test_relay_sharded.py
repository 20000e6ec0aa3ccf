"""The relay on a sharded `cm`: a guess waiting in the queue lives on its
player's lane's shard, so the relay must look for its job there. Looking on
the job id's shard (where a job without a lane would be) finds nothing for
most guesses, and every one of them is enqueued again: answered "duplicate"
by the lane's shard, so harmless, but a wasted script call per waiting guess
every relay pass."""
from datetime import timedelta

import pytest

from echomq import ShardedQueue
from echomq.contrib import django as emq_django
from echomq.contrib.django import get_queue
from games.guesses import relay_unsent, submit

pytestmark = pytest.mark.django_db

S = ["🐶", "🐱", "🐭", "🐹", "🐰", "🦊"]


@pytest.fixture
def sharded_cm(settings, valkey_server):
    settings.ECHOMQ = {**settings.ECHOMQ, "QUEUES": {**settings.ECHOMQ.get("QUEUES", {}), "cm": {"shards": 6}}}
    emq_django.reset_client(valkey_server.url)
    q = get_queue("cm")
    assert isinstance(q, ShardedQueue)
    yield q
    emq_django.reset_client(valkey_server.url)


def test_the_relay_finds_waiting_guesses_on_their_lanes_shard(sharded_cm, valkey, make_player, make_round,
                                                              django_capture_on_commit_callbacks):
    q = sharded_cm
    rnd = make_round(secret=S)
    with django_capture_on_commit_callbacks(execute=True):
        guesses = [submit(make_player(keys=3), rnd, S) for _ in range(8)]
    for g in guesses:
        assert q.shard_for(lane=g.player_id).job(g.job_id)["state"] == "pending"
    # The case that matters: the id's shard is not the lane's (else either lookup finds it).
    assert any(q.shard_index(job_id=g.job_id) != q.shard_index(lane=g.player_id) for g in guesses)

    valkey.config_resetstat()
    assert relay_unsent(older_than=timedelta(0)) == {"relayed": 0, "duplicate": len(guesses)}
    evalsha = valkey.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0)
    assert evalsha == 0, f"{evalsha} waiting guess(es) were enqueued again"  # only the EXISTS lookups ran
    assert q.counts()["pending"] == len(guesses)
