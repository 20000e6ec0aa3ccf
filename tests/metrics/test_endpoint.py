"""GET /metrics: who may read it, and honest figures from Valkey."""
from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from echomq import Queue, ids
from tests.games.procs import wait_for

from .conftest import documented, ours, samples, value

pytestmark = pytest.mark.django_db

TOKEN = "s3cret-scrape-token"
SITE = {"echomq_valkey_up", "echomq_queue_jobs", "echomq_queue_completed_total", "echomq_queue_dead_total",
        "echomq_queue_lease_expiries_reaped_total", "echomq_queue_lanes", "echomq_queue_paused",
        "echomq_queue_oldest_pending_age_seconds", "codemojex_guesses_submitted_total",
        "codemojex_guesses_refused_total", "echomq_events_length", "echomq_events_maxlen",
        "echomq_events_added_total", "echomq_events_reader_lag_seconds"}
RATE = {"echomq_queue_rate_limit_jobs", "echomq_queue_rate_limit_window_seconds", "echomq_queue_rate_window_claimed",
        "echomq_queue_rate_window_remaining_seconds"}  # only for queues with a rate limit
Q = "mq.test"


@pytest.fixture
def token(settings):
    settings.ECHOMQ = {**settings.ECHOMQ, "METRICS_TOKEN": TOKEN}


def test_strangers_get_401_and_players_403(client, make_player, token):
    resp = client.get("/metrics")
    assert resp.status_code == 401 and resp["WWW-Authenticate"].startswith("Bearer")
    assert b"echomq_" not in resp.content
    for header in ("Bearer wrong", f"Basic {TOKEN}", TOKEN, f"Bearer {TOKEN}x", "Bearer "):
        assert client.get("/metrics", HTTP_AUTHORIZATION=header).status_code == 401
    client.force_login(make_player().user)
    assert client.get("/metrics").status_code == 403
    assert client.post("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 405


def _staff(name: str, *perms: str):
    from django.contrib.auth.models import Permission

    user = get_user_model().objects.create_user(name, password=None, is_staff=True)
    user.user_permissions.add(*[Permission.objects.get(content_type__app_label="echomq", codename=p) for p in perms])
    return user


def test_no_token_configured_means_the_dashboards_readers_only(client, settings):
    settings.ECHOMQ = {**settings.ECHOMQ, "METRICS_TOKEN": ""}
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer ").status_code == 401
    client.force_login(_staff("ops", "view_queues"))
    resp = client.get("/metrics")
    assert resp.status_code == 200 and resp["Content-Type"].startswith("text/plain")
    assert "no-cache" in resp["Cache-Control"] or "max-age=0" in resp["Cache-Control"]


def test_staff_without_the_dashboards_permission_get_403(client, token):
    """Being staff is not enough (a content editor is staff too): the
    figures are the queue dashboard's, so is the permission."""
    client.force_login(_staff("editor"))
    resp = client.get("/metrics")
    assert resp.status_code == 403 and b"echomq_" not in resp.content
    assert b"echomq.view_queues" in resp.content
    client.force_login(_staff("ops", "view_queues"))
    assert client.get("/metrics").status_code == 200
    client.force_login(get_user_model().objects.create_superuser("root", password=None))
    assert client.get("/metrics").status_code == 200


def test_queue_figures_are_honest(client, valkey, token):
    q = Queue(Q, valkey)
    lane = ids.mint("PLR")
    q.enqueue(b"1")
    job = q.claim()
    q.complete(job.id, job.attempts)                      # completed 1
    q.enqueue(b"2")
    job = q.claim()
    q.retry(job.id, job.attempts, max_attempts=1, error="boom")  # dead 1
    stalled, _ = q.enqueue(b"3")
    q.claim(lease_ms=1)
    wait_for(lambda: q.reap() == 1, timeout=10, what="the lease to expire")  # reaped 1, pending again
    old, _ = q.enqueue(b"4", lane=lane)                   # a lane
    q.enqueue(b"5", delay_ms=60_000)                      # scheduled
    q.enqueue(b"6")
    assert q.claim().id == stalled                        # active 1; pending: 6 and the lane's 4
    valkey.hset(q.job_key(old), "created", q.server_time_ms() - 120_000)  # admitted two minutes ago
    found = samples(client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").content.decode())
    assert value(found, "echomq_valkey_up") == 1
    assert {s: value(found, "echomq_queue_jobs", queue=Q, state=s)
            for s in ("pending", "active", "scheduled", "dead")} == {"pending": 2, "active": 1, "scheduled": 1,
                                                                     "dead": 1}
    assert value(found, "echomq_queue_completed_total", queue=Q) == 1
    assert value(found, "echomq_queue_dead_total", queue=Q) == 1
    assert value(found, "echomq_queue_lease_expiries_reaped_total", queue=Q) == 1
    assert value(found, "echomq_queue_lanes", queue=Q) == 1
    assert value(found, "echomq_queue_paused", queue=Q) == 0
    assert 119 <= value(found, "echomq_queue_oldest_pending_age_seconds", queue=Q) < 130
    q.pause()
    found = samples(client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").content.decode())
    assert value(found, "echomq_queue_paused", queue=Q) == 1


def test_a_sharded_queue_reports_its_shards_together(client, valkey, token, settings):
    """A queue configured with shards is one queue on /metrics, as on the
    dashboard: its shards' jobs summed under its name (its shards are not
    listed, and its logical name holds no keys of its own)."""
    settings.ECHOMQ = {**settings.ECHOMQ, "QUEUES": {"sq": {"shards": 3}}}
    from echomq.contrib.django import get_queue

    sq = get_queue("sq")
    lanes = [ids.mint("PLR") for _ in range(6)]
    for lane in lanes:
        sq.enqueue(b"x", lane=lane)
    assert len(sq.claim_batch(2, lease_ms=60_000)) == 2
    old, _ = sq.enqueue(b"old")
    sq.enqueue(b"later", delay_ms=60_000)
    valkey.hset(sq.job_key(old), "created", sq.server_time_ms() - 120_000)
    found = samples(client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").content.decode())
    counts = sq.counts()
    assert counts["pending"] == 5 and counts["active"] == 2
    assert {s: value(found, "echomq_queue_jobs", queue="sq", state=s) for s in ("pending", "active", "scheduled")} \
        == {"pending": counts["pending"], "active": 2, "scheduled": 1}
    assert value(found, "echomq_queue_lanes", queue="sq") == counts["lanes"]
    assert 119 <= value(found, "echomq_queue_oldest_pending_age_seconds", queue="sq") < 130
    shards = {s.name for s in sq.shards}
    assert not any(dict(labels).get("queue") in shards for _, labels in found)


def test_event_stream_figures_and_a_readers_lag(client, valkey, token):
    q = Queue(Q, valkey)
    q.set_events(500)
    q.enqueue_many([b"x"] * 3)
    list(q.events("0", reader="live"))  # a reader that has read everything so far
    found = samples(client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").content.decode())
    assert value(found, "echomq_events_length", queue=Q) == 3
    assert value(found, "echomq_events_maxlen", queue=Q) == 500
    assert value(found, "echomq_events_added_total", queue=Q) == 3
    assert value(found, "echomq_events_reader_lag_seconds", queue=Q, reader="live") == 0
    first = list(q.events("0"))[0].cursor
    valkey.hset(q.prefix + "events:readers", "live", first)  # as if it had stopped at the first entry
    last_ms = int(list(q.events("0"))[-1].id.split("-")[0])
    valkey.xadd(q.k_events, {"type": "enqueued", "job": ids.mint("JOB"), "lane": "-", "attempt": 0, "data": ""},
                id=f"{last_ms + 7_000}-0")  # an entry 7 s after the reader's position
    found = samples(client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").content.decode())
    assert 7 <= value(found, "echomq_events_reader_lag_seconds", queue=Q, reader="live") < 8


def test_game_counters_count_submitted_and_refused_guesses(client, make_player, make_round, token, settings,
                                                          django_capture_on_commit_callbacks):
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "guess": "100/s"}  # four posts in a second are fine here
    rnd = make_round(secret=["🐶", "🐱", "🐭", "🐹", "🐰", "🦊"], guess_price=2)
    rich, poor = make_player(keys=10), make_player(keys=1)
    guess = {f"slot{i}": e for i, e in enumerate(["🐶", "🐱", "🐭", "🐹", "🐰", "🦊"])}
    client.force_login(rich.user)
    with django_capture_on_commit_callbacks(execute=True):
        assert client.post(f"/rounds/{rnd.pk}/guess/", guess).status_code == 302
        # a different guess: an exact repeat of one's own guess is refused
        assert client.post(f"/rounds/{rnd.pk}/guess/", {**guess, "slot0": "🐱", "slot1": "🐶"}).status_code == 302
    assert client.post(f"/rounds/{rnd.pk}/guess/", {**guess, "slot5": "🚗"}).status_code == 400
    assert client.post(f"/rounds/{rnd.pk}/guess/", {"slot0": "x" * 65}).status_code == 400
    client.force_login(poor.user)
    assert client.post(f"/rounds/{rnd.pk}/guess/", guess).status_code in (303, 400)
    client.logout()
    found = samples(client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").content.decode())
    assert value(found, "codemojex_guesses_submitted_total") == 2
    refused = {dict(labels)["reason"]: v for (name, labels), v in found.items()
               if name == "codemojex_guesses_refused_total"}
    assert refused == {"off_keyboard": 1, "form": 1, "insufficient_funds": 1}


def test_the_endpoint_serves_only_documented_names(client, valkey, token, make_player, make_round,
                                                   django_capture_on_commit_callbacks):
    from games.metrics import refused, submitted

    Queue(Q, valkey).enqueue(b"x")
    list(Queue(Q, valkey).events("0", reader="dash"))  # a named reader: its lag is served
    submitted(), refused("closed")
    found = samples(client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").content.decode())
    assert ours(found) == SITE and SITE <= documented()


def test_valkey_down_answers_up_0_not_500(client, token):
    from echomq.contrib import django as emq_django
    from echomq.embedded import free_port

    emq_django.reset_client(f"redis://127.0.0.1:{free_port()}/0")  # nobody listens there
    resp = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert resp.status_code == 200
    assert value(samples(resp.content.decode()), "echomq_valkey_up") == 0


def test_counts_reach_valkey_within_a_second_or_so_without_a_scrape(valkey):
    """A web process keeps its counts in memory and a daemon thread adds them
    to ``cm:metrics`` about once a second: nobody has to read /metrics."""
    from games import metrics as game_metrics

    for _ in range(3):
        game_metrics.submitted()
    game_metrics.refused("closed")
    want = {b"submitted": b"3", b"refused:closed": b"1"}
    wait_for(lambda: valkey.hgetall(game_metrics.KEY) == want, timeout=5 * game_metrics.FLUSH_EVERY_S,
             what=f"the flusher to write {want}")


def test_a_rate_limit_shows_its_limit_and_window(client, valkey, token):
    q = Queue(Q, valkey)
    q.set_rate_limit(3, 60_000)
    q.enqueue_many([b"x"] * 5)
    assert len(q.claim_batch(5)) == 3
    found = samples(client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").content.decode())
    assert value(found, "echomq_queue_rate_limit_jobs", queue=Q) == 3
    assert value(found, "echomq_queue_rate_limit_window_seconds", queue=Q) == 60
    assert value(found, "echomq_queue_rate_window_claimed", queue=Q) == 3
    assert 50 < value(found, "echomq_queue_rate_window_remaining_seconds", queue=Q) <= 60
    assert RATE <= ours(found) <= documented()
    q.set_rate_limit(None)
    found = samples(client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").content.decode())
    assert ("echomq_queue_rate_limit_jobs", (("queue", Q),)) not in found
