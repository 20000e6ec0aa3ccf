"""From a guess to its job and back: the guess admin links its JOB id, the
job page links the guess, player and round (through the game's resolver),
a finished job's page says what the database knows, the dashboard finds
jobs by JOB, GES, PLR id or player name, a lane's page lists its waiting
jobs, and removing a queued guess's job is honest about what happens."""
from datetime import timedelta

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from echomq import Drop
from echomq.contrib.django import get_queue
from games import guesses, settlement, wallet
from games.guesses import submit
from games.models import Guess, LedgerEntry
from games.workers import score_guess
from tests.echomq_admin.snapshot import db_snapshot, valkey_snapshot

from .conftest import drain

pytestmark = pytest.mark.django_db


@pytest.fixture
def root(client):
    client.force_login(get_user_model().objects.create_superuser("root", password="pw-root-123"))
    return client


@pytest.fixture
def queued(make_player, make_round, django_capture_on_commit_callbacks):
    """A charged guess whose job waits in ``cm``."""
    rnd = make_round(title="Jobs", guess_price=2)
    amy = make_player("amy", keys=10)
    with django_capture_on_commit_callbacks(execute=True):
        guess = submit(amy, rnd, rnd.keyboard[:6])
    assert get_queue("cm").job(guess.job_id)["state"] == "pending"
    return guess


def test_guess_admin_links_its_job_and_the_job_page_links_back(root, queued):
    html = root.get(f"/admin/games/guess/{queued.pk}/change/").content.decode()
    job_url = f"/admin/queues/cm/jobs/{queued.job_id}/"
    assert f'href="{job_url}"' in html
    assert f'href="{job_url}"' in root.get("/admin/games/guess/").content.decode()
    page = root.get(job_url)
    assert page.status_code == 200
    html = page.content.decode()
    for url in (f"/admin/games/guess/{queued.pk}/change/", f"/admin/games/player/{queued.player_id}/change/",
                f"/admin/games/round/{queued.round_id}/change/"):
        assert f'href="{url}"' in html, url
    assert "Guess " + queued.pk + " by amy" in html


@pytest.mark.parametrize("retained", [True, False])
def test_a_finished_guess_job_page_says_what_the_database_knows(root, queued, retained):
    if not retained:
        get_queue("cm").set_retention(completed=0)  # the queue keeps no record of completed jobs
    drain("cm", score_guess)
    queued.refresh_from_db()
    assert queued.status == "scored" and get_queue("cm").job(queued.job_id) is None
    resp = root.get(f"/admin/queues/cm/jobs/{queued.job_id}/")
    assert resp.status_code == 200
    facts = dict(resp.context["about"].facts)
    assert facts["status"] == "scored" and facts["total"] == f"{queued.total}/600"
    assert facts["scored at"] != "not yet"
    html = resp.content.decode()
    if retained:
        assert "completed" in html and "keeps this record" in html and resp.context["record"]["attempts"] == 1
    else:
        assert "holds no row" in html and resp.context["record"] is None
    # A job id nobody knows is still a 404.
    assert root.get("/admin/queues/cm/jobs/JOB0KHTOWnGLuC/").status_code == 404


def test_a_finished_blind_job_keeps_its_total_sealed(root, make_player, make_round, django_capture_on_commit_callbacks):
    rnd = make_round(kind="blind")
    with django_capture_on_commit_callbacks(execute=True):
        g = submit(make_player("bo"), rnd, rnd.keyboard[:6])
    drain("cm", score_guess)
    facts = dict(root.get(f"/admin/queues/cm/jobs/{g.job_id}/").context["about"].facts)
    assert facts["total"] == "sealed until the reveal"


@pytest.mark.parametrize("term", ["job", "guess", "player", "name", "round"])
def test_search_by_job_guess_player_or_name(root, queued, term):
    drain("cm", score_guess)  # finished: found through the database
    value = {"job": queued.job_id, "guess": queued.pk, "player": queued.player_id, "name": "AMY",
             "round": queued.round_id}[term]
    resp = root.get("/admin/queues/", {"q": value})
    assert resp.status_code == 200
    hits = {(r["queue"], r["job_id"]) for r in resp.context["results"]}
    assert ("cm", queued.job_id) in hits
    row = next(r for r in resp.context["results"] if r["job_id"] == queued.job_id)
    assert row["state"] == "completed" and queued.pk in row["label"]
    if term == "round":
        assert ("cm.settle", settlement.settle_job_id(queued.round_id)) in hits


def test_search_finds_live_jobs_of_any_queue_and_says_when_nothing_matches(root, queued):
    other, _ = get_queue("mail").enqueue(b"x")
    resp = root.get("/admin/queues/", {"q": other})
    assert [(r["queue"], r["state"]) for r in resp.context["results"]] == [("mail", "pending")]
    resp = root.get("/admin/queues/", {"q": queued.job_id})
    assert [(r["queue"], r["state"]) for r in resp.context["results"]] == [("cm", "pending")]
    assert "No job matches" in root.get("/admin/queues/", {"q": "nobody-here"}).content.decode()


def test_a_lane_page_lists_its_waiting_jobs_in_pages(root, queued):
    q = get_queue("cm")
    lane = queued.player_id
    extra = [q.enqueue(b"{}", lane=lane)[0] for _ in range(54)]
    first = root.get(f"/admin/queues/cm/lanes/{lane}/")
    assert first.status_code == 200
    assert first.context["jobs"] == [queued.job_id] + extra[:49] and first.context["pages"] == 2
    second = root.get(f"/admin/queues/cm/lanes/{lane}/?page=2")
    assert second.context["jobs"] == extra[49:] and "51–55 of 55" in second.content.decode()
    assert root.get(f"/admin/queues/cm/lanes/{lane}/?page=3").status_code == 404
    assert f"/admin/queues/cm/lanes/{lane}/" in root.get("/admin/queues/cm/").content.decode()


def test_removing_a_queued_guess_job_says_it_comes_back_and_it_does(root, queued):
    url = f"/admin/queues/cm/jobs/{queued.job_id}/remove/"
    ask = root.get(url).content.decode()
    assert "relay sends its job again" in ask and "Remove and refund this guess" in ask
    assert "Yes, remove the job only" in ask
    resp = root.post(url, {"confirm": "yes"}, follow=True)
    assert "will come back" in resp.content.decode()
    assert get_queue("cm").job(queued.job_id) is None
    # ... and the relay does send it again: the guess is still charged and queued.
    assert guesses.relay_unsent(older_than=timedelta(0))["relayed"] == 1
    assert get_queue("cm").job(queued.job_id)["state"] == "pending"
    assert Guess.objects.get(pk=queued.pk).status == "queued"
    assert not LedgerEntry.objects.filter(reason="refund").exists()


def test_remove_and_refund_refunds_once_and_the_job_stays_gone(root, queued):
    url = f"/admin/queues/cm/jobs/{queued.job_id}/remove/"
    before = wallet.balances(queued.player)["keys"]
    resp = root.post(url, {"confirm": "yes", "option": "refund"}, follow=True)
    assert "Refunded guess" in resp.content.decode()
    assert wallet.balances(queued.player)["keys"] == before + 2
    assert Guess.objects.get(pk=queued.pk).status == "refunded"
    assert get_queue("cm").job(queued.job_id) is None
    assert guesses.relay_unsent(older_than=timedelta(0))["relayed"] == 0
    # A second click: the job is gone (404), nothing is refunded again.
    assert root.post(url, {"confirm": "yes", "option": "refund"}).status_code == 404
    # A stale copy of the job is dropped by the worker; voiding the round later refunds nothing twice.
    get_queue("cm").enqueue(guesses.payload(queued), job_id=queued.job_id, lane=queued.player_id)
    with pytest.raises(Drop):
        score_guess(get_queue("cm").claim())
    settlement.void_round(queued.round_id)
    assert LedgerEntry.objects.filter(reason="refund", reference=queued.pk).count() == 1
    assert wallet.mismatched_wallets() == []
    # Audited on the queue and on the guess itself.
    assert LogEntry.objects.filter(object_id=f"cm/{queued.job_id}", change_message__contains="Refunded").exists()
    assert "Refunded guess" in root.get(f"/admin/games/guess/{queued.pk}/history/").content.decode()


def test_refund_needs_its_own_permission(client, queued, valkey):
    """An operator without games.refund_guess is not offered the refund, and
    posting it anyway is a 403 that changes nothing."""
    from tests.echomq_admin.conftest import staff_user

    user = staff_user(get_user_model(), "ops", "echomq.view_queues", "echomq.operate_queues")
    client.force_login(user)
    url = f"/admin/queues/cm/jobs/{queued.job_id}/remove/"
    assert "Remove and refund" not in client.get(url).content.decode()
    before = (db_snapshot(Guess, LedgerEntry), valkey_snapshot(valkey))
    assert client.post(url, {"confirm": "yes", "option": "refund"}).status_code == 403
    assert (db_snapshot(Guess, LedgerEntry), valkey_snapshot(valkey)) == before
    # The Queue operator group holds it.
    user.groups.add(Group.objects.get(name="Queue operator"))
    assert client.post(url, {"confirm": "yes", "option": "refund"}).status_code == 302
    assert Guess.objects.get(pk=queued.pk).status == "refunded"


def test_cancel_a_waiting_guess_job_asks_first_says_it_comes_back_and_is_logged(root, queued):
    url = f"/admin/queues/cm/jobs/{queued.job_id}/cancel/"
    ask = root.get(url).content.decode()
    assert "cancelled at once" in ask and "relay sends its job again" in ask
    assert get_queue("cm").job(queued.job_id)["state"] == "pending"
    resp = root.post(url, {"confirm": "yes"}, follow=True)
    assert "Cancelled the job" in resp.content.decode()
    assert get_queue("cm").job(queued.job_id) is None
    assert LogEntry.objects.filter(object_id=f"cm/{queued.job_id}", change_message__startswith="Cancelled").exists()
    assert root.post(url, {"confirm": "yes"}).status_code == 404


def test_cancel_a_running_job_marks_it(root, queued):
    q = get_queue("cm")
    job = q.claim(lease_ms=60_000)
    assert job.id == queued.job_id
    resp = root.post(f"/admin/queues/cm/jobs/{job.id}/cancel/", {"confirm": "yes"})
    assert resp.status_code == 302 and resp["Location"] == f"/admin/queues/cm/jobs/{job.id}/"
    assert q.find(job.id)["cancelling"] is True


def test_cancel_refuses_a_dead_job(root, queued):
    q = get_queue("cm")
    job = q.claim(lease_ms=60_000)
    assert q.retry(job.id, job.attempts, max_attempts=1, error="x") == "dead"
    assert root.get(f"/admin/queues/cm/jobs/{job.id}/cancel/").status_code == 409
    assert q.job(job.id)["state"] == "dead"


def test_queue_page_lists_recently_completed_jobs(root, queued):
    drain("cm", score_guess)
    resp = root.get("/admin/queues/cm/")
    assert [j["id"] for j in resp.context["completed"]] == [queued.job_id]
    assert "Recently completed" in resp.content.decode()


def test_bulk_remove_of_dead_guess_jobs_warns_they_come_back(root, queued):
    q = get_queue("cm")
    job = q.claim(lease_ms=60_000)
    assert q.retry(job.id, job.attempts, max_attempts=1, error="db down") == "dead"
    page = root.post("/admin/queues/cm/dead/", {"action": "remove", "ids": [job.id]}).content.decode()
    assert "relay sends its job again" in page and q.job(job.id)["state"] == "dead"
