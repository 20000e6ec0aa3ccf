"""A task whose run_after is further ahead than a job may wait (a year) is
refused with ArgumentError before anything is written: the result record
was written first, then deleted when the job refused the delay."""
import datetime

import pytest
from django.utils import timezone

from echomq import ArgumentError

pytestmark = pytest.mark.django_db


def writes(client) -> int:
    stats = client.info("commandstats")
    return sum(stats.get(f"cmdstat_{c}", {}).get("calls", 0) for c in ("hset", "evalsha", "eval", "pexpire"))


def test_a_run_after_beyond_a_year_is_refused_before_any_write(valkey):
    from games.tasks import announce_round

    valkey.config_resetstat()
    with pytest.raises(ArgumentError, match="run_after"):
        announce_round.using(run_after=timezone.now() + datetime.timedelta(days=800)).enqueue("RND0KHTOWnGLuC")
    assert writes(valkey) == 0 and valkey.dbsize() == 0


def test_a_run_after_within_a_year_is_taken(valkey):
    from games.tasks import announce_round

    result = announce_round.using(run_after=timezone.now() + datetime.timedelta(days=300)).enqueue("RND0KHTOWnGLuC")
    assert result.id.startswith("JOB")
